"""The reference kernels of 08_memory besides the cross-entropy: int8_weight_linear (kernels_ref/quant.py)
and checkpointed_mlp (kernels_ref/checkpoint.py), against float64 references under the Triton interpreter
on the CPU and, with `-m gpu`, at full size on a GPU; and measure.memory.MemoryMeter, which measures
what checkpointed_mlp is graded on."""
import course
import pytest
import torch

from measure.memory import MemoryMeter, fresh_outputs
from kernels_ref.checkpoint import TOLERANCES as MLP_TOLERANCES
from kernels_ref.checkpoint import checkpointed_mlp, forward_backward, mlp_inputs, mlp_torch
from kernels_ref.quant import dequantize_int8, int8_weight_linear, int8_weight_linear_torch, quantize_int8
from measure.tolerance import compare

DEV = course.DEVICE
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# float32 activations go through TF32 tensor cores on a GPU (10-bit mantissa): outputs O(1) land ~5e-4
# from the exact value (the spec's Q_TOLERANCES).
Q_TOLERANCES = {torch.float32: (2e-3, 2e-3)}


def assert_close(out, ref, dtype, overrides=None, what=""):
    ok, _, msg = compare(out, ref.to(out.device), overrides, dtypes=[dtype])
    assert ok, f"{what}: {msg} ({dtype})"


def quantized(n, k, dtype=torch.float32):
    w = torch.randn(n, k, device=DEV) / k**0.5
    w_q, w_scale = quantize_int8(w)
    return w, w_q, w_scale


# ------------------------------------------------------------------------------------------- int8_weight_linear

def test_quantize_int8_round_trip():
    w, w_q, w_scale = quantized(37, 100)
    assert w_q.dtype == torch.int8 and w_scale.dtype == torch.float32 and w_scale.shape == (37,)
    assert int(w_q.abs().max()) == 127  # every row uses the full range
    deq = dequantize_int8(w_q, w_scale, torch.float32)
    assert bool(((deq - w).abs() <= w_scale[:, None] / 2 + 1e-7).all())  # at most half a step per element
    w_q0, s0 = quantize_int8(torch.zeros(2, 5, device=DEV))  # a row of zeros: scale 0, no NaN
    assert bool((w_q0 == 0).all()) and bool((s0 == 0).all())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1, 1), (5, 33, 17), (16, 64, 96), (40, 100, 70)])
def test_int8_weight_linear(shape, dtype):
    m, k, n = shape
    _, w_q, w_scale = quantized(n, k)
    x = torch.randn(m, k, device=DEV).to(dtype)
    bias = torch.randn(n, device=DEV).to(dtype)
    copies = [t.clone() for t in (x, w_q, w_scale, bias)]
    y = int8_weight_linear(x, w_q, w_scale, bias)
    assert all(torch.equal(a, b) for a, b in zip((x, w_q, w_scale, bias), copies)), "an input was modified"
    assert y.dtype == dtype and y.shape == (m, n)
    assert_close(y, int8_weight_linear_torch(x.double(), w_q, w_scale.double(), bias.double()), dtype, Q_TOLERANCES)


def test_int8_weight_linear_strided_x_no_bias_and_k_tail():
    _, w_q, w_scale = quantized(50, 75)  # K = 75: a partial last K tile
    x = torch.randn(9, 150, device=DEV)[:, ::2]  # every other column: stride(1) == 2
    y = int8_weight_linear(x, w_q, w_scale, None)
    assert_close(y, x.double() @ dequantize_int8(w_q, w_scale, torch.float64).T, torch.float32, Q_TOLERANCES)


def test_int8_weight_linear_rejects_bad_inputs():
    _, w_q, w_scale = quantized(8, 16)
    x = torch.randn(3, 16, device=DEV)
    with pytest.raises(TypeError, match="int8"):
        int8_weight_linear(x, w_q.float(), w_scale, None)
    with pytest.raises(ValueError, match=r"\[N, 15\]"):
        int8_weight_linear(torch.randn(3, 15, device=DEV), w_q, w_scale, None)
    with pytest.raises(ValueError, match="w_scale"):
        int8_weight_linear(x, w_q, w_scale[:4], None)
    with pytest.raises(TypeError, match="bias"):
        int8_weight_linear(x, w_q, w_scale, torch.zeros(8, device=DEV, dtype=torch.float16))


