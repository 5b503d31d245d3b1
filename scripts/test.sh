#!/usr/bin/env bash
# Installs this package with its test extras into .venv (created on first use) and runs the whole test suite.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -k fold`; `--install-only` installs and stops. Tests run in
# TEST_WORKERS processes (pytest-xdist, default 2): most of the suite waits on servers, browsers and databases. The
# tests on the shared server run in one of them, so that server starts once.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/python ]; then
  "${PYTHON:-python3}" -m venv .venv
fi
[ -x .venv/bin/uv ] || .venv/bin/python -m pip install --quiet --disable-pip-version-check uv
.venv/bin/uv pip install --quiet --python .venv/bin/python -e ".[test]"
[ "${1:-}" = "--install-only" ] && exit 0
exec .venv/bin/python -m pytest -q -n "${TEST_WORKERS:-2}" --dist loadgroup "$@"
