"""A pre-LayerNorm GPT-2 transformer block from the course's reference kernels: prefill and decode.

``transformer_block(x, params)`` (x ``[B, S, D]``, causal; ``params`` as in ``measure.reference``:
``n_heads`` and ``ln1_weight, ln1_bias, w_qkv [3D, D], b_qkv, w_out [D, D], b_out, ln2_weight, ln2_bias,
w_fc [4D, D], b_fc, w_proj [D, 4D], b_proj``):

    h = x + w_out(attn(ln1(x))),    y = h + w_proj(gelu_tanh(w_fc(ln2(h))))

Seven launches, every elementwise step fused into a neighbour:
1. ``layer_norm_fwd`` (kernels_ref.layer_norm)            ln1(x)
2. ``linear`` (kernels_ref.matmul), bias epilogue          qkv = ln1(x) @ w_qkv.T + b_qkv        [B*S, 3D]
3. ``flash_attention_fwd`` (kernels_ref.flash_attention)  reads q, k, v as strided views of qkv (no
   split, no transpose copy) and writes o as ``[B, S, H, D/H]``, i.e. the ``[B*S, D]`` rows the next
   projection reads (no transpose copy either)
4. ``linear``, bias + residual epilogue                    h = x + o @ w_out.T + b_out
5. ``layer_norm_fwd``                                      ln2(h)
6. ``linear``, bias + GELU epilogue                        f = gelu(ln2(h) @ w_fc.T + b_fc)      [B*S, 4D]
7. ``linear``, bias + residual epilogue                    y = h + f @ w_proj.T + b_proj
Eager PyTorch runs the same four cuBLAS projections and FlashAttention, plus a GELU, two residual adds and a
transpose copy as separate kernels: at B1 S2048 D1024 (bf16) those move ~50 MB that the fused block never
writes or reads again. FLOPs at that shape: 2*S*12*D^2 = 52 GFLOP of projections + 2*S^2*D = 8.6 GFLOP of
causal attention; bytes at least 12*D^2*2 (weights) + 2*S*D*2 (x, y) = 33 MB: compute-bound.

Decode (``decode_step``): one new token per sequence, x ``[B, 1, D]`` at position ``pos``, with a KV cache
``[B, H, L, D/H]`` per k and v that holds positions ``< pos``. Every projection is then a matrix-vector
product: the ~25 MB of weights (D = 1024, bf16) are read for 2*B*12*D^2 FLOPs, ~1 FLOP per byte at B = 1,
far left of the ridge point: memory-bound, ~8 us of HBM traffic on an H100, while launching ~10 kernels
from Python costs more than that. ``decode_attention`` is flash-decoding: the cache is split along the
sequence so that B*H*splits programs stream it in parallel (B*H alone would leave most SMs idle), each
keeps a running max and sum, and a second kernel merges the splits.
"""
from __future__ import annotations

import math

import course  # noqa: F401  (first: sets TRITON_INTERPRET=1 without a GPU)
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from kernels_ref._launch import cdiv, next_power_of_2
from kernels_ref._triton_math import LOG2E
from kernels_ref._validate import check_tensor, cuda_sm_count, rows_contiguous
from kernels_ref.flash_attention import flash_attention_fwd
from kernels_ref.layer_norm import layer_norm_fwd
from kernels_ref.matmul import linear
from measure import reference

EPS = 1e-5
PARAMS = reference.BLOCK_PARAMS


def _check(x, params, ndim_x=3):
    check_tensor("x", x, ndim=ndim_x)
    missing = [n for n in ("n_heads", *PARAMS) if n not in params]
    if missing:
        raise ValueError(f"params lacks {', '.join(missing)}")
    D, H = x.shape[-1], int(params["n_heads"])
    if H < 1 or D % H:
        raise ValueError(f"n_heads = {H} does not divide D = {D}")
    return D, H, D // H


# ------------------------------------------------------------------------------------------- prefill

def transformer_block(x, params, eps: float = EPS):
    """The block on a whole prompt x ``[B, S, D]`` in seven launches (module docstring)."""
    D, H, d = _check(x, params)
    B, S, _ = x.shape
    x2 = rows_contiguous(x.reshape(B * S, D))
    qkv = linear(layer_norm_fwd(x2, params["ln1_weight"], params["ln1_bias"], eps)[0], params["w_qkv"],
                 params["b_qkv"])
    q, k, v = qkv.view(B, S, 3, H, d).permute(2, 0, 3, 1, 4)   # [B, H, S, d] views: strides, no copies
    o = torch.empty((B, S, H, d), dtype=x.dtype, device=x.device)
    flash_attention_fwd(q, k, v, causal=True, out=o.transpose(1, 2))
    h = linear(o.view(B * S, D), params["w_out"], params["b_out"], residual=x2)
    f = linear(layer_norm_fwd(h, params["ln2_weight"], params["ln2_bias"], eps)[0], params["w_fc"],
               params["b_fc"], gelu=True)
    return linear(f, params["w_proj"], params["b_proj"], residual=h).view(B, S, D)