def test_int8_weight_linear_never_makes_a_weight_sized_tensor():
    """The point of the exercise, as the grader's recorder sees it: no torch operator produces N*K elements."""
    from autograder.legality import OpRecorder

    _, w_q, w_scale = quantized(96, 64)
    x = torch.randn(16, 64, device=DEV, dtype=torch.bfloat16)
    rec = OpRecorder(None)
    with rec:
        int8_weight_linear(x, w_q, w_scale, torch.zeros(96, device=DEV, dtype=torch.bfloat16))
    assert rec.largest[0] < w_q.numel(), rec.largest


def test_int8_kernel_compiles_for_hopper():
    # No GPU here, but Triton compiles for sm_90 ahead of time: the first decode config must use the
    # tensor cores (mma) with cp.async pipelining and fit in shared memory.
    from sm90 import compile_sm90

    info = compile_sm90("kernels_ref.quant", "_int8_linear_kernel", 0)
    assert info["mma"] and info["cp_async"], info
    assert info["shared"] <= 227 * 1024, info


# ------------------------------------------------------------------------------------------- checkpointed_mlp

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1, 1), (5, 24, 40), (33, 16, 64)])
def test_checkpointed_mlp_matches_float64_autograd(shape, dtype):
    args = mlp_inputs(*shape, dtype=dtype)
    out = forward_backward(checkpointed_mlp)(*args)
    ref = forward_backward(mlp_torch)(*(a.double() for a in args))
    for name, o, r in zip(("y", "dx", "dw1", "db1", "dw2", "db2"), out, ref):
        assert o.dtype == dtype
        assert_close(o, r, dtype, MLP_TOLERANCES, name)


def test_checkpointed_mlp_holds_nothing_and_peaks_like_eager():
    x, w1, b1, w2, b2, dy = mlp_inputs(64, 32, 128, dtype=torch.float32)

    def measure(fn):
        leaves = [t.detach().requires_grad_() for t in (x, w1, b1, w2, b2)]
        with MemoryMeter() as meter:
            y = fn(*leaves)
            held = meter.held(y)
            y.backward(dy)
        return held, meter.peak

    held, peak = measure(checkpointed_mlp)
    eager_held, eager_peak = measure(mlp_torch)
    assert held == 0
    assert eager_held == 2 * 64 * 128 * 4  # h and gelu(h)
    assert peak <= eager_peak


