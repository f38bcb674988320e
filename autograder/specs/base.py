"""What an exercise spec holds, and the shared pieces specs are built from.

A spec is data: the grading machinery (isolation, legality, correctness, timing) reads these fields and
never needs to know which exercise it is grading. Adding an exercise means adding a spec.

Tolerances are stated once, in ``measure.tolerance``; a spec overrides them only with a reason.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

import torch

from measure.reference import as64, gelu_tanh  # noqa: F401  (the specs' float64 math)
from measure.tolerance import TOLERANCES

# Operators every kernel launcher may use: allocating outputs, reshaping views, making a contiguous
# copy. None of them computes anything, so none can stand in for the kernel being taught.
PLUMBING_OPS = frozenset({
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "view", "_unsafe_view",
    "reshape", "_reshape_alias", "as_strided", "t", "transpose", "permute", "expand", "contiguous",
    "clone", "copy_", "detach", "alias", "unsqueeze", "squeeze", "select", "slice", "lift_fresh",
    "_to_copy", "to", "is_same_size", "resolve_conj", "resolve_neg", "_local_scalar_dense",
    "flatten", "unflatten", "split", "chunk", "narrow", "unbind",
    # the Triton interpreter's own copies of a launch's tensors to the host and back (CPU only)
    "set_",
})

# Tensor primitives the naive exercises of 01 may combine (elementwise, reductions, matmul, masks).
PRIMITIVE_OPS = PLUMBING_OPS | frozenset({
    "add", "sub", "mul", "div", "neg", "exp", "log", "tanh", "pow", "sqrt", "rsqrt", "reciprocal",
    "max", "amax", "min", "amin", "sum", "mean", "var", "square", "abs", "maximum", "minimum",
    "mm", "bmm", "matmul", "addmm", "baddbmm", "expand_as", "where", "masked_fill", "masked_fill_",
    "triu", "tril", "ones", "ones_like", "zeros", "zeros_like", "full", "full_like", "fill_",
    "zero_", "arange", "gt", "lt", "ge", "le", "eq", "ne", "logical_not", "scalar_tensor",
    "add_", "sub_", "mul_", "div_", "exp_", "_softmax_backward_data", "lift_fresh_copy",
    "sigmoid", "erf", "clamp", "clamp_min", "clamp_max", "rsub", "true_divide", "sum_",
    # spellings of the same primitives: ``x.new_full``, ``~mask``, 2**x, the square root of ``var``
    "new_full", "new_zeros", "new_ones", "bitwise_not", "exp2", "std",
})

# Filling a fresh tensor with a constant computes nothing, whatever the spelling (``torch.zeros``,
# ``x.new_zeros``, ``torch.full_like``...). ``stack`` and ``cat`` stay out: they assemble one tensor from
# others, the shape of building an answer from pieces, and no launcher of the course needs them.
# A launcher's checks of what it made (``assert not torch.isnan(y).any()``) answer a bit of each value, never
# a value: they cannot stand in for a kernel either.
TRITON_ALLOWED = PLUMBING_OPS | {"zeros", "zeros_like", "new_zeros", "ones", "ones_like", "new_ones", "full",
                                 "full_like", "new_full", "zero_", "fill_",
                                 "isnan", "isinf", "isfinite", "any", "all"}


def fresh_seed() -> int:
    """A new seed for every grading run: inputs are never the same twice (docs/GUARANTEES.md, 1)."""
    return int.from_bytes(os.urandom(4), "little") & 0x7FFFFFFF


# What a learner's entry point is, which decides how it is run and judged:
# - VALUE:  returns a number or a word (00, 02: measurements, counts, verdicts); judged by ``judge``,
#           run with memory unpoisoned (the probes it measures must behave as they do in the notebook).
# - TORCH:  tensor code from torch primitives (01, checkpointed recomputation); judged against a float64
#           reference; the operators it may call are listed.
# - TRITON: the learner's own Triton kernel(s), launched from a thin Python function; judged against a
#           float64 reference; torch only allocates and reshapes.
VALUE, TORCH, TRITON = "value", "torch", "triton"
KINDS = (VALUE, TORCH, TRITON)


@dataclass(frozen=True)
class Rules:
    """What the learner's code may do while it runs (legality); judged by autograder.legality."""

    allowed_ops: frozenset | None = None  # aten operators it may call; None: any
    why: dict = field(default_factory=dict)  # aten op -> why the exercise forbids it (shown with the line)
    min_launches: int = 0                 # Triton launches per call, at least ...
    max_launches: int | None = None       # ... and at most (a fused kernel is one launch)
    # The most elements any one torch operator may hand back in a call, from the call's arguments (memory
    # exercises: "never materialize the full logits"); None: no limit.
    max_intermediate: Callable[[tuple], int] | None = None
    # What to do instead, said after a tensor over that limit (the exercise's own way around it).
    intermediate_advice: str = "stream it in chunks"
    # Features the source may use that the static audit otherwise reports (autograder.audit.FEATURES,
    # e.g. {"cuda_graphs", "streams"} where the exercise teaches them).
    features: frozenset = frozenset()
    # The course's own functions (``measure``: its timer, memory meters) a graded call may run, by dotted
    # name; None: any. A measuring exercise (00, 02) asks for the learner's own measurement: the course's
    # tools, which the grader measures with, answer it for them (``autograder.legality.CourseTools``).
    course_tools: frozenset | None = None
    # Triton's library functions that do this exercise's work inside a kernel: {dotted path: why}. A
    # kernel that calls one is refused, as torch's operator is outside it (autograder.audit).
    kernel_library: dict = field(default_factory=dict)


