#!/usr/bin/env bash
# The Python tests again under the oldest torch that pyproject.toml accepts (torch>=2.1) and that
# has a wheel for this Python: 2.1 up to Python 3.11, 2.2 on 3.12, 2.5 on 3.13. One build of
# libcc1d serves every torch, so the tests run from the source tree (PYTHONPATH) against the
# Release build's library. The venv lives beside the main one (about 5 GB with the CUDA wheels
# torch depends on, made once; later runs reuse it). `make old-torch-test`; CI runs it.
#   scripts/old_torch_test.sh BUILD_DIR [pytest args...]
#   OLD_TORCH     the torch version (default: as above)
#   CC1D_VENV     the main venv, whose Python makes this one
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${1:?usage: scripts/old_torch_test.sh BUILD_DIR [pytest args...]}"
shift
LIB="$PWD/$BUILD/libcc1d.so"
[ -e "$LIB" ] || { echo "old-torch-test: no $LIB; build it first (make cpp-test)"; exit 1; }
MAIN_VENV="${CC1D_VENV:-$HOME/.cache/causal-conv1d/venv}"
PY_MINOR=$("$MAIN_VENV/bin/python" -c 'import sys; print(sys.version_info[1])')
case "$PY_MINOR" in
  8 | 9 | 10 | 11) DEFAULT=2.1.2 ;;
  12) DEFAULT=2.2.2 ;;
  *) DEFAULT=2.5.1 ;;
esac
TORCH="${OLD_TORCH:-$DEFAULT}"
VENV="$HOME/.cache/causal-conv1d/venv-torch$TORCH"
if [ ! -x "$VENV/bin/python" ]; then
  echo "old-torch-test: creating $VENV"
  "$MAIN_VENV/bin/python" -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import torch, numpy, pytest; assert torch.__version__.split('+')[0] == '$TORCH'" \
  2>/dev/null; then
  echo "old-torch-test: installing torch $TORCH, numpy<2, pytest into $VENV (first run: several minutes)"
  # torch 2.1-2.3 were built against numpy 1.
  "$VENV/bin/pip" install -q --disable-pip-version-check "torch==$TORCH" "numpy<2" pytest
fi
echo "old-torch-test: pytest under torch $("$VENV/bin/python" -c 'import torch; print(torch.__version__)')"
PYTHONPATH="$PWD/python" CAUSAL_CONV1D_LIBRARY="$LIB" "$VENV/bin/python" -m pytest -q -p no:cacheprovider \
  tests/python "$@"
