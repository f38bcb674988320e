"""The one call loop of grading and of ``check()``, and the judging of what it brought back.

``make_plan``: fresh cases (inputs A and B of the same shapes, their float64 references computed here).
``run_cases``: drives a worker (any session with ``request``: a worker process, a forked child of a
notebook's kernel, or the notebook's own process on a GPU) through every case: load A, prepare, call,
ship; re-fill the same tensors with B in place, prepare, call, ship. A result cached by pointer or shape
answers B with A's output.
``judge_cases``: outputs against the references (``measure.tolerance``), inputs unmodified, the rules of
the exercise from what the calls reported (to name the learner's line), a hint for the first failure
chosen from its symptom (``autograder.symptoms``). A case that ``raises`` expects the call to raise that
exception (an input the exercise says to reject): raising it is the right answer.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from autograder import correctness, legality, protocol, symptoms
from measure.memory import tensors_in
from measure.tolerance import reference_values


@dataclass
class PlannedCase:
    case: object          # specs.base.Case
    a: tuple              # inputs of the first call (CPU tensors, probe dicts, plain values)
    b: tuple              # inputs of the second call: same shapes, new values
    ref_a: object
    ref_b: object

    def __iter__(self):  # case, a, b, ref_a, ref_b = planned
        return iter((self.case, self.a, self.b, self.ref_a, self.ref_b))

    def __getitem__(self, i):
        return tuple(self)[i]


@dataclass
class CaseRun:
    """What came back from one case: the reply and the shipped output of each of its two calls."""

    calls: list           # [(CallDone, Shipped | None), (CallDone, Shipped | None)]


@dataclass
class Judged:
    """The verdict on one call: passed, the largest error, what went wrong, the symptom, and for numbers
    (VALUE exercises, exception cases) what came back and what was due."""

    ok: bool
    error: float | None = None
    message: str = ""
    symptom: symptoms.Symptom | None = None
    got: object = None
    expected: object = None
    # where the symptom of a wrong output is found only if asked for (``find_symptom``): a grading's hint
    # comes from its first failure alone, and a diagnosis reads the whole output in float64 on the host (a
    # submission wrong on every case diagnosed every call: 91 s of an online softmax's grading on an H200)
    diagnosis: object = None

    def find_symptom(self) -> symptoms.Symptom | None:
        if self.symptom is None and self.diagnosis is not None:
            self.symptom, self.diagnosis = self.diagnosis(), None
        return self.symptom


@dataclass
class Failure:
    case: object
    message: str
    hint: str | None = None


@dataclass
class Verdicts:
    # {"case", "shape", "dtype", "max_error", "verdict"} and, for scalar answers and exception cases, "got"
    # and "expected"; "tolerance" in words
    rows: list = field(default_factory=list)
    first_fail: Failure | None = None
    ops: list = field(default_factory=list)
    launches: list = field(default_factory=list)
    largest: list = field(default_factory=list)
    measured: list = field(default_factory=list)    # (case, args A, [measured of each call]) per case

    @property
    def all_ok(self) -> bool:
        return self.first_fail is None


def _to_device(args):
    import course

    from autograder.argtree import to_device

    return to_device(args, course.DEVICE)


def reference(spec, case, args):
    if case.raises is not None:
        return None  # the input is invalid: the call must raise, there is no answer to compute
    if spec.reference is None:
        return case.expected
    from autograder.probes import materialize

    with torch.no_grad():
        return spec.reference(*materialize(_to_device(args)))


def make_plan(spec, quick: bool, seed: int, public_only: bool = False) -> list[PlannedCase]:
    gen = torch.Generator().manual_seed(seed)
    plan = []
    for case in spec.cases(quick):
        if public_only and not case.public:
            continue
        a, b = case.build(gen), case.build(gen)
        plan.append(PlannedCase(case, a, b, reference(spec, case, a), reference(spec, case, b)))
    return plan


def call_once(session, slot: int = 0, config: int | None = None) -> tuple:
    """(CallDone, Shipped) of one call on the slot's arguments, prepared like every other call; autotuned
    kernels run their config number ``config`` (worker.AutotunePin) unless it is None."""
    session.request({"op": "prepare"})
    done = session.request({"op": "call", "slots": [slot], "record": True, "config": config},
                           reply=protocol.CallDone)
    shipped = session.request({"op": "ship", "index": 0}, reply=protocol.Shipped)
    return done, shipped


class RequestClock:
    """``session`` with each request timed from this side: seconds per kind of request (load, prepare,
    call, ship, refill), where an exercise's cases spend their time (the report's ``seconds``)."""

    def __init__(self, session):
        self.session = session
        self.seconds: dict[str, float] = {}

    def request(self, req: dict, reply=None):
        start = time.perf_counter()
        try:
            return self.session.request(req, reply)
        finally:
            op = req.get("op", "?")
            self.seconds[op] = round(self.seconds.get(op, 0.0) + time.perf_counter() - start, 3)


def run_cases(session, plan: list[PlannedCase], on_case=None) -> list[CaseRun]:
    """Every case of the plan, in order; ``on_case(k)`` is told when case k starts."""
    runs = []
    for number, p in enumerate(plan):
        if on_case is not None:
            on_case(number)
        runs.append(run_case(session, p, number))
    return runs


def run_case(session, p: PlannedCase, number: int) -> CaseRun:
    """Case ``number`` of a plan: load A, call, ship; re-fill with B, call, ship. Whichever worker runs it
    (the graded worker, or one sharing its cases: ``autograder.warm``), case k runs each autotuned kernel's
    config k (mod their count)."""
    session.request({"op": "load", "slot": 0, "args": p.a})
    first = call_once(session, config=number)
    session.request({"op": "refill", "slot": 0, "args": p.b})
    second = call_once(session, config=number)
    return CaseRun([first, second])


def intermediate_limit(spec, args) -> int | None:
    """The most elements one operator may produce for these arguments (None: the exercise sets no limit)."""
    limit = spec.rules.max_intermediate
    return limit(args) if limit is not None else None


def judge_call(spec, case, args, ref, done, shipped) -> Judged:
    if case.raises is not None:
        ok, msg = correctness.judge_raises(case, done)
        got = (done.error or "").split(":", 1)[0] if not done.ok else "a result"
        return Judged(ok, None, msg, symptoms.diagnose_error(done.error) if not done.ok else None,
                      got=got, expected=case.raises.__name__)
    if not done.ok:
        from autograder.isolation import plain_error

        special = plain_error(done.error or "")
        return Judged(False, None, f"{special}: " * bool(special) + f"raised {done.error}",
                      symptoms.diagnose_error(done.error))
    out = shipped.output
    if not spec.judged_on_tensors:
        ok, err, msg = spec.judge(out, ref)
        return Judged(ok, err, msg, None if ok else symptoms.diagnose_value(out, ref), got=out, expected=ref)
    dtypes = correctness.expected_dtypes(args, ref, spec)
    ok, err, msg = correctness.compare_outputs(out, ref, dtypes, spec, case)
    if not ok:
        return Judged(False, err, msg,
                      diagnosis=lambda: correctness.symptom_of(out, ref, dtypes, spec, case, args))
    if spec.check_inputs:
        for i, (before, after) in enumerate(zip(args, shipped.inputs_after)):
            if i not in spec.writes and not correctness.same_values(before, after):
                return Judged(False, err, f"modified its input argument {i} (inputs must come back unchanged)",
                              symptoms.Symptom("modified-input"))
    return Judged(True, err, msg)


def judge_cases(spec, plan: list[PlannedCase], runs: list[CaseRun], where) -> Verdicts:
    """Every case's verdict, in the order of the plan; ``where(line)`` names a learner's line."""
    v = Verdicts()
    for p, run in zip(plan, runs):
        (done_a, ship_a), (done_b, ship_b) = run.calls
        a = judge_call(spec, p.case, p.a, p.ref_a, done_a, ship_a)
        b = judge_call(spec, p.case, p.b, p.ref_b, done_b, ship_b)
        # (a wrong output's symptom, found only if asked for, is never one of these: they name errors and inputs)
        if (a.ok and not b.ok and p.case.raises is None
                and (b.symptom is None or b.symptom.name not in ("raised", "not-written", "modified-input"))):
            if _is_first_answer(spec, p, ship_b):
                b.message = ("wrong on the second call, after the inputs were re-filled in place with new values: "
                             "it returned the first call's answer (a result cached by pointer or shape?). " + b.message)
                b.symptom = symptoms.Symptom("stale")
            else:  # not the old answer: wrong on these values (or near the tolerance), not a cache
                b.message = ("wrong on the second call (the inputs re-filled in place with new values; the first "
                             "call was right): " + b.message)
        errs = [e for e in (a.error, b.error) if e is not None]
        shape, dtype = correctness.describe_tensor_args(p.a)
        ok = a.ok and b.ok
        row = {"case": p.case.name, "shape": shape, "dtype": dtype, "max_error": max(errs) if errs else None,
               "verdict": "ok" if ok else "FAIL", "tolerance": correctness.describe_tolerance(spec, p, ok)}
        if not spec.judged_on_tensors or p.case.raises is not None:
            shown = a if not a.ok or b.ok else b
            row["got"], row["expected"], row["unit"] = shown.got, shown.expected, spec.unit
        v.rows.append(row)
        v.measured.append((p.case, p.a, [done_a.measured, done_b.measured]))
        for done, args in ((done_a, p.a), (done_b, p.b)):
            v.ops.extend(done.ops if done.ok else legality.without_value_exits(done.ops))
            v.largest.append((*done.largest, intermediate_limit(spec, args)))
            if done.ok:  # a call that raised (out of memory, say) launched nothing worth judging
                v.launches.append(done.launches)
        if not ok and v.first_fail is None:
            failed = a if not a.ok else b
            pinned = (done_a if not a.ok else done_b).autotune
            if pinned:
                failed.message += f" (autotuned kernels ran with {'; '.join(pinned)})"
            v.first_fail = Failure(p.case, where_msg(failed.message, where),
                                   symptoms.hint(spec.kind, p.case, failed.find_symptom(), spec.unit))
    return v


def _is_first_answer(spec, p: PlannedCase, shipped) -> bool:
    """Whether the second call's output is the first call's reference, within the tolerance: a cached result."""
    if not spec.judged_on_tensors or shipped is None:
        return False
    # compare_outputs answers False (never raises) for an output of another kind, shape or dtype
    return correctness.compare_outputs(shipped.output, p.ref_a, correctness.expected_dtypes(p.a, p.ref_a, spec),
                                       spec, p.case)[0]


def where_msg(msg: str, where) -> str:
    """Turn the worker's '[line N]' into the learner's location ('cell 7, line 3' in notebooks)."""
    import re

    return re.sub(r"\[line (\d+)\]", lambda m: f"(at {where(int(m.group(1)))})", msg or "")


def rule_violations(spec, v: Verdicts, kernels_ref: bool, where) -> list[str]:
    """The recorder's and launch counter's violations, and the rules a harness saw broken (each once)."""
    worst: dict = {}  # each rule once, named where it was broken by the most (the clearest case to look at)
    for m in (m for _, _, calls in v.measured for m in calls if m and m.get("violation")):
        if m["violation"] not in worst or _excess(m) > _excess(worst[m["violation"]]):
            worst[m["violation"]] = m
    return (legality.judge(spec, v.ops, v.launches, kernels_ref, where, v.largest)
            + [harness_violation(m, where) for m in worst.values()])


def harness_violation(measured: dict, where) -> str:
    """The text of a rule a harness saw broken (specs.base.Exercise.harness), with the learner's line where it
    was broken (its ``{crossed}``; ``at``, from the worker's ``OpRecorder.place``)."""
    return measured["violation"].replace("{crossed}", where_msg(measured.get("at", ""), where))


def _excess(measured: dict) -> float:
    return measured.get("peak_bytes", 0) / max(1, measured.get("limit_bytes", 1))


def judge_memory(spec, v: Verdicts) -> tuple[dict, float, list[str]]:
    """(performance entry, credit, feedback) of a memory exercise (specs.base.Memory), from what the harness
    measured around each call. The baseline runs through the same harness here, in the judging process, on
    each case's first inputs (its counts depend only on shapes and dtypes)."""
    from autograder import timing
    from autograder.probes import materialize
    from measure.memory import fmt_bytes

    mem = spec.memory
    held_worst = peak_worst = None  # (bytes / allowed, bytes, allowed or limit, baseline's bytes, case name)
    for case, args, calls in v.measured:
        calls = [m for m in calls if m]
        if not calls or not mem.judges(case):
            continue
        dev_args = materialize(_to_device(args))
        _, base = spec.call(mem.baseline, dev_args)
        held, limit = max(m["held_bytes"] for m in calls), mem.held_limit(dev_args)
        peak = max(m["peak_bytes"] for m in calls)
        peak_allowed = mem.peak_ratio * base["peak_bytes"] + mem.slack_bytes
        row = (held / (limit + mem.slack_bytes), held, limit, base["held_bytes"], case.name)
        held_worst = max(held_worst or row, row)
        row = (peak / peak_allowed, peak, peak_allowed, base["peak_bytes"], case.name)
        peak_worst = max(peak_worst or row, row)
    if held_worst is None:
        return timing.not_graded_entry_memory(mem), 0.0, ["memory not measured: no call came back"]
    held_ok, peak_ok = held_worst[0] <= 1.0, peak_worst[0] <= 1.0
    credit = mem.held_share * held_ok + (1.0 - mem.held_share) * peak_ok
    lines = []
    _, held, limit, base_held, name = held_worst
    if not held_ok:
        lines.append(f"memory: holds {fmt_bytes(held)} between forward and backward on {name} ({mem.baseline_name} "
                     f"holds {fmt_bytes(base_held)}); the limit is {mem.held_limit_name} ({fmt_bytes(limit)}): save "
                     f"only the inputs and recompute the rest in backward ({mem.held_share * spec.performance_points:g} "
                     "points withheld)")
    _, peak, allowed, base_peak, name = peak_worst
    if not peak_ok:
        lines.append(f"memory: the peak of forward + backward is {fmt_bytes(peak)} on {name}, more than "
                     f"{mem.peak_ratio:g}x {mem.baseline_name}'s {fmt_bytes(base_peak)}: free each recomputed "
                     "tensor after its last use (del) and avoid float32 copies of 16-bit activations "
                     f"({(1 - mem.held_share) * spec.performance_points:g} points withheld)")
    return timing.memory_entry(mem, held_worst, peak_worst, credit), credit, lines


def null_kernel_check(session, spec, plan: list[PlannedCase]) -> str | None:
    """With every Triton launch made to do nothing, the outputs must change: otherwise they were not made
    by the learner's kernels. Run on the first cases (the behaviour is what matters, not the size)."""
    from autograder.specs.base import TRITON

    if spec.kind != TRITON:
        return None
    cases = null_check_cases(plan)
    if not cases:
        return None
    session.request({"op": "nullify"})
    for number, p in cases:
        session.request({"op": "load", "slot": 0, "args": p.a})
        done, shipped = call_once(session, config=number)
        if not done.ok:
            return None  # it failed without its kernels: they do matter
        if not judge_call(spec, p.case, p.a, p.ref_a, done, shipped).ok:
            return None
    return ("its outputs stay correct when its Triton kernels are made to do nothing: the results are "
            "computed some other way, not by the kernel the exercise asks for")


def null_check_cases(plan: list[PlannedCase], count: int = 2) -> list:
    """(case number, case) of the first ``count`` cases whose answer a kernel that never ran cannot give:
    not an empty output, not all zeros (a zero-initialised buffer, e.g. the loss at V = 1) or all NaN."""
    return [(n, p) for n, p in enumerate(plan)
            if p.case.raises is None and not all(_trivial(t) for t in tensors_in(reference_values(p.ref_a)))][:count]


def _trivial(t: torch.Tensor) -> bool:
    """An output a kernel that never ran could still get right: empty, all zeros (a zero-initialised
    accumulator), or all NaN (a poisoned buffer)."""
    if t.numel() == 0:
        return True
    if t.is_floating_point():
        return bool(torch.isnan(t).all()) or not bool(t.any())
    return not bool(t.any())
