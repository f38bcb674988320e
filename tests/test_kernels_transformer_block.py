"""kernels_ref.transformer_block (and what it added to kernels_ref.matmul and kernels_ref.flash_attention)
against float64: the prefill block, a decode step with a KV cache, flash-decoding's splits, the residual
epilogue, attention written into a transposed buffer; on a GPU, full size and CUDA-graph replay.

CPU (interpreter): matmul tiles 16x32x16, attention tiles 32x16, decode blocks of 16 keys, so the shapes
below cross several tiles, ragged tails and (decode) several splits."""
import course
import pytest
import torch

from autograder.specs.nb09_capstone import BLOCK_TOLERANCES
from kernels_ref import transformer_block as T
from kernels_ref.flash_attention import flash_attention_fwd
from kernels_ref.matmul import linear
from measure import reference
from measure.tolerance import TOLERANCES, compare

DEV = course.DEVICE
DTYPES = (torch.float32, torch.float16, torch.bfloat16)
# float32 runs TF32 dots on a GPU (notebook 06's tolerance); the interpreter computes exactly.
TF32 = {torch.float32: (2e-3, 2e-3)}


def _assert(out, ref, tolerances, what):
    ok, err, msg = compare(out, ref, tolerances)
    assert ok, f"{what}: {msg}"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1, 16, 1), (2, 17, 48, 3), (1, 40, 64, 2)])
def test_prefill_block_matches_float64(shape, dtype):
    B, S, D, H = shape
    x = torch.randn(B, S, D, device=DEV).to(dtype)
    p = T.make_params(D, H, dtype)
    ref = reference.transformer_block(x, p)
    _assert(T.transformer_block(x, p), ref, BLOCK_TOLERANCES, f"triton {shape} {dtype}")
    _assert(T.transformer_block_torch(x, p), ref, BLOCK_TOLERANCES, f"eager {shape} {dtype}")


def test_prefill_block_reads_a_non_contiguous_x():
    x = torch.randn(17, 2, 48, device=DEV).transpose(0, 1)  # [S, B, D] memory
    p = T.make_params(48, 3, torch.float32)
    _assert(T.transformer_block(x, p), reference.transformer_block(x, p), BLOCK_TOLERANCES, "x sequence-first")


