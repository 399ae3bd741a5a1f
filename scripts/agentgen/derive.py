"""Questions, facts and references computed from a tool's output text, and nothing else.

`derive(template, arg, output)` is a pure function: the capture script calls it to write a
task, and tests/test_agent_set.py calls it again on the committed output to check that
every stored fact is what the output says. A template raises `Unanswerable` when the
output does not give one exact answer (a tie, a missing line): that task is not made.
One file past 500 lines on purpose: the template table is data, one small pure function
per question, read side by side.
"""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from collections.abc import Callable

Facts = list[tuple[str, str]]
Derived = tuple[str, Facts, str]


class Unanswerable(ValueError):
    """The output does not give one exact answer to this template."""


def _n(count: int | str, word: str) -> str:
    """`count word`, with the word in the plural unless the count is 1."""
    return f"{count} {word}" if str(count) == "1" else f"{count} {word}s"


def _need(condition: bool, why: str) -> None:
    if not condition:
        raise Unanswerable(why)


# --- search hits: path:line:text ---------------------------------------------------------

_HIT = re.compile(r"^(.+?):(\d+):(.*)$")


def grep_hits(output: str) -> list[tuple[str, int, str]]:
    hits = []
    for line in output.splitlines():
        match = _HIT.match(line)
        if match:
            hits.append((match.group(1), int(match.group(2)), match.group(3)))
    return hits


def search_def(name: str, output: str) -> Derived:
    pattern = re.compile(rf"^\s*(?:async\s+)?(?:def|class)\s+{re.escape(name)}\b")
    found = [(p, n) for p, n, text in grep_hits(output) if pattern.match(text)]
    _need(len(found) == 1, f"{len(found)} definitions of {name}")
    path, line = found[0]
    question = f"Which file and line define `{name}`? Give the path as shown and the line number."
    return question, [("path_line", f"{path}:{line}")], f"`{path}`, line {line}."


def search_count_files(_: object, output: str) -> Derived:
    files = {p for p, _, _ in grep_hits(output)}
    _need(len(files) > 0, "no hits")
    question = "How many different files have at least one matching line in this output?"
    return question, [("number", str(len(files)))], _n(len(files), "file") + "."


def search_top_file(_: object, output: str) -> Derived:
    counts = Counter(p for p, _, _ in grep_hits(output)).most_common()
    _need(len(counts) >= 2 and counts[0][1] > counts[1][1], "no single top file")
    path, n = counts[0]
    question = "Which file has the most matching lines, and how many matching lines does it have?"
    return (
        question,
        [("path", path), ("number", str(n))],
        f"`{path}`, with {_n(n, 'matching line')}.",
    )


def search_count_in(path: str, output: str) -> Derived:
    n = sum(1 for p, _, _ in grep_hits(output) if p == path)
    _need(n >= 2, f"fewer than two hits in {path}")
    question = f"How many matching lines are there in `{path}`?"
    return question, [("number", str(n))], _n(n, "matching line") + "."


# --- listings: ls -la and find -------------------------------------------------------------


def ls_entries(output: str) -> list[tuple[str, int, str, str | None]]:
    """(type char, size, name, link target) of each `ls -l` entry, . and .. left out."""
    entries = []
    for line in output.splitlines():
        parts = line.split(None, 8)
        if len(parts) < 9 or not re.match(r"^[-dlcbps][rwxsStT-]{9}", parts[0]):
            continue
        name, target = parts[8], None
        if parts[0][0] == "l" and " -> " in name:
            name, target = name.split(" -> ", 1)
        if name in (".", ".."):
            continue
        size = int(parts[4]) if parts[4].isdigit() else -1
        entries.append((parts[0][0], size, name, target))
    return entries


def ls_size_of(name: str, output: str) -> Derived:
    found = [e for e in ls_entries(output) if e[2] == name and e[0] == "-"]
    _need(len(found) == 1, f"{name} not one regular file")
    size = found[0][1]
    question = f"What is the size in bytes of `{name}` in this listing?"
    return question, [("number", str(size))], f"{size} bytes."


