#!/usr/bin/env bash
# Named stages on a GPU machine, in one call from the repository root:
#   bash tools/gpu_session.sh STAGE [STAGE ...]
# Stages: env | kernel-tests | gpu-tests-some | capstone-gpu | bench | bench-gpu | bench-quick | bench-quick-gpu | bench-quick-repeat | bench-matmul | gpu-tests | notebooks | capstone | autograde | naive |
#         autograder-check | sandbox | batch-throughput | probe-configs | probe-matmul | probe-attention | probe-attention-bwd |
#         probe-attention-decode | launch-cost |
#         launch-cost-memory | protocol-timeline | step-host | grading-time | serving | serving-bench | serving-notebook | serving-grade |
#         repeat-grading | seed-scan
# OPS=a,b limits bench, bench-quick, bench-quick-repeat and probe-configs to those ops; PYTEST_K=expr selects kernel-tests; ASSIGNMENTS=05_layer_norm,... limits notebooks and autograde;
# ONLY=label,... limits autograder-check to those submissions, JOBS=n (default 4) grades its correctness-only
# submissions n at a time; AUTOGRADE_FLAGS=--no-execute grades without
# executing the notebooks (calibration only).
# Carried wheels (.whl/, for a GPU image that has only torch and triton) are installed first. Fill .whl/ on
# a machine with the internet, for the GPU image's Python (3.12); batch-throughput needs dask there too:
#   python3 -m pip download --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 \
#       -d .whl nbgrader nbclient nbformat ipykernel "dask[distributed]==2026.8.0"
# (torch, triton and what the image already has may be deleted from .whl/ to keep it small.) Everything lands in one run folder laid out like results/ (results/README.md):
# results/<gpu>-<date>/ with bench-quick.json and its plots, calibration.json, autograder/ (the grader's
# reports), one log per stage (each with the machine and the command in its header) and run.json listing
# it all; $OUT/results.tgz holds that folder (unpack it at the repository root to add the run),
# $OUT/nbgrader-course.tgz the autograde stage's scratch course, and $OUT/summary.txt each stage's summary,
# printed last too.
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
    # Installed once per machine: two sessions started side by side (one per GPU) must not reinstall under
    # each other, so the second finds the first's stamp (the carried wheels' names) and goes on.
    stamp=$(ls .whl | md5sum | cut -c1-32)
    if [ "$(cat /tmp/site/.carried 2>/dev/null)" != "$stamp" ]; then
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
            || { echo "installing the carried wheels failed"; exit 1; }
        echo "$stamp" > /tmp/site/.carried
    fi
    export PATH=/tmp/site/bin:$PATH
fi
export PYTHONPATH=$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}
# The grader's sandbox: the image's bubblewrap, else one carried in .whl/ (cp /usr/bin/bwrap .whl/).
if ! command -v bwrap >/dev/null && [ -x .whl/bwrap ] && [ -z "${AUTOGRADER_BWRAP:-}" ]; then
    export AUTOGRADER_BWRAP=$PWD/.whl/bwrap
fi
# Bytecode for the packages a grading worker imports: every worker is a new sandboxed process, and an image
# without __pycache__ (this GPU image has none for torch's lazily imported modules: torch._dynamo, sympy,
# torch.distributed) makes each one compile ~900 source files, ~3 s, at its first case. A normal pip
# install writes it; this does the same once per machine (quietly skipped where site-packages is read-only).
SITE=$(python3 -c "import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))")
t0=$SECONDS
( cd "$SITE" && python3 -m compileall -q -j 0 torch sympy mpmath triton numpy >/dev/null 2>&1 )
echo "bytecode for torch, sympy, mpmath, triton, numpy in $SITE: $((SECONDS - t0)) s"
RUN=$(python3 -m tools.results name) || { echo "tools.results name failed"; exit 1; }
TOP=$(mktemp -d)
RES=$TOP/results/$RUN
mkdir -p "$RES"
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }

stage_env() {
    { python3 -m tools.results header --method "nvidia-smi; python3 -c 'import torch, triton'"
      nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
      python3 -c "import torch, triton, sys; print('python', sys.version.split()[0], '| torch', torch.__version__, '| triton', triton.__version__, '|', torch.cuda.get_device_name())"
    } > "$RES/env.log" 2>&1
    tail -n 3 "$RES/env.log" | tee -a "$SUMMARY"
}

run_logged() {  # name, command...
    local name=$1; shift
    local t0=$SECONDS
    python3 -m tools.results header --method "$*" > "$RES/$name.log"
    # Each stage stops itself before the call's time limit, so the results tarball is still written.
    timeout "${STAGE_TIMEOUT:-540}" "$@" >> "$RES/$name.log" 2>&1
    local rc=$?
    note "== $name: exit $rc in $((SECONDS - t0)) s"
    tail -n "${TAIL:-25}" "$RES/$name.log" | tee -a "$SUMMARY"
    return $rc
}

notebook_sources() {  # every solution notebook, or those of ASSIGNMENTS=a,b
    if [ -z "${ASSIGNMENTS:-}" ]; then ls solutions/*/*.ipynb; return; fi
    for a in ${ASSIGNMENTS//,/ }; do echo "solutions/$a/$a.ipynb"; done
}

for stage in "$@"; do
    case $stage in
        env) stage_env ;;
        gpu-tests) run_logged gpu-tests python3 -m pytest -m gpu -q -p no:cacheprovider --timeout 600 ;;
        # GPU tests, autotuning capped: the reference kernels' (kernel-tests) or those of GPU_TESTS="tests/a.py
        # tests/b.py" (gpu-tests-some); PYTEST_K=expr selects among them.
        kernel-tests|gpu-tests-some)
            tests=${GPU_TESTS:-tests}; [ "$stage" = kernel-tests ] && tests="tests/test_kernels_*.py"
            run_logged "$stage" env COURSE_AUTOTUNE_MAX=${COURSE_AUTOTUNE_MAX:-2} python3 -m pytest -m gpu $tests -q \
                -p no:cacheprovider --timeout 600 --durations 10 ${PYTEST_K:+-k "$PYTEST_K"} ;;
        # 09's claims measured (tools/capstone_gpu.py): CAPSTONE_ONLY=loss,train,prefill,decode picks sections.
        capstone-gpu) TAIL=60 run_logged capstone-gpu python3 -m tools.capstone_gpu "$RES/capstone" \
                          ${CAPSTONE_ONLY:+--only "$CAPSTONE_ONLY"} ;;
        bench) TAIL=120 run_logged bench python3 -m kernels_ref.bench --no-progress ${OPS:+--ops "$OPS"} --json "$RES/bench.json" ;;
        # The full sweeps by the GPU's time alone: which misses are the launcher's CPU time, shape by shape.
        bench-gpu) TAIL=120 run_logged bench-gpu python3 -m kernels_ref.bench --clock gpu --no-progress ${OPS:+--ops "$OPS"} --json "$RES/bench-gpu.json" ;;
        bench-quick) TAIL=80 run_logged bench-quick python3 -m kernels_ref.bench --quick --no-progress ${OPS:+--ops "$OPS"} --json "$RES/bench-quick.json" ;;
        # The quick suite REPEAT times (default 5), each run a fresh process, every goal judged on its worst run:
        # bench-quick-repeat.json (each goal's worst, median and verdict) beside bench-quick-repeat-run<k>.json.
        # No run starts that would end past the stage's time limit; BENCH_FROM=results/<run> (carried in the
        # working tree) brings an earlier call's finished runs in, and the count resumes after them.
        bench-quick-repeat) [ -n "${BENCH_FROM:-}" ] && cp "$BENCH_FROM"/bench-quick-repeat-run* "$RES/"
                            TAIL=60 run_logged bench-quick-repeat python3 -m kernels_ref.bench --quick --no-progress \
                                --repeat "${REPEAT:-5}" --stop-after $(( ${STAGE_TIMEOUT:-540} - 30 )) \
                                ${OPS:+--ops "$OPS"} --json "$RES/bench-quick-repeat.json" ;;
        # The same cases by the GPU's time alone (the launch hidden): how much of a miss is the launcher's CPU time.
        bench-quick-gpu) TAIL=80 run_logged bench-quick-gpu python3 -m kernels_ref.bench --quick --clock gpu --no-progress ${OPS:+--ops "$OPS"} --json "$RES/bench-quick-gpu.json" ;;
        notebooks) run_logged notebooks python3 -m tools.execute_notebook --timeout 900 $(notebook_sources) ;;
        # 09 at full size: its measurements and the claims' verdicts in the log, the executed copy beside it.
        capstone) TAIL=60 run_logged capstone python3 -m tools.execute_notebook --timeout 900 --print-output \
                      --save-to "$RES" solutions/09_capstone/09_capstone.ipynb ;;
        # One notebook's grading time (solution and untouched, no execution, no calibration), labelled
        # GRADING_LABEL, in a fresh Triton cache: run it with the grader's knobs set (AUTOGRADER_WARMERS,
        # AUTOGRADER_WARM_MODE, AUTOGRADER_TIMING_SECONDS) to compare one setting with another on the same machine.
        grading-time) label=grading-${GRADING_LABEL:-now}
                      TAIL=40 run_logged "$label" env TRITON_CACHE_DIR="$(mktemp -d)" python3 -m tools.gpu_autograde "$RES/$label" \
                          --skip-calibration --no-execute --solutions-only ${ASSIGNMENTS:+--assignments "$ASSIGNMENTS"}
                      python3 -m tools.results outcomes "$RES/$label" ;;
        # Every solution graded RUNS times (default 5) by the trusted autograde, one run-k/<notebook>/ folder per
        # grading with its calibration.json and outcome (tools/gpu_repeat_grading.py). REPEAT_FROM=results/<run>/
        # repeat-... resumes an earlier call's gradings (carried in the working tree) at the next notebook; no
        # grading starts that would end past the stage's time limit. On a machine of several GPUs, one grading
        # per GPU at a time (GPUS=n to use fewer).
        repeat-grading) [ -n "${REPEAT_FROM:-}" ] && cp -r "$REPEAT_FROM" "$RES/repeat"
                        TAIL=40 run_logged repeat-grading python3 -m tools.gpu_repeat_grading "$RES/repeat" \
                            --runs "${RUNS:-5}" --gpus "${GPUS:-$(nvidia-smi -L | grep -c '^GPU')}" --stop-after $(( ${STAGE_TIMEOUT:-540} - 30 )) \
                            ${ASSIGNMENTS:+--assignments "$ASSIGNMENTS"} ;;
        # The measured and counted exercises (00, 02, 08's meters) graded GRADINGS times each (default 10) from their
        # solutions, each grading's seed and failed cases kept (tools/gpu_seed_scan.py; EXERCISES=a,b to choose).
        # SEED_FROM=results/<run>/seed-scan-.../seed-scan.json resumes an earlier call's scan (same GPU).
        seed-scan) TAIL=30 run_logged seed-scan python3 -m tools.gpu_seed_scan "$RES/seed-scan" \
                       --gradings "${GRADINGS:-10}" --stop-after $(( ${STAGE_TIMEOUT:-540} - 30 )) \
                       ${EXERCISES:+--exercises "$EXERCISES"} ${SEED_FROM:+--resume "$SEED_FROM"} ;;
        autograde) TAIL=80 run_logged autograde python3 -m tools.gpu_autograde "$RES/autograder" --calibration "$RES/calibration.json" ${ASSIGNMENTS:+--assignments "$ASSIGNMENTS"} ${AUTOGRADE_FLAGS:-} ;;
        # The naive versions alone, timed by the grader's protocol (NAIVE_ASSIGNMENTS): the calibration's other half
        # when the solutions were graded in another run.
        naive) TAIL=30 run_logged naive python3 -m tools.gpu_autograde "$RES/naive" --skip-nbgrader --naive-only \
                   --calibration "$RES/calibration-naive.json" --assignments "${NAIVE_ASSIGNMENTS:-$ASSIGNMENTS}" ;;
        # The matmul family alone: both kernels' GPU tests, then the headline shapes (the persistent TMA kernel
        # against eager, torch.compile, cuBLASLt's fused epilogue and the bare cuBLAS matmul).
        bench-matmul) run_logged matmul-tests env COURSE_AUTOTUNE_MAX=${COURSE_AUTOTUNE_MAX:-2} python3 -m pytest -m gpu tests/test_kernels_matmul.py -q -p no:cacheprovider --timeout 600
                      TAIL=60 run_logged bench-matmul python3 -m kernels_ref.bench --quick --no-progress --ops matmul,linear_bias_gelu --json "$RES/bench-matmul.json" ;;
        # The memory-bound kernels' launch configurations, each checked, then timed against a copy of the same bytes.
        # PROBE_ARGS adds options (e.g. --shapes 8192x8192 --variants split), PROBE_LABEL names the files.
        probe-configs) name=probe-configs${PROBE_LABEL:+-$PROBE_LABEL}
                       TAIL=60 run_logged "$name" python3 -m probes.probe_kernel_configs ${OPS:+--ops "$OPS"} ${PROBE_ARGS:-} --json "$RES/$name.json" ;;
        # The attention forward's pointer and TMA loads, autotuned and config by config, beside cuDNN
        # (ATTENTION_SHAPES="B,H,S,D;..." picks the shapes); probe-attention-bwd: the backward's kernels one by
        # one and the one-kernel backward with atomic dQ, beside PyTorch's flash and cuDNN.
        probe-attention) TAIL=40 run_logged probe-attention python3 -m probes.probe_attention \
                             ${ATTENTION_SHAPES:+--shapes "$ATTENTION_SHAPES"} --json "$RES/probe-attention.json" ;;
        probe-attention-bwd) TAIL=40 run_logged probe-attention-bwd python3 -m probes.probe_attention --backward \
                             ${ATTENTION_SHAPES:+--shapes "$ATTENTION_SHAPES"} --json "$RES/probe-attention-bwd.json" ;;
        # The decode step's attention, launch configuration by configuration, beside SDPA (B,H,cache length,D).
        probe-attention-decode) TAIL=30 run_logged probe-attention-decode python3 -m probes.probe_attention --decode \
                             ${ATTENTION_SHAPES:+--shapes "$ATTENTION_SHAPES"} --json "$RES/probe-attention-decode.json" ;;
        # The fused GEMM's launch configurations (tile, stages, warps, epilogue, order, warp specialization),
        # each checked, then timed against cuBLAS's bare matmul and eager.
        probe-matmul) TAIL=70 run_logged probe-matmul python3 -m probes.probe_matmul_configs --json "$RES/probe-matmul.json" ;;
        # Where the fused GEMM's timed cost goes: its launch on the CPU against the flush, step by step.
        launch-cost) TAIL=60 run_logged matmul-launch-cost python3 -m probes.matmul_launch_cost ;;
        # The memory-bound kernels' launch: CPU per call, protocol and GPU time, bound against unbound.
        # LAUNCH_ARGS adds options (e.g. --profile layer_norm_bwd: where its CPU time goes), LAUNCH_LABEL names the log.
        # cProfile of one training step's host time (probes/step_host_profile.py); STEP_OPS=course|eager
        step-host) TAIL=90 run_logged step-host-${STEP_OPS:-course} python3 -m probes.step_host_profile --ops "${STEP_OPS:-course}" ;;
        launch-cost-memory) TAIL=${LAUNCH_TAIL:-20} run_logged launch-cost${LAUNCH_LABEL:+-$LAUNCH_LABEL} python3 -m probes.launch_cost ${LAUNCH_ARGS:-} ;;
        # Where the protocol's time goes in one call (torch.profiler's timeline): flush, CPU to the first launch,
        # GPU idle, kernels, synchronize; each reference kernel beside eager. TIMELINE_ARGS adds options.
        protocol-timeline) TAIL=${LAUNCH_TAIL:-20} run_logged protocol-timeline${LAUNCH_LABEL:+-$LAUNCH_LABEL} python3 -m probes.protocol_timeline ${TIMELINE_ARGS:-} ;;
        # 10_serving in one go (serving = serving-bench, serving-notebook, serving-grade): its reference kernels
        # checked at full size (the GPU tests of tests/test_kernels_serving.py), their goals (sampling and RoPE
        # against eager, paged attention against gather + SDPA and as a fraction of copy bandwidth, the decode
        # step built from them graphed against eager's graph), the notebook at full size (its printed
        # measurements in the log, the executed copy beside it), then the solution graded GRADINGS times
        # (default 5): the first with the calibration (the naive versions timed by the grader's protocol), the
        # others by `python -m autograder grade`.
        serving|serving-bench|serving-notebook|serving-grade)
            if [ "$stage" != serving-notebook ] && [ "$stage" != serving-grade ]; then
                TAIL=15 run_logged serving-kernel-tests python3 -m pytest -m gpu tests/test_kernels_serving.py -q \
                    -p no:cacheprovider --timeout 600
                TAIL=40 run_logged serving-bench python3 -m kernels_ref.bench --no-progress \
                    --ops sample_top_p,rope_kv_append,paged_decode_attention,decode_step --json "$RES/bench-serving.json"
            fi
            if [ "$stage" = serving ] || [ "$stage" = serving-notebook ]; then
                TAIL=40 run_logged serving-notebook python3 -m tools.execute_notebook --timeout 900 --print-output \
                    --save-to "$RES" solutions/10_serving/10_serving.ipynb
            fi
            if [ "$stage" = serving ] || [ "$stage" = serving-grade ]; then
                TAIL=30 run_logged serving-grade-1 python3 -m tools.gpu_autograde "$RES/serving" --skip-nbgrader \
                    --assignments 10_serving --calibration "$RES/calibration-serving.json"
                for i in $(seq 2 "${GRADINGS:-5}"); do
                    TAIL=8 run_logged "serving-grade-$i" python3 -m autograder grade solutions/10_serving/10_serving.ipynb \
                        --json "$RES/serving/grading-run$i.json"
                    python3 -m tools.results stamp "$RES/serving/grading-run$i.json" --method "python -m autograder grade --json"
                done
            fi ;;
        autograder-check) TAIL=60 run_logged autograder-check python3 -m tools.gpu_autograder_check --out "$RES/autograder" --jobs "${JOBS:-4}" ${ONLY:+--only "$ONLY"} ;;
        # The worker's sandbox on this machine: GPU and Triton inside it, what it refuses, start-up cost.
        # Without bubblewrap on the image, a bwrap binary carried in .whl/ (cp /usr/bin/bwrap .whl/) is used.
        sandbox) run_logged sandbox python3 -m autograder.sandbox ;;
        # a synthetic class graded by `python -m autograder batch`: 4 submissions a GPU, on 1 GPU then 2 (BATCH_GPUS=1,2,4:
        # also 4) (submissions/minute); BATCH_ASSIGNMENTS, BATCH_PER_GPU and BATCH_FLAGS (e.g. --no-execute) size it
        batch-throughput) TAIL=30 run_logged batch-throughput python3 -m tools.synthetic_class "$RES/batch" \
            --assignments "${BATCH_ASSIGNMENTS:-03_triton_basics}" --per-worker "${BATCH_PER_GPU:-4}" --gpus "${BATCH_GPUS:-1,2}" \
            ${BATCH_FLAGS:-} ;;
        *) note "unknown stage: $stage" ;;
    esac
done
if [ -d "$RES/autograder/course" ]; then  # nbgrader's scratch course (autograded notebooks) stays out of results/
    tar czf "$OUT/nbgrader-course.tgz" -C "$RES/autograder" course && rm -rf "$RES/autograder/course"
fi
python3 -m tools.results index "$RES" | tee -a "$SUMMARY"
tar czf "$OUT/results.tgz" -C "$TOP" results
echo "===== summary ($RUN) ====="
cat "$SUMMARY"
