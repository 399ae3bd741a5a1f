"""Screenshots of a calibration's artifacts in the Prefect UI, and checks of what they show.

Why a script and not a test: it needs a full Prefect server with its UI (~15-40 s to
start) and a browser, and what it produces is pictures for a person to look at. It does
check, from the rendered DOM, what a picture cannot prove by itself: that the curve
table's cells are shown as written (an arm name is not turned into a link, `__all__` is
not bold, no escape characters leak into the text), and that no artifact carries a
`mailto:` or `file://` link.

What it does, all on 127.0.0.1 with nothing fetched:

1. `prefect server start` (UI included) with a temporary PREFECT_HOME and database;
2. `--runs` calibrations (fresh sample each, so the trend artifact has rows) of a few
   classes against the loopback Anthropic server (`tokenlens.testing.FakeAnthropic`);
3. headless Chromium, driven by Playwright on the system browser (`--chromium`):
   the last flow run's Artifacts tab (the page rewrites `?tab=Artifacts` to its first tab
   on load, so the tab is clicked), then each artifact's own page.

PNGs go to `--out` (default reports/screenshots/, git-ignored). Needs `playwright` (the
Python package only: its own browser download is never used) and a Chromium binary.

Usage: .venv/bin/python bench/screenshot_artifacts.py [--out DIR] [--runs 2]
Prints what it saved and what it checked; exits 1 when a check fails.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import closing
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from tokenlens.calibration.prefect_server import stop_server, wait_for_server

REPO = Path(__file__).resolve().parents[1]
#: What the calibration measures: small, but every artifact has real content, and the
#: ladder has rate-taking arms (`prune@0.6`, `prune@0.4`) whose names a markdown renderer
#: would turn into e-mail links.
CLASSES = ("extraction", "numeric-reasoning", "summarization")
METHODS = ("safe", "minify", "dedup", "prune")
RATES = (0.6, 0.4)
#: Text that must never be visible in a rendered artifact: escapes that leaked through.
#: A desktop screen (`--width` for another; issue 26 reads the UI at 1400 px).
VIEWPORT = (1920, 1080)
LEAKED_ESCAPES = ("\\_", "\\@", "&#64;", "\\*", "\\|")


@dataclass
class Check:
    what: str
    ok: bool
    detail: str = ""

    def line(self) -> str:
        mark = "PASS" if self.ok else "FAIL"
        return f"  [{mark}] {self.what}" + (f": {self.detail}" if self.detail else "")


def _free_port() -> int:
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def quiet_prefect_env(home: Path) -> None:
    """Settings that keep Prefect local, quiet and fast (see ENVIRONMENT-NOTES)."""
    os.environ["PREFECT_HOME"] = str(home)
    os.environ["DO_NOT_TRACK"] = "1"
    os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
    os.environ["PREFECT_SERVER_SERVICES_SCHEDULER_ENABLED"] = "false"
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    os.environ["HF_HUB_OFFLINE"] = "1"


def start_server(root: Path, timeout_s: float) -> tuple[subprocess.Popen[bytes], str]:
    """`prefect server start` with its UI on a free loopback port; returns it and its URL."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    prefect = Path(sys.executable).with_name("prefect")
    log = (root / "server.log").open("wb")
    # The UI asks the API at this URL (default: port 4200, not ours).
    env = {**os.environ, "PREFECT_UI_API_URL": f"{url}/api"}
    command = [str(prefect), "server", "start", "--host", "127.0.0.1", "--port", str(port),
               "--analytics-off"]  # fmt: skip
    process = subprocess.Popen(
        command,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    wait_for_server(process, f"{url}/api", timeout_s)  # stops it and raises on failure
    return process, url


def run_calibrations(root: Path, runs: int) -> str:
    """Run the flow `runs` times against the loopback server; the last flow run's id."""
    from flows.calibrate import calibrate, flow_parameters
    from tokenlens.config import CalibrationConfig
    from tokenlens.testing import FakeAnthropic

    config = CalibrationConfig(
        backend="anthropic",
        model="claude-haiku-4-5",
        classes=CLASSES,
        max_tasks_per_class=2,
        methods=METHODS,
        rates=RATES,
        repeats=2,
        judge="metric",
        max_tokens=1024,
        store=str(root / "store"),
        reports=str(root / "reports"),
    )
    flow_run_id = ""
    with FakeAnthropic(seed=3) as server:
        os.environ["ANTHROPIC_BASE_URL"] = server.base_url
        os.environ["ANTHROPIC_API_KEY"] = "sk-ant-screenshots-dummy"
        for index in range(runs):
            started = time.perf_counter()
            params = flow_parameters(config, fail_on_unresolved=False, fresh_sample=index > 0)
            state = calibrate(**params, return_state=True)
            flow_run_id = str(state.state_details.flow_run_id)
            print(
                f"flow run {index + 1}/{runs}: {flow_run_id} {state.name} "
                f"in {time.perf_counter() - started:.1f} s"
            )
    return flow_run_id


def read_artifacts(flow_run_id: str) -> list[Any]:
    """The flow run's artifacts, newest version of each key."""
    from uuid import UUID

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    with get_client(sync_client=True) as client:
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(
                flow_run_id=ArtifactFilterFlowRunId(any_=[UUID(flow_run_id)])
            )
        )
    latest: dict[str, Any] = {}
    for artifact in sorted(found, key=lambda a: str(a.created)):
        latest[artifact.key or str(artifact.id)] = artifact
    return list(latest.values())


