"""Every third-party import in `tokenlens/` and `flows/` has a declared dependency.

A package that only arrives as somebody else's dependency can vanish with their next
release; declaring it in pyproject.toml (bounds) keeps a fresh install working.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OURS = {"tokenlens", "flows", "__future__"}
#: Optional extras whose package is usually not installed here (the external compressors'
#: adapters import them, in this Python or in another one): import name -> distribution.
NOT_INSTALLED = {"headroom": "headroom-ai", "llmtrim": "llmtrim"}


def _imported_modules() -> dict[str, str]:
    """Top-level third-party module -> one file that imports it (any import, anywhere)."""
    found: dict[str, str] = {}
    for folder in ("tokenlens", "flows"):
        for path in sorted((REPO / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    top = name.split(".")[0]
                    if top not in sys.stdlib_module_names and top not in OURS:
                        found.setdefault(top, str(path.relative_to(REPO)))
    return found


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared() -> set[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        requirements += extra
    return {_normal(re.split(r"[<>=!~;\[ ]", req, maxsplit=1)[0]) for req in requirements}


def test_every_third_party_import_is_declared() -> None:
    distributions = packages_distributions()
    declared = _declared()
    missing = []
    for module, where in sorted(_imported_modules().items()):
        names = {_normal(d) for d in distributions.get(module, [])}
        if not names and module in NOT_INSTALLED:
            names = {NOT_INSTALLED[module]}
        if not names & declared:
            missing.append(f"{module} (distribution {sorted(names) or '?'}, imported by {where})")
    assert not missing, "imported but not declared in pyproject.toml: " + "; ".join(missing)


def test_the_scan_sees_imports() -> None:
    """Guard against a scan that finds nothing (and so passes vacuously)."""
    modules = _imported_modules()
    assert {"pydantic", "starlette", "jinja2", "prefect"} <= modules.keys()
