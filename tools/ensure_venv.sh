#!/usr/bin/env bash
# Create (or repair) .venv and install the project with what the person needs:
#   tools/ensure_venv.sh              the course (a learner: `make lab`)
#   tools/ensure_venv.sh instructor   + nbgrader and Dask (grading a class, `make notebooks`)
#   tools/ensure_venv.sh dev          + instructor, pytest, pytest-xdist, playwright (`make test`, `make check`)
# Does nothing when .venv already has them (its stamp, newer than pyproject.toml, lists what was installed).
# The dependency list lives in pyproject.toml only.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv
STAMP=$VENV/.installed
EXTRA=${1:-}
case "$EXTRA" in ""|instructor|dev) ;; *) echo "error: unknown extra '$EXTRA' (use instructor or dev)" >&2; exit 2 ;; esac

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

# What the stamp says is installed; `dev` includes `instructor`, and each includes the course.
installed() {
    [ -f "$STAMP" ] && [ "$STAMP" -nt pyproject.toml ] || return 1
    case "$EXTRA" in
        "") return 0 ;;
        instructor) grep -qxE "instructor|dev" "$STAMP" ;;
        dev) grep -qx dev "$STAMP" ;;
    esac
}
if installed; then
    exit 0
fi

echo "installing the course${EXTRA:+ with [$EXTRA]} into $VENV (torch 2.13.0, triton, jupyterlab, ...); this takes a few minutes the first time"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
# torch first and pinned: where no CUDA is wanted, this picks the CPU build available to pip here;
# an unpinned torch would pull several GB of CUDA packages.
"$VENV/bin/python" -m pip install --quiet "torch==2.13.0"
"$VENV/bin/python" -m pip install --quiet -e ".${EXTRA:+[$EXTRA]}" || fail "installing the project failed; see pip's message above."
# The stamp lists what is installed: the course (an empty line) and each extra, one a line.
{ [ -f "$STAMP" ] && [ "$STAMP" -nt pyproject.toml ] && cat "$STAMP"; echo "$EXTRA"; } | sort -u > "$STAMP.new"
mv "$STAMP.new" "$STAMP"
echo "$VENV ready: $("$VENV/bin/python" -c 'import torch, triton; print("torch", torch.__version__, "/ triton", triton.__version__)')"