def expected_curve_cells() -> tuple[set[str], set[str]]:
    """The arm labels and class names the curve table must show, as plain text."""
    from tokenlens.compress.arms import CONTROL, build_ladder
    from tokenlens.formatting import arm_label

    arms = {arm_label(CONTROL), *(arm_label(a.key) for a in build_ladder(METHODS, RATES))}
    return arms, {*CLASSES, "all classes"}


def table_cells(page: Any) -> tuple[list[str], list[list[dict[str, Any]]]]:
    """Header texts and, per row, each cell's text, links and emphasis, from the DOM."""
    result: dict[str, Any] = page.evaluate(
        """() => {
            const table = document.querySelector('table');
            if (!table) return {headers: [], rows: []};
            const headers = [...table.querySelectorAll('thead th')].map(th => th.innerText.trim());
            const rows = [...table.querySelectorAll('tbody tr')].map(tr =>
                [...tr.querySelectorAll('td')].map(td => ({
                    text: td.innerText.trim(),
                    links: [...td.querySelectorAll('a')].map(a => a.getAttribute('href')),
                    // Prefect's renderer marks emphasis with classes on <div>s, not
                    // <strong>: ask the computed style of every element in the cell.
                    bold: [td, ...td.querySelectorAll('*')]
                        .filter(e => {
                            const style = getComputedStyle(e);
                            return Number(style.fontWeight) >= 600 || style.fontStyle === 'italic';
                        })
                        .map(e => e.innerText.trim()),
                })));
            return {headers, rows};
        }"""
    )
    return result["headers"], result["rows"]


def check_curve_table(page: Any) -> list[Check]:
    headers, rows = table_cells(page)
    checks = [Check("curve table rendered", bool(headers and rows), f"{len(rows)} rows")]
    if not rows:
        return checks
    arm_col = headers.index("arm") if "arm" in headers else 1
    class_col = headers.index("class") if "class" in headers else 0
    arms_seen = [row[arm_col]["text"] for row in rows]
    classes_seen = [row[class_col]["text"] for row in rows]
    want_arms, want_classes = expected_curve_cells()
    checks.append(
        Check(
            "arm names shown as written",
            set(arms_seen) == want_arms,
            f"seen {sorted(set(arms_seen))}",
        )
    )
    checks.append(
        Check(
            "class names shown as written",
            set(classes_seen) == want_classes,
            f"seen {sorted(set(classes_seen))}",
        )
    )
    links = [(c["text"], href) for row in rows for c in row for href in c["links"]]
    checks.append(Check("no cell is a link (mailto: or other)", not links, f"links: {links}"))
    emphasised = sorted({c["text"] for row in rows for c in row if c["bold"]})
    checks.append(
        Check(
            "`__all__` row ('all classes') and every other cell not bold/italic",
            not emphasised,
            f"bold or italic: {emphasised}" if emphasised else "computed font weight < 600",
        )
    )
    raw = [c for c in classes_seen if "all" in c and c != "all classes"]
    checks.append(Check("'__all__' shown as 'all classes'", not raw, f"seen {raw}" if raw else ""))
    return checks