def checked_only(harness: Callable) -> Callable:
    """Marks a harness (``Exercise.harness``) that measures a rule around the checked calls alone: the timed
    calls call the entry point plainly (a memory meter, a dispatch mode on every operator, would be timed
    with the learner's code)."""
    harness.checked_only = True
    return harness


def triton_rules(why: dict, *, max_launches: int | None = 1, extra_ops=frozenset(),
                 max_intermediate=None, intermediate_advice: str = "stream it in chunks",
                 kernel_library: dict | None = None) -> Rules:
    """A Triton exercise: at least one launch of the learner's kernel, torch only for plumbing."""
    return Rules(TRITON_ALLOWED | frozenset(extra_ops), why, 1, max_launches, max_intermediate,
                 intermediate_advice=intermediate_advice, kernel_library=dict(kernel_library or {}))


# Triton's own softmax (triton.language.standard: tl.softmax, and the tensor method x.softmax()) does in one
# call the max, exp and sum of a row that the softmax exercises (04, and the online softmax of 07 and 10)
# teach: inside their kernels it is refused, as torch.softmax is outside them.
TL_SOFTMAX = {path: ("tl.softmax is Triton's library softmax: this exercise asks you to write the row's max, "
                     "exp and sum yourself (the notebook's steps)")
              for path in ("triton.language.softmax", "triton.language.standard.softmax")}


def torch_rules(why: dict, *, extra_ops=frozenset()) -> Rules:
    """A tensor-primitives exercise (01): elementwise ops, reductions and matmuls, not the fused op."""
    return Rules(PRIMITIVE_OPS | frozenset(extra_ops), why)


@dataclass
class Case:
    """One graded input: ``build(gen)`` makes the argument tuple (called again for the re-filled call).

    ``public`` cases also run in the notebook's ``check``; set where the case is built. ``family`` names
    the kind of input the case stands for (``FAMILIES``): every family of an exercise's cases has a public
    member, so a PASSED ``check`` predicts the grade (tests/test_feedback.py). ``hint`` is advice of this
    exercise for this family; hints chosen from the symptom (``autograder.symptoms``) come first.
    ``raises``: the exercise states that this input is invalid, and the call must raise this exception."""

    name: str
    build: Callable[[torch.Generator], tuple]
    hint: str = ""
    public: bool = False
    expected: Any = None         # for VALUE exercises judged without a reference function
    tolerances: dict | None = None  # this case's own (atol, rtol) per dtype, when its inputs are ill-conditioned
    family: str = ""
    raises: type | None = None


