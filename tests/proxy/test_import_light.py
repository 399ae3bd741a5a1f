"""The proxy stays light: importing it pulls in none of the calibration's heavy stack."""

from __future__ import annotations

import subprocess
import sys

import pytest

FORBIDDEN = ("prefect", "pandas", "pyarrow", "flows", "torch", "llmlingua", "llama_cpp")


@pytest.mark.parametrize("module", ["tokenlens.proxy.app", "tokenlens.commands.serve"])
def test_proxy_imports_nothing_heavy(module: str) -> None:
    code = (
        f"import {module}, sys; "
        f"loaded = [m for m in {FORBIDDEN!r} if m in sys.modules]; "
        "assert not loaded, loaded"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_building_the_app_and_serve_parser_imports_nothing_heavy() -> None:
    code = (
        "import sys\n"
        "from tokenlens.cli import build_parser\n"
        "build_parser()\n"
        "from tokenlens.proxy.app import create_app\n"
        "from tokenlens.proxy.settings import ProxySettings\n"
        "create_app(ProxySettings(upstream='http://127.0.0.1:9'))\n"
        f"loaded = [m for m in {FORBIDDEN!r} if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
