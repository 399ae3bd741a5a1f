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


def test_the_checker_sees_a_function_level_import(tmp_path: Path) -> None:
    source = tmp_path / "lazy.py"
    source.write_text("def f():\n    from tokenlens.proxy import app\n    return app\n")
    assert "tokenlens.proxy" in imports_of(source)
