"""The grading worker: ``python -m autograder.worker JOB RESULT``, one fresh interpreter per exercise.

It only *runs* the learner's code and ships raw outputs back; it never sees a reference output and
judges nothing (the grading process does, guarantee 3). For each case it calls the entry point on the
grader's inputs A, re-fills those same input tensors in place with inputs B and calls again (a result
cached by pointer or shape answers B with A's output: guarantee 4), recording torch operators and
Triton launches during each call (guarantee 2). Fresh memory is poisoned: with
``fill_uninitialized_memory`` every torch.empty holds NaN, so an output element the kernel never
wrote cannot pass. On a GPU it then times the kernel against the baseline (guarantee 5) and calls it
once more on re-filled inputs.
"""
from __future__ import annotations

import os
import sys
import traceback


def ship(obj):
    """A copy of an output safe to load with weights_only=True (tensors on the CPU, plain values)."""
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, (tuple, list)):
        return [ship(o) for o in obj] if isinstance(obj, list) else tuple(ship(o) for o in obj)
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    try:
        import numbers

        if isinstance(obj, numbers.Integral):
            return int(obj)
        if isinstance(obj, numbers.Real):
            return float(obj)
    except Exception:
        pass
    return {"__unsupported__": type(obj).__name__}


def describe_error(exc: BaseException, source_file: str, where=None) -> str:
    """'ValueError: msg (at line N)': the learner's deepest line in the traceback, not the grader's."""
    if isinstance(exc, SystemExit):
        text = f"called sys.exit({exc.code!r})"
    elif isinstance(exc, KeyboardInterrupt):
        text = "raised KeyboardInterrupt"
    else:
        text = f"{type(exc).__name__}: {str(exc).strip()[:500]}"
    line = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename == source_file:
            line = frame.lineno
    return text if line is None else f"{text} [line {line}]"


def main(argv) -> int:
    job_path, result_path = argv[1], argv[2]
    os.environ["AUTOGRADER_WORKER"] = "1"
    import course
    import torch

    from autograder import legality, probes
    from autograder.specs import get

    save, replace = torch.save, os.replace  # taken before any learner code can patch them
    job = torch.load(job_path, weights_only=True)
    spec = get(job["exercise"])
    source_file = job["source_file"]
    result = {"status": "ok", "calls": [], "kernels_ref": False, "error": None, "perf": None, "after": None}

    def finish():
        tmp = result_path + ".tmp"
        save(result, tmp)
        replace(tmp, result_path)

    legality.install_launch_counter()
    watch = legality.KernelsRefWatch().install()
    sys.path.insert(0, os.path.dirname(job["submission_dir"] + "/"))
    if job.get("poison", True):
        # Every torch.empty / empty_like now holds NaN (ints: their max): never-written outputs show.
        import torch.utils.deterministic

        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.utils.deterministic.fill_uninitialized_memory = True

    import types

    module = types.ModuleType("submission")
    module.__file__ = source_file
    sys.modules["submission"] = module
    try:
        with open(source_file, encoding="utf-8") as fh:
            code = compile(fh.read(), source_file, "exec")
        exec(code, module.__dict__)
    except BaseException as exc:  # noqa: BLE001  (sys.exit at import is the learner's, not ours)
        result.update(status="import_error", error=describe_error(exc, source_file),
                      kernels_ref=watch.imported())
        finish()
        return 0
    fn = module.__dict__.get(job["entry"])
    if not callable(fn):
        result.update(status="missing", error=f"no function named {job['entry']!r} is defined")
        finish()
        return 0

    def sync():
        if course.ON_GPU:
            torch.cuda.synchronize()

    def poison_cache():
        # Cached-but-free GPU blocks keep whatever the last user wrote; overwrite them with 0xFF (NaN)
        # bytes. One request per free block, largest first and all held at once, so each lands in a free
        # block (best fit) instead of a new segment: a single request of the total free size would not
        # fit a fragmented cache, would take fresh memory and leave the old blocks as they were.
        if not course.ON_GPU:
            return
        held = []
        try:
            sizes = sorted((b["size"] for seg in torch.cuda.memory_snapshot() for b in seg["blocks"]
                            if b["state"] == "inactive"), reverse=True)
            for size in sizes:
                held.append(torch.empty(size, dtype=torch.uint8, device="cuda"))
            for t in held:
                t.fill_(0xFF)
        except Exception:  # noqa: BLE001  (a second line of defence; torch.empty is already poisoned)
            pass
        del held

    def call(args):
        poison_cache()
        rec = legality.OpRecorder(source_file)
        legality.reset_launches()
        entry = {"ok": True, "output": None, "error": None}
        try:
            with rec:
                out = fn(*args)
            sync()
            entry["output"] = ship(out)
        except BaseException as exc:  # noqa: BLE001
            entry.update(ok=False, error=describe_error(exc, source_file))
        entry["ops"] = rec.records()
        entry["largest"] = rec.largest
        entry["launches"] = legality.launches()
        return entry

    def device_args(args):
        return tuple(a.to(course.DEVICE) if isinstance(a, torch.Tensor) else a for a in probes.materialize(args))

    for case in job["cases"]:
        args = device_args(case["a"])
        first = call(args)
        first["inputs_after"] = ship(list(args))
        # Same tensors (same pointers, shapes, strides), new values: a cache keyed on them now lies.
        fresh = probes.materialize(case["b"])
        with torch.no_grad():
            for a, b in zip(args, fresh):
                if isinstance(a, torch.Tensor):
                    a.copy_(b)
        args = tuple(a if isinstance(a, torch.Tensor) else b for a, b in zip(args, fresh))
        second = call(args)
        second["inputs_after"] = ship(list(args))
        result["calls"].append([first, second])
    result["kernels_ref"] = watch.imported()

    if job.get("time") and course.ON_GPU and spec.performance is not None:
        try:
            result["perf"] = time_against_baseline(fn, spec, job)
        except BaseException as exc:  # noqa: BLE001
            result["perf"] = {"error": describe_error(exc, source_file)}
        if job.get("after") is not None:
            args = device_args(job["after"])
            entry = call(args)
            entry["inputs_after"] = ship(list(args))
            result["after"] = entry
    finish()
    return 0