# The families of inputs cases stand for. "dtype:<name>" (each 16-bit dtype) and "head-dim:<d>" (each head
# dimension of a transformer block, 09) are one more per value.
FAMILIES = {
    "shape": "plain float32 inputs of ordinary shapes (mostly non-powers of two: a ragged last block)",
    "tiny": "a dimension of 1 (one row, one element)",
    "long-rows": "rows longer than one block of columns (more than 1024)",
    "large": "large magnitudes (exp and cubes overflow float32 unless computed stably); for row ops the "
             "same case has -inf entries and a constant row",
    "neg-inf-blocks": "rows whose leading blocks are entirely -inf",
    "constant": "constant rows (variance exactly 0)",
    "mean-offset": "rows with a large mean (catastrophic cancellation in E[x^2] - E[x]^2)",
    "strided": "non-contiguous inputs (rows of a wider buffer, transposed operands, other layouts)",
    "causal": "causal masking",
    "scale": "an explicit scale argument",
    "long-k": "a long reduction dimension (accumulator precision)",
    "edge-values": "values at the ends of their range (targets 0 and V - 1, rows and scales of zero)",
    "memory": "the memory a call holds between forward and backward, and its peak (08)",
    "heads": "many attention heads (09), several query heads per key/value head (10)",
    "ties": "tied values where a decision is made (10: equal logits at the nucleus' boundary)",
    "top-p": "the ends of top_p's range: 1 keeps every token, a tiny top_p only the largest logit (10)",
    "temperature": "temperatures far from 1 (very sharp and very flat distributions, 10)",
    "paged": "a page size that is not a power of two or is smaller than a kernel's tile (10)",
    "invalid": "inputs the exercise says to reject with an exception",
    "value": "a scalar question (00, 02): every case is of this family",
}


def known_family(family: str) -> bool:
    return family in FAMILIES or family.startswith(("dtype:", "head-dim:"))


@dataclass
class Performance:
    """How the kernel is timed on a GPU and what it is compared with."""

    inputs: Callable[[torch.Generator, torch.device], tuple]  # the large workload, made in the worker
    baseline: Callable  # eager torch, the naive version, or a kernels_ref kernel (imported lazily)
    baseline_name: str
    nbytes: Callable[[tuple], int]      # bytes the op must move at least (for GB/s)
    flops: Callable[[tuple], int] | None = None  # set for compute-bound kernels (TFLOP/s)
    threshold: float = 0.9              # full credit at speedup >= threshold (baseline_ms / time_ms)
    floor: float = 0.3                  # zero credit at or below this speedup; linear in between
    # The version a learner writes before the course (eager, one kernel per operator): calibration times
    # it against the baseline, and the threshold must stay out of its reach (tools/gpu_autograde.py).
    naive: Callable | None = None
    # The baseline's own arguments, prepared from the inputs once, outside every timed call (e.g. the
    # dequantized bf16 weight a bf16 matmul multiplies by); None: the baseline takes the inputs as they are.
    baseline_args: Callable[[tuple], tuple] | None = None
    # Fresh values for a timed call from the loaded arguments and a seed (autograder.fresh), made the same
    # way in the worker and in the grading process; None: every float tensor jittered. An exercise whose
    # inputs depend on each other (a backward's o and lse are its q, k, v's forward) remakes them here.
    fresh: Callable[[tuple, int], tuple] | None = None
    # The date (ISO) the timed workload last changed: calibration records and gradings from before it timed
    # another workload, and are history rather than evidence for this threshold (tests/test_results.py).
    timed_since: str = ""

    def __post_init__(self):
        if self.fresh is not None and self.baseline_args is not None:
            raise ValueError("fresh values are made from the inputs, which baseline_args replaces: use one")

    def fresh_args(self, bases: tuple, seed: int) -> tuple:
        from autograder.fresh import jittered_args

        return (self.fresh or jittered_args)(bases, seed)

    def baseline_for(self, args: tuple) -> Callable:
        """The baseline as it is timed on ``args`` (called with the same arguments as the submission)."""
        if self.baseline_args is None:
            return self.baseline
        prepared = self.baseline_args(args)
        return lambda *_args: self.baseline(*prepared)


