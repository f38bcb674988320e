"""The memory-bound reference kernels (bias_gelu, softmax, online_softmax, LayerNorm, RMSNorm,
linear_cross_entropy) against float64 PyTorch references, under the Triton interpreter on CPU and,
with `-m gpu`, at full size on a GPU.

Error measure: the course's one tolerance table and comparison (measure.tolerance: elementwise in
float64, NaN never passes), the one the grader and the benchmark suite use.
Every output is allocated poisoned (NaN / a sentinel) so an element the kernel forgets to write fails.
"""
import course
import pytest
import torch
import triton

from measure.tolerance import GRAD_TOLERANCES, TOLERANCES, compare
from kernels_ref.bias_gelu import bias_gelu, bias_gelu_torch
from kernels_ref.cross_entropy import (linear_cross_entropy, linear_cross_entropy_reference,
                                       linear_cross_entropy_torch)
from kernels_ref.layer_norm import (layer_norm, layer_norm_bwd, layer_norm_fwd, layer_norm_gelu, layer_norm_gelu_torch,
                                    layer_norm_torch)
from kernels_ref.rms_norm import rms_norm, rms_norm_bwd, rms_norm_fwd, rms_norm_torch
from kernels_ref.softmax import MAX_FUSED_N, online_softmax, softmax, softmax_torch

DEV = course.DEVICE
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
SHAPES = [(1, 1), (3, 17), (37, 130), (64, 1000)]
# Longer than the interpreter's one fixed block (64 columns) so online_softmax really loops.
ONLINE_SHAPES = [(1, 1), (3, 17), (5, 300), (2, 1000)]


def err64(out, ref) -> float:
    """max|out - ref| / max|ref| in float64: for two float64 computations that must agree to rounding."""
    o, r = out.detach().double(), ref.detach().double().to(out.device)
    return ((o - r).abs().max() / max(r.abs().max().item(), 1e-3)).item()


def assert_close(out, ref, dtype, what="", sum_over_rows=False):
    """``out`` within the tolerance of ``dtype`` (the inputs' dtype: a float32 loss of bf16 logits is held to
    bf16's), in the dtype it has. ``sum_over_rows``: a weight's gradient, summed over every row
    (GRAD_TOLERANCES, as the grader holds it)."""
    tol = (GRAD_TOLERANCES if sum_over_rows else {}).get(dtype, TOLERANCES[dtype])
    ok, _, msg = compare(out, ref.to(out.device) if isinstance(ref, torch.Tensor) else ref,
                         overrides={out.dtype: tol})
    assert ok, f"{what}: {msg} ({dtype})"


@pytest.fixture(autouse=True)
def poisoned_outputs(monkeypatch):
    """torch.empty / empty_like return NaN-filled (float) or sentinel-filled (int) memory."""
    real_empty, real_empty_like = torch.empty, torch.empty_like

    def poison(t):
        if t.is_floating_point():
            t.fill_(float("nan"))
        elif t.dtype != torch.bool and t.numel():
            t.fill_(-7777)
        return t

    monkeypatch.setattr(torch, "empty", lambda *a, **k: poison(real_empty(*a, **k)))
    monkeypatch.setattr(torch, "empty_like", lambda *a, **k: poison(real_empty_like(*a, **k)))


def randn(*shape, dtype=torch.float32, scale=1.0):
    return (torch.randn(*shape, device=DEV, dtype=torch.float32) * scale).to(dtype)


def unchanged(*tensors):
    """Snapshot inputs; calling the result asserts they were not modified."""
    copies = [t.clone() for t in tensors]

    def check():
        for t, c in zip(tensors, copies):
            assert torch.equal(t, c), "an input was modified"
    return check


# ------------------------------------------------------------------------------------------- bias_gelu

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_bias_gelu(shape, dtype):
    x, b = randn(*shape, dtype=dtype, scale=3), randn(shape[1], dtype=dtype)
    same = unchanged(x, b)
    y = bias_gelu(x, b)
    same()
    assert y.dtype == dtype and y.shape == x.shape
    assert_close(y, bias_gelu_torch(x.double(), b.double()), dtype)


