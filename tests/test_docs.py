"""Every command line in the README and `docs/` is real (docs/contributing.md says how).

Two checks. Shell blocks marked `<!-- runnable -->` run, in the site's reading order, with
bash in one scratch folder, against the loopback Anthropic server and the session's Prefect
server, and must exit as the marker says (0 unless it says `exit=N`). Every other command
line, in any shell block or inline code span, is checked without running: a `tokenlens`
line must parse with the CLI's own parser (a missing subcommand or flag fails), a `python
bench/…` line must name a bench script that defines its flags, and a `prefect deployment
run` line must name a deployment of prefect.yaml and only parameters its flow has.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import resource
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from markdown_it import MarkdownIt
from markdown_it.token import Token

from tokenlens.cli import build_parser
from tokenlens.testing import FakeAnthropic

REPO = Path(__file__).resolve().parents[1]
SHELL = {"bash", "sh", "shell", "console"}
MARKER = re.compile(r"^<!--\s*runnable(?:\s+exit=(?P<exit>\d+))?\s*-->$")
#: Words that end one command and start the next on a shell line.
SEPARATORS = {";", "&&", "||", "|", "&"}
#: A runnable block gets this long; the whole set should take well under a minute.
BLOCK_TIMEOUT_S = 120


@dataclass(frozen=True)
class Block:
    """A fenced code block of a page, where it starts, and its runnable marker if any."""

    page: str
    line: int
    lang: str
    text: str
    expected_exit: int | None  # None: not marked runnable

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[Path]:
    """README first, then the site's pages in mkdocs.yml's nav order (reading order)."""
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    return [REPO / "README.md", *(REPO / "docs" / name for name in _nav_files(config["nav"]))]


def _nav_files(nav: object) -> Iterator[str]:
    if isinstance(nav, str):
        yield nav
    elif isinstance(nav, list):
        for item in nav:
            yield from _nav_files(item)
    elif isinstance(nav, dict):
        for value in nav.values():
            yield from _nav_files(value)


def _tokens(path: Path) -> list[Token]:
    return MarkdownIt("commonmark").parse(path.read_text(encoding="utf-8"))


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of one page; a marker is an HTML comment right before the fence."""
    found = []
    previous = None
    for token in _tokens(path):
        if token.type == "fence" and token.map is not None:
            marked = (
                MARKER.match(previous.content.strip())
                if previous is not None and previous.type == "html_block"
                else None
            )
            expected = None if marked is None else int(marked.group("exit") or 0)
            lang = token.info.split()[0] if token.info.strip() else ""
            name = str(path.relative_to(REPO)) if path.is_relative_to(REPO) else path.name
            found.append(Block(name, token.map[0] + 1, lang, token.content, expected))
        previous = token
    return found


def inline_code(path: Path) -> Iterator[str]:
    for token in _tokens(path):
        for child in token.children or ():
            if child.type == "code_inline":
                yield child.content


def commands(text: str) -> Iterator[list[str]]:
    """The simple commands of a shell text: continuations joined, comments, variable
    assignments and redirections dropped, split at `;`, `&&`, `||`, `|` and `&`."""
    for line in text.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        words: list[str] = []
        skip_next = False
        for word in [*lexer, ";"]:
            if skip_next:
                skip_next = False
            elif word in SEPARATORS:
                while words and (re.match(r"^\w+=", words[0]) or words[0] == "export"):
                    words.pop(0)
                if words:
                    yield words
                words = []
            elif word in {">", ">>", "<", "&>"}:
                if words and words[-1].isdigit():  # `2>/dev/null`
                    words.pop()
                skip_next = True
            else:
                words.append(word)


def tokenlens_argv(words: list[str]) -> list[str] | None:
    """The arguments after `tokenlens` (however it is spelled), or None for other programs."""
    head = Path(words[0]).name
    if head == "tokenlens":
        return words[1:]
    if re.fullmatch(r"python3?", head) and words[1:3] == ["-m", "tokenlens"]:
        return words[3:]
    return None


