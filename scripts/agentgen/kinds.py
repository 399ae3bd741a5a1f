"""The real commands each kind runs, over openly licensed material installed here.

Every function returns `Candidate`s: a captured output and the questions derive.py may ask
about it. Which candidates become tasks is decided by size (common.spread). One file past
500 lines on purpose: one short function per kind of output, read side by side.
"""

from __future__ import annotations

import ast
import gzip
import json
import random
import re
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path

from common import Candidate, Round, run

from tokenlens.tokens import estimate_tokens

STDLIB = Path(f"/usr/lib/python{sys.version_info.major}.{sys.version_info.minor}")
STDLIB_SRC = f"Python {sys.version_info.major}.{sys.version_info.minor} standard library ({STDLIB})"
PSF = "PSF-2.0"
SITE = Path(next(p for p in sys.path if p.endswith("site-packages")))
VENV_BIN = str(Path(sys.executable).parent)
BOTOCORE = SITE / "botocore" / "data"


def _stdlib_files() -> list[Path]:
    skip = ("test", "idlelib", "lib2to3", "site-packages", "dist-packages", "__pycache__")
    return sorted(
        p
        for p in STDLIB.rglob("*.py")
        if not any(part in skip for part in p.relative_to(STDLIB).parts)
    )


def search() -> list[Candidate]:
    """grep over the standard library for names of every frequency."""
    files = _stdlib_files()
    freq: Counter[str] = Counter()
    defined: set[str] = set()
    for path in files:
        text = path.read_text(errors="replace")
        freq.update(set(re.findall(r"\b[A-Za-z_][A-Za-z0-9_]{3,}\b", text)))
        defined.update(re.findall(r"^\s*(?:def|class)\s+(\w+)", text, flags=re.M))
    rng = random.Random("agent-search")
    by_band: dict[int, list[str]] = {}
    for word, n in freq.items():
        by_band.setdefault(min(n.bit_length(), 10), []).append(word)
    words: list[str] = []
    for band in sorted(by_band):
        pool = sorted(by_band[band])
        rng.shuffle(pool)
        words += pool[:14]
    words += sorted(rng.sample(sorted(defined & set(freq)), 40))
    out = []
    for i, word in enumerate(sorted(set(words))):
        if i % 3 == 2:
            command = f"grep -rn --include='*.py' '\\b{word}\\b' ."
            rnd = Round("bash", {"command": command, "cwd": str(STDLIB)}, "")
        else:
            command = f"grep -rnw --include='*.py' {word} ."
            rnd = Round("grep", {"pattern": f"\\b{word}\\b", "path": ".", "include": "*.py"}, "")
        rnd.output = run(command, STDLIB)
        hits = [line.split(":", 1)[0] for line in rnd.output.splitlines() if ":" in line]
        last = hits[-1] if hits else ""
        others: list[tuple[str, object]] = [
            ("search-top-file", None),
            ("search-count-files", None),
            ("search-count-in", last),
        ]
        # a name defined once is asked for its definition; other questions take turns
        templates = [("search-def", word), *_rotate(others, i)]
        out.append(
            Candidate(
                kind="agent-search",
                key=f"grep-{word}",
                request=f"Find where `{word}` is used in the Python standard library.",
                rounds=[rnd],
                templates=templates,
                source=STDLIB_SRC,
                licence=PSF,
            )
        )
    return out


def _rotate(templates: list[tuple[str, object]], i: int) -> list[tuple[str, object]]:
    k = i % len(templates)
    return templates[k:] + templates[:k]