def test_bias_gelu_extremes_and_noncontiguous():
    x = torch.tensor([[-1e4, 1e4, -30.0, 30.0, 0.0, -0.5]], device=DEV)
    assert_close(bias_gelu(x, torch.zeros(6, device=DEV)), bias_gelu_torch(x.double(), torch.zeros(6, dtype=torch.float64, device=DEV)), torch.float32)
    base = randn(40, 70)
    x = base[::2, 3:60]  # row stride 140, columns offset: a strided view
    b = randn(57)
    assert_close(bias_gelu(x, b), bias_gelu_torch(x.double(), b.double()), torch.float32)
    xt = randn(33, 20).t()  # column-major
    bt = randn(33)
    assert_close(bias_gelu(xt, bt), bias_gelu_torch(xt.double(), bt.double()), torch.float32)


@pytest.mark.gpu
def test_bias_gelu_bfloat16_hard_values():
    # bfloat16 over [-60, 60], saturation included, judged elementwise by the course's bfloat16 tolerance
    # against float64 (NaN never passes).
    x = torch.linspace(-60, 60, 8192, device=DEV).reshape(4, 2048).to(torch.bfloat16)
    b = randn(2048, dtype=torch.bfloat16, scale=0.1)
    assert_close(bias_gelu(x, b), bias_gelu_torch(x.double(), b.double()), torch.bfloat16)


def test_bias_gelu_rejects_bad_inputs():
    with pytest.raises(ValueError, match="bias"):
        bias_gelu(randn(4, 5), randn(6))
    with pytest.raises(TypeError, match="dtype"):
        bias_gelu(torch.ones(4, 5, dtype=torch.int32, device=DEV), torch.ones(5, dtype=torch.int32, device=DEV))
    with pytest.raises(TypeError, match="must match"):
        bias_gelu(randn(4, 5), randn(5, dtype=torch.float16))
    with pytest.raises(ValueError, match="2-D"):
        bias_gelu(randn(5), randn(5))


# ------------------------------------------------------------------------------------------- softmax

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("fn,shape", [(softmax, s) for s in SHAPES] + [(online_softmax, s) for s in ONLINE_SHAPES],
                         ids=[f"softmax-{s}" for s in SHAPES] + [f"online_softmax-{s}" for s in ONLINE_SHAPES])
def test_softmax(fn, shape, dtype):
    # online_softmax on rows longer than one block too (ONLINE_SHAPES)
    x = randn(*shape, dtype=dtype, scale=4)
    same = unchanged(x)
    y = fn(x)
    same()
    assert y.dtype == dtype
    assert_close(y, softmax_torch(x.double()), dtype)


@pytest.mark.parametrize("fn", [softmax, online_softmax])
def test_softmax_hard_rows(fn):
    n = 300
    x = randn(6, n, scale=1e4)                       # large magnitudes: max subtraction must happen
    x[1] = -float("inf"); x[1, 7] = 2.0              # all -inf but one: one-hot
    x[2, ::3] = -float("inf")                        # some -inf entries
    x[3] = -float("inf"); x[3, 250] = -1e30; x[3, 251] = -1e30  # finite but tiny, in a later block
    x[4] = 88.0                                      # exp would overflow without subtracting the max
    x[5] = -float("inf")                             # fully -inf: no softmax; NaN, like torch.softmax
    y = fn(x)
    ref = softmax_torch(x[:5].double())
    assert_close(y[:5], ref, torch.float32)
    assert y[1, 7] == 1.0 and y[3, 250] == 0.5
    assert torch.isnan(y[5]).all() and torch.isnan(torch.softmax(x[5:], -1)).all()


@pytest.mark.parametrize("fn", [softmax, online_softmax])
def test_softmax_noncontiguous(fn):
    x = randn(50, 90)[::3, 5:80]
    assert_close(fn(x), softmax_torch(x.double()), torch.float32)
    xt = randn(40, 30).t()
    assert_close(fn(xt), softmax_torch(xt.double()), torch.float32)


def test_softmax_rejects_bad_inputs():
    with pytest.raises(ValueError, match="online_softmax"):
        softmax(torch.zeros(1, MAX_FUSED_N + 1, device=DEV))
    with pytest.raises(ValueError, match="2-D"):
        softmax(randn(2, 3, 4))
    with pytest.raises(TypeError):
        online_softmax(torch.ones(2, 3, dtype=torch.int64, device=DEV))