def parse_error(argv: list[str]) -> str | None:
    """What the CLI's parser says about these arguments, or None when it accepts them."""
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            build_parser().parse_args(argv)
    except SystemExit as exc:
        return None if exc.code == 0 else stderr.getvalue().strip().splitlines()[-1]
    return None


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def inline_error(argv: list[str]) -> str | None:
    """For a command quoted inline, with placeholders (`[RUN]`, `FILE`, `…`): its
    subcommands must exist and every flag it names must be one of theirs."""
    parser = build_parser()
    words = list(argv)
    chosen = ["tokenlens"]
    while (subs := _subcommands(parser)) and words and not words[0].startswith("-"):
        if words[0] not in subs:
            return f"`{' '.join(chosen)}` has no subcommand {words[0]!r}"
        chosen.append(words[0])
        parser = subs[words.pop(0)]
    for word in words:
        flag = re.match(r"^\[?(--?[A-Za-z][\w-]*)", word)
        if flag and flag.group(1) not in parser._option_string_actions:
            return f"`{' '.join(chosen)}` has no option {flag.group(1)}"
    return None


def bench_error(words: list[str]) -> str | None:
    """`python bench/x.py --flag …`: the script exists and defines each flag."""
    if not (len(words) > 1 and Path(words[0]).name.startswith("python")):
        return None
    script = words[1]
    if not script.startswith("bench/"):
        return None
    path = REPO / script
    if not path.is_file():
        return f"{script} does not exist"
    source = path.read_text(encoding="utf-8")
    for word in words[2:]:
        flag = re.match(r"^\[?(--[A-Za-z][\w-]*)", word)
        if flag and f'"{flag.group(1)}"' not in source:
            return f"{script} defines no option {flag.group(1)}"
    return None


def all_blocks() -> list[Block]:
    return [block for page in pages() for block in blocks(page)]


def test_every_page_is_found_and_has_blocks_to_check() -> None:
    """Guards the checks below against reading nothing (a renamed folder, a parser change)."""
    found = all_blocks()
    assert len(pages()) > 10
    assert sum(block.lang in SHELL for block in found) >= 10
    assert sum(block.expected_exit is not None for block in found) >= 3
    marked_elsewhere = [
        block.where for block in found if block.expected_exit is not None and block.lang != "bash"
    ]
    assert marked_elsewhere == [], "only ```bash blocks can be marked runnable"


def test_every_tokenlens_line_parses() -> None:
    problems = []
    for block in all_blocks():
        if block.lang not in SHELL:
            continue
        for words in commands(block.text):
            argv = tokenlens_argv(words)
            error = parse_error(argv) if argv is not None else bench_error(words)
            if error:
                problems.append(f"{block.where}: `{' '.join(words)}`: {error}")
    assert problems == [], "\n".join(problems)


def test_every_tokenlens_command_quoted_inline_exists() -> None:
    problems = []
    checked = 0
    for page in pages():
        for code in inline_code(page):
            if not re.match(r"^(\S*/)?(tokenlens|python3? (-m tokenlens|bench/\S+))(\s|$)", code):
                continue
            checked += 1
            words = code.replace("…", " ").split()
            argv = tokenlens_argv(words)
            error = inline_error(argv) if argv is not None else bench_error(words)
            if error:
                problems.append(f"{page.relative_to(REPO)}: `{code}`: {error}")
    assert problems == [], "\n".join(problems)
    assert checked >= 30


