#!/usr/bin/env bash
# Set up ./.venv if needed, then run `tokenlens calibrate` with the given options, exiting
# with the calibration's own code: 0 certified, 4 ran but some class was not certified,
# 2 bad input, 3 spend limit reached, 1 crashed. `make run` cannot pass a code through
# (make exits 0 or 2), so scripts that need to tell the outcomes apart call this.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec "${VENV:-.venv}/bin/tokenlens" calibrate "$@"