def time_against_baseline(fn, spec, job) -> dict:
    """Medians of the submission and the baseline, then one more call checked by the grader.

    The checked call: the timed input tensors (same pointers, shapes, strides) re-filled in place with
    new values from ``job["check_seed"]``, called and timed exactly like the timed calls (so it cannot
    tell it is the one checked). A result cached by pointer or shape, work deferred to a later call, or
    memory returned unwritten in the hope it still holds an answer, comes back wrong there.
    """
    import torch
    import torch.utils.deterministic

    from autograder.timing import l2_flush_buffer, time_interleaved, timed_call

    saved = torch.utils.deterministic.fill_uninitialized_memory, torch.are_deterministic_algorithms_enabled()
    torch.utils.deterministic.fill_uninitialized_memory = False  # timing must not pay for poisoning
    torch.use_deterministic_algorithms(False)
    try:
        perf = spec.performance
        dev = torch.device("cuda")
        args = perf.inputs(torch.Generator().manual_seed(job["seed"]), dev)
        # poison_outputs: the baseline's output (the right answer) is NaN before its memory is freed
        medians = time_interleaved({"submission": fn, "baseline": perf.baseline}, args, poison_outputs=True)
        flops = perf.flops(args) if perf.flops else None
        nbytes = perf.nbytes(args)
        checked = None
        if job.get("check_seed") is not None:
            fresh = perf.inputs(torch.Generator().manual_seed(job["check_seed"]), dev)
            with torch.no_grad():
                for a, b in zip(args, fresh):
                    if isinstance(a, torch.Tensor):
                        a.copy_(b)
            del fresh
            flush = l2_flush_buffer()
            _, out = timed_call(fn, args, flush)
            del flush
            checked = ship(out)
    finally:
        torch.utils.deterministic.fill_uninitialized_memory = saved[0]  # the after-call is poisoned again
        torch.use_deterministic_algorithms(saved[1], warn_only=True)
    return {"time_ms": medians["submission"], "baseline_ms": medians["baseline"],
            "nbytes": nbytes, "flops": flops, "checked_output": checked}


if __name__ == "__main__":
    sys.exit(main(sys.argv))
