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


# ------------------------------------------------------------------------------------------- serving (10)

def top_p_nucleus(logits, temperature, top_p) -> torch.Tensor:
    """The nucleus of each row as a bool mask ``[B, V]``, in float64: with ``p = softmax(logits / T)``, token i
    is kept when the probability of the tokens whose logit is strictly larger than its own is below ``top_p``
    (the smallest set of most probable tokens reaching ``top_p``, every token tied with its last member kept
    too); ``top_p >= 1`` keeps every token of non-zero probability. Ties are ties of the logits themselves."""
    x = as64(logits)
    p = torch.softmax(x / as64(temperature)[:, None], dim=-1)
    keep = torch.empty(x.shape, dtype=torch.bool, device=x.device)
    for b in range(x.shape[0]):
        levels, inverse = torch.unique(x[b], sorted=True, return_inverse=True)       # ascending
        mass = torch.zeros(levels.numel(), dtype=torch.float64, device=x.device).index_add_(0, inverse, p[b])
        above = mass.flip(0).cumsum(0).flip(0) - mass                                  # strictly larger logits
        kept_level = above < float(top_p[b]) if float(top_p[b]) < 1.0 else mass > 0
        keep[b] = kept_level[inverse] & (p[b] > 0)
    return keep


def sample_top_p(logits, temperature, top_p, uniform) -> torch.Tensor:
    """Temperature + top-p sampling with the random numbers given: ``[B]`` int64 tokens. In each row, the
    token is the first (in vocabulary order) whose running sum of kept probability exceeds ``uniform *`` the
    nucleus' mass (inverse-CDF sampling over the nucleus, in index order)."""
    p = torch.softmax(as64(logits) / as64(temperature)[:, None], dim=-1)
    cdf = (p * top_p_nucleus(logits, temperature, top_p)).cumsum(-1)
    target = as64(uniform)[:, None] * cdf[:, -1:]
    token = torch.searchsorted(cdf, target, right=True)[:, 0]
    return torch.minimum(token, (cdf < cdf[:, -1:]).sum(-1)).to(torch.int64)  # u -> 1: the last kept token


def rotate_half(x, cos, sin) -> torch.Tensor:
    """Rotary embedding, rotate-half form (GPT-NeoX, Llama): the first and second halves of the last
    dimension are the pairs, ``(x1 cos - x2 sin, x2 cos + x1 sin)``; ``cos``, ``sin`` broadcast over heads."""
    x = as64(x)
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    c, s = as64(cos), as64(sin)
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)


def rope_kv_append(q, k, v, cos, sin, k_cache, v_cache, positions):
    """``(q_rot, k_cache', v_cache')`` in float64: q and k rotated at each sequence's position, the rotated k
    and v written into row ``positions[b]`` of sequence b's caches ``[B, L, H_kv, D]``, all else unchanged."""
    pos = positions.long()
    c, s = as64(cos)[pos][:, None, :], as64(sin)[pos][:, None, :]                   # [B, 1, D/2]
    kc, vc = as64(k_cache).clone(), as64(v_cache).clone()
    rows = torch.arange(q.shape[0], device=q.device)
    kc[rows, pos] = rotate_half(k, c, s)
    vc[rows, pos] = as64(v)
    return rotate_half(q, c, s), kc, vc


def paged_decode_attention(q, k_pages, v_pages, block_table, seq_lens, sm_scale=None) -> torch.Tensor:
    """One query per sequence against its paged cache, in float64: ``q`` ``[B, H, D]``; key j of sequence b
    is ``k_pages[block_table[b, j // P], j % P]`` (``[num_pages, P, H_kv, D]``), j < seq_lens[b]; query head
    h reads kv head ``h // (H / H_kv)``. Returns ``[B, H, D]``."""
    B, H, D = q.shape
    P, H_kv = k_pages.shape[1], k_pages.shape[2]
    scale = attention_scale(sm_scale, D)
    out = torch.empty(B, H, D, dtype=torch.float64, device=q.device)
    for b in range(B):
        n = int(seq_lens[b])
        j = torch.arange(n, device=q.device)
        pages = block_table[b].long()[j // P]
        k, v = as64(k_pages[pages, j % P]), as64(v_pages[pages, j % P])               # [n, H_kv, D]
        qg = as64(q[b]).view(H_kv, H // H_kv, D)                                     # heads by kv head
        s = torch.einsum("kgd,nkd->kgn", qg, k) * scale
        out[b] = torch.einsum("kgn,nkd->kgd", torch.softmax(s, dim=-1), v).reshape(H, D)
    return out


SAMPLING_MARGIN = 1e-4


def decisive_top_p_uniform(logits, temperature, top_p, uniform, margin: float = SAMPLING_MARGIN):
    """``(top_p, uniform)`` moved, row by row, to where float32 rounding cannot change ``sample_top_p``'s
    answer: top_p to the middle of the cumulative-mass interval of a level of tied logits at least
    ``2 * margin`` wide (the one nearest the requested top_p; the top level if none is that wide), uniform
    to the middle of the sampled token's interval of nucleus mass (the kept token nearest in index with
    probability at least ``2 * margin``; the most probable kept token if none). Every decision then has a
    margin of ``margin`` of probability mass, far beyond a float32 kernel's error (~1e-6 at V = 128k).
    ``top_p >= 1`` stays. Vectorized (sorts on the inputs' device): cheap enough for every timed call."""
    x = as64(logits)
    p = torch.softmax(x / as64(temperature)[:, None], dim=-1)
    xs, order = torch.sort(x, dim=-1, descending=True, stable=True)
    ps = p.gather(1, order)
    V = x.shape[1]
    pos = torch.arange(V, device=x.device).expand_as(xs)
    start = torch.ones_like(xs, dtype=torch.bool)
    start[:, 1:] = xs[:, 1:] != xs[:, :-1]
    first = torch.where(start, pos, 0).cummax(-1).values                      # each token's level start
    last = torch.ones_like(start)
    last[:, :-1] = start[:, 1:]
    end = torch.where(last, pos, V - 1).flip(-1).cummin(-1).values.flip(-1)   # each token's level end
    cum = ps.cumsum(-1)
    above = (cum - ps).gather(1, first)                                        # mass of larger logits
    width = cum.gather(1, end) - above                                         # the level's mass
    want = as64(top_p)[:, None]
    dist = torch.where(want < above, above - want, torch.where(want >= above + width, want - above - width, 0.0))
    dist = torch.where(start & (width >= 2 * margin), dist, torch.inf)
    level = torch.where(torch.isinf(dist.min(-1).values), 0, dist.argmin(-1))[:, None]
    new_p = torch.where(want >= 1.0, want, (above + width / 2).gather(1, level))
    kept_sorted = (above < new_p) | (want >= 1.0)
    kept = torch.zeros_like(kept_sorted).scatter(1, order, kept_sorted) & (p > 0)
    mass = p * kept
    cdf = mass.cumsum(-1)
    z = cdf[:, -1:]
    t = torch.searchsorted(cdf, as64(uniform)[:, None].clamp(0, 1) * z, right=True).clamp_max(V - 1)
    idx = torch.arange(V, device=x.device)[None, :]
    good = kept & (p >= 2 * margin)
    near = torch.where(good, (idx - t).abs().to(torch.float64), torch.inf)
    choice = torch.where(torch.isinf(near.min(-1).values), mass.argmax(-1), near.argmin(-1))[:, None]
    new_u = ((cdf.gather(1, choice) - mass.gather(1, choice) / 2) / z)[:, 0]
    return new_p[:, 0].to(top_p.dtype), new_u.to(uniform.dtype)