def listing() -> list[Candidate]:
    """ls -la of real folders and find over the standard library."""
    rng = random.Random("agent-listing")
    out = []
    folders = sorted({p.parent for p in _stdlib_files()})
    places = [(d, STDLIB_SRC, PSF) for d in folders]
    system = [
        "/usr/bin",
        "/usr/sbin",
        "/etc",
        "/etc/alternatives",
        "/usr/share/doc",
        "/usr/lib/x86_64-linux-gnu",
    ]
    for parent in ("/usr/share", "/usr/lib", "/usr/lib/x86_64-linux-gnu", "/etc"):
        system += sorted(
            str(p) for p in Path(parent).iterdir() if p.is_dir() and not p.is_symlink()
        )
    places += [
        (
            Path(d),
            "Debian 12 system folder (file names and sizes only)",
            "see /usr/share/doc/*/copyright",
        )
        for d in system
    ]
    for i, (folder, source, licence) in enumerate(places):
        command = f"ls -la {folder}"
        output = run(command)
        from derive import ls_entries

        entries = ls_entries(output)
        files = sorted(e[2] for e in entries if e[0] == "-")
        links = sorted(e[2] for e in entries if e[0] == "l")
        templates: list[tuple[str, object]] = [("ls-largest", None), ("ls-count-dirs", None)]
        if files:
            templates.append(("ls-size-of", rng.choice(files)))
        if links:
            templates.insert(0, ("ls-link", rng.choice(links)))
        out.append(
            Candidate(
                kind="agent-listing",
                key=f"ls-{folder}",
                request=f"What is in `{folder}`?",
                rounds=[Round("bash", {"command": command}, output)],
                templates=_rotate(templates, i),
                source=source,
                licence=licence,
            )
        )
    tops = sorted(
        {
            p.relative_to(STDLIB).parts[0]
            for p in _stdlib_files()
            if len(p.relative_to(STDLIB).parts) > 1
        }
    )
    roots = [
        (STDLIB, top, pattern, STDLIB_SRC, PSF) for top in [".", *tops] for pattern in ("*.py", "*")
    ]
    for parent in ("/usr/share", "/usr/lib", "/usr/include", "/usr/share/doc"):
        for d in sorted(p for p in Path(parent).iterdir() if p.is_dir() and not p.is_symlink()):
            roots.append(
                (
                    d,
                    ".",
                    "*",
                    f"Debian 12 system folder {d} (file names only)",
                    "see /usr/share/doc/*/copyright",
                )
            )
    for i, (cwd, top, pattern, source, licence) in enumerate(roots):
        name = "" if pattern == "*" else f" -name '{pattern}'"
        command = f"find {top} -type f{name} -not -path '*/__pycache__/*' | sort"
        output = run(command, cwd)
        paths = output.splitlines()
        subdirs = sorted({"/".join(p.split("/")[:2]) for p in paths if p.count("/") >= 2})
        templates: list[tuple[str, object]] = [("find-count", None)]
        if subdirs:
            templates.append(("find-count-under", rng.choice(subdirs)))
        out.append(
            Candidate(
                kind="agent-listing",
                key=f"find-{cwd}-{top}-{pattern}",
                request=f"List the files under `{cwd / top}`.",
                rounds=[Round("bash", {"command": command, "cwd": str(cwd)}, output)],
                templates=_rotate(templates, i),
                source=source,
                licence=licence,
            )
        )
    return out


def _read_round(i: int, path: Path, output: str) -> Round:
    """Every other read is the read_file tool's, the rest `cat -n` in bash."""
    if i % 2:
        return Round("read_file", {"path": str(path)}, output)
    rel = path.relative_to(STDLIB)
    return Round("bash", {"command": f"cat -n {rel}", "cwd": str(STDLIB)}, output)