# ------------------------------------------------------------------------------------------- norms

def _autograd_ref(fn, x, params, dy):
    leaves = [t.detach().double().requires_grad_() for t in (x, *params)]
    y = fn(*leaves)
    y.backward(dy.double())
    return y.detach(), [leaf.grad for leaf in leaves]


def _ln_inputs(M, N, dtype):
    """x (mean away from 0), dy, weight and bias of a LayerNorm test."""
    x, dy = randn(M, N, dtype=dtype, scale=2) + 0.5, randn(M, N, dtype=dtype)
    return x, dy, randn(N, dtype=dtype), randn(N, dtype=dtype)


def _assert_ln_grads(got, want, dtype):
    """dx, dweight and dbias against the float64 autograd ones (the weight gradients sum over rows)."""
    assert_close(got[0], want[0], dtype, "dx")
    assert_close(got[1], want[1], dtype, "dweight", sum_over_rows=True)
    assert_close(got[2], want[2], dtype, "dbias", sum_over_rows=True)


@pytest.mark.parametrize("split", [2, 4])
@pytest.mark.parametrize("M,N", [(37, 40), (9, 128), (70, 100)])
def test_layer_norm_bwd_split_rows(M, N, split):
    # Wide rows can share each row block between SPLIT programs (the one-pass way): each sums the
    # whole rows chunk by chunk, then owns BLOCK_N / SPLIT columns of dx, dweight and dbias. Forced here on
    # small odd widths: the last chunk masked, one chunk entirely past N (N=40 at split 4: 16-column chunks).
    dtype = torch.float32
    x, dy, w, b = _ln_inputs(M, N, dtype)
    _, (gx, gw, gb) = _autograd_ref(lambda x, w, b: layer_norm_torch(x, w, b, 1e-5), x, (w, b), dy)
    _, mean, rstd = layer_norm_fwd(x, w, b, 1e-5)
    dx, dw, db = layer_norm_bwd(dy, x, w, mean, rstd, config={"SPLIT": split})
    _assert_ln_grads((dx, dw, db), (gx, gw, gb), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", [{"two_pass": True},
                                    {"two_pass": {"BLOCK_M": 2, "CHUNK": 16}, "SPLIT": 4, "BLOCK_M": 4, "num_warps": 4}])
