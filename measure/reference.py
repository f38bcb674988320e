"""float64 definitions of the course's operations: what every kernel, exercise and benchmark is checked
against. Written for clarity, not speed; inputs of any dtype and strides are upcast to float64 first.
"""
from __future__ import annotations

import math

import torch

LOG2E = 1.4426950408889634  # log2(e): exp(x) == exp2(x * LOG2E), the form GPU kernels compute
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def as64(t: torch.Tensor) -> torch.Tensor:
    return t.detach().to(dtype=torch.float64)


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """GELU, tanh approximation, written out (the course's one definition)."""
    return 0.5 * x * (1.0 + torch.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x ** 3)))


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Row softmax over the last dimension."""
    return torch.softmax(as64(x), dim=-1)


def layer_norm_stats(x: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean, rstd) of each row: the variance as mean((x - mean)^2), the biased estimator."""
    x = as64(x)
    mean = x.mean(-1)
    var = ((x - mean[..., None]) ** 2).mean(-1)
    return mean, 1.0 / torch.sqrt(var + eps)


def layer_norm(x, weight, bias, eps: float) -> torch.Tensor:
    mean, rstd = layer_norm_stats(x, eps)
    return (as64(x) - mean[..., None]) * rstd[..., None] * as64(weight) + as64(bias)


def mlp(x, w1, b1, w2, b2) -> torch.Tensor:
    """The transformer MLP: gelu_tanh(x @ w1.T + b1) @ w2.T + b2 (nn.Linear weight layout)."""
    return gelu_tanh(as64(x) @ as64(w1).T + as64(b1)) @ as64(w2).T + as64(b2)


def attention_scale(sm_scale: float | None, head_dim: int) -> float:
    return 1.0 / math.sqrt(head_dim) if sm_scale is None else float(sm_scale)


def _heads_per_chunk(s: int) -> int:
    return max(1, 2 ** 30 // (s * s * 8))  # float64 S x S scores of one chunk stay near 1 GiB


def attention(q, k, v, causal: bool, sm_scale: float | None = None, do=None, o=None):
    """Attention on ``[B, H, S, D]``: float64 ``(o, lse)`` (lse the natural-log log-sum-exp of each row of
    scaled scores), or ``(dq, dk, dv)`` in closed form when the output gradient ``do`` is given. Causal:
    query i attends to keys j <= i. A few heads at a time, so S = 16384 still fits.

    ``o`` (with ``do``): the forward output a backward is handed, rounded to its dtype; the backward's
    delta = rowsum(dO * o) is then taken from it, as a FlashAttention backward takes it, instead of from
    the exact output (the two differ by o's rounding, which large scores amplify)."""
    B, H, S, D = q.shape
    scale = attention_scale(sm_scale, D)
    given = (q, k, v) if do is None else (q, k, v, do) if o is None else (q, k, v, do, o)
    flat = [as64(t).reshape(B * H, S, D) for t in given]
    mask = torch.ones(S, S, dtype=torch.bool, device=q.device).triu(1) if causal else None
    outs = []
    per = _heads_per_chunk(S)
    for i in range(0, B * H, per):
        qc, kc, vc = (t[i:i + per] for t in flat[:3])
        s = qc @ kc.transpose(-1, -2) * scale
        if mask is not None:
            s = s.masked_fill(mask, float("-inf"))
        lse = torch.logsumexp(s, dim=-1)
        p = torch.exp(s - lse[..., None])
        if do is None:
            outs.append((p @ vc, lse))
            continue
        doc = flat[3][i:i + per]
        dv = p.transpose(-1, -2) @ doc
        dp = doc @ vc.transpose(-1, -2)
        delta = (dp * p).sum(-1, keepdim=True) if o is None else (doc * flat[4][i:i + per]).sum(-1, keepdim=True)
        ds = p * (dp - delta)
        outs.append((ds @ kc * scale, ds.transpose(-1, -2) @ qc * scale, dv))
    parts = list(zip(*outs))
    if do is None:
        return torch.cat(parts[0]).reshape(B, H, S, D), torch.cat(parts[1]).reshape(B, H, S)
    return tuple(torch.cat(p).reshape(B, H, S, D) for p in parts)


BLOCK_PARAMS = ("ln1_weight", "ln1_bias", "w_qkv", "b_qkv", "w_out", "b_out",
                "ln2_weight", "ln2_bias", "w_fc", "b_fc", "w_proj", "b_proj")


def transformer_block(x, params, eps: float = 1e-5, past=None) -> torch.Tensor:
    """A pre-LayerNorm GPT-2 block on ``x`` ``[B, S, D]``, causal: ``h = x + attn(ln1(x))``,
    ``y = h + w_proj(gelu_tanh(w_fc(ln2(h))))``. ``params`` holds ``n_heads`` and the tensors named in
    ``BLOCK_PARAMS`` (nn.Linear layout: ``w_qkv`` ``[3D, D]`` whose rows are q, then k, then v, each head's
    ``D / n_heads`` features side by side; ``w_out`` ``[D, D]``, ``w_fc`` ``[4D, D]``, ``w_proj`` ``[D, 4D]``).

    ``past``: the keys and values ``[B, H, P, D / H]`` of P earlier positions (a KV cache); x's tokens are
    then positions P .. P+S-1 and attend to those too (decoding one token: S = 1)."""
    B, S, D = x.shape
    H = int(params["n_heads"])
    p = {name: as64(params[name]) for name in BLOCK_PARAMS}
    x = as64(x)
    qkv = layer_norm(x, p["ln1_weight"], p["ln1_bias"], eps) @ p["w_qkv"].T + p["b_qkv"]
    q, k, v = qkv.view(B, S, 3, H, D // H).permute(2, 0, 3, 1, 4)       # each [B, H, S, D / H]
    if past is None:
        o, _ = attention(q, k, v, causal=True)
    else:
        k, v = torch.cat([as64(past[0]), k], dim=2), torch.cat([as64(past[1]), v], dim=2)
        n_past = k.shape[2] - S
        s = q @ k.transpose(-1, -2) * attention_scale(None, D // H)
        s = s.masked_fill(torch.ones(S, n_past + S, dtype=torch.bool, device=x.device).triu(n_past + 1),
                          float("-inf"))                                # token i sees positions <= n_past + i
        o = torch.softmax(s, dim=-1) @ v
    h = x + o.transpose(1, 2).reshape(B, S, D) @ p["w_out"].T + p["b_out"]
    return h + mlp(layer_norm(h, p["ln2_weight"], p["ln2_bias"], eps), p["w_fc"], p["b_fc"], p["w_proj"], p["b_proj"])