def file_read() -> list[Candidate]:
    """Numbered reads of standard-library modules (bash `cat -n` or the read_file tool)."""
    import ast

    rng = random.Random("agent-file-read")
    out = []
    for i, path in enumerate(_stdlib_files()):
        rel = path.relative_to(STDLIB)
        output = run(f"cat -n {rel}", STDLIB)
        try:
            tree = ast.parse(path.read_text())
        except (SyntaxError, UnicodeDecodeError):
            continue
        defs = [
            n
            for n in ast.walk(tree)
            if isinstance(n, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef)
        ]
        names = Counter(n.name for n in defs)
        once = sorted(n for n, c in names.items() if c == 1)
        funcs = [
            n
            for n in defs
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and names[n.name] == 1
        ]
        consts = sorted(
            t.id
            for n in tree.body
            if isinstance(n, ast.Assign)
            and isinstance(n.value, ast.Constant)
            and isinstance(n.value.value, int)
            and not isinstance(n.value.value, bool)
            for t in n.targets
            if isinstance(t, ast.Name)
        )
        templates: list[tuple[str, object]] = [("read-count-defs", None)]
        if once:
            templates.append(("read-def-line", rng.choice(once)))
        if funcs:
            node = rng.choice(funcs)
            end = node.end_lineno or node.lineno
            if end > node.lineno + 1:
                templates.append(("read-enclosing", rng.randint(node.lineno + 1, end)))
        if consts:
            templates.append(("read-constant", rng.choice(consts)))
        rounds = [_read_round(i, path, output)]
        if i % 3 == 0:
            listing = run(f"ls {rel.parent}", STDLIB)
            rounds.insert(
                0, Round("bash", {"command": f"ls {rel.parent}", "cwd": str(STDLIB)}, listing)
            )
        out.append(
            Candidate(
                kind="agent-file-read",
                key=f"read-{rel}",
                request=f"Open `{rel}` from the standard library and help me understand it.",
                rounds=rounds,
                templates=_rotate(templates, i),
                source=STDLIB_SRC,
                licence=PSF,
            )
        )
    return out


BODY_TEMPLATES = ("read-return", "read-raise", "read-condition", "read-string-set")


def file_read_body() -> list[Candidate]:
    """The same numbered reads, asked about what a function's body says (derive.py's
    read-return, read-raise, read-condition, read-string-set)."""
    import ast

    rng = random.Random("agent-file-read-body")
    out = []
    for i, path in enumerate(_stdlib_files()):
        rel = path.relative_to(STDLIB)
        try:
            tree = ast.parse(path.read_text())
        except (SyntaxError, UnicodeDecodeError):
            continue
        funcs = sorted(
            n.name
            for n in ast.walk(tree)
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
            and (n.end_lineno or 0) - n.lineno >= 4
        )
        if not funcs:
            continue
        output = run(f"cat -n {rel}", STDLIB)
        picks = rng.sample(funcs, min(6, len(funcs)))
        templates = [(t, f) for t in _rotate(list(BODY_TEMPLATES), i) for f in picks]
        out.append(
            Candidate(
                kind="agent-file-read",
                key=f"body-read-{rel}",
                request=f"Open `{rel}` from the standard library and walk me through its code.",
                rounds=[_read_round(i, path, output)],
                templates=templates,
                source=STDLIB_SRC,
                licence=PSF,
            )
        )
    return out