def control_artifact() -> str:
    """A table artifact with the raw names, unescaped: the checks must fail on it."""
    from prefect import flow
    from prefect.artifacts import create_table_artifact

    rows = [
        {"class": "__all__", "arm": "prune@0.4", "status": "held"},
        {"class": "extraction", "arm": "prune@0.6", "status": "held"},
    ]

    @flow(name="screenshot-check-control")
    def publish() -> str:
        artifact_id = create_table_artifact(
            table=rows, key="screenshot-check-control", description="unescaped control table"
        )
        return str(artifact_id)

    return publish()


def check_control(page: Any, ui: str, artifact_id: str) -> Check:
    """The checks are able to fail: on the unescaped table they must see links and bold."""
    page.goto(f"{ui}/artifacts/artifact/{artifact_id}", wait_until="networkidle")
    page.wait_for_timeout(1000)
    results = {c.what: c for c in check_curve_table(page)}
    caught = [w for w, c in results.items() if not c.ok and ("link" in w or "bold" in w)]
    return Check(
        "control: the same checks FAIL on an unescaped table (prune@0.4, __all__)",
        len(caught) == 2,
        "; ".join(f"{results[w].detail}" for w in caught),
    )


def check_page_text(page: Any, name: str) -> list[Check]:
    """Checks every artifact page gets: no mailto:/file:// links, no leaked escapes."""
    content = page.locator("main") if page.locator("main").count() else page.locator("body")
    text = content.inner_text()
    hrefs: list[str] = page.evaluate(
        "() => [...document.querySelectorAll('a')].map(a => a.getAttribute('href') || '')"
    )
    bad = sorted({h for h in hrefs if h.startswith(("mailto:", "file:"))})
    leaked = [e for e in LEAKED_ESCAPES if e in text]
    cut: list[str] = page.evaluate(
        "() => [...document.querySelectorAll('pre')]"
        ".filter(e => e.scrollWidth > e.clientWidth + 1)"
        ".map(e => e.innerText.slice(0, 40))"
    )
    hidden = wide_tables(page)
    return [
        Check(f"{name}: no mailto:/file:// links", not bad, ", ".join(bad)),
        Check(f"{name}: no escape characters visible", not leaked, ", ".join(leaked)),
        Check(f"{name}: no code block cut off at {VIEWPORT[0]} px", not cut, "; ".join(cut)),
        Check(f"{name}: no table column hidden at {VIEWPORT[0]} px", not hidden, str(hidden)),
    ]


def snap(page: Any, path: Path) -> None:
    """A screenshot of the whole page. The UI scrolls inside its own container, so
    Playwright's full-page capture stops at the viewport: grow the viewport instead."""
    height: int = page.evaluate(
        "() => Math.max(...[...document.querySelectorAll('*')].map(e => e.scrollHeight))"
    )
    page.set_viewport_size({"width": VIEWPORT[0], "height": max(VIEWPORT[1], min(height, 8000))})
    page.wait_for_timeout(500)
    page.screenshot(path=str(path))
    page.set_viewport_size({"width": VIEWPORT[0], "height": VIEWPORT[1]})
    print(f"saved {path}")