def transformer_block_torch(x, params, eps: float = EPS):
    """The block as a PyTorch user writes it: F.layer_norm, F.linear (cuBLAS), SDPA, F.gelu, +."""
    B, S, D = x.shape
    H = int(params["n_heads"])
    a = F.layer_norm(x, (D,), params["ln1_weight"], params["ln1_bias"], eps)
    q, k, v = F.linear(a, params["w_qkv"], params["b_qkv"]).view(B, S, 3, H, D // H).permute(2, 0, 3, 1, 4)
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    h = x + F.linear(o.transpose(1, 2).reshape(B, S, D), params["w_out"], params["b_out"])
    f = F.gelu(F.linear(F.layer_norm(h, (D,), params["ln2_weight"], params["ln2_bias"], eps), params["w_fc"],
                        params["b_fc"]), approximate="tanh")
    return h + F.linear(f, params["w_proj"], params["b_proj"])


# ------------------------------------------------------------------------------------------- decode

@triton.jit
def _decode_split_kernel(Q, K, V, M_part, L_part, O_part, n_keys, keys_per_split, n_splits, H, qk_scale,
                         stride_qb, stride_qh, stride_kb, stride_kh, stride_ks, stride_vb, stride_vh, stride_vs,
                         HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr):
    """One query against keys [split*keys_per_split, ...) of one (b, h): the split's running max m, sum l
    (base 2) and unnormalized output, for the merge. Reads 2*keys*HEAD_DIM*itemsize: memory-bound."""
    bh, split = tl.program_id(0), tl.program_id(1)
    b, h = bh // H, bh % H
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + b * stride_qb + h * stride_qh + offs_d).to(tl.float32) * qk_scale
    k_base, v_base = K + b * stride_kb + h * stride_kh, V + b * stride_vb + h * stride_vh
    start = split * keys_per_split
    end = tl.minimum(start + keys_per_split, n_keys)
    m = tl.full((), float("-inf"), tl.float32)
    l = tl.zeros((), tl.float32)
    acc = tl.zeros((HEAD_DIM,), tl.float32)
    for n0 in range(start, end, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N)
        keep = offs_n < end
        k = tl.load(k_base + offs_n[:, None] * stride_ks + offs_d[None, :], mask=keep[:, None], other=0.0)
        s = tl.where(keep, tl.sum(k.to(tl.float32) * q[None, :], axis=1), float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=0))  # finite: every block of a split holds a key
        p = tl.exp2(s - m_new)
        alpha = tl.exp2(m - m_new)
        v = tl.load(v_base + offs_n[:, None] * stride_vs + offs_d[None, :], mask=keep[:, None], other=0.0)
        l = l * alpha + tl.sum(p, axis=0)
        acc = acc * alpha + tl.sum(p[:, None] * v.to(tl.float32), axis=0)
        m = m_new
    part = bh * n_splits + split
    tl.store(M_part + part, m)
    tl.store(L_part + part, l)
    tl.store(O_part + part * HEAD_DIM + offs_d, acc)


