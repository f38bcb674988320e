#!/usr/bin/env bash
# Create (or repair) .venv and install the project with everything the course needs.
# Called by `make lab`, `make test` and `make notebooks`; does nothing when .venv is up to date
# (its stamp is newer than pyproject.toml). The dependency list lives in pyproject.toml only.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv
STAMP=$VENV/.installed

fail() { echo "error: $*" >&2; exit 1; }

pick_python() {
    for cand in "${PYTHON:-}" python3.12 python3.11 python3.10 python3; do
        [ -n "$cand" ] || continue
        command -v "$cand" >/dev/null 2>&1 || continue
        if "$cand" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' 2>/dev/null; then
            echo "$cand"; return 0
        fi
    done
    return 1
}

if [ -d "$VENV" ] && ! "$VENV/bin/python" -c 'import sys' >/dev/null 2>&1; then
    fail ".venv exists but its Python does not run (moved or broken). Remove it with 'rm -rf .venv' and run the command again."
fi

if [ ! -d "$VENV" ]; then
    PY=$(pick_python) || fail "Python 3.10 or newer is needed and none was found on PATH. Install it (e.g. 'apt-get install python3 python3-venv') or set PYTHON=/path/to/python3.11."
    echo "creating $VENV with $($PY --version)"
    "$PY" -m venv "$VENV" || fail "'$PY -m venv' failed; on Debian/Ubuntu install python3-venv."
fi

if [ -f "$STAMP" ] && [ "$STAMP" -nt pyproject.toml ]; then
    exit 0
fi

echo "installing the course into $VENV (torch 2.13.0, triton, jupyterlab, nbgrader, ...); this takes a few minutes the first time"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
# torch first and pinned: where no CUDA is wanted, this picks the CPU build available to pip here;
# an unpinned torch would pull several GB of CUDA packages.
"$VENV/bin/python" -m pip install --quiet "torch==2.13.0"
"$VENV/bin/python" -m pip install --quiet -e . || fail "installing the project failed; see pip's message above."
touch "$STAMP"
echo "$VENV ready: $("$VENV/bin/python" -c 'import torch, triton; print("torch", torch.__version__, "/ triton", triton.__version__)')"