def json_kind() -> list[Candidate]:
    """pip's JSON listing and botocore's service models through jq / json.tool."""
    import importlib.metadata as md

    rng = random.Random("agent-json")
    out = []
    env = {"PATH": f"{VENV_BIN}:/usr/bin:/bin"}
    for flags in ("", " --not-required"):
        command = f"python -m pip list --format json{flags}"
        output = run(command, env=env)
        names = sorted(r["name"] for r in json.JSONDecoder().raw_decode(output)[0])
        for j, name in enumerate(rng.sample(names, 8)):
            out.append(
                Candidate(
                    kind="agent-json",
                    key=f"pip{flags.strip()}-{name}",
                    request="Which Python packages are installed in this environment?",
                    rounds=[Round("bash", {"command": command}, output)],
                    templates=[("json-pip-count", None)]
                    if j == 0
                    else [("json-pip-version", name)],
                    source="pip list of this project's environment (package names and versions)",
                    licence="metadata of PyPI packages",
                )
            )
    version = md.version("botocore")
    source = f"botocore {version} service models"
    services = sorted(p for p in BOTOCORE.iterdir() if p.is_dir())
    for i, service in enumerate(rng.sample(services, 120)):
        model = max(service.glob("*/service-2.json.gz"), default=None)
        if model is None:
            continue
        rel = model.relative_to(SITE)
        data = json.loads(gzip.decompress(model.read_bytes()))
        ops = sorted(data.get("operations", {}))
        if not ops:
            continue
        if i % 3 == 0:
            command = f"zcat {rel} | python -m json.tool"
            templates: list[tuple[str, object]] = _rotate(
                [("json-metadata", None), ("json-operation-http", rng.choice(ops))], i // 3
            )
        elif i % 3 == 1:
            command = f"zcat {rel} | jq '.operations'"
            templates = [
                ("json-operation-http", rng.choice(ops)),
                ("json-count-keys", "operations"),
            ]
        else:
            shapes = sorted(
                k for k, v in data.get("shapes", {}).items() if 0 < len(v.get("required", [])) <= 6
            )
            if not shapes:
                continue
            shape = rng.choice(shapes)
            command = f"zcat {rel} | jq '.shapes.{shape}'"
            templates = [("json-required", shape)]
        output = run(command, SITE, env=env)
        rounds = [Round("bash", {"command": command, "cwd": str(SITE)}, output)]
        if i % 4 == 0:
            first = f"ls {service.relative_to(SITE)}/*/"
            rounds.insert(0, Round("bash", {"command": first, "cwd": str(SITE)}, run(first, SITE)))
        out.append(
            Candidate(
                kind="agent-json",
                key=f"botocore-{service.name}",
                request=f"Look at botocore's model of the `{service.name}` API.",
                rounds=rounds,
                templates=templates,
                source=source,
                licence="Apache-2.0",
            )
        )
        paginators = max(service.glob("*/paginators-1.json"), default=None)
        if paginators is not None and i % 2:
            command = f"jq '.pagination' {paginators.relative_to(SITE)}"
            out.append(
                Candidate(
                    kind="agent-json",
                    key=f"botocore-pag-{service.name}",
                    request=f"Which operations of `{service.name}` paginate in botocore?",
                    rounds=[
                        Round("bash", {"command": command, "cwd": str(SITE)}, run(command, SITE))
                    ],
                    templates=[("json-count-keys", "paginators")],
                    source=source,
                    licence="Apache-2.0",
                )
            )
    return out


DPKG_LOG = "/var/log/dpkg.log"


def logs() -> list[Candidate]:
    """dpkg's log, Debian changelogs and pytest runs (passing, and with one real failure)."""
    from derive import dpkg_lines

    rng = random.Random("agent-log")
    out = []
    total = len(Path(DPKG_LOG).read_text().splitlines())
    for i, n in enumerate(sorted({int(30 * 1.12**k) for k in range(40)})):
        start = rng.randint(1, max(1, total - n))
        command = (
            f"sed -n '{start},{start + n - 1}p' {DPKG_LOG}" if i % 2 else f"tail -n {n} {DPKG_LOG}"
        )
        output = run(command)
        lines = dpkg_lines(output)
        installed = sorted(
            {r[1].split(":")[0] for _, a, r in lines if a == "status" and r[:1] == ["installed"]}
        )
        upgraded = sorted(
            {r[0].split(":")[0] for _, a, r in lines if a == "upgrade" and len(r) == 3}
        )
        templates: list[tuple[str, object]] = [("dpkg-count-installed", None)]
        if installed:
            templates.append(("dpkg-installed-version", rng.choice(installed)))
        if upgraded:
            templates.append(("dpkg-upgrade", rng.choice(upgraded)))
        out.append(
            Candidate(
                kind="agent-log",
                key=f"dpkg-{i:02d}",
                request="What did the package manager do on this machine recently?",
                rounds=[Round("bash", {"command": command}, output)],
                templates=_rotate(templates, i),
                source="dpkg log of this Debian 12 machine",
                licence="system log (package names and versions only)",
            )
        )
    docs = sorted(Path("/usr/share/doc").glob("*/changelog.Debian.gz"))
    for path in rng.sample(docs, 40):
        n = rng.choice([40, 80, 160, 400, 1000, 2500])
        command = f"zcat {path} | head -n {n}"
        output = run(command)
        versions = re.findall(r"^\S+ \(([^)]+)\) ", output, flags=re.M)
        if len(versions) < 2:
            continue
        out.append(
            Candidate(
                kind="agent-log",
                key=f"changelog-{path.parent.name}",
                request=f"What changed recently in the Debian package `{path.parent.name}`?",
                rounds=[Round("bash", {"command": command}, output)],
                templates=[("changelog-maintainer", rng.choice(versions[1:]))],
                source=f"Debian package {path.parent.name}: changelog.Debian",
                licence=f"see /usr/share/doc/{path.parent.name}/copyright",
            )
        )
    out += _pytest_runs(rng)
    return out