def ls_largest(_: object, output: str) -> Derived:
    files = sorted((e for e in ls_entries(output) if e[0] == "-"), key=lambda e: -e[1])
    _need(len(files) >= 2 and files[0][1] > files[1][1], "no single largest file")
    _, size, name, _ = files[0]
    question = "Which regular file in this listing is the largest, and what is its size in bytes?"
    return question, [("path", name), ("number", str(size))], f"`{name}`, {size} bytes."


def ls_count_dirs(_: object, output: str) -> Derived:
    n = sum(1 for e in ls_entries(output) if e[0] == "d")
    question = "How many subdirectories does this listing show (not counting `.` and `..`)?"
    return (
        question,
        [("number", str(n))],
        (f"{n} subdirectory" if n == 1 else f"{n} subdirectories") + ".",
    )


def ls_link(name: str, output: str) -> Derived:
    found = [e for e in ls_entries(output) if e[2] == name and e[0] == "l"]
    _need(len(found) == 1 and found[0][3] is not None, f"{name} not one symlink")
    target = str(found[0][3])
    question = f"Where does the symbolic link `{name}` point?"
    return question, [("path", target)], f"It points to `{target}`."


def find_paths(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.strip() and not line.startswith("find:")]


def find_count(_: object, output: str) -> Derived:
    n = len(find_paths(output))
    question = "How many paths did this `find` command print?"
    return question, [("number", str(n))], _n(n, "path") + "."


def find_count_under(prefix: str, output: str) -> Derived:
    n = sum(1 for p in find_paths(output) if p.startswith(prefix.rstrip("/") + "/"))
    _need(n > 0, f"nothing under {prefix}")
    question = f"How many of the printed paths are under `{prefix}`?"
    return question, [("number", str(n))], _n(n, "path") + "."


# --- file reads: cat -n ----------------------------------------------------------------

_NUMBERED = re.compile(r"^ *(\d+)\t(.*)$")


def numbered_source(output: str) -> tuple[int, str]:
    """(first line number, source text) of `cat -n` output."""
    lines = output.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    numbers, texts = [], []
    for line in lines:
        match = _NUMBERED.match(line)
        _need(match is not None, "not cat -n output")
        assert match is not None
        numbers.append(int(match.group(1)))
        texts.append(match.group(2))
    _need(bool(numbers), "empty read")
    return numbers[0], "\n".join(texts) + "\n"


def _tree(output: str) -> ast.Module:
    first, source = numbered_source(output)
    _need(first == 1, "a partial read")
    try:
        return ast.parse(source)
    except SyntaxError as exc:
        raise Unanswerable(f"not Python: {exc}") from exc


def _defs(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef]:
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return [node for node in ast.walk(tree) if isinstance(node, kinds)]


def read_def_line(name: str, output: str) -> Derived:
    found = [node for node in _defs(_tree(output)) if node.name == name]
    _need(len(found) == 1, f"{len(found)} definitions of {name}")
    node = found[0]
    line = node.lineno
    what = "class" if isinstance(node, ast.ClassDef) else "function"
    question = (
        f"On which line of this file does the {what} `{name}` start (its `def`/`class` line)?"
    )
    return question, [("number", str(line))], f"Line {line}."


def read_enclosing(line: int, output: str) -> Derived:
    functions = [
        node
        for node in _defs(_tree(output))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.lineno < line <= (node.end_lineno or 0)
    ]
    _need(bool(functions), f"line {line} is in no function")
    inner = max(functions, key=lambda node: node.lineno)
    names = [node.name for node in _defs(_tree(output))]
    _need(names.count(inner.name) == 1, f"{inner.name} is defined more than once")
    question = f"Which function contains line {line} of this file?"
    return question, [("name", inner.name)], f"`{inner.name}`."


def read_constant(name: str, output: str) -> Derived:
    tree = _tree(output)
    values = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            values.append(node.value)
    _need(len(values) == 1, f"{name} assigned {len(values)} times")
    value = values[0]
    _need(
        isinstance(value, ast.Constant)
        and isinstance(value.value, int | float)
        and not isinstance(value.value, bool),
        f"{name} is not a number",
    )
    assert isinstance(value, ast.Constant)
    number = value.value
    question = f"What number is the module-level name `{name}` set to in this file?"
    return question, [("number", str(number))], f"`{name}` is {number}."