@triton.jit
def _decode_merge_kernel(M_part, L_part, O_part, O, n_splits, H, stride_ob, stride_oh,
                         HEAD_DIM: tl.constexpr, SPLITS: tl.constexpr):
    """o = sum_s 2^(m_s - m) acc_s / sum_s 2^(m_s - m) l_s over the splits of one (b, h); an empty split
    (m_s = -inf) weighs 0, and split 0 always holds a key, so m is finite."""
    bh = tl.program_id(0)
    offs_s = tl.arange(0, SPLITS)
    offs_d = tl.arange(0, HEAD_DIM)
    valid = offs_s < n_splits
    m = tl.load(M_part + bh * n_splits + offs_s, mask=valid, other=float("-inf"))
    l = tl.load(L_part + bh * n_splits + offs_s, mask=valid, other=0.0)
    acc = tl.load(O_part + (bh * n_splits + offs_s)[:, None] * HEAD_DIM + offs_d[None, :], mask=valid[:, None],
                  other=0.0)
    w = tl.exp2(m - tl.max(m, axis=0))
    o = tl.sum(w[:, None] * acc, axis=0) / tl.sum(w * l, axis=0)
    tl.store(O + (bh // H) * stride_ob + (bh % H) * stride_oh + offs_d, o.to(O.dtype.element_ty))


def _splits(n_keys: int, programs: int, device, block_n: int, per_sm: int = 2) -> tuple[int, int]:
    """(splits, keys per split): about ``per_sm`` programs per SM in all, each split a whole number of blocks."""
    want = max(1, min(cdiv(per_sm * cuda_sm_count(device), programs), cdiv(n_keys, block_n)))
    per = cdiv(cdiv(n_keys, want), block_n) * block_n
    return cdiv(n_keys, per), per


# The split kernel's launch: keys per step, programs per SM in all (the splits), warps, pipeline stages.
# The best all-round of 36 on an H100 (probes/probe_attention.py --decode, results/h100-2026-11-26/
# probe-attention-decode-18h11.log): 1.65x, 1.23x and 1.12x cuDNN's SDPA at B1 H16 and B8 H16 (cache 2049,
# head 64) and B8 H32 (4097, 128), where 64 keys a step, 2 programs an SM, 4 warps and 3 stages ran 1.60x,
# 0.93x and 0.94x: more programs in flight per SM hide the cache's latency.
DECODE_CONFIG = {"BLOCK_N": 128, "per_sm": 8, "num_warps": 2, "num_stages": 4}


def decode_attention(q, k_cache, v_cache, n_keys: int, sm_scale: float | None = None, *, config: dict | None = None):
    """o ``[B, H, d]`` of one query per (b, h), ``q`` ``[B, H, d]``, against the first ``n_keys`` positions
    of the caches ``[B, H, L, d]`` (any strides but a contiguous last dim). Two launches. ``config``
    replaces entries of DECODE_CONFIG (probes/probe_attention.py --decode times them)."""
    B, H, d = q.shape
    if not 1 <= n_keys <= k_cache.shape[2]:
        raise ValueError(f"n_keys = {n_keys} must be in 1..{k_cache.shape[2]} (the cache length)")
    if d < 16 or d & (d - 1):
        raise ValueError(f"head_dim must be a power of two >= 16, got {d}")
    cfg = {**DECODE_CONFIG, **(config or {})}
    block_n = 16 if course.INTERPRET else cfg["BLOCK_N"]
    n_splits, per = _splits(n_keys, B * H, q.device, block_n, cfg["per_sm"])
    m_part = torch.empty((B * H, n_splits), dtype=torch.float32, device=q.device)
    l_part = torch.empty_like(m_part)
    o_part = torch.empty((B * H, n_splits, d), dtype=torch.float32, device=q.device)
    o = torch.empty((B, H, d), dtype=q.dtype, device=q.device)
    qk_scale = reference.attention_scale(sm_scale, d) * LOG2E
    _decode_split_kernel[(B * H, n_splits)](q, k_cache, v_cache, m_part, l_part, o_part, n_keys, per, n_splits, H,
                                            qk_scale, q.stride(0), q.stride(1), k_cache.stride(0),
                                            k_cache.stride(1), k_cache.stride(2), v_cache.stride(0),
                                            v_cache.stride(1), v_cache.stride(2), HEAD_DIM=d, BLOCK_N=block_n,
                                            num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    _decode_merge_kernel[(B * H,)](m_part, l_part, o_part, o, n_splits, H, o.stride(0), o.stride(1), HEAD_DIM=d,
                                   SPLITS=next_power_of_2(n_splits))
    return o


def decode_step(x, params, k_cache, v_cache, pos: int, eps: float = EPS):
    """One token per sequence, x ``[B, 1, D]`` at position ``pos``: its k and v go into the caches
    ``[B, H, L, D/H]`` at ``pos``, its query attends to positions ``0..pos``. Returns y ``[B, 1, D]``."""
    D, H, d = _check(x, params)
    B = x.shape[0]
    x2 = rows_contiguous(x.reshape(B, D))
    qkv = linear(layer_norm_fwd(x2, params["ln1_weight"], params["ln1_bias"], eps)[0], params["w_qkv"],
                 params["b_qkv"]).view(B, 3, H, d)
    k_cache[:, :, pos].copy_(qkv[:, 1])
    v_cache[:, :, pos].copy_(qkv[:, 2])
    o = decode_attention(qkv[:, 0], k_cache, v_cache, pos + 1)           # [B, H, d]: the [B, D] rows
    h = linear(o.view(B, D), params["w_out"], params["b_out"], residual=x2)
    f = linear(layer_norm_fwd(h, params["ln2_weight"], params["ln2_bias"], eps)[0], params["w_fc"],
               params["b_fc"], gelu=True)
    return linear(f, params["w_proj"], params["b_proj"], residual=h).view(B, 1, D)


def decode_step_torch(x, params, k_cache, v_cache, pos: int, eps: float = EPS):
    """The eager decode step: F.layer_norm, F.linear, the cache written in place, SDPA over 0..pos."""
    B, _, D = x.shape
    H = int(params["n_heads"])
    a = F.layer_norm(x, (D,), params["ln1_weight"], params["ln1_bias"], eps)
    q, k, v = F.linear(a, params["w_qkv"], params["b_qkv"]).view(B, 1, 3, H, D // H).permute(2, 0, 3, 1, 4)
    k_cache[:, :, pos:pos + 1].copy_(k)
    v_cache[:, :, pos:pos + 1].copy_(v)
    o = F.scaled_dot_product_attention(q, k_cache[:, :, :pos + 1], v_cache[:, :, :pos + 1])
    h = x + F.linear(o.transpose(1, 2).reshape(B, 1, D), params["w_out"], params["b_out"])
    f = F.gelu(F.linear(F.layer_norm(h, (D,), params["ln2_weight"], params["ln2_bias"], eps), params["w_fc"],
                        params["b_fc"]), approximate="tanh")
    return h + F.linear(f, params["w_proj"], params["b_proj"])


def decode_step_naive(x, params, k_cache, v_cache, pos: int, eps: float = EPS):
    """01's naive block on one token with the cache as its past: LayerNorm, attention scores and softmax,
    GELU's formula and the residual adds each a chain of eager operators."""
    B, _, D = x.shape
    H = int(params["n_heads"])

    def ln(t, w, b):
        mean = t.mean(-1, keepdim=True)
        return (t - mean) / torch.sqrt(((t - mean) ** 2).mean(-1, keepdim=True) + eps) * w + b

    q, k, v = (ln(x, params["ln1_weight"], params["ln1_bias"]) @ params["w_qkv"].T + params["b_qkv"]) \
        .view(B, 1, 3, H, D // H).permute(2, 0, 3, 1, 4)
    k_cache[:, :, pos:pos + 1].copy_(k)
    v_cache[:, :, pos:pos + 1].copy_(v)
    s = q @ k_cache[:, :, :pos + 1].transpose(-1, -2) / math.sqrt(D // H)
    e = torch.exp(s - s.amax(-1, keepdim=True))
    o = (e / e.sum(-1, keepdim=True)) @ v_cache[:, :, :pos + 1]
    h = x + o.transpose(1, 2).reshape(B, 1, D) @ params["w_out"].T + params["b_out"]
    f = ln(h, params["ln2_weight"], params["ln2_bias"]) @ params["w_fc"].T + params["b_fc"]
    f = 0.5 * f * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (f + 0.044715 * f ** 3)))
    return h + f @ params["w_proj"].T + params["b_proj"]


def decode_reference(x, params, k_cache, v_cache, pos: int, eps: float = EPS):
    """float64 y of a decode step: the block on x with the cache's positions ``< pos`` as its past."""
    return reference.transformer_block(x, params, eps, past=(k_cache[:, :, :pos], v_cache[:, :, :pos]))


# ------------------------------------------------------------------------------------------- benchmarks

def make_params(D: int, H: int, dtype=torch.bfloat16, device=None) -> dict:
    """Block weights with O(1) activations: weights ~ N(0, 1/fan_in), LayerNorm weights ~ 1, biases ~ 0.1."""
    device = device or course.DEVICE

    def t(*shape, scale):
        return (torch.randn(*shape, device=device) * scale).to(dtype)

    return {"n_heads": H, "ln1_weight": 1 + t(D, scale=0.1), "ln1_bias": t(D, scale=0.1),
            "w_qkv": t(3 * D, D, scale=D ** -0.5), "b_qkv": t(3 * D, scale=0.1),
            "w_out": t(D, D, scale=D ** -0.5), "b_out": t(D, scale=0.1),
            "ln2_weight": 1 + t(D, scale=0.1), "ln2_bias": t(D, scale=0.1),
            "w_fc": t(4 * D, D, scale=D ** -0.5), "b_fc": t(4 * D, scale=0.1),
            "w_proj": t(D, 4 * D, scale=(4 * D) ** -0.5), "b_proj": t(D, scale=0.1)}


def cuda_graphed(fn):
    """``fn`` replayed as one CUDA graph: on the first call with a set of arguments it runs twice on a side
    stream (autotuning, compiling and allocator warm-up stay out of the graph), is captured, and from then
    on every call is one ``graph.replay()``: one launch from Python instead of one per kernel."""
    state = {}

    def run(*args):
        key = tuple(id(a) for a in args)
        if state.get("key") != key:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(2):
                    fn(*args)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                out = fn(*args)
            state.update(key=key, graph=graph, out=out)
        state["graph"].replay()
        return state["out"]

    return run


# A block is 5 chained roundings deep (notebook 09): 16-bit outputs are held to 2 ulps of |h| ~ 4-8, as the
# grader holds the learner's block (autograder/specs/nb09_capstone.py, BLOCK_TOLERANCES).
BENCH_TOLERANCES = {torch.bfloat16: (2 * 2.0**-5, 1.6e-2), torch.float16: (2 * 2.0**-8, 4e-3)}


def _block_flops(B, S, D, past=0) -> int:
    """Projections 2*B*S*12*D^2; attention 4*B*S*(keys per query)*D, causal: on average past + S/2 keys."""
    return 2 * B * S * 12 * D * D + 4 * B * S * D * (past + S // 2 if S > 1 else past + 1)


def prefill_case(B, S, D, H, dtype=torch.bfloat16, graphs=True):
    from kernels_ref.benchmarking import BenchCase, Goal

    def make():
        return torch.randn(B, S, D, device=course.DEVICE, dtype=dtype), make_params(D, H, dtype)

    candidates = {"triton": transformer_block, "eager": transformer_block_torch,
                  "compiled": torch.compile(transformer_block_torch)}
    if graphs and course.ON_GPU:
        candidates.update(triton_graph=cuda_graphed(transformer_block), eager_graph=cuda_graphed(transformer_block_torch))
    return BenchCase(
        op="transformer_block_prefill", label=f"B{B} S{S} D{D} H{H} {str(dtype).replace('torch.', '')}",
        make_inputs=make, candidates=candidates, reference=lambda x, p: reference.transformer_block(x, p, EPS),
        flops=_block_flops(B, S, D), tolerances=BENCH_TOLERANCES,
        goals=[Goal.faster("triton", "eager"), Goal.faster("triton", "compiled")],
    )


def decode_case(B, context, D, H, dtype=torch.bfloat16):
    """One decode step at position ``context`` (the caches hold ``context`` earlier positions)."""
    from kernels_ref.benchmarking import BenchCase, Goal

    d, length = D // H, context + 1

    def make():
        caches = [torch.randn(B, H, length, d, device=course.DEVICE, dtype=dtype) for _ in range(2)]
        return torch.randn(B, 1, D, device=course.DEVICE, dtype=dtype), make_params(D, H, dtype), *caches

    def at_pos(fn):
        return lambda x, p, kc, vc: fn(x, p, kc, vc, context)

    candidates = {"triton": at_pos(decode_step), "eager": at_pos(decode_step_torch),
                  "compiled": torch.compile(at_pos(decode_step_torch))}
    if course.ON_GPU:
        candidates.update(triton_graph=cuda_graphed(at_pos(decode_step)),
                          eager_graph=cuda_graphed(at_pos(decode_step_torch)))
        goals = [Goal.faster("triton_graph", "eager_graph"), Goal.faster("triton_graph", "triton", 2.0)]
    else:
        goals = [Goal.faster("triton", "eager")]
    weights = 12 * D * D + 13 * D
    return BenchCase(
        op="transformer_block_decode", label=f"B{B} context{context} D{D} H{H} {str(dtype).replace('torch.', '')}",
        make_inputs=make, candidates=candidates, reference=at_pos(decode_reference),
        nbytes=(weights + 2 * B * context * D + 2 * B * D) * torch.empty((), dtype=dtype).element_size(),
        tolerances=BENCH_TOLERANCES, goals=goals,
    )


def bench_cases(quick: bool = False):
    """Prefill of 2048-token prompts through a 1024-wide block, B1 (the notebook's claim) and B4 (the shape the
    grader times: the evidence for its threshold), GPT-2 small's 768 x 12 heads in the full suite; one
    decode step after 2048 tokens (B1, and B8 in the full suite); bf16, each against eager PyTorch,
    torch.compile and, on a GPU, both as CUDA graphs."""
    cases = [prefill_case(1, 2048, 1024, 16), prefill_case(4, 2048, 1024, 16)]
    if not quick:
        cases.append(prefill_case(1, 1024, 768, 12))
    cases.append(decode_case(1, 2048, 1024, 16))
    if not quick:
        cases.append(decode_case(8, 2048, 1024, 16))
    return cases
