"""The decode step of notebook 09 rebuilt from the serving kernels, each step captured as a CUDA graph, against
eager PyTorch's step captured the same way.

One step for B sequences, one new token each, through one pre-LayerNorm block with grouped-query attention
and the LM head: LayerNorm, the QKV projection, RoPE with the KV-cache write, attention over the cache,
the output projection and the residual, LayerNorm, the MLP (GELU in the up-projection's epilogue) and
the residual, the LM head, then temperature + top-p sampling. The serving version runs the course's
kernels (``kernels_ref``: layer_norm, linear with fused epilogues, rope_kv_append, paged_decode_attention
over the cache seen as pages, sample_top_p); eager runs F.layer_norm, F.linear, the eager RoPE and cache
write, SDPA on the cache with a length mask and the sort path of sampling. Graphed, neither pays for its
launches: what is left is the kernels' time. Each step returns its logits (checked against the float64
step) and writes its tokens into a buffer.
"""
from __future__ import annotations

import math

import course  # noqa: F401  (TRITON_INTERPRET before the kernels below are defined)
import torch
import torch.nn.functional as F

from kernels_ref.paged_attention import paged_decode_attention
from kernels_ref.rope_cache import rope_kv_append, rope_kv_append_torch, rope_tables
from kernels_ref.sampling import sample_top_p, sample_top_p_torch
from measure import reference

WEIGHTS = ("ln1_weight", "ln1_bias", "w_qkv", "w_out", "ln2_weight", "ln2_bias", "w_fc", "w_proj", "w_head")