def read_count_defs(_: object, output: str) -> Derived:
    tree = _tree(output)
    n_def = sum(isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) for node in tree.body)
    n_class = sum(isinstance(node, ast.ClassDef) for node in tree.body)
    if n_def >= 2:
        question = "How many top-level functions (module-level `def`) does this file define?"
        return question, [("number", str(n_def))], _n(n_def, "top-level function") + "."
    _need(n_class >= 2, "fewer than two top-level functions and classes")
    question = "How many top-level classes (module-level `class`) does this file define?"
    return (
        question,
        [("number", str(n_class))],
        _n(n_class, "top-level class").replace("classs", "classes") + ".",
    )


# --- file reads: what a function's body says ----------------------------------------------
# Facts that live on body lines (a return, a raise, a condition, a string set), read as the
# exact source text; the text must occur once in the whole output, so only that line holds it.


def _function(name: str, output: str) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef, str]:
    """The one function called `name` (with at least five lines) and the source it is in."""
    _, source = numbered_source(output)
    tree = _tree(output)
    found = [node for node in _defs(tree) if node.name == name]
    _need(len(found) == 1, f"{len(found)} definitions of {name}")
    node = found[0]
    _need(isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef), f"{name} is a class")
    assert isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    _need((node.end_lineno or 0) - node.lineno >= 4, f"{name} is shorter than five lines")
    return node, source


def _own(node: ast.AST) -> list[ast.AST]:
    """The nodes of a function's body, nested functions and classes left out."""
    out: list[ast.AST] = []
    todo = list(ast.iter_child_nodes(node))
    while todo:
        child = todo.pop(0)
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue
        out.append(child)
        todo.extend(ast.iter_child_nodes(child))
    return sorted(out, key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0)))


def _body_text(node: ast.AST, source: str, output: str, *, shortest: int = 8) -> str:
    """The node's exact source text: on one body line, long enough, and once in the output."""
    text = ast.get_source_segment(source, node)
    _need(text is not None and "\n" not in text, "not on one line")
    assert text is not None
    _need(shortest <= len(text) <= 120, f"{len(text)} characters")
    fact = ("text", text)
    pattern = re.compile(_fact_pattern(*fact))
    _need(len(pattern.findall(_normalise(output))) == 1, f"{text!r} is not once in the output")
    return text


def _fact_pattern(kind: str, value: str) -> str:
    from tokenlens.facts import _value_pattern

    return _value_pattern(kind, value).pattern


def _normalise(text: str) -> str:
    from tokenlens.facts import normalise

    return normalise(text)


def read_return(name: str, output: str) -> Derived:
    node, source = _function(name, output)
    returns = [n for n in _own(node) if isinstance(n, ast.Return) and n.value is not None]
    _need(len(returns) == 1, f"{name} has {len(returns)} returns with a value")
    line = returns[0].lineno
    _need(line > node.body[0].lineno, "the return is the first statement")
    text = _body_text(returns[0], source, output, shortest=12)
    question = f"What does the function `{name}` return? Quote its return statement exactly."
    return question, [("text", text)], f"`{text}` (line {line})."


def read_raise(name: str, output: str) -> Derived:
    node, source = _function(name, output)
    raises = [
        n
        for n in _own(node)
        if isinstance(n, ast.Raise) and isinstance(n.exc, ast.Call) and n.exc.args
    ]
    _need(len(raises) == 1, f"{name} raises {len(raises)} times with a message")
    text = _body_text(raises[0], source, output, shortest=16)
    question = (
        f"Which exception does the function `{name}` raise, and with what message? "
        "Quote its raise statement exactly."
    )
    return question, [("text", text)], f"`{text}` (line {raises[0].lineno})."


def read_condition(name: str, output: str) -> Derived:
    node, source = _function(name, output)
    tests = [n.test for n in _own(node) if isinstance(n, ast.If | ast.While)]
    _need(bool(tests), f"{name} has no if or while")
    first = tests[0]
    nested = [
        n for n in ast.walk(node) if isinstance(n, ast.If | ast.While) and n.test not in tests
    ]
    _need(all(n.lineno > first.lineno for n in nested), "a nested function tests first")
    _need(not isinstance(first, ast.Name), "a bare name as the condition")
    text = _body_text(first, source, output, shortest=10)
    question = (
        f"What condition does the first `if`/`while` statement in the function `{name}` "
        "test? Quote the condition exactly."
    )
    return question, [("text", text)], f"`{text}` (line {first.lineno})."


