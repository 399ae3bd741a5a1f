#!/usr/bin/env bash
# Extra system packages the test suite needs beyond scripts/setup.sh:
# Debian's headless Chromium, which renders the proxy dashboard in a test.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "[setup-test] chromium is missing: install Debian's 'chromium' package (needs root)" >&2
  exit 1
fi
echo "[setup-test] installing chromium (Debian package, ~1 minute)" >&2
apt-get update -q >/dev/null
DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null