@pytest.mark.parametrize("dtype", DTYPES)
def test_decode_step_matches_float64_and_writes_the_cache(dtype):
    B, D, H, pos = 2, 64, 4, 37                      # 38 keys: several 16-key blocks, more than one split
    x = torch.randn(B, 1, D, device=DEV).to(dtype)
    p = T.make_params(D, H, dtype)
    caches = [torch.randn(B, H, pos + 3, D // H, device=DEV).to(dtype) for _ in range(2)]
    ref = T.decode_reference(x, p, *caches, pos)
    eager_caches = [c.clone() for c in caches]
    y = T.decode_step(x, p, *caches, pos)
    _assert(y, ref, BLOCK_TOLERANCES, f"decode {dtype}")
    _assert(T.decode_step_torch(x, p, *eager_caches, pos), ref, BLOCK_TOLERANCES, f"eager decode {dtype}")
    naive_caches = [c.clone() for c in eager_caches]  # 01's naive block at decode: what the claims compare with
    _assert(T.decode_step_naive(x, p, *naive_caches, pos), ref, BLOCK_TOLERANCES, f"naive decode {dtype}")
    for mine, eager in zip(caches, eager_caches):      # the new key and value landed at pos, nowhere else
        torch.testing.assert_close(mine[:, :, :pos], eager[:, :, :pos], atol=0, rtol=0)
        _assert(mine[:, :, pos], eager[:, :, pos].double(), TF32, "cache row")


def test_decode_continues_a_prefill():
    """The prompt's keys and values in the cache + one decode step = the prefill of the prompt and that token."""
    B, S, D, H = 1, 20, 48, 3
    tokens = torch.randn(B, S + 1, D, device=DEV)
    p = T.make_params(D, H, torch.float32)
    a = reference.layer_norm(tokens[:, :S], p["ln1_weight"], p["ln1_bias"], T.EPS)
    qkv = (a @ reference.as64(p["w_qkv"]).T + reference.as64(p["b_qkv"])).float()
    k, v = qkv.view(B, S, 3, H, D // H).permute(2, 0, 3, 1, 4)[1:]
    caches = [torch.zeros(B, H, S + 1, D // H, device=DEV) for _ in range(2)]
    caches[0][:, :, :S], caches[1][:, :, :S] = k, v
    y = T.decode_step(tokens[:, S:], p, *caches, S)
    _assert(y, reference.transformer_block(tokens, p)[:, S:], BLOCK_TOLERANCES, "decode after prefill")


@pytest.mark.parametrize("n_keys", [1, 15, 16, 17, 100])
def test_decode_attention_merges_its_splits(n_keys):
    B, H, d = 2, 3, 32
    q = torch.randn(B, H, d, device=DEV)
    kc, vc = (torch.randn(B, H, 128, d, device=DEV) for _ in range(2))
    o = T.decode_attention(q, kc, vc, n_keys)
    s = reference.as64(q)[:, :, None] @ reference.as64(kc[:, :, :n_keys]).transpose(-1, -2) / d ** 0.5
    ref = (torch.softmax(s, -1) @ reference.as64(vc[:, :, :n_keys]))[:, :, 0]
    _assert(o, ref, TOLERANCES, f"{n_keys} keys")
    with pytest.raises(ValueError, match="n_keys"):
        T.decode_attention(q, kc, vc, 129)


@pytest.mark.parametrize("dtype", DTYPES)
def test_linear_epilogues(dtype):
    M, K, N = 37, 29, 45
    x = torch.randn(M, K, device=DEV).to(dtype)
    w = (torch.randn(N, K, device=DEV) / K ** 0.5).to(dtype)
    b, r = torch.randn(N, device=DEV).to(dtype), torch.randn(M, N, device=DEV).to(dtype)
    pre = reference.as64(x) @ reference.as64(w).T + reference.as64(b)
    _assert(linear(x, w, b), pre, TF32, "bias")
    _assert(linear(x, w, b, residual=r), pre + reference.as64(r), TF32, "bias + residual")
    _assert(linear(x, w, b, gelu=True, residual=r), reference.gelu_tanh(pre) + reference.as64(r), TF32, "all")
    _assert(linear(x, w), pre - reference.as64(b), TF32, "no bias")
    with pytest.raises(ValueError, match="residual"):
        linear(x, w, b, residual=r[:, :-1])


def test_flash_attention_writes_into_a_transposed_buffer():
    B, S, H, d = 2, 33, 3, 16
    qkv = torch.randn(B * S, 3 * H * d, device=DEV)
    q, k, v = qkv.view(B, S, 3, H, d).permute(2, 0, 3, 1, 4)
    o = torch.empty(B, S, H, d, device=DEV)
    out, _ = flash_attention_fwd(q, k, v, causal=True, out=o.transpose(1, 2))
    assert out.data_ptr() == o.data_ptr()
    _assert(o.transpose(1, 2), reference.attention(q, k, v, True)[0], TF32, "o in [B, S, H, d]")
    with pytest.raises(ValueError, match="out"):
        flash_attention_fwd(q, k, v, causal=True, out=torch.empty(B, H, S + 1, d, device=DEV))


@pytest.mark.skipif(not course.INTERPRET, reason="the interpreter's cast; compiled kernels round natively")
def test_the_interpreter_rounds_float32_to_bfloat16_to_nearest_even():
    import triton
    import triton.language as tl

    import autograder  # noqa: F401  (importing it makes the interpreter's casts round like a GPU's)

    @triton.jit
    def cast(x_ptr, y_ptr, N: tl.constexpr):
        i = tl.arange(0, N)
        tl.store(y_ptr + i, tl.load(x_ptr + i).to(tl.bfloat16))

    # above halfway (truncation would round these down), and an exact tie (to even: down)
    x = torch.tensor([1 + 2**-8 + 2**-10, -(1 + 2**-8 + 2**-10), 3 + 0.9 * 2**-6, 1 + 2**-8])
    y = torch.empty(4, dtype=torch.bfloat16)
    cast[(1,)](x, y, N=4)
    assert torch.equal(y, x.to(torch.bfloat16)), (y.tolist(), x.to(torch.bfloat16).tolist())


def test_bench_cases_are_well_formed():
    for quick in (True, False):
        cases = T.bench_cases(quick)
        assert {c.op for c in cases} == {"transformer_block_prefill", "transformer_block_decode"}
        assert any(c.label.startswith("B1 S2048 D1024 H16 bfloat16") for c in cases)
        for c in cases:
            assert c.reference is not None and {"triton", "eager", "compiled"} <= set(c.candidates)
            assert c.goals and (c.flops or c.nbytes)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_full_size_prefill_and_decode_on_a_gpu(dtype):
    B, S, D, H = 1, 2048, 1024, 16
    x = torch.randn(B, S, D, device=DEV).to(dtype)
    p = T.make_params(D, H, dtype)
    _assert(T.transformer_block(x, p), reference.transformer_block(x, p), BLOCK_TOLERANCES, "prefill")
    caches = [torch.randn(B, H, S + 1, D // H, device=DEV).to(dtype) for _ in range(2)]
    x_t = torch.randn(B, 1, D, device=DEV).to(dtype)
    ref = T.decode_reference(x_t, p, *caches, S)
    _assert(T.decode_step(x_t, p, *caches, S), ref, BLOCK_TOLERANCES, "decode")
    replay = T.cuda_graphed(lambda *a: T.decode_step(*a, S))
    for _ in range(2):  # the capture, then a replay
        _assert(replay(x_t, p, *caches), ref, BLOCK_TOLERANCES, "decode, CUDA graph")