@pytest.mark.parametrize("M,N", [(37, 40), (9, 128), (5, 3000)])
def test_layer_norm_bwd_two_pass(M, N, config, dtype):
    # The row sums first (x and dy read twice), then column tiles of dx and the partial sums: ragged rows,
    # a chunk partly and wholly past N, row blocks past M, and dx poisoned so an unwritten element shows.
    x, dy, w, b = _ln_inputs(M, N, dtype)
    _, (gx, gw, gb) = _autograd_ref(lambda x, w, b: layer_norm_torch(x, w, b, 1e-5), x, (w, b), dy)
    _, mean, rstd = layer_norm_fwd(x, w, b, 1e-5)
    dx, dw, db = layer_norm_bwd(dy, x, w, mean, rstd, config=config)
    _assert_ln_grads((dx, dw, db), (gx, gw, gb), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_layer_norm_fwd_bwd(shape, dtype):
    M, N = shape
    x, dy, w, b = _ln_inputs(M, N, dtype)
    eps = 1e-5
    same = unchanged(x, w, b, dy)
    y, mean, rstd = layer_norm_fwd(x, w, b, eps)
    assert mean.dtype == rstd.dtype == torch.float32 and mean.shape == rstd.shape == (M,)
    ref_y, (gx, gw, gb) = _autograd_ref(lambda x, w, b: layer_norm_torch(x, w, b, eps), x, (w, b), dy)
    xd = x.double()
    assert_close(y, ref_y, dtype, "y")
    assert_close(mean, xd.mean(-1), torch.float32, "mean")
    assert_close(rstd, 1 / torch.sqrt(xd.var(-1, unbiased=False) + eps), torch.float32, "rstd")
    dx, dw, db = layer_norm_bwd(dy, x, w, mean, rstd)
    same()
    assert dx.dtype == dw.dtype == db.dtype == dtype
    _assert_ln_grads((dx, dw, db), (gx, gw, gb), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_layer_norm_gelu(shape, dtype):
    M, N = shape
    x, w, b = randn(M, N, dtype=dtype, scale=2) + 0.5, randn(N, dtype=dtype), randn(N, dtype=dtype)
    same = unchanged(x, w, b)
    y = layer_norm_gelu(x, w, b, 1e-5)
    same()
    assert y.dtype == dtype and y.is_contiguous()
    assert_close(y, layer_norm_gelu_torch(x.double(), w.double(), b.double(), 1e-5), dtype, "y")


def test_layer_norm_gelu_strided_rows_and_saturation():
    x = randn(9, 80)[:, 5:70]                     # strided rows
    w, b = randn(65, scale=40), randn(65, scale=40)  # |pre-activation| in the hundreds: GELU saturates
    y = layer_norm_gelu(x, w, b, 1e-5)
    assert_close(y, layer_norm_gelu_torch(x.double(), w.double(), b.double(), 1e-5), torch.float32, "y")
    assert not torch.isnan(y).any()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_rms_norm_fwd_bwd(shape, dtype):
    M, N = shape
    x, dy, w = randn(M, N, dtype=dtype, scale=2), randn(M, N, dtype=dtype), randn(N, dtype=dtype)
    eps = 1e-6
    same = unchanged(x, w, dy)
    y, rstd = rms_norm_fwd(x, w, eps)
    ref_y, (gx, gw) = _autograd_ref(lambda x, w: rms_norm_torch(x, w, eps), x, (w,), dy)
    assert_close(y, ref_y, dtype, "y")
    assert_close(rstd, 1 / torch.sqrt(x.double().pow(2).mean(-1) + eps), torch.float32, "rstd")
    dx, dw = rms_norm_bwd(dy, x, w, rstd)
    same()
    assert_close(dx, gx, dtype, "dx")
    assert_close(dw, gw, dtype, "dweight", sum_over_rows=True)


def test_norm_autograd_functions_3d_noncontiguous():
    x = randn(3, 7, 90)[:, :, 10:75]  # strided rows
    w, b = randn(65), randn(65)
    dy = randn(3, 7, 65)
    xt, wt, bt = (t.clone().requires_grad_() for t in (x, w, b))
    layer_norm(xt, wt, bt, 1e-5).backward(dy)
    _, (gx, gw, gb) = _autograd_ref(lambda x, w, b: layer_norm_torch(x, w, b, 1e-5), x, (w, b), dy)
    for got, want in ((xt.grad, gx), (wt.grad, gw), (bt.grad, gb)):
        assert_close(got, want, torch.float32)
    xt, wt = x.clone().requires_grad_(), w.clone().requires_grad_()
    rms_norm(xt, wt, 1e-6).backward(dy)
    _, (gx, gw) = _autograd_ref(lambda x, w: rms_norm_torch(x, w, 1e-6), x, (w,), dy)
    assert_close(xt.grad, gx, torch.float32)
    assert_close(wt.grad, gw, torch.float32)


def test_norm_bwd_many_rows_per_program():
    # More row blocks than programs: each program accumulates several blocks into its partial sums.
    M, N = 200, 40
    x, dy, w, b = randn(M, N), randn(M, N), randn(N), randn(N)
    _, mean, rstd = layer_norm_fwd(x, w, b, 1e-5)
    _, (gx, gw, gb) = _autograd_ref(lambda x, w, b: layer_norm_torch(x, w, b, 1e-5), x, (w, b), dy)
    dx, dw, db = layer_norm_bwd(dy, x, w, mean, rstd)
    for got, want in ((dx, gx), (dw, gw), (db, gb)):
        assert_close(got, want, torch.float32)


def test_norms_reject_bad_inputs():
    x, w = randn(4, 8), randn(8)
    with pytest.raises(ValueError, match="weight"):
        layer_norm_fwd(x, randn(9), w, 1e-5)
    with pytest.raises(TypeError, match="must match"):
        rms_norm_fwd(x, w.half(), 1e-6)
    _, mean, rstd = layer_norm_fwd(x, w, w, 1e-5)
    with pytest.raises(TypeError, match="rstd"):
        layer_norm_bwd(x, x, w, mean, rstd.double())
    with pytest.raises(ValueError, match="dy"):
        rms_norm_bwd(randn(4, 7), x, w, rstd)


# ------------------------------------------------------------------------------------------- cross-entropy

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("M,H,V,chunk", [(1, 3, 5, None), (7, 16, 300, 2), (37, 20, 130, None), (9, 12, 200, 4)])
def test_linear_cross_entropy(M, H, V, chunk, dtype):
    x, w = randn(M, H, dtype=dtype), randn(V, H, dtype=dtype, scale=0.5)
    t = torch.randint(0, V, (M,), device=DEV)
    same = unchanged(x, w, t)
    xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
    loss = linear_cross_entropy(xg, wg, t, chunk_rows=chunk)
    assert loss.dtype == torch.float32 and loss.dim() == 0
    (3 * loss).backward()  # a non-unit incoming gradient must scale both gradients
    same()
    xd, wd = x.double().requires_grad_(), w.double().requires_grad_()
    ref = linear_cross_entropy_torch(xd, wd, t)
    (3 * ref).backward()
    assert_close(loss, ref.detach(), torch.float32 if dtype == torch.float32 else dtype, "loss")
    assert_close(xg.grad, xd.grad, dtype, "dx")
    assert_close(wg.grad, wd.grad, dtype, "dweight", sum_over_rows=True)


def test_linear_cross_entropy_no_grad_and_reference():
    M, H, V = 11, 8, 150
    x, w, t = randn(M, H), randn(V, H), torch.randint(0, V, (M,), device=DEV)
    with torch.no_grad():
        loss = linear_cross_entropy(x, w, t, chunk_rows=4)
    xd, wd = x.double().requires_grad_(), w.double().requires_grad_()
    ref = linear_cross_entropy_torch(xd, wd, t)
    ref.backward()
    assert_close(loss, ref.detach(), torch.float32)
    # The chunked float64 closed form the benchmark checks against agrees with autograd.
    l64, dx64, dw64 = linear_cross_entropy_reference(x, w, t, chunk_rows=3)
    assert err64(l64, ref.detach()) < 1e-12 and err64(dx64, xd.grad) < 1e-12 and err64(dw64, wd.grad) < 1e-12


def test_linear_cross_entropy_matmuls_run_over_an_aligned_vocabulary(monkeypatch):
    """At an odd vocabulary (GPT-2's 50257 here scaled down to 1001), the matmuls run over 1024 columns (a
    contiguous dimension cuBLAS's tensor cores read aligned; zero weight rows after V), the loss reads the V
    columns of each row, and the loss and both gradients are still those of the 1001-word vocabulary."""
    from kernels_ref import cross_entropy

    seen = []
    kernel = cross_entropy._cross_entropy_rows_kernel

    class Watch:
        def __getitem__(self, grid):
            def launch(logits, targets, losses, lse, V, stride, **kwargs):
                seen.append((tuple(logits.shape), logits.stride(), V))
                return kernel[grid](logits, targets, losses, lse, V, stride, **kwargs)
            return launch

    monkeypatch.setattr(cross_entropy, "_cross_entropy_rows_kernel", Watch())
    x, w = randn(40, 16).requires_grad_(), randn(1001, 16).requires_grad_()
    t = torch.randint(0, 1001, (40,), device=DEV)
    t[0] = 1000  # the last word of the vocabulary, next to the padding
    loss = linear_cross_entropy(x, w, t, 16)
    loss.backward()
    assert seen == [((16, 1024), (1024, 1), 1001), ((16, 1024), (1024, 1), 1001), ((8, 1024), (1024, 1), 1001)]
    xd, wd = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    ref = torch.nn.functional.cross_entropy(xd @ wd.T, t)
    ref.backward()
    assert abs(float(loss) - float(ref)) < 1e-5
    assert w.grad.shape == (1001, 16) and w.grad.is_contiguous()
    assert err64(x.grad.double(), xd.grad) < 1e-4 and err64(w.grad.double(), wd.grad) < 1e-4


def test_linear_cross_entropy_backward_never_reads_the_gpu(monkeypatch):
    """The backward scales the gradients by the incoming one without asking the host what it is: a read
    (.item()) there would stall the launches of a training step's whole backward."""
    x, w = randn(8, 16).requires_grad_(), randn(50, 16).requires_grad_()
    t = torch.randint(0, 50, (8,), device=DEV)
    loss = linear_cross_entropy(x, w, t)

    def refuse(self):
        raise AssertionError("the backward read a tensor's value on the host")

    monkeypatch.setattr(torch.Tensor, "item", refuse)
    (3 * loss).backward()
    monkeypatch.undo()
    xd, wd = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    (3 * torch.nn.functional.cross_entropy(xd @ wd.T, t)).backward()
    assert err64(x.grad.double(), xd.grad) < 1e-4 and err64(w.grad.double(), wd.grad) < 1e-4


def test_linear_cross_entropy_rejects_bad_inputs():
    x, w = randn(4, 8), randn(10, 8)
    with pytest.raises(ValueError, match=r"\[0, 10\)"):
        linear_cross_entropy(x, w, torch.tensor([0, 1, 10, 2], device=DEV))
    with pytest.raises(ValueError, match="nn.Linear"):
        linear_cross_entropy(x, randn(8, 10), torch.zeros(4, dtype=torch.long, device=DEV))
    with pytest.raises(ValueError, match="one per row"):
        linear_cross_entropy(x, w, torch.zeros(3, dtype=torch.long, device=DEV))
    with pytest.raises(TypeError, match="targets"):
        linear_cross_entropy(x, w, torch.zeros(4, device=DEV))


def _offset_view(t: torch.Tensor, elements: int) -> torch.Tensor:
    """t's values in a view starting ``elements`` into a fresh buffer: same strides, another alignment."""
    buf = torch.empty(t.numel() + elements, dtype=t.dtype, device=t.device)
    view = buf[elements:].view(t.shape)
    view.copy_(t)
    return view


@pytest.mark.parametrize("M", [48, 40])
def test_layer_norm_launches_tell_alignments_and_shapes_apart(M):
    # On a GPU LayerNorm's launches are keyed by the launcher (shape, dtype, strides, each pointer's 16-byte
    # alignment), not by every argument: aligned, then misaligned by one element (same strides), then
    # aligned again, at two row counts of one width: each checked against float64.
    N, dtype = 96, torch.bfloat16
    x, dy, w, b = randn(M, N, dtype=dtype), randn(M, N, dtype=dtype), randn(N, dtype=dtype), randn(N, dtype=dtype)
    _, (gx, gw, gb) = _autograd_ref(lambda x, w, b: layer_norm_torch(x, w, b, 1e-5), x, (w, b), dy)
    ref_y = layer_norm_torch(x.double(), w.double(), b.double(), 1e-5)
    for shift in (0, 1, 0):
        xs, dys, ws, bs = (_offset_view(t, shift) if shift else t for t in (x, dy, w, b))
        y, mean, rstd = layer_norm_fwd(xs, ws, bs, 1e-5)
        assert_close(y, ref_y, dtype, f"layer_norm y (offset {shift})")
        mean, rstd = (_offset_view(t, shift) if shift else t for t in (mean, rstd))
        for got, want, what in zip(layer_norm_bwd(dys, xs, ws, mean, rstd), (gx, gw, gb), ("dx", "dw", "db")):
            assert_close(got, want, dtype, f"layer_norm {what} (offset {shift})", sum_over_rows=what != "dx")


# ------------------------------------------------------------------------------------------- GPU, full size

@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("call", ["first", "bound"])
def test_gpu_full_size_memory_bound(dtype, call):
    # "bound": every op is called once before the checked call, so the checked call is the launch bound to
    # its compiled kernel (kernels_ref._launch), not the autotuner's and the JIT's.
    M, N = 16384, 4096
    x, dy, w, b = randn(M, N, dtype=dtype), randn(M, N, dtype=dtype), randn(N, dtype=dtype), randn(N, dtype=dtype)
    if call == "bound":
        _, mean, rstd = layer_norm_fwd(x, w, b, 1e-5)
        bias_gelu(x, b), softmax(x), layer_norm_bwd(dy, x, w, mean, rstd), layer_norm_gelu(x, w, b, 1e-5)
        rms_norm_bwd(dy, x, w, rms_norm_fwd(x, w, 1e-6)[1])
    assert_close(bias_gelu(x, b), bias_gelu_torch(x.double(), b.double()), dtype, "bias_gelu")
    assert_close(softmax(x), softmax_torch(x.double()), dtype, "softmax")
    long = randn(64, 200_000, dtype=dtype)
    assert_close(online_softmax(long), softmax_torch(long.double()), dtype, "online_softmax")
    y, mean, rstd = layer_norm_fwd(x, w, b, 1e-5)
    ref_y, (gx, gw, gb) = _autograd_ref(lambda x, w, b: layer_norm_torch(x, w, b, 1e-5), x, (w, b), dy)
    assert_close(y, ref_y, dtype, "layer_norm y")
    for got, want, what in zip(layer_norm_bwd(dy, x, w, mean, rstd), (gx, gw, gb), ("dx", "dw", "db")):
        assert_close(got, want, dtype, f"layer_norm {what}", sum_over_rows=what != "dx")
    assert_close(layer_norm_gelu(x, w, b, 1e-5), layer_norm_gelu_torch(x.double(), w.double(), b.double(), 1e-5),
                 dtype, "layer_norm_gelu")
    y, rstd = rms_norm_fwd(x, w, 1e-6)
    ref_y, (gx, gw) = _autograd_ref(lambda x, w: rms_norm_torch(x, w, 1e-6), x, (w,), dy)
    assert_close(y, ref_y, dtype, "rms_norm y")
    for got, want, what in zip(rms_norm_bwd(dy, x, w, rstd), (gx, gw), ("dx", "dw")):
        assert_close(got, want, dtype, f"rms_norm {what}", sum_over_rows=what != "dx")


@pytest.mark.gpu
@pytest.mark.parametrize("N", [16384, 32768, 50000])
def test_gpu_layer_norm_bwd_wide_rows(N):
    # Rows this wide take the two-pass backward (TWO_PASS_FROM), and still run the one-pass split kernel
    # when asked to (SPLIT programs per row block; _column_split).
    M, dtype = 2048, torch.bfloat16
    x, dy, w, b = randn(M, N, dtype=dtype), randn(M, N, dtype=dtype), randn(N, dtype=dtype), randn(N, dtype=dtype)
    _, mean, rstd = layer_norm_fwd(x, w, b, 1e-5)
    _, (gx, gw, gb) = _autograd_ref(lambda x, w, b: layer_norm_torch(x, w, b, 1e-5), x, (w, b), dy)
    split = {"two_pass": False, "SPLIT": triton.next_power_of_2(N) // 8192, "num_warps": 8}
    for config in (None, split):
        for got, want, what in zip(layer_norm_bwd(dy, x, w, mean, rstd, config=config), (gx, gw, gb),
                                   ("dx", "dw", "db")):
            assert_close(got, want, dtype, f"layer_norm {what} ({config})", sum_over_rows=what != "dx")


@pytest.mark.gpu
def test_gpu_linear_cross_entropy_memory():
    M, H, V = 4096, 2048, 128256
    x = randn(M, H, dtype=torch.bfloat16)
    w = randn(V, H, dtype=torch.bfloat16, scale=H ** -0.5)
    t = torch.randint(0, V, (M,), device=DEV)

    def run(fn):
        xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
        torch.cuda.synchronize(); torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        loss = fn(xg, wg, t)
        loss.backward()
        torch.cuda.synchronize()
        return loss.detach(), xg.grad, wg.grad, torch.cuda.max_memory_allocated() - base

    run(linear_cross_entropy)  # warm-up: autotuning's first call allocates do_bench's 256 MB L2-flush buffer
    *ours, ours_peak = run(linear_cross_entropy)
    *eager, eager_peak = run(linear_cross_entropy_torch)
    ref = linear_cross_entropy_reference(x, w, t)
    for got, want in zip(ours, ref):
        assert_close(got, want, torch.bfloat16)
    assert ours_peak * 4 <= eager_peak, (ours_peak, eager_peak)
