"""Record a 20-turn coding-agent session over an installed package's source, for the tests.

Runs real commands (search, listings, file reads, JSON from pip, a log) in the package's
folder and writes the session as JSON: the opening ask and, per turn, the tool call and
its real output. `tests/proxy/test_cache_stable.py` replays it through `tokenlens serve`.

    python scripts/record_agent_session.py [PACKAGE_DIR] [OUT]

Deterministic for one installed version of the package (aiohttp by default).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ASK = "Show me how aiohttp implements raise_for_status, timeout and release."
COMMANDS = (
    "grep -rn 'def raise_for_status' .",
    "sed -n '1,140p' client_reqrep.py",
    "grep -rn 'raise_for_status' . | sort",
    "ls -la",
    "grep -rn 'timeout' client.py | head -60",
    "sed -n '1,120p' client.py",
    "grep -rn 'def release' . | sort",
    "find . -name '*.py' | sort",
    "grep -rn 'self._loop' . | sort | head -120",
    "wc -l *.py | sort -n",
    "sed -n '1,160p' helpers.py",
    "grep -rn 'class .*Error' client_exceptions.py",
    'python3 -c "import json, pathlib; '
    "names = sorted(p.name for p in pathlib.Path('.').glob('*.py')); "
    "print(json.dumps({'modules': names}, indent=2))\"",
    "grep -rn 'import ' __init__.py | head -80",
    "sed -n '1,100p' client_exceptions.py",
    "grep -rn 'ClientTimeout' . | sort",
    "python3 -m pip list --format json",
    "grep -rn 'async def close' . | sort",
    "sed -n '1,80p' streams.py",
    "grep -c '' *.py | sort -t: -k2 -n",
)


def main() -> None:
    here = Path(sys.argv[1]) if len(sys.argv) > 1 else None
    if here is None:
        import aiohttp

        here = Path(aiohttp.__file__).parent
    out = Path(sys.argv[2]) if len(sys.argv) > 2 else Path("tests/proxy/data/agent_session.json")
    turns = []
    for command in COMMANDS:
        run = subprocess.run(
            command, shell=True, cwd=here, capture_output=True, text=True, check=False
        )
        turns.append({"command": command, "output": run.stdout + run.stderr})
    out.write_text(json.dumps({"ask": ASK, "turns": turns}, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out}: {len(turns)} turns, {sum(len(t['output']) for t in turns)} chars")


if __name__ == "__main__":
    main()