@dataclass(frozen=True)
class Memory:
    """Memory graded in place of time (the performance points of a memory exercise), on every device.

    The exercise's ``harness`` measures each call of the submission in the worker (held_bytes: what the
    call keeps after returning, beyond its output; peak_bytes: the most alive during the call, e.g. forward
    + backward), with measure.memory.MemoryMeter, whose counts are deterministic. The grading process
    runs ``baseline`` through the same harness on the same inputs and judges: ``held_share`` of the points
    for held_bytes <= held_limit(args) + slack_bytes on every case, the rest for peak_bytes <=
    peak_ratio * the baseline's peak + slack_bytes on every case (of ``families``). ``slack_bytes`` admits scalars and
    small bookkeeping tensors on tiny shapes; the larger cases are the ones that decide."""

    baseline: Callable                    # the eager version (measured in the grading process)
    baseline_name: str
    held_limit: Callable[[tuple], int]    # bytes a call may keep between forward and backward
    held_limit_name: str                  # the limit in words ("the bytes of x")
    peak_ratio: float = 1.25
    held_share: float = 2 / 3
    slack_bytes: int = 4096
    # The case families memory is judged on (None: every case). A ratio to eager's peak means something
    # only where the tensor being saved dominates (an LM head's V >> H), not on tiny shapes.
    families: frozenset | None = None

    def judges(self, case) -> bool:
        return self.families is None or case.family in self.families


@dataclass
class Exercise:
    """One graded exercise: the entry point a learner writes and how it is judged."""

    id: str
    notebook: str
    entry: str
    kind: str                                   # VALUE, TORCH or TRITON (above)
    correctness_points: float
    performance_points: float = 0.0
    cases: Callable[[bool], list[Case]] = None  # cases(quick) -> fresh cases for this run
    reference: Callable | None = None           # float64 reference: reference(*args) -> output(s)
    judge: Callable | None = None               # VALUE only: judge(output, expected) -> (ok, error, message)
    out_dtypes: Callable[[tuple], Sequence[torch.dtype]] | None = None
    tolerances: dict | None = None              # overrides measure.tolerance.TOLERANCES (say why in the spec)
    rules: Rules = field(default_factory=Rules)
    performance: Performance | None = None
    timeout_s: float = 120.0
    signature: str = ""
    check_inputs: bool = True                   # inputs must come back unmodified ...
    # ... except these arguments (indices), which the call writes in place as outputs (a KV cache): the
    # harness returns them with the result, and they are judged against the reference like any output.
    writes: tuple[int, ...] = ()
    # Arguments (indices) that are metadata: integers saying where the data is (lengths, block tables,
    # positions), not the data the exercise computes on. A launcher may read them out of torch
    # (``seq_lens.tolist()`` to size its grid), as they were given; the float inputs stay in torch.
    metadata: tuple[int, ...] = ()
    # How the worker (and check) calls the entry point: harness(fn, args) -> (output, measured), where
    # measured is a dict of numbers (held_bytes, peak_bytes for ``memory``) and may name a rule the call
    # broke (measured["violation"]: a sentence). None: output = fn(*args), nothing measured.
    harness: Callable | None = None
    memory: Memory | None = None                # memory graded for the performance points (see Memory)
    unit: str = ""                              # VALUE: the unit of the returned number (shown by check)
    # The names of the judged outputs, as the contract names them (feedback says "dk", not "output 2");
    # empty: the names in the signature's "-> (a, b, c)".
    outputs: tuple = ()
    # Where the notebook asks for a deterministic kernel: why, in its words (autograder.determinism: atomics
    # in a reachable kernel are a finding; on a GPU two calls on the same inputs must give the same bits).
    deterministic: str = ""
    # Steps a notebook builds the entry point from, each checked on its own before the whole (07's backward:
    # delta, then dK/dV, then dQ): {name: the fields that differ (entry, signature, cases, reference,
    # out_dtypes, tolerances, rules)}. ``check(id, fn, step=name)`` runs one; nothing grades it.
    steps: dict = field(default_factory=dict)
    # The reference measures the grading process itself (02's kernel count and peak memory: the profiler
    # records every kernel the process launches, the allocator's peak counts every thread's tensors): the
    # exercise is graded with nothing else running beside it, else another exercise's inputs count too.
    measures_grader: bool = False

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"{self.id}: kind must be one of {KINDS}, not {self.kind!r}")
        if (self.kind == VALUE) != (self.judge is not None):
            raise ValueError(f"{self.id}: a judge is given for VALUE exercises, and for them only")
        if self.writes and self.harness is None:
            raise ValueError(f"{self.id}: arguments written in place are returned by a harness, with the result")
        if self.measures_grader and self.performance is not None:  # graded alone already: a timing would wait on itself
            raise ValueError(f"{self.id}: an exercise graded alone (measures_grader) has no timed part")
        if self.memory is not None and (self.harness is None or self.performance is not None):
            raise ValueError(f"{self.id}: memory is graded through a harness, in place of a performance part")

    def step(self, name: str) -> "Exercise":
        """Step ``name`` as an exercise of its own: its entry point, cases and reference, this exercise's
        kind and time limit, no performance or memory part."""
        if name not in self.steps:
            known = ", ".join(map(repr, self.steps)) or "none"
            raise KeyError(f"{self.id} has no step {name!r} (its steps: {known})")
        return replace(self, id=f"{self.id}:{name}", performance=None, memory=None, harness=None, writes=(),
                       outputs=(), deterministic="", steps={}, **self.steps[name])

    @property
    def course_tools(self) -> frozenset | None:
        """The course's functions a graded call may run: none for a measurement (VALUE) unless its rules say."""
        if self.rules.course_tools is None and self.kind == VALUE:
            return frozenset()
        return self.rules.course_tools

    def call(self, fn, args: tuple):
        """(output, measured or None): one call of the learner's ``fn`` as the exercise makes it."""
        if self.harness is None:
            return fn(*args), None
        return self.harness(fn, args)

    def output_name(self, i: int) -> str:
        """The contract's name of judged output ``i`` ("output i" where the contract names none)."""
        names = self.outputs or _tuple_names(self.signature)
        return names[i] if i < len(names) else f"output {i}"

    @property
    def judged_on_tensors(self) -> bool:
        return self.kind != VALUE

    def tolerance(self, dtype: torch.dtype, case: Case | None = None) -> tuple[float, float]:
        if case is not None and case.tolerances and dtype in case.tolerances:
            return case.tolerances[dtype]
        own = self.tolerances or {}
        return own[dtype] if dtype in own else TOLERANCES[dtype]  # an integer output has only its own

    @property
    def points(self) -> float:
        return self.correctness_points + self.performance_points