def read_string_set(name: str, output: str) -> Derived:
    node, source = _function(name, output)
    found = [
        (n.targets[0], n.value)
        for n in _own(node)
        if isinstance(n, ast.Assign)
        and len(n.targets) == 1
        and isinstance(n.targets[0], ast.Name | ast.Attribute)
        and isinstance(n.value, ast.Constant)
        and isinstance(n.value.value, str)
    ]
    _need(len(found) == 1, f"{name} sets {len(found)} names to a string")
    target, value = found[0]
    literal = _body_text(value, source, output, shortest=6)
    where = ast.get_source_segment(source, target)
    question = (
        f"Inside the function `{name}`, which string is `{where}` set to? "
        "Quote the literal exactly as written."
    )
    return question, [("text", literal)], f"`{where} = {literal}` (line {value.lineno})."


# --- JSON ------------------------------------------------------------------------------


def _json(output: str) -> object:
    """The JSON value the output starts with (a tool may print notices after it)."""
    try:
        return json.JSONDecoder().raw_decode(output.lstrip())[0]
    except json.JSONDecodeError as exc:
        raise Unanswerable(f"not JSON: {exc}") from exc


def json_pip_version(name: str, output: str) -> Derived:
    rows = _json(output)
    _need(isinstance(rows, list), "not a pip list")
    assert isinstance(rows, list)
    found = [r["version"] for r in rows if isinstance(r, dict) and r.get("name") == name]
    _need(len(found) == 1, f"{name} listed {len(found)} times")
    version = str(found[0])
    question = f"Which version of `{name}` is installed?"
    return question, [("version", version)], f"{name} {version}."


def json_pip_count(_: object, output: str) -> Derived:
    rows = _json(output)
    _need(isinstance(rows, list), "not a pip list")
    assert isinstance(rows, list)
    question = "How many packages does this list contain?"
    return question, [("number", str(len(rows)))], _n(len(rows), "package") + "."


def json_operation_http(op: str, output: str) -> Derived:
    data = _json(output)
    _need(isinstance(data, dict), "not an object")
    assert isinstance(data, dict)
    if isinstance(data.get("operations"), dict):  # the whole model
        node = data["operations"].get(op)
    else:  # `.operations`, or the operation itself
        node = data.get(op, data)
    _need(isinstance(node, dict) and isinstance(node.get("http"), dict), "no http block")
    assert isinstance(node, dict)
    method, uri = node["http"].get("method"), node["http"].get("requestUri")
    _need(isinstance(method, str) and isinstance(uri, str), "no method or requestUri")
    question = f"Which HTTP method and request URI does the `{op}` operation use?"
    return question, [("name", method), ("text", uri)], f"`{method} {uri}`."


def json_required(shape: str, output: str) -> Derived:
    data = _json(output)
    _need(isinstance(data, dict), "not an object")
    assert isinstance(data, dict)
    required = data.get("required")
    _need(isinstance(required, list) and 0 < len(required) <= 6, "no short required list")
    assert isinstance(required, list)
    names = [str(r) for r in required]
    question = f"Which members of the `{shape}` shape are required?"
    return question, [("name", r) for r in names], ", ".join(f"`{r}`" for r in names) + "."


def json_count_keys(what: str, output: str) -> Derived:
    data = _json(output)
    _need(isinstance(data, list | dict), "not a list")
    assert isinstance(data, list | dict)
    question = f"How many {what} does this output list?"
    return question, [("number", str(len(data)))], f"{len(data)} {what}."


def json_metadata(_: object, output: str) -> Derived:
    data = _json(output)
    _need(isinstance(data, dict) and isinstance(data.get("metadata"), dict), "no metadata")
    assert isinstance(data, dict)
    meta = data["metadata"]
    full, protocol = meta.get("serviceFullName"), meta.get("protocol")
    _need(isinstance(full, str) and isinstance(protocol, str), "no full name or protocol")
    question = "What are this service model's full service name and protocol?"
    return question, [("text", full), ("name", protocol)], f"{full}, protocol `{protocol}`."


# --- logs and test runs --------------------------------------------------------------------

_DPKG = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) (\S+) (.*)$")


def dpkg_lines(output: str) -> list[tuple[str, str, list[str]]]:
    out = []
    for line in output.splitlines():
        match = _DPKG.match(line)
        if match:
            out.append((match.group(1), match.group(2), match.group(3).split()))
    return out


def dpkg_installed_version(package: str, output: str) -> Derived:
    versions = {
        rest[2]
        for _, action, rest in dpkg_lines(output)
        if action == "status"
        and rest[:1] == ["installed"]
        and len(rest) >= 3
        and rest[1].split(":")[0] == package
    }
    _need(len(versions) == 1, f"{package} installed as {len(versions)} versions")
    version = versions.pop()
    question = (
        f"Which version of the package `{package}` reached the status `installed` in this log?"
    )
    return question, [("version", version)], f"{version}."


def dpkg_count_installed(_: object, output: str) -> Derived:
    n = sum(
        1
        for _, action, rest in dpkg_lines(output)
        if action == "status" and rest[:1] == ["installed"]
    )
    _need(n > 0, "nothing installed")
    question = "How many `status installed` lines does this log excerpt contain?"
    return question, [("number", str(n))], _n(n, "line") + "."


def dpkg_upgrade(package: str, output: str) -> Derived:
    found = [
        (when, rest)
        for when, action, rest in dpkg_lines(output)
        if action == "upgrade" and len(rest) == 3 and rest[0].split(":")[0] == package
    ]
    _need(len(found) == 1, f"{package} upgraded {len(found)} times")
    when, rest = found[0]
    question = f"When was `{package}` upgraded, and from which version to which?"
    facts = [("text", when), ("version", rest[1]), ("version", rest[2])]
    return question, facts, f"At {when}, from {rest[1]} to {rest[2]}."


_SUMMARY = re.compile(r"^=+ (.*?) in [\d.]+s(?: \([\d:]+\))? =+$")
_FAILED = re.compile(r"^FAILED (\S+?)::(\S+?)(?: - (.*))?$")


def pytest_counts(output: str) -> dict[str, int]:
    lines = [m.group(1) for m in map(_SUMMARY.match, output.splitlines()) if m]
    _need(len(lines) == 1, "no single summary line")
    counts: dict[str, int] = {}
    for part in lines[0].split(", "):
        n, _, what = part.partition(" ")
        _need(n.isdigit(), f"odd summary part {part!r}")
        counts[what] = int(n)
    return counts


def pytest_summary(_: object, output: str) -> Derived:
    passed = pytest_counts(output).get("passed", 0)
    _need(passed > 0, "nothing passed")
    question = "How many tests passed in this run?"
    return question, [("number", str(passed))], _n(passed, "test") + " passed."


def pytest_failure(_: object, output: str) -> Derived:
    failed = [m for m in map(_FAILED.match, output.splitlines()) if m]
    _need(len(failed) == 1, f"{len(failed)} failures")
    match = failed[0]
    test = match.group(2)
    assertion = match.group(3) or ""
    numbers = re.findall(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])", assertion)
    _need(0 < len(numbers) <= 3 and len(set(numbers)) == len(numbers), "no clear values")
    question = "Which test failed, and which values did its failing assertion compare?"
    facts = [("test", test)] + [("number", n) for n in numbers]
    return question, facts, f"`{test}` failed: {assertion}."


def changelog_maintainer(version: str, output: str) -> Derived:
    lines = output.splitlines()
    heads = [
        i
        for i, line in enumerate(lines)
        if re.match(r"^\S+ \(" + re.escape(version) + r"\) ", line)
    ]
    _need(len(heads) == 1, f"version {version} heads {len(heads)} entries")
    sign = next((line for line in lines[heads[0] + 1 :] if line.startswith(" -- ")), None)
    _need(sign is not None, "no sign-off")
    assert sign is not None
    match = re.match(r"^ -- (.+?) <[^>]*>  \w{3}, (\d{1,2} \w{3} \d{4})", sign)
    _need(match is not None, "odd sign-off")
    assert match is not None
    who, date = match.group(1), match.group(2)
    question = f"Who signed the changelog entry for version {version}, and on which date?"
    return question, [("name", who), ("text", date)], f"{who}, on {date}."


# --- version control: git log --------------------------------------------------------------

_COMMIT = re.compile(r"^commit ([0-9a-f]{40})")


def git_commits(output: str) -> list[dict[str, str]]:
    """Commits of `git log` (medium format, optionally --stat)."""
    commits: list[dict[str, str]] = []
    for line in output.splitlines():
        match = _COMMIT.match(line)
        if match:
            commits.append({"hash": match.group(1), "subject": "", "stat": ""})
            continue
        if not commits:
            continue
        current = commits[-1]
        if line.startswith("Author: "):
            current["author"] = re.sub(r"\s*<[^>]*>\s*$", "", line[8:]).strip()
        elif line.startswith("Date: "):
            current["date"] = line[6:].strip()
        elif line.startswith("    ") and not current["subject"]:
            current["subject"] = line.strip()
        elif re.match(r"^ \d+ files? changed", line):
            current["stat"] = line.strip()
    return commits


def git_author(short: str, output: str) -> Derived:
    found = [c for c in git_commits(output) if c["hash"].startswith(short)]
    _need(len(found) == 1 and "author" in found[0], f"{short} matches {len(found)} commits")
    who = found[0]["author"]
    question = f"Who is the author of commit {short}?"
    return question, [("name", who)], f"{who}."


def git_hash_of(subject: str, output: str) -> Derived:
    found = [c for c in git_commits(output) if c["subject"].startswith(subject)]
    _need(len(found) == 1 and found[0]["subject"] == subject, "subject not one commit's")
    short = found[0]["hash"][:7]
    question = f'What is the hash of the commit whose message starts with "{subject}"?'
    return question, [("name", short)], f"{short}."


def git_count_by(author: str, output: str) -> Derived:
    n = sum(1 for c in git_commits(output) if c.get("author") == author)
    _need(n >= 2, f"fewer than two commits by {author}")
    question = f"How many of the listed commits were authored by {author}?"
    return question, [("number", str(n))], _n(n, "commit") + "."


def git_files_changed(short: str, output: str) -> Derived:
    found = [c for c in git_commits(output) if c["hash"].startswith(short)]
    _need(len(found) == 1 and found[0]["stat"], f"{short}: no single commit with a stat")
    match = re.match(r"^(\d+) files? changed", found[0]["stat"])
    assert match is not None
    n = match.group(1)
    question = f"How many files did commit {short} change?"
    return question, [("number", n)], _n(n, "file") + "."


_REF = re.compile(r"(?<![\w&/])#(\d+)\b")
_COAUTHOR = re.compile(r"^\s*Co-authored-by:\s*(.+?)\s*<[^>]*>\s*$", re.I)


def git_bodies(output: str) -> dict[str, list[str]]:
    """Each commit's message lines after the subject (medium format), by full hash."""
    bodies: dict[str, list[str]] = {}
    current: list[str] | None = None
    subject = False
    for line in output.splitlines():
        match = _COMMIT.match(line)
        if match:
            current = bodies.setdefault(match.group(1), [])
            subject = False
        elif current is not None and line.startswith("    "):
            if subject:
                current.append(line.strip())
            subject = True
        elif current is not None and re.match(r"^ \S.* \| ", line):
            current = None  # --stat lines end the message
    return bodies


def git_body_ref(short: str, output: str) -> Derived:
    found = [(h, b) for h, b in git_bodies(output).items() if h.startswith(short)]
    _need(len(found) == 1, f"{short} matches {len(found)} commits")
    refs = sorted({m for line in found[0][1] for m in _REF.findall(line)})
    _need(len(refs) == 1, f"{short}'s body names {len(refs)} issue numbers")
    ref = "#" + refs[0]
    _need(len(re.findall(rf"(?<![\w&/]){ref}\b", output)) == 1, f"{ref} not once in the output")
    question = (
        f"Which issue or pull request number does the body of commit {short}'s message "
        "refer to (after its subject line)? Give it as `#N`."
    )
    return question, [("text", ref)], f"{ref}."


def git_coauthor(short: str, output: str) -> Derived:
    found = [(h, b) for h, b in git_bodies(output).items() if h.startswith(short)]
    _need(len(found) == 1, f"{short} matches {len(found)} commits")
    names = [m.group(1) for line in found[0][1] if (m := _COAUTHOR.match(line))]
    _need(len(names) == 1, f"{short} has {len(names)} co-authors")
    authors = {c.get("author") for c in git_commits(output)}
    _need(names[0] not in authors, f"{names[0]} also authors a listed commit")
    question = f"Who is credited as co-author (a `Co-authored-by` trailer) of commit {short}?"
    return question, [("name", names[0])], f"{names[0]}."


def oneline_count(_: object, output: str) -> Derived:
    n = sum(1 for line in output.splitlines() if re.match(r"^[0-9a-f]{7,} ", line))
    _need(n > 0, "no commits")
    question = "How many commits does this log list?"
    return question, [("number", str(n))], _n(n, "commit") + "."


# --- short lookups (the offline set): one value read from a short JSON document or report --


def json_paginator_key(arg: list[str], output: str) -> Derived:
    """The value of one key of one paginator in botocore's `pagination` map; the value must
    tell that paginator from the others (no other paginator has it under that key), and not
    be guessable from the question (`Channels` for `ListChannels` is not asked)."""
    operation, key = arg
    data = json.loads(output)
    _need(isinstance(data, dict) and len(data) >= 2, "fewer than two paginators")
    value = data.get(operation, {}).get(key)
    _need(isinstance(value, str) and bool(value), f"{operation}.{key} is not a string")
    others = [v.get(key) for name, v in data.items() if name != operation and isinstance(v, dict)]
    _need(value not in others, f"{operation}.{key} is shared with another paginator")
    _need(value.lower() not in operation.lower(), f"{value} can be guessed from {operation}")
    question = f"What is the `{key}` of the `{operation}` paginator?"
    return question, [("name", value)], f"`{value}`."


_PIP_FIELD = re.compile(r"^([A-Za-z-]+): ?(.*)$")


def pip_show_version(name: str, output: str) -> Derived:
    """The version `pip show` gives for one of the packages it shows; no other package
    shown has that version."""
    blocks = [
        dict(m.groups() for m in map(_PIP_FIELD.match, block.splitlines()) if m)
        for block in output.split("\n---\n")
    ]
    versions = {b.get("Name", ""): b.get("Version", "").strip() for b in blocks}
    value = versions.get(name, "")
    _need(len(blocks) >= 2 and bool(value), f"{name} not among several packages shown")
    _need(list(versions.values()).count(value) == 1, f"{name}'s version is shared")
    question = f"Which version of `{name}` is installed, according to pip?"
    return question, [("version", value)], f"{name} {value}."


TEMPLATES: dict[str, Callable[..., Derived]] = {
    "search-def": search_def,
    "search-count-files": search_count_files,
    "search-top-file": search_top_file,
    "search-count-in": search_count_in,
    "ls-size-of": ls_size_of,
    "ls-largest": ls_largest,
    "ls-count-dirs": ls_count_dirs,
    "ls-link": ls_link,
    "find-count": find_count,
    "find-count-under": find_count_under,
    "read-def-line": read_def_line,
    "read-enclosing": read_enclosing,
    "read-constant": read_constant,
    "read-count-defs": read_count_defs,
    "read-return": read_return,
    "read-raise": read_raise,
    "read-condition": read_condition,
    "read-string-set": read_string_set,
    "json-pip-version": json_pip_version,
    "json-pip-count": json_pip_count,
    "json-operation-http": json_operation_http,
    "json-required": json_required,
    "json-count-keys": json_count_keys,
    "json-metadata": json_metadata,
    "dpkg-installed-version": dpkg_installed_version,
    "dpkg-count-installed": dpkg_count_installed,
    "dpkg-upgrade": dpkg_upgrade,
    "pytest-summary": pytest_summary,
    "pytest-failure": pytest_failure,
    "changelog-maintainer": changelog_maintainer,
    "git-author": git_author,
    "git-hash-of": git_hash_of,
    "git-count-by": git_count_by,
    "git-files-changed": git_files_changed,
    "oneline-count": oneline_count,
    "git-body-ref": git_body_ref,
    "git-coauthor": git_coauthor,
    "json-paginator-key": json_paginator_key,
    "pip-show-version": pip_show_version,
}


def derive(template: str, arg: object, output: str) -> Derived:
    """(question, facts as (kind, value), reference) of `template` over `output`."""
    return TEMPLATES[template](arg, output)