def make_step_inputs(B, D, H, H_kv, V, L, dtype, device, seed: int = 0) -> tuple:
    """(x, k_cache, v_cache, weights, state): a batch at position L // 2 of caches [B, L, H_kv, D / H]."""
    g = torch.Generator().manual_seed(seed)
    d = D // H

    def rand(*shape, scale=1.0):
        return (scale * torch.randn(*shape, generator=g)).to(device=device, dtype=dtype)

    w = {"ln1_weight": 1 + rand(D, scale=0.1), "ln1_bias": rand(D, scale=0.1),
         "w_qkv": rand((H + 2 * H_kv) * d, D, scale=D ** -0.5), "w_out": rand(D, D, scale=D ** -0.5),
         "ln2_weight": 1 + rand(D, scale=0.1), "ln2_bias": rand(D, scale=0.1),
         "w_fc": rand(4 * D, D, scale=D ** -0.5), "w_proj": rand(D, 4 * D, scale=(4 * D) ** -0.5),
         "w_head": rand(V, D, scale=D ** -0.5), "n_heads": H, "n_kv_heads": H_kv}
    w["cos"], w["sin"] = rope_tables(L, d, device=device)
    positions = torch.full((B,), L // 2, dtype=torch.int64, device=device)
    state = {"positions": positions, "seq_lens": (positions + 1).to(torch.int32),
             "block_table": torch.arange(B, dtype=torch.int32, device=device)[:, None],  # a page of L per sequence
             "temperature": torch.full((B,), 0.8, device=device), "top_p": torch.full((B,), 0.9, device=device),
             "uniform": torch.rand(B, generator=g).to(device), "tokens": torch.empty(B, dtype=torch.int64, device=device)}
    return rand(B, D), rand(B, L, H_kv, d), rand(B, L, H_kv, d), w, state


def _split_qkv(qkv, w):
    H, H_kv = w["n_heads"], w["n_kv_heads"]
    qkv = qkv.view(qkv.shape[0], H + 2 * H_kv, -1)
    return qkv[:, :H], qkv[:, H:H + H_kv], qkv[:, H + H_kv:]


def serving_step(x, k_cache, v_cache, w, st):
    """The step from the course's kernels: 9 launches, no torch compute."""
    from kernels_ref.layer_norm import layer_norm
    from kernels_ref.matmul import linear

    B, D = x.shape
    q, k, v = _split_qkv(linear(layer_norm(x, w["ln1_weight"], w["ln1_bias"]), w["w_qkv"]), w)
    q = rope_kv_append(q, k, v, w["cos"], w["sin"], k_cache, v_cache, st["positions"])
    o = paged_decode_attention(q, k_cache, v_cache, st["block_table"], st["seq_lens"], 1 / math.sqrt(q.shape[-1]))
    h = linear(o.reshape(B, D), w["w_out"], residual=x)
    f = linear(layer_norm(h, w["ln2_weight"], w["ln2_bias"]), w["w_fc"], gelu=True)
    logits = linear(linear(f, w["w_proj"], residual=h), w["w_head"])
    st["tokens"].copy_(sample_top_p(logits, st["temperature"], st["top_p"], st["uniform"]))
    return logits


def eager_step(x, k_cache, v_cache, w, st):
    """The same step in eager PyTorch (SDPA on the cache with a length mask, the sort path of sampling)."""
    B, D = x.shape
    q, k, v = _split_qkv(F.linear(F.layer_norm(x, (D,), w["ln1_weight"], w["ln1_bias"]), w["w_qkv"]), w)
    q = rope_kv_append_torch(q, k, v, w["cos"], w["sin"], k_cache, v_cache, st["positions"])
    keys = torch.arange(k_cache.shape[1], device=x.device)[None, None, None, :] < st["seq_lens"][:, None, None, None]
    o = F.scaled_dot_product_attention(q[:, :, None], k_cache.transpose(1, 2), v_cache.transpose(1, 2),
                                       attn_mask=keys, enable_gqa=True)[:, :, 0]
    h = x + F.linear(o.reshape(B, D), w["w_out"])
    f = F.gelu(F.linear(F.layer_norm(h, (D,), w["ln2_weight"], w["ln2_bias"]), w["w_fc"]), approximate="tanh")
    logits = F.linear(h + F.linear(f, w["w_proj"]), w["w_head"])
    st["tokens"].copy_(sample_top_p_torch(logits, st["temperature"], st["top_p"], st["uniform"]))
    return logits


def reference_step(x, k_cache, v_cache, w, st):
    """The step's logits in float64 (the caches as given, the new token's k and v at its position)."""
    B, D = x.shape
    p = {n: reference.as64(w[n]) for n in WEIGHTS}
    x64 = reference.as64(x)
    q, k, v = _split_qkv(reference.layer_norm(x64, p["ln1_weight"], p["ln1_bias"], 1e-5) @ p["w_qkv"].T, w)
    q_rot, kc, vc = reference.rope_kv_append(q, k, v, w["cos"], w["sin"], k_cache, v_cache, st["positions"])
    o = reference.paged_decode_attention(q_rot, kc, vc, st["block_table"], st["seq_lens"])
    h = x64 + o.reshape(B, D) @ p["w_out"].T
    f = reference.gelu_tanh(reference.layer_norm(h, p["ln2_weight"], p["ln2_bias"], 1e-5) @ p["w_fc"].T)
    return (h + f @ p["w_proj"].T) @ p["w_head"].T


class Graphed:
    """``fn`` captured as a CUDA graph at its first call on a set of arguments, then replayed (returning the
    captured output tensor, which each replay rewrites); without a GPU, ``fn`` called as it is."""

    def __init__(self, fn):
        self.fn, self.key, self.graph, self.out = fn, None, None, None

    def __call__(self, *args):
        if not torch.cuda.is_available():
            return self.fn(*args)
        key = tuple(id(a) for a in args)
        if key != self.key:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # warm-up outside the graph: autotuning, compiling, allocating
                for _ in range(2):
                    self.fn(*args)
            torch.cuda.current_stream().wait_stream(side)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.out = self.fn(*args)
            self.key = key
        self.graph.replay()
        return self.out


# The logits pass through a chain of bf16 roundings (x, h, the MLP's hidden layer) as in 09's block: 2 ulps
# of |h| absolute (nb09_capstone.BLOCK_TOLERANCES), both steps held to it.
STEP_TOLERANCES = {torch.bfloat16: (2 * 2.0**-5, 1.6e-2), torch.float32: (2e-2, 1e-2)}


def step_case(B=32, D=2048, H=16, H_kv=4, V=128256, L=2048, dtype=torch.bfloat16):
    from course import DEVICE
    from kernels_ref.benchmarking import BenchCase, Goal

    return BenchCase(
        op="decode_step", label=f"B{B} D{D} H{H}/{H_kv} V{V} cache {L} {str(dtype)[6:]}",
        make_inputs=lambda: make_step_inputs(B, D, H, H_kv, V, L, dtype, DEVICE),
        candidates={"eager": eager_step, "eager_graph": Graphed(eager_step), "serving": serving_step,
                    "serving_graph": Graphed(serving_step)},
        reference=reference_step, tolerances=STEP_TOLERANCES, sweep="B", sweep_value=B,
        # the serving kernels move fewer bytes (no sort, no eager intermediates): graphed, at least even
        goals=[Goal.faster("serving_graph", "eager_graph", 1.0)])


def bench_cases(quick: bool = False):
    """A decode step of a 2048-wide model with Llama 3's vocabulary, at 32 sequences (and 8 in the full suite)."""
    return [step_case()] if quick else [step_case(8), step_case(32)]