def test_every_prefect_deployment_run_names_real_parameters() -> None:
    """`prefect deployment run FLOW/DEPLOYMENT --param NAME=…`: prefect.yaml deploys it
    and NAME is one of that flow's parameters."""
    from prefect.flows import load_flow_from_entrypoint

    deployments = yaml.safe_load((REPO / "prefect.yaml").read_text())["deployments"]
    problems = []
    checked = 0
    for block in all_blocks():
        for words in commands(block.text) if block.lang in SHELL else ():
            if [Path(words[0]).name, *words[1:3]] != ["prefect", "deployment", "run"]:
                continue
            target = words[3]
            match = [d for d in deployments if d["name"] == target.split("/")[-1]]
            if not match:
                problems.append(f"{block.where}: no deployment {target!r} in prefect.yaml")
                continue
            flow = load_flow_from_entrypoint(str(REPO / match[0]["entrypoint"]))
            if f"{flow.name}/{match[0]['name']}" != target:
                problems.append(f"{block.where}: {target!r} is flow {flow.name!r}")
            names = set(flow.parameters.properties)
            params = [words[i + 1] for i, word in enumerate(words[:-1]) if word == "--param"]
            for param in params:
                checked += 1
                if param.split("=", 1)[0] not in names:
                    problems.append(f"{block.where}: flow {flow.name} has no parameter {param}")
    assert problems == [], "\n".join(problems)
    assert checked >= 3


def test_the_checks_catch_a_missing_flag_and_a_missing_command() -> None:
    assert parse_error(["calibrate", "--dry-run"]) is None
    assert "--no-such-flag" in (parse_error(["calibrate", "--no-such-flag"]) or "")
    assert parse_error(["no-such-command"]) is not None
    assert inline_error(["history", "[--class", "C]"]) is None
    assert inline_error(["tasks", "harvest", "CAPTURES", "--out", "FILE"]) is None
    assert "--nope" in (inline_error(["review", "[RUN]", "--nope"]) or "")
    assert "'nope'" in (inline_error(["tasks", "nope"]) or "")
    assert bench_error(["python", "bench/bench_proxy.py", "--requests", "4"]) is None
    assert bench_error(["python", "bench/bench_proxy.py", "--nope"]) is not None
    assert list(commands("A=1 tokenlens x --y 2>/dev/null && echo ok  # note\n")) == [
        ["tokenlens", "x", "--y"],
        ["echo", "ok"],
    ]
    assert list(commands("export K=v\ntokenlens a \\\n  --b\n")) == [["tokenlens", "a", "--b"]]


def test_a_marker_is_read_only_right_before_a_fence(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- runnable -->\n```bash\ntrue\n```\n\n<!-- runnable exit=4 -->\n```bash\nfalse\n"
        "```\n\n<!-- runnable -->\n\ntext\n\n```bash\nnot marked\n```\n"
    )
    found = blocks(page)
    assert [(b.line, b.expected_exit) for b in found] == [(2, 0), (7, 4), (15, None)]


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    """A folder that reads like a checkout (its files linked) and writes only to itself."""
    for entry in REPO.iterdir():
        if entry.name.startswith(".") or entry.name in {"reports", "site"}:
            continue
        (tmp_path / entry.name).symlink_to(entry)
    return tmp_path


def test_the_runnable_blocks_run_in_reading_order(
    scratch: Path, fake_anthropic: FakeAnthropic, prefect_api: str
) -> None:
    """Run as a reader would: page after page in one folder, so a page may read what an
    earlier one wrote (a calibration, then its history)."""
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "ANTHROPIC_BASE_URL": fake_anthropic.base_url,
        "PREFECT_API_URL": prefect_api,
        "NO_COLOR": "1",
    }
    env.pop("ANTHROPIC_API_KEY", None)  # what the docs say to set, they set themselves
    ran = []
    for block in all_blocks():
        if block.expected_exit is None:
            continue
        started, cpu = time.monotonic(), _children_cpu()
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", block.text],
            cwd=scratch,
            env=env,
            capture_output=True,
            text=True,
            timeout=BLOCK_TIMEOUT_S,
        )
        wall, used = time.monotonic() - started, _children_cpu() - cpu
        ran.append(f"{block.where}: {wall:.1f} s wall, {used:.1f} s CPU")
        assert done.returncode == block.expected_exit, (
            f"{block.where} exited {done.returncode}, the docs say {block.expected_exit}:\n"
            f"{block.text}\n--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"
        )
    print("\n".join(ran), f"(load average {os.getloadavg()[0]:.1f})")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime
