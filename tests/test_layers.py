"""The import graph keeps its layers (ARCHITECTURE.md's homes), read statically from the
source, function-level imports included: a lazy import that crosses a layer is still a
dependency, it only shows up later."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

#: module prefix -> imports it must never make (prefixes).
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "tokenlens.decision": ("tokenlens.calibration", "tokenlens.proxy", "flows", "prefect"),
    "tokenlens.compress": (
        "tokenlens.calibration",
        "tokenlens.decision",
        "tokenlens.models",
        "tokenlens.proxy",
        "flows",
        "prefect",
    ),
    "tokenlens.classifier": ("tokenlens.proxy", "tokenlens.calibration", "flows", "prefect"),
    "tokenlens.proxy": (
        "tokenlens.calibration",
        "tokenlens.decision",
        "flows",
        "prefect",
        "pandas",
        "pyarrow",
    ),
    "tokenlens.ledger": ("tokenlens.calibration", "flows", "prefect"),
    "tokenlens.storage": ("tokenlens.calibration", "flows", "prefect"),
    "tokenlens.policy": ("tokenlens.calibration", "pandas", "prefect"),
    "tokenlens.models": ("tokenlens.calibration", "tokenlens.proxy", "flows", "prefect"),
    "tokenlens.calibration": ("tokenlens.proxy", "tokenlens.commands", "flows"),
}


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted((REPO / "tokenlens").rglob("*.py")):
        name = ".".join(path.relative_to(REPO).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


def imports_of(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def _matches(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_a_layer_never_imports_what_sits_above_it(layer: str) -> None:
    crossings = [
        f"{module} imports {name}"
        for module, path in _modules().items()
        if _matches(module, layer)
        for name in sorted(imports_of(path))
        if any(_matches(name, bad) for bad in FORBIDDEN[layer])
    ]
    assert not crossings, "\n".join(crossings)


def test_only_the_cli_reaches_into_flows() -> None:
    reaching = [
        module
        for module, path in _modules().items()
        if any(_matches(name, "flows") for name in imports_of(path))
        and not _matches(module, "tokenlens.commands")
    ]
    assert reaching == []


def test_only_the_cli_imports_the_commands() -> None:
    """`commands/` is the top of the house: a module below that needs something of a command
    (e.g. the proxy's workers once needed `serve`'s argument handling) owns it instead."""
    reaching = [
        f"{module} imports {name}"
        for module, path in {**_modules(), **_flow_modules()}.items()
        if not _matches(module, "tokenlens.commands") and module != "tokenlens.cli"
        for name in sorted(imports_of(path))
        if _matches(name, "tokenlens.commands")
    ]
    assert not reaching, "\n".join(reaching)


def _flow_modules() -> dict[str, Path]:
    return {
        ".".join(path.relative_to(REPO).with_suffix("").parts): path
        for path in sorted((REPO / "flows").rglob("*.py"))
    }


def module_edges(path: Path, known: set[str]) -> set[str]:
    """The modules of `known` that `path` imports. `from package import submodule` is an
    edge to the submodule, not to the package's `__init__` (which Python runs first anyway,
    and which may itself import that submodule: no cycle)."""
    edges: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                edges.add(sub if sub in known else node.module)
        elif isinstance(node, ast.Import):
            edges.update(alias.name for alias in node.names)
    return edges & known


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def test_no_module_imports_itself_back() -> None:
    """No import cycles between modules, lazy and TYPE_CHECKING imports included: a cycle
    means two modules share one job, or one reaches back up for what it should own."""
    modules = {**_modules(), **_flow_modules()}
    known = set(modules)
    graph = {name: module_edges(path, known) - {name} for name, path in modules.items()}
    cycles = import_cycles(graph)
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_the_cycle_finder_finds_a_lazy_cycle(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("from pkg import b\n")
    (tmp_path / "b.py").write_text("def f():\n    import pkg.a\n")
    (tmp_path / "c.py").write_text("from pkg.a import thing\n")
    known = {"pkg", "pkg.a", "pkg.b", "pkg.c"}
    graph = {f"pkg.{n}": module_edges(tmp_path / f"{n}.py", known) for n in "abc"}
    assert graph["pkg.a"] == {"pkg.b"}
    assert import_cycles(graph) == [["pkg.a", "pkg.b"]]


def test_the_checker_sees_a_function_level_import(tmp_path: Path) -> None:
    source = tmp_path / "lazy.py"
    source.write_text("def f():\n    from tokenlens.proxy import app\n    return app\n")
    assert "tokenlens.proxy" in imports_of(source)


#: The calibration's stages in story order (`tokenlens/calibration/stages.py`), with the
#: modules that serve them: a module may import from its own rank or lower, never higher.
STAGE_ORDER: tuple[tuple[str, ...], ...] = (
    ("tokenlens.calibration.context",),
    ("tokenlens.calibration.stage_load",),
    ("tokenlens.calibration.stage_compress",),
    ("tokenlens.calibration.answers", "tokenlens.calibration.judging"),
    ("tokenlens.calibration.stage_pay",),
    ("tokenlens.calibration.stage_publish",),
    ("tokenlens.calibration.stages",),
)


def test_a_stage_never_imports_a_later_stage() -> None:
    """Each stage hands rows to the next; what they all share is `context.Calibration`.
    A stage reaching forward (or the context reaching into a stage) is the old tangle of
    one 800-line module whose shared object every stage climbed back up through."""
    rank = {module: i for i, group in enumerate(STAGE_ORDER) for module in group}
    modules = _modules()
    assert set(rank) <= set(modules), "STAGE_ORDER names a module that is gone"
    forward = [
        f"{module} imports {name}"
        for module in rank
        for name in sorted(module_edges(modules[module], set(modules)))
        if name in rank and rank[name] > rank[module]
    ]
    assert not forward, "\n".join(forward)


def test_only_the_flows_and_tests_read_the_story_module() -> None:
    """`stages` only lists the stages in order; code below the flows imports each stage
    from its own module."""
    modules = _modules()
    reaching = [
        module
        for module, path in modules.items()
        if "tokenlens.calibration.stages" in module_edges(path, set(modules))
    ]
    assert reaching == []