def _pytest_runs(rng: random.Random) -> list[Candidate]:
    """pytest -v over copies of sympy's own test modules; every other run has one expected
    value changed by one, so it fails for real."""
    import importlib.metadata as md

    version = md.version("sympy")
    modules = sorted((SITE / "sympy").glob("*/tests/test_*.py"))
    picked = rng.sample([m for m in modules if m.stat().st_size < 20_000], 18)
    out = []
    env = {"PATH": f"{VENV_BIN}:/usr/bin:/bin"}
    for i, module in enumerate(picked):
        with tempfile.TemporaryDirectory(prefix="agentgen-") as tmp:
            copy = Path(tmp) / module.name
            shutil.copyfile(module, copy)
            template = "pytest-summary"
            if i % 2:
                lines = copy.read_text().splitlines(keepends=True)
                spots = [
                    k
                    for k, line in enumerate(lines)
                    if re.match(r"^\s+assert .+ == (\d+)\s*$", line)
                ]
                if not spots:
                    continue
                k = rng.choice(spots)
                lines[k] = re.sub(
                    r"== (\d+)(\s*)$", lambda m: f"== {int(m.group(1)) + 1}{m.group(2)}", lines[k]
                )
                copy.write_text("".join(lines))
                template = "pytest-failure"
            command = f"python -m pytest -v -p no:cacheprovider {module.name}"
            output = run(command, tmp, env=env).replace(tmp, "/work/sympy-tests")
        out.append(
            Candidate(
                kind="agent-log",
                key=f"pytest-{module.parent.parent.name}-{module.stem}",
                request=f"Run sympy's `{module.stem}` tests and tell me how it went.",
                rounds=[Round("bash", {"command": command, "cwd": "/work/sympy-tests"}, output)],
                templates=[(template, None)],
                source=f"sympy {version} test module {module.relative_to(SITE)}"
                + (" (one expected value changed by one)" if template == "pytest-failure" else ""),
                licence="BSD-3-Clause",
            )
        )
    return out


REPOS = {
    "click": (
        "/work/.mirror/pallets+click/repo",
        "https://github.com/pallets/click",
        "BSD-3-Clause",
    ),
    "requests": (
        "/work/.mirror/psf+requests/repo",
        "https://github.com/psf/requests",
        "Apache-2.0",
    ),
}


def _repos() -> list[tuple[str, str, str, str, int]]:
    """(name, where, licence, source naming the commit, commit count) of each repository."""
    found = []
    for name, (where, url, licence) in sorted(REPOS.items()):
        if not Path(where).exists():
            raise SystemExit(f"{where}: clone {url} there first (bare is fine)")
        head = run("git rev-parse HEAD", where).strip()
        total = int(run("git rev-list --count HEAD", where))
        found.append((name, where, licence, f"{url} at {head}", total))
    return found