def _tuple_names(signature: str) -> tuple:
    """("o", "lse") from "f(q, k, v) -> (o, lse)"; () where the result is not a tuple of names."""
    result = signature.partition("->")[2].strip()
    if not (result.startswith("(") and result.endswith(")")):
        return ()
    names = tuple(n.strip() for n in result[1:-1].split(","))
    return names if all(n.isidentifier() for n in names) else ()


def rand(gen, shape, dtype=torch.float32, scale=1.0, device=None):
    """Gaussian values in float32, reproducible from ``gen``, then cast: made on the CPU for the CPU; for a
    GPU, made there by a generator seeded from ``gen`` (the same seed gives the same values on the same GPU
    model and torch). A CPU generator makes ~100 million values a second, one thread: a grading's cases at
    GPU sizes (up to 1.6 GB of inputs per exercise, twice) took seconds of it before every worker's first case."""
    device = torch.device(device or _device())
    if device.type == "cuda":
        on_device = _generator_on(device, gen)
        return (torch.randn(shape, generator=on_device, dtype=torch.float32, device=device) * scale).to(dtype)
    x = torch.randn(shape, generator=gen, dtype=torch.float32) * scale
    return x.to(dtype=dtype, device=device)


def rand_int(gen, low: int, high: int, shape, dtype, device=None):
    """Integers uniform in [low, high), reproducible from ``gen`` as ``rand``'s values are: made on the CPU for
    the CPU, on a GPU by a generator seeded from ``gen`` (08's timed int8 weight holds 470 million)."""
    device = torch.device(device or _device())
    if device.type == "cuda":
        return torch.randint(low, high, tuple(shape), generator=_generator_on(device, gen), dtype=dtype, device=device)
    return torch.randint(low, high, tuple(shape), generator=gen, dtype=dtype).to(device)


def _generator_on(device, gen) -> torch.Generator:
    """A generator on ``device`` seeded by one draw from the CPU generator ``gen``."""
    return torch.Generator(device=device).manual_seed(int(torch.randint(0, 2**62, (1,), generator=gen)))


def _device():
    from course import DEVICE

    return DEVICE


def pick_shapes(quick: bool, quick_shapes, full_cpu, full_gpu):
    from course import ON_GPU

    if quick:
        return quick_shapes
    return full_gpu if ON_GPU else full_cpu


def float_dtypes(bf16: bool = True):
    out = [torch.float32, torch.float16]
    if bf16:
        out.append(torch.bfloat16)
    return out