def wide_tables(page: Any) -> list[str]:
    """Tables that scroll sideways at this width (their last columns are off-screen)."""
    found: list[str] = page.evaluate(
        """() => [...document.querySelectorAll('table')].flatMap(t => {
            let box = t.parentElement;
            while (box && box.scrollWidth <= box.clientWidth && box !== document.body)
                box = box.parentElement;
            if (!box || box === document.body) return [];
            const heads = [...t.querySelectorAll('th')];
            const right = box.getBoundingClientRect().right;
            const hidden = heads.filter(h => h.getBoundingClientRect().right > right + 1);
            return hidden.length
                ? [hidden.map(h => h.innerText.trim()).join(', ')] : [];
        })"""
    )
    return found


def shoot(
    ui: str, flow_run_id: str, artifacts: list[Any], out: Path, chromium: str, control: str
) -> list[Check]:
    from playwright.sync_api import sync_playwright

    checks: list[Check] = []
    out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": VIEWPORT[0], "height": VIEWPORT[1]})
        page.goto(f"{ui}/runs/flow-run/{flow_run_id}", wait_until="networkidle")
        # The UI's tabs are <li class="p-tab"> elements, not ARIA tabs.
        page.locator("li.p-tab", has_text="Artifacts").first.click()
        page.wait_for_load_state("networkidle")
        page.wait_for_timeout(1500)
        snap(page, out / "flow-run-artifacts-tab.png")
        tab_text = page.locator("body").inner_text()
        keys = [a.key for a in artifacts if a.key]  # task runs' ones in a section below
        missing = [k for k in keys if k not in tab_text]
        checks.append(
            Check("artifacts tab lists every artifact key", not missing, f"missing {missing}")
        )
        for artifact in artifacts:
            name = artifact.key or str(artifact.id)
            page.goto(f"{ui}/artifacts/artifact/{artifact.id}", wait_until="networkidle")
            page.wait_for_timeout(1000)
            snap(page, out / f"artifact-{name}.png")
            checks += check_page_text(page, name)
            if artifact.type == "table":
                checks += check_curve_table(page)
        checks.append(check_control(page, ui, control))
        browser.close()
    return checks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "reports" / "screenshots")
    parser.add_argument("--runs", type=int, default=2, help="calibrations (trend rows)")
    parser.add_argument("--width", type=int, default=1920, help="viewport width, px")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    parser.add_argument("--server-timeout", type=float, default=240.0)
    parser.add_argument("--ui", help="use this running Prefect server (e.g. http://127.0.0.1:4200)")
    parser.add_argument("--flow-run", help="with --ui: shoot this flow run instead of running one")
    args = parser.parse_args()
    global VIEWPORT
    VIEWPORT = (args.width, VIEWPORT[1])

    if find_spec("playwright") is None:
        sys.exit(
            "playwright is not installed: .venv/bin/pip install -c constraints.txt "
            "-e '.[screenshots]' (the Python package only; the system Chromium is used)"
        )
    if not Path(args.chromium).is_file():
        sys.exit(f"no Chromium at {args.chromium}: apt-get install -y chromium, or --chromium PATH")
    root = Path(tempfile.mkdtemp(prefix="tokenlens-shots-"))
    quiet_prefect_env(root / "prefect")
    server = None
    if args.ui:
        ui = args.ui.rstrip("/")
    else:
        started = time.perf_counter()
        server, ui = start_server(root, args.server_timeout)
        print(f"prefect server with UI at {ui} in {time.perf_counter() - started:.1f} s")
    os.environ["PREFECT_API_URL"] = f"{ui}/api"
    try:
        flow_run_id = args.flow_run or run_calibrations(root, args.runs)
        artifacts = read_artifacts(flow_run_id)
        print(f"artifacts of {flow_run_id}: {', '.join(a.key or '?' for a in artifacts)}")
        checks = shoot(ui, flow_run_id, artifacts, args.out, args.chromium, control_artifact())
    finally:
        if server is not None:
            stop_server(server)
    print("DOM checks:")
    for check in checks:
        print(check.line())
    shutil.rmtree(root, ignore_errors=True)
    sys.exit(0 if all(c.ok for c in checks) else 1)


if __name__ == "__main__":
    main()