def vcs() -> list[Candidate]:
    """git log over two real repositories' histories."""
    from derive import git_commits

    rng = random.Random("agent-vcs")
    out = []
    for name, where, licence, source, total in _repos():
        for i, n in enumerate(sorted({int(3 * 100 ** (k / 44)) for k in range(45)})):
            skip = rng.randint(0, max(0, total - n - 1))
            n = n * 2 if i % 3 == 1 else n
            stat = " --stat" if i % 3 == 1 else ""
            command = f"git log -n {n} --skip {skip}{stat}"
            output = run(command, where)
            commits = git_commits(output)
            if not commits:
                continue
            one = rng.choice(commits)
            authors = sorted({c["author"] for c in commits if "author" in c})
            templates: list[tuple[str, object]] = [
                ("git-author", one["hash"][:7]),
                ("git-hash-of", one["subject"]),
                ("git-count-by", rng.choice(authors)),
            ]
            if stat:
                templates.insert(0, ("git-files-changed", one["hash"][:7]))
            out.append(
                Candidate(
                    kind="agent-vcs",
                    key=f"log-{name}-{i:02d}",
                    request=f"Show me some history of the {name} repository.",
                    rounds=[Round("bash", {"command": command}, output)],
                    templates=_rotate(templates, i),
                    source=source,
                    licence=licence,
                )
            )
        files = run("git ls-tree -r --name-only HEAD", where).split()
        for path in rng.sample([f for f in files if f.endswith(".py")], 14):
            command = f"git log --oneline -- {path}"
            out.append(
                Candidate(
                    kind="agent-vcs",
                    key=f"oneline-{name}-{path}",
                    request=f"How often has `{path}` changed in {name}?",
                    rounds=[Round("bash", {"command": command}, run(command, where))],
                    templates=[("oneline-count", None)],
                    source=source,
                    licence=licence,
                )
            )
    return out


def vcs_body() -> list[Candidate]:
    """git log over the same two histories, asked about what a commit message's body says
    (an issue number it refers to, a Co-authored-by trailer)."""
    from derive import git_bodies

    rng = random.Random("agent-vcs-body")
    out = []
    for name, where, licence, source, total in _repos():
        for i, n in enumerate(sorted({int(4 * 60 ** (k / 30)) for k in range(31)})):
            skip = rng.randint(0, max(0, total - n - 1))
            stat = " --stat" if i % 3 == 1 else ""
            command = f"git log -n {n} --skip {skip}{stat}"
            output = run(command, where)
            bodies = git_bodies(output)
            refs = [h[:7] for h, b in bodies.items() if any("#" in line for line in b)]
            coauthored = [
                h[:7] for h, b in bodies.items() if any("co-authored-by" in x.lower() for x in b)
            ]
            rng.shuffle(refs)
            rng.shuffle(coauthored)
            templates: list[tuple[str, object]] = [("git-coauthor", h) for h in coauthored[:4]]
            templates += [("git-body-ref", h) for h in refs[:6]]
            if i % 2:
                templates.reverse()
            if not templates:
                continue
            out.append(
                Candidate(
                    kind="agent-vcs",
                    key=f"body-log-{name}-{i:02d}",
                    request=f"Show me some history of the {name} repository.",
                    rounds=[Round("bash", {"command": command}, output)],
                    templates=templates,
                    source=source,
                    licence=licence,
                )
            )
    return out


#: The lookup set's outputs stay short (estimated tokens), so a prompt is a few hundred
#: tokens and the embedded model answers in seconds (the offline default scope).
LOOKUP_MAX_TOKENS = 420
LOOKUP_MIN_TOKENS = 60


