#!/usr/bin/env bash
# One call on a lent GPU machine (device tool), from the repository root:
#   bash tools/gpu_session.sh STAGE [STAGE ...]
# Stages: env | kernel-tests | bench | bench-quick | gpu-tests | notebooks | autograde | sandbox
# Carried wheels (.whl, from ../shared/tools/gpu-wheels.sh) are installed first: the GPU image has
# torch/triton but no nbgrader/nbclient. Logs and results go to $OUT/results.tgz (one file, because the
# device tool brings back at most 8 files) and each stage's summary is printed last.
set -uo pipefail
OUT=${OUT:-$PWD/out}
RES=$(mktemp -d)/results
mkdir -p "$OUT" "$RES"
export PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        || { echo "installing the carried wheels failed"; exit 1; }
    export PATH=/tmp/site/bin:$PATH
fi
export PYTHONPATH=$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}
SUMMARY=$RES/summary.txt
note() { echo "$*" | tee -a "$SUMMARY"; }

stage_env() {
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv | tee "$RES/nvidia-smi.csv"
    python3 -c "import torch, triton, sys; print('python', sys.version.split()[0], '| torch', torch.__version__, '| triton', triton.__version__, '|', torch.cuda.get_device_name())" | tee -a "$SUMMARY"
}

run_logged() {  # name, command...
    local name=$1; shift
    local t0=$SECONDS
    # Each stage stops itself before the device call's limit, so the results tarball is still written.
    timeout "${STAGE_TIMEOUT:-540}" "$@" > "$RES/$name.log" 2>&1
    local rc=$?
    note "== $name: exit $rc in $((SECONDS - t0)) s"
    tail -n "${TAIL:-25}" "$RES/$name.log" | tee -a "$SUMMARY"
    return $rc
}

for stage in "$@"; do
    case $stage in
        env) stage_env ;;
        kernel-tests) run_logged kernel-tests env COURSE_AUTOTUNE_MAX=${COURSE_AUTOTUNE_MAX:-2} python3 -m pytest -m gpu tests/test_kernels_*.py -q -p no:cacheprovider --timeout 600 ;;
        gpu-tests) run_logged gpu-tests python3 -m pytest -m gpu -q -p no:cacheprovider --timeout 600 ;;
        bench) TAIL=120 run_logged bench python3 -m kernels_ref.bench --no-progress --json "$RES/bench/bench.json" ;;
        bench-quick) TAIL=80 run_logged bench-quick python3 -m kernels_ref.bench --quick --no-progress --json "$RES/bench-quick/bench.json" ;;
        notebooks) run_logged notebooks python3 -m tools.execute_notebook --timeout 900 solutions/*/*.ipynb ;;
        autograde) TAIL=80 run_logged autograde python3 -m tools.gpu_autograde "$RES/autograde" ;;
        # The worker's sandbox on this machine: GPU and Triton inside it, what it refuses, start-up cost.
        # Without bubblewrap on the image, a bwrap binary carried in .whl/ (cp /usr/bin/bwrap .whl/) is used.
        sandbox) bw=${AUTOGRADER_BWRAP:-$(command -v bwrap || { [ -x .whl/bwrap ] && echo "$PWD/.whl/bwrap"; })}
                 AUTOGRADER_BWRAP=$bw run_logged sandbox python3 -m autograder.sandbox ;;
        *) note "unknown stage: $stage" ;;
    esac
done
tar czf "$OUT/results.tgz" -C "$(dirname "$RES")" results
cp "$SUMMARY" "$OUT/summary.txt" 2>/dev/null
echo "===== summary ====="
cat "$SUMMARY"
