"""Where a timed call's time goes, on a GPU: the kernel alone (CUDA events in one process), the worker's
call path in that process (recorder, launch counter, synchronize), and the grading process's clock across
the socket (with and without the sandbox). Prints one table; used to keep the cross-process clock honest.

    python -m probes.probe_timer [--exercise softmax] [--submission tests/submissions/good_triton.py]
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch

import course  # noqa: F401


BATCH = 4  # autograder.grading.CALLS_PER_ROUND_TRIP


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--exercise", default="softmax")
    p.add_argument("--submission", default="tests/submissions/good_triton.py")
    p.add_argument("--reps", type=int, default=30)
    args = p.parse_args(argv)
    from autograder import specs
    from autograder.grading import baseline_job, submission_job
    from autograder.isolation import WorkerSession
    from autograder.submission import load
    from autograder.worker import Worker, load_entry
    from measure.timer import median_ms

    spec = specs.get(args.exercise)
    sub = load(args.submission)
    perf = spec.performance
    cpu_args = perf.inputs(torch.Generator().manual_seed(1), torch.device("cpu"))
    gpu_args = tuple(a.cuda() if isinstance(a, torch.Tensor) else a for a in cpu_args)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        source = sub.write(Path(tmp))
        job = submission_job(spec, sub, source)
        fn, _ = load_entry(job)
        rows.append(("events, kernel alone (measure.timer)", median_ms(fn, *gpu_args),
                     median_ms(perf.baseline, *gpu_args)))
        w = Worker(fn, None, poison=True)
        wb = Worker(perf.baseline, None, poison=False)
        slots = list(range(1, BATCH + 1))
        for who in (w, wb):
            for slot in slots:
                who.handle({"op": "load", "slot": slot, "args": cpu_args})

        def inproc(worker, record, batch, empty=False):
            ts = []
            for i in range(args.reps + 3):
                for slot in slots[:batch]:
                    worker.handle({"op": "jitter", "slot": slot, "seed": i * 7 + slot})
                worker.handle({"op": "prepare"})
                t0 = time.perf_counter()
                worker.handle({"op": "call", "slots": slots[:batch], "record": record, "empty": empty})
                ts.append((time.perf_counter() - t0) * 1e3 / batch)
                worker.handle({"op": "drop"})
            return statistics.median(ts[3:])

        for record, batch, what in ((True, 1, "recorded"), (False, 1, "1 call"), (False, BATCH, f"{BATCH} calls")):
            e1, e2 = inproc(w, record, batch, True), inproc(wb, record, batch, True)
            rows.append((f"in process, wall clock, {what}, less empty",
                         inproc(w, record, batch) - e1, inproc(wb, record, batch) - e2))
        for sandboxed in (False, True):
            def session(j):
                return WorkerSession(j, 300, scratch=(str(Path(tmp) / f"s{sandboxed}") if sandboxed else None))
            with session(job) as s, session(baseline_job(spec)) as b:
                res = {}
                for name, ses in (("sub", s), ("base", b)):
                    for slot in slots:
                        ses.request({"op": "load", "slot": slot, "args": cpu_args})
                    for empty in (True, False):
                        ts = []
                        for i in range(args.reps + 3):
                            for slot in slots:
                                ses.request({"op": "jitter", "slot": slot, "seed": i * 7 + slot})
                            ses.request({"op": "prepare"})
                            ms, _ = ses.timed({"op": "call", "slots": slots, "record": False, "empty": empty})
                            ses.request({"op": "drop"})
                            ts.append(ms / BATCH)
                        res[(name, empty)] = statistics.median(ts[3:])
                rows.append((f"across the socket{' (sandboxed)' if sandboxed else ''}, less empty "
                             f"(empty {res[('sub', True)]:.3f} / {res[('base', True)]:.3f} ms)",
                             res[("sub", False)] - res[("sub", True)], res[("base", False)] - res[("base", True)]))
    print(f"{'method':<70} {'submission ms':>14} {'baseline ms':>12} {'speedup':>8}")
    for name, a, b in rows:
        print(f"{name:<70} {a:>14.4f} {b:>12.4f} {b / a:>8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