def lookup() -> list[Candidate]:
    """One value looked up in a short tool output: a key of a paginator in botocore's JSON
    models, a module-level number in a short standard-library file, the version `pip show`
    gives for one of three packages. Each candidate asks one question of its output."""
    import importlib.metadata as md

    rng = random.Random("agent-lookup")
    out: list[Candidate] = []
    env = {"PATH": f"{VENV_BIN}:/usr/bin:/bin"}
    source = f"botocore {md.version('botocore')} service models"
    newest = {p.parent.parent.name: p for p in sorted(BOTOCORE.glob("*/*/paginators-1.json"))}
    for path in newest.values():  # an API's newest version only
        rel = path.relative_to(SITE)
        pages = json.loads(path.read_text()).get("pagination", {})
        command = f"jq '.pagination' {rel}"
        output = run(command, SITE)
        if not LOOKUP_MIN_TOKENS <= estimate_tokens(output) <= LOOKUP_MAX_TOKENS:
            continue
        operation = rng.choice(sorted(pages))
        keys = ["result_key", "limit_key", "output_token"]
        out.append(
            Candidate(
                kind="agent-lookup",
                key=f"paginators-{rel.parts[2]}",
                request=f"How does botocore paginate the `{rel.parts[2]}` API?",
                rounds=[Round("bash", {"command": command, "cwd": str(SITE)}, output)],
                templates=[("json-paginator-key", [operation, k]) for k in keys],
                source=source,
                licence="Apache-2.0",
            )
        )
    for i, path in enumerate(_stdlib_files()):
        rel = path.relative_to(STDLIB)
        output = run(f"cat -n {rel}", STDLIB)
        if not LOOKUP_MIN_TOKENS <= estimate_tokens(output) <= LOOKUP_MAX_TOKENS:
            continue
        try:
            tree = ast.parse(path.read_text())
        except (SyntaxError, UnicodeDecodeError):
            continue
        stored = Counter(
            n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
        )
        names = sorted(  # assigned at module level and nowhere else: one value to give
            t.id
            for n in tree.body
            if isinstance(n, ast.Assign)
            for t in n.targets
            if isinstance(t, ast.Name) and stored[t.id] == 1
        )
        for name in rng.sample(names, min(2, len(names))):
            out.append(
                Candidate(
                    kind="agent-lookup",
                    key=f"constant-{rel}-{name}",
                    request=f"Open `{rel}` from the standard library and help me understand it.",
                    rounds=[_read_round(i, path, output)],
                    templates=[("read-constant", name)],
                    source=STDLIB_SRC,
                    licence=PSF,
                )
            )
    names = sorted(  # not the chunk packages that carry the offline model's file
        {
            d.metadata["Name"]
            for d in md.distributions()
            if d.metadata["Name"] and not re.search(r"-part\d+$", d.metadata["Name"])
        }
    )
    for k in range(12):
        shown = rng.sample(names, 3)
        command = "python -m pip show " + " ".join(shown)
        output = run(command, env=env)
        if not LOOKUP_MIN_TOKENS <= estimate_tokens(output) <= LOOKUP_MAX_TOKENS:
            continue
        out.append(
            Candidate(
                kind="agent-lookup",
                key=f"pip-show-{k:02d}",
                request="Which versions of these packages are installed here?",
                rounds=[Round("bash", {"command": command}, output)],
                templates=[("pip-show-version", shown[rng.randrange(3)])],
                source="pip show of this project's environment (package metadata)",
                licence="metadata of PyPI packages",
            )
        )
    return out


KINDS = {
    "agent-search": search,
    "agent-listing": listing,
    "agent-file-read": file_read,
    "agent-json": json_kind,
    "agent-log": logs,
    "agent-vcs": vcs,
}
#: Sets of extra tasks about what bodies say (a function's, a commit message's): written
#: beside a kind's file as <set>.jsonl, their tasks of the kind they name.
BODY_SETS = {
    "agent-file-read-body": file_read_body,
    "agent-vcs-body": vcs_body,
}
#: Written to tasks_data/lookup/ (the offline default scope reads it), not to the agent set.
LOOKUP_SETS = {"agent-lookup": lookup}