def test_memory_meter_sees_what_a_function_keeps_anywhere():
    """Saved tensors, ctx attributes and globals all count; views and in-place results are not fresh."""
    kept = []

    class Sneaky(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            h = x * 2                 # 4 KiB, kept as a ctx attribute (not through save_for_backward)
            ctx.h = h
            kept.append(x + 1)        # 4 KiB in a global list
            return h.sum()

        @staticmethod
        def backward(ctx, g):
            return g * 2 * torch.ones_like(ctx.h)

    x = torch.randn(32, 32, requires_grad=True)
    with MemoryMeter() as meter:
        y = Sneaky.apply(x)
        assert meter.held(y) == 2 * 32 * 32 * 4
        kept.clear()
        assert meter.held(y) == 32 * 32 * 4
    t = torch.randn(8, 8)
    assert [o for o, _ in fresh_outputs((t,), {}, t.view(64))] == []
    assert [o for o, _ in fresh_outputs((t,), {}, t.add_(1))] == []
    assert len(list(fresh_outputs((t,), {}, t + 1))) == 1


# ------------------------------------------------------------------------------------------- bench cases

def test_bench_cases_are_well_formed_and_check_out_at_small_size():
    """The suite's cases are built (their full-size inputs live on the GPU), and small versions of the same
    cases pass the suite's float64 check on this device (stub timer and peak-memory meter)."""
    from kernels_ref import bench, benchmarking, checkpoint, quant

    for quick in (True, False):
        cases, _ = bench.collect_cases(quick, ["int8_weight_linear", "checkpointed_mlp"],
                                       modules=("kernels_ref.checkpoint", "kernels_ref.quant"))
        assert {c.op for c in cases} == {"int8_weight_linear", "checkpointed_mlp"}
        assert any(g.threshold == 1.5 and g.baseline == "bf16_matmul" for c in cases for g in c.goals)
        assert any(c.metric == "peak_memory" and c.goals for c in cases)
    small = [quant.decode_case(4, 96, 64)] + checkpoint.mlp_cases(33, 16, 64, stacks=(2,), dtype=torch.float32)
    _, rows, verdicts = benchmarking.run_suite(small, ceilings=benchmarking.Ceilings(1.0, 1.0), timer=lambda fn: 1.0,
                                               peak_memory=lambda fn: 1, progress=False)
    assert all(r.correct for r in rows), [(r.op, r.candidate, r.note) for r in rows]


# ------------------------------------------------------------------------------------------- GPU, full size

@pytest.mark.gpu
def test_gpu_int8_weight_linear_decode():
    m, k, n = 16, 4096, 16384
    _, w_q, w_scale = quantized(n, k)
    x = torch.randn(m, k, device=DEV, dtype=torch.bfloat16)
    bias = torch.randn(n, device=DEV, dtype=torch.bfloat16)
    y = int8_weight_linear(x, w_q, w_scale, bias)
    assert_close(y, int8_weight_linear_torch(x.double(), w_q, w_scale.double(), bias.double()), torch.bfloat16)


@pytest.mark.gpu
def test_gpu_checkpointed_mlp_memory():
    args = mlp_inputs(8192, 1024, 4096)

    def held_and_peak(mlp):
        x, w1, b1, w2, b2, dy = (a.detach().requires_grad_() if i < 5 else a for i, a in enumerate(args))
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        y = mlp(x, w1, b1, w2, b2)
        held = torch.cuda.memory_allocated() - base - y.numel() * y.element_size()
        y.backward(dy)
        torch.cuda.synchronize()
        return held, torch.cuda.max_memory_allocated() - base

    held, peak = held_and_peak(checkpointed_mlp)
    eager_held, eager_peak = held_and_peak(mlp_torch)
    assert held <= 1 << 20 and eager_held >= 2 * 8192 * 4096 * 2, (held, eager_held)
    assert peak <= 1.1 * eager_peak, (peak, eager_peak)


def test_the_meter_counts_a_storage_at_its_size_when_it_measures():
    # grown after it was first seen (the tensor's resize_, its storage's resize_): what is held is counted
    with MemoryMeter() as meter:
        small = torch.empty(4)
        assert meter.live_bytes() == 16
        small.resize_(1000)
        assert meter.live_bytes() == 4000
        small.untyped_storage().resize_(8000)
        assert meter.live_bytes() == 8000


def test_the_meter_counts_a_sparse_copy_by_its_indices_and_values():
    dense = torch.randn(64, 64)
    with MemoryMeter() as meter:
        kept = dense.to_sparse()
        held = meter.held(None)
    nnz = kept._nnz()
    assert held >= nnz * (4 + 2 * 8)  # float32 values and two int64 indices per entry
    del kept


def test_given_the_inputs_the_meter_counts_storage_no_operator_allocated_once_written():
    # a tensor over a Python buffer, a storage built by hand: no operator allocates them, the writes show them;
    # the inputs written in place are the caller's, and without inputs the meter counts operators' outputs only
    x = torch.randn(64, 16)
    for meter in (MemoryMeter(inputs=(x,)), MemoryMeter()):
        with meter:
            kept = torch.frombuffer(bytearray(x.numel() * 4), dtype=torch.float32).view(x.shape)
            kept.copy_(x)
            built = torch.empty(0).set_(torch.UntypedStorage(8000))
            built.zero_()
            x.mul_(1.0)
            seen = meter.held(None)
        assert seen == (x.numel() * 4 + 8000 if meter._provenance is not None else 0), seen
    del kept, built


def test_given_the_inputs_the_meter_counts_what_an_inputs_storage_grew_by():
    # resize_ (or out=) on an alias of an input grows the input's storage: the growth is held like any storage,
    # what the input held when the meter began is the caller's
    x = torch.randn(64, 16)
    with MemoryMeter(inputs=(x,)) as meter:
        grown = x.detach()
        grown.resize_(x.numel() + 1000)
        grown[x.numel():].zero_()
        assert meter.live_bytes() == 4000 and meter.peak >= 4000
        out = torch.empty(0)
        torch.mm(x, x.T, out=x.detach()[:0])  # out= resizes an empty alias: the storage grows to 64 x 64
        assert meter.live_bytes() == 64 * 64 * 4 - x.numel() * 4
    del grown, out


def test_results_written_through_out_and_resize_count_as_what_the_operator_made():
    from measure.memory import written_outputs

    a, b = torch.randn(6, 3), torch.randn(3, 7)
    out = torch.empty(0)
    mm = torch.ops.aten.mm.out
    assert [t.shape for t in written_outputs(mm, (a, b), {"out": out}, mm(a, b, out=out))] == [(6, 7)]
    t = torch.empty(0)
    grow = torch.ops.aten.resize_.default
    assert [x.numel() for x in written_outputs(grow, (t, [10, 10]), {}, grow(t, [10, 10]))] == [100]
    copy = torch.ops.aten.copy_.default  # in place on a tensor that exists: nothing new is made
    assert written_outputs(copy, (t, torch.ones(10, 10)), {}, copy(t, torch.ones(10, 10))) == []


@pytest.mark.skipif(not course.INTERPRET, reason="the Triton interpreter's launches (CPU)")
def test_an_interpreted_launch_holds_no_argument_after_it_returns():
    """course.interpreter: without its patch the interpreter's launch kept every argument's storage in a
    reference cycle until the cycle collector ran, so a chunk freed with del stayed allocated."""
    import gc

    from torch.multiprocessing.reductions import StorageWeakRef

    from kernels_ref.bias_gelu import bias_gelu

    enabled = gc.isenabled()
    gc.disable()  # no collection may hide a cycle
    try:
        x, b = torch.randn(3, 40), torch.randn(40)
        y = bias_gelu(x, b)
        kept = StorageWeakRef(y.untyped_storage()), StorageWeakRef(x.untyped_storage())
        del x, y
        assert all(ref.expired() for ref in kept)
    finally:
        if enabled:
            gc.enable()


@pytest.mark.skipif(not course.INTERPRET, reason="the Triton interpreter's own operators (CPU)")
def test_the_interpreters_casts_under_a_memory_meter_are_not_the_learners():
    """A memory exercise's harness counts with a MemoryMeter above the operator recorder: the interpreter's
    bf16 casts inside a launch must still be its own plumbing, not operators of the kernel's line."""
    from autograder import legality
    from kernels_ref.bias_gelu import bias_gelu

    x, b = torch.randn(3, 40).to(torch.bfloat16), torch.randn(40).to(torch.bfloat16)
    rec = legality.OpRecorder(None)
    with rec, MemoryMeter():
        bias_gelu(x, b)
    assert "_to_copy" not in {name for name, _ in rec.ops}, rec.ops


@pytest.mark.skipif(not course.INTERPRET, reason="the Triton interpreter's own calls (CPU)")
def test_the_course_packages_own_calls_are_never_the_learners():
    """In check() the recorder has no submission file: code outside the installed libraries is the learner's,
    but not the course's own package (its bf16 rounding hands values to numpy, its bounds checks read
    storages, at every interpreted launch)."""
    from autograder import legality
    from kernels_ref.bias_gelu import bias_gelu

    x, b = torch.randn(3, 40).to(torch.bfloat16), torch.randn(40).to(torch.bfloat16)
    rec = legality.OpRecorder(None)
    with rec:
        bias_gelu(x, b)  # a bf16 store: the interpreter's rounding goes through numpy
    assert not [name for name, _ in rec.ops if name.startswith(legality.LEAVES_TORCH + ":")], rec.ops


def test_the_meter_counts_a_workspace_made_before_the_span_once_a_kernel_is_handed_it():
    """A kernel may write any tensor it is handed, and no operator records what it writes: storage handed to
    a launch that the span neither allocated nor took as an input (a workspace made at import, keeping an
    activation for the backward) is held memory, counted once; the inputs and the span's own are not
    counted again."""
    import triton
    import triton.language as tl

    from autograder import legality

    legality.install_launch_counter()  # as every grading worker does: launches reach the meters

    @triton.jit
    def keep(src, dst, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)

    x = torch.randn(64)
    workspace = torch.empty(1024)  # made before the span
    with MemoryMeter(inputs=(x,)) as meter:
        y = torch.empty(64)
        keep[(1,)](x, workspace, 64, BLOCK=64)
        keep[(1,)](x, y, 64, BLOCK=64)
        keep[(1,)](x, workspace, 64, BLOCK=64)
    assert meter.held(y) == 1024 * 4 and meter.peak == 1024 * 4 + 64 * 4
    with MemoryMeter() as meter:  # without its inputs a meter judges no provenance: launches add nothing
        keep[(1,)](x, workspace, 64, BLOCK=64)
    assert meter.live_bytes() == 0
    held = torch.empty(2048)  # handed inside triton.reinterpret's holder: the tensor inside is what is held
    with MemoryMeter(inputs=(x,)) as meter:
        keep[(1,)](x, triton.reinterpret(held, tl.float32), 64, BLOCK=64)
    assert meter.live_bytes() == 2048 * 4
    with MemoryMeter(inputs=(x,)) as meter:  # inside a tuple argument too (Triton takes tuples of pointers)
        legality._meter_launch(((triton.reinterpret(held, tl.float32),), 64))
    assert meter.live_bytes() == 2048 * 4


def test_values_in_finds_every_tensor_in_order_through_the_containers_own_classes():
    from measure.memory import tensors_in

    a, b, c, d = (torch.zeros(i + 1) for i in range(4))

    class Sneaky(list):  # a container whose own iteration would hide what it holds
        def __iter__(self):
            return iter(())

    assert [t.numel() for t in tensors_in((a, [b, {"k": c, "n": None}], 3, 2.5, Sneaky([d])))] == [1, 2, 3, 4]
    assert tensors_in(a) == [a] and tensors_in((1, None, "s")) == []


def test_the_meters_bookkeeping_is_unwatched_for_plain_tensors_and_watched_for_a_subclass():
    """A profile function set around an operator (the grader's recorder's watch) stays set when the meter is
    done; the meter's own bookkeeping runs outside it where every tensor is of torch's plain classes, and
    inside it where one is a subclass (whose class's Python runs when read)."""
    import sys

    class Sub(torch.Tensor):
        pass

    seen = []

    def watch(frame, event, _arg):
        if event == "call" and frame.f_code.co_filename.endswith("memory.py"):
            seen.append(frame.f_code.co_name)

    x = torch.ones(8)
    for t, watched in ((x, False), (x.as_subclass(Sub), True)):
        seen.clear()
        with MemoryMeter(inputs=(t,)) as meter:
            sys.setprofile(watch)
            try:
                y = t * 2
                assert sys.getprofile() is watch
            finally:
                sys.setprofile(None)
        assert ("_account" in seen) is watched, (type(t).__name__, seen)
        assert meter.peak >= y.numel() * y.element_size()


def test_plain_tensors_are_told_by_identity_never_by_a_metaclass_answer():
    from measure.memory import is_plain

    asked = []

    class Meta(type(torch.Tensor)):
        def __eq__(cls, other):  # what `type(t) in (torch.Tensor, ...)` would ask
            asked.append(other)
            return True

        __hash__ = type.__hash__

    class Sneaky(torch.Tensor, metaclass=Meta):
        pass

    assert is_plain(torch.ones(1)) and is_plain(torch.nn.Parameter(torch.ones(1)))
    assert not is_plain(torch.ones(1).as_subclass(Sneaky)) and asked == []
