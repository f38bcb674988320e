"""10_serving: the kernels of a serving stack's decode step. Three exercises, in the notebook's order.

sample_top_p
------------
``sample_top_p(logits, temperature, top_p, uniform) -> tokens`` (docs/CONTRACTS.md): logits ``[B, V]``
(float32/16, bfloat16, rows may be strided), per-row float32 ``temperature``, ``top_p`` and ``uniform``
``[B]``; tokens ``[B]`` int64, exactly ``measure.reference.sample_top_p``'s: the nucleus of
``softmax(logits / T)`` is the tokens whose strictly larger logits hold less than ``top_p`` of the
probability (ties kept together, ``top_p >= 1`` keeps all), and the token is the first in vocabulary order
where the nucleus' running mass passes ``uniform`` times its mass. Judged exactly (tokens are equal or
not). A float32 kernel cannot decide a token whose interval is thinner than its rounding, so the grader
draws ``top_p`` and ``uniform`` at least ``SAMPLING_MARGIN`` of probability mass away from every decision
(``measure.reference.decisive_top_p_uniform``): every correct float32 kernel returns the reference's token,
and no other answer is tolerated. One launch; no sort, cumsum, softmax or multinomial from torch.

rope_kv_append
--------------
``rope_kv_append(q, k, v, cos, sin, k_cache, v_cache, positions) -> q_rot``: q ``[B, H, D]``, k and v
``[B, H_kv, D]`` (any strides), cos and sin ``[max_position, D / 2]`` float32, caches ``[B, L, H_kv, D]``,
positions ``[B]`` int64. Rotate-half RoPE of q and k at each sequence's position; the rotated k and v are
written into row ``positions[b]`` of sequence b's caches, in place. Graded: q_rot *and both caches* (the
harness returns them with q_rot), whole: every other row of the caches holds values that must come back
unchanged. One launch, which writes the cache rows itself (torch's copy_ into a cache row is a violation).

paged_decode_attention
----------------------
``paged_decode_attention(q, k_pages, v_pages, block_table, seq_lens, sm_scale) -> o``: q ``[B, H, D]``, pages
``[num_pages, page_size, H_kv, D]``, block_table ``[B, max_pages]`` int32, seq_lens ``[B]`` int32 (>= 1);
key j of sequence b at ``k_pages[block_table[b, j // page_size], j % page_size]``; query head h reads
key/value head ``h // (H / H_kv)``. o ``[B, H, D]`` in q's dtype. At most two launches (the splits, then
their combination).
"""
from __future__ import annotations

import dataclasses
import math

import torch

from autograder.fresh import arg_seed, jittered
from autograder.specs._cases import HINT_STRIDE, dtype_name, family_of, row_strided
from autograder.specs.base import (TL_SOFTMAX, TOLERANCES, TRITON, TRITON_ALLOWED, Case, Exercise, Performance,
                                   float_dtypes, pick_shapes, rand, triton_rules)
from autograder.specs.nb06_matmul_fused_mlp import TF32_TOLERANCES
from measure import reference

NOTEBOOK = "10_serving"

# ------------------------------------------------------------------------------------------- sample_top_p

TOKEN_TOLERANCES = {torch.int64: (0.0, 0.0)}  # a token is right or wrong

HINT_SAMPLE = ("the token is the first index (in vocabulary order, not sorted order) where the running sum of "
               "the kept probabilities exceeds uniform * (their total)")
HINT_TIES = ("ties: a token is kept when the tokens with a strictly larger logit hold less than top_p; equal "
             "logits are kept or dropped together (a threshold on the logit, never a count of tokens)")
HINT_TOP_P = "top_p >= 1 keeps every token; a tiny top_p keeps only the largest logit (and its ties)"
HINT_BIG = "large logits and -inf entries: subtract the row max before exp; exp(-inf) = 0 is never kept"
HINT_TEMP = "divide the logits by the row's temperature before the softmax (a small T sharpens, a large T flattens)"


def _sampling_args(g, B, V, dtype, scale=3.0, layout="plain", top_p=None, temperature=None):
    """logits ~ N(0, scale^2) (peaked enough for top-p to matter), temperature in [0.5, 1.5], top_p in
    [0.3, 0.95], then top_p and uniform moved to decisive values (reference.decisive_top_p_uniform)."""
    from course import DEVICE

    # made on the device, where the decisive values are computed too: on the CPU, 64 rows of Llama 3's
    # vocabulary took a grading seconds of sorting in float64 before its first case
    logits = rand(g, (B, V), torch.float32, scale=scale, device=DEVICE)
    if layout == "ties":  # the four largest logits of every row equal, at the nucleus' boundary
        logits[:, :V:max(V // 4, 1)] = logits.max(-1, keepdim=True).values + 0.5
    if layout == "large":  # logits ~ +-1000 and a masked vocabulary (-inf), one row nearly all -inf
        logits = logits * 300.0
        logits[:, 1::3] = float("-inf")
        logits[-1, : max(V - 3, 1)] = float("-inf")
    logits = logits.to(dtype)
    t = (torch.rand(B, generator=g) + 0.5) if temperature is None else torch.tensor(temperature)
    p = (0.3 + 0.65 * torch.rand(B, generator=g)) if top_p is None else torch.as_tensor(top_p, dtype=torch.float32)
    t, p, u = t.to(DEVICE), p.to(DEVICE), torch.rand(B, generator=g).to(DEVICE)
    p, u = reference.decisive_top_p_uniform(logits, t, p, u)
    if layout == "strided":
        logits = row_strided(logits)
    return logits, t, p, u


def _sampling_shapes(quick):
    """(B, V): one row of a few tokens, odd rows and vocabularies; on a GPU up to Llama 3's 128256."""
    return pick_shapes(quick, [(1, 7), (3, 300)], [(1, 7), (3, 300), (4, 1500)],
                       [(1, 7), (3, 300), (5, 5000), (16, 50257), (64, 128256)])


def _sampling_cases(quick):
    shapes = _sampling_shapes(quick)
    cases = [Case(f"B={b} V={v} {dtype_name(d)}", lambda g, s=(b, v), d=d: _sampling_args(g, *s, d),
                  hint=HINT_SAMPLE, family=family_of((b, v), d, rows=True), public=(b, v) in shapes[:2])
             for b, v in shapes for d in float_dtypes()]
    b, v = shapes[1]
    cases += [
        Case(f"tied largest logits B=8 V={v} float32",  # 8 rows: a sampler that cuts ties fails on most
             lambda g: _sampling_args(g, 8, v, torch.float32, layout="ties", top_p=[1e-3] * 8), hint=HINT_TIES,
             family="ties", public=True),
        Case(f"tied logits B={b} V={v} bfloat16 (many ties)",
             lambda g: _sampling_args(g, b, v, torch.bfloat16, scale=0.5), hint=HINT_TIES, family="ties",
             public=True),
        Case(f"top_p 1, 1e-3 and 0.5 B=3 V={v} float32",
             lambda g: _sampling_args(g, 3, v, torch.float32, top_p=[1.0, 1e-3, 0.5]), hint=HINT_TOP_P,
             family="top-p", public=True),
        Case(f"large logits and -inf B={b} V={v} float32",
             lambda g: _sampling_args(g, b, v, torch.float32, layout="large"), hint=HINT_BIG, family="large",
             public=True),
        Case(f"temperatures 0.05 and 3 B=3 V={v} float32",
             lambda g: _sampling_args(g, 3, v, torch.float32, temperature=[0.05, 3.0, 0.05]),
             hint=HINT_TEMP, family="temperature", public=True),
        Case(f"row-strided logits B={b} V={v} float32",
             lambda g: _sampling_args(g, b, v, torch.float32, layout="strided"), hint=HINT_STRIDE,
             family="strided", public=True),
    ]
    longest = max(s[1] for s in shapes)
    if longest > 1024 and all(s[1] <= 1024 for s in shapes[:2]):
        cases.append(Case(f"long rows B=2 V={longest} float32",
                          lambda g: _sampling_args(g, 2, longest, torch.float32), hint=HINT_SAMPLE,
                          family="long-rows", public=True))
    return cases


def _sampling_perf_inputs(g, dev):
    B, V = 64, 128256  # a serving batch of 64 sequences, Llama 3's vocabulary, float32 logits
    return tuple(t.to(dev) for t in _sampling_args(g, B, V, torch.float32))


def sampling_fresh(bases, seed):
    """Fresh logits and temperatures (jittered), then decisive top_p and uniform for them: the same
    values in the worker and in the grading process (the same operations on the same device)."""
    logits, t, p, u = (jittered(b, arg_seed(seed, i)) for i, b in enumerate(bases))
    p, u = reference.decisive_top_p_uniform(logits, t, p.clamp(1e-3, 0.99), u.clamp(0.0, 0.999))
    return logits, t, p, u


def eager_sampling(logits, temperature, top_p, uniform):
    """Softmax, sort, cumsum, a cutoff, a second cumsum and a search: the eager PyTorch path."""
    from kernels_ref.sampling import sample_top_p_torch

    return sample_top_p_torch(logits, temperature, top_p, uniform)


def _sampling_bytes(args) -> int:
    logits = args[0]
    return logits.numel() * logits.element_size() + logits.shape[0] * 20


_NO_SORT = ("sorting (or a torch softmax, cumsum, search or draw) is the path this kernel replaces: find the "
            "nucleus' cutoff inside your kernel")
WHY_SAMPLING = dict.fromkeys((
    "sort", "argsort", "topk", "kthvalue", "msort", "cumsum", "cumsum_", "_softmax", "softmax", "_log_softmax",
    "log_softmax", "multinomial", "searchsorted", "argmax", "max", "amax", "exp", "div", "mul", "sum",
    "gather", "where", "masked_fill", "lt", "gt", "ge", "le", "cummax", "unique", "_unique2"), _NO_SORT)

# ------------------------------------------------------------------------------------------- rope_kv_append

# q_rot and the written cache rows: two products and a sum in float32, rounded once to the output dtype
# (base.TOLERANCES); the cache rows left alone must come back bit for bit, which any tolerance admits only
# when nothing moved (their values are O(1) random numbers, so a row written in the wrong place is off by
# O(1)). A rotation by the wrong angle or the interleaved-pairs convention is off by O(1) too.
HINT_ROPE = ("rotate-half pairs (x[i], x[i + D/2]): (x1 cos - x2 sin, x2 cos + x1 sin), with the cos/sin row "
             "of each sequence's own position")
HINT_CACHE = ("write the rotated k and the v into row positions[b] of sequence b's caches ([B, L, H_kv, D]), "
              "and nothing else: every other row must come back unchanged")
HINT_GQA = "fewer key/value heads than query heads (H_kv < H): rotate and write each of k's own heads"
HINT_QKV = "q, k, v are views of one fused [B, H + 2 H_kv, D] projection: pass their strides"


def _rope_args(g, B, H, H_kv, D, L, dtype, layout="plain", positions=None):
    from course import DEVICE
    from measure.serving import rope_tables

    if layout == "qkv":
        qkv = rand(g, (B, H + 2 * H_kv, D), dtype)
        q, k, v = qkv[:, :H], qkv[:, H:H + H_kv], qkv[:, H + H_kv:]
    else:
        q, k, v = rand(g, (B, H, D), dtype), rand(g, (B, H_kv, D), dtype), rand(g, (B, H_kv, D), dtype)
    cos, sin = rope_tables(L, D, device=DEVICE)
    caches = rand(g, (B, L, H_kv, D), dtype), rand(g, (B, L, H_kv, D), dtype)
    # random positions avoid 0, where the rotation is the identity (the "positions 0 and L-1" case has it)
    pos = torch.randint(min(1, L - 1), L, (B,), generator=g) if positions is None else torch.tensor(positions)
    return q, k, v, cos, sin, *caches, pos.to(torch.int64).to(DEVICE)


def rope_outputs(fn, args):
    """The harness: q_rot = fn(*args), graded with the two caches it wrote in place."""
    return (fn(*args), args[5], args[6]), None


def _rope_shapes(quick):
    """(B, H, H_kv, D, L): one sequence and head; odd batches, grouped heads, head dims 16 to 128."""
    return pick_shapes(quick, [(1, 1, 1, 2, 1), (3, 4, 2, 16, 9)],
                       [(1, 1, 1, 2, 1), (3, 4, 2, 16, 9), (5, 6, 3, 32, 33)],
                       [(1, 1, 1, 2, 1), (3, 4, 2, 16, 9), (5, 6, 3, 32, 33), (64, 32, 8, 128, 1024)])


def _rope_cases(quick):
    shapes = _rope_shapes(quick)
    cases = [Case(f"B={s[0]} H={s[1]} H_kv={s[2]} D={s[3]} L={s[4]} {dtype_name(d)}",
                  lambda g, s=s, d=d: _rope_args(g, *s, d), hint=HINT_ROPE, family=family_of(s[:4], d),
                  public=s in shapes[:2])
             for s in shapes for d in float_dtypes()]
    B, H, H_kv, D, L = shapes[1]
    cases += [
        Case(f"positions 0 and L-1 B=2 H={H} H_kv={H_kv} D={D} L={L} float32",
             lambda g: _rope_args(g, 2, H, H_kv, D, L, torch.float32, positions=[0, L - 1]), hint=HINT_CACHE,
             family="edge-values", public=True),
        Case(f"q, k, v views of one QKV buffer B={B} H={H} H_kv={H_kv} D={D} bfloat16",
             lambda g: _rope_args(g, B, H, H_kv, D, L, torch.bfloat16, layout="qkv"), hint=HINT_QKV,
             family="strided", public=True),
        Case(f"8 query heads per kv head B=2 H=8 H_kv=1 D={D} L={L} float32",
             lambda g: _rope_args(g, 2, 8, 1, D, L, torch.float32), hint=HINT_GQA, family="heads", public=True),
    ]
    return cases


def _rope_perf_inputs(g, dev):
    B, H, H_kv, D, L = 64, 32, 8, 128, 1024  # a decode step of a Llama-3-8B-like layer, 64 sequences, bf16
    return tuple(t.to(dev) for t in _rope_args(g, B, H, H_kv, D, L, torch.bfloat16, layout="qkv"))


def rope_fresh(bases, seed):
    """Fresh q, k, v and caches (jittered); the cos/sin tables and positions as loaded (their values are
    the model's, and every call still writes new values at them)."""
    out = [jittered(b, arg_seed(seed, i)) if i not in (3, 4) else b for i, b in enumerate(bases)]
    return tuple(out)


def eager_rope(q, k, v, cos, sin, k_cache, v_cache, positions):
    """Eager PyTorch: slices, products and concatenations for q and k, two indexed writes."""
    from kernels_ref.rope_cache import rope_kv_append_torch

    return rope_kv_append_torch(q, k, v, cos, sin, k_cache, v_cache, positions)


def _rope_bytes(args) -> int:
    q, k = args[0], args[1]
    (B, H, D), H_kv = q.shape, k.shape[1]
    return B * ((2 * H + 4 * H_kv) * D * q.element_size() + 2 * D * 4 + 8)


WHY_ROPE = {**dict.fromkeys(("mul", "sub", "add", "cat", "neg", "index", "index_select", "chunk_cat"),
                            "the rotation belongs in your kernel, computed in float32 from the loaded halves"),
            **dict.fromkeys(("index_put", "index_put_", "_index_put_impl_", "scatter", "scatter_", "copy_",
                             "_local_scalar_dense"),
                            "write the cache rows from your kernel (the same launch that rotates k)")}
# The cache write is the exercise: torch may not copy rows into the caches (copy_ into a selected row, with
# positions read to the host by .item()), which plumbing otherwise allows. A launcher that needs a
# contiguous copy of q, k or v still gets one (contiguous and clone).
ROPE_RULES = dataclasses.replace(triton_rules(WHY_ROPE, max_launches=1),
                                 allowed_ops=TRITON_ALLOWED - {"copy_", "_local_scalar_dense"})

# ------------------------------------------------------------------------------------------- paged attention

# One query's softmax over up to 128k keys: the weights are float32, P @ V accumulates in float32 from
# 16-bit values (tensor cores), one rounding when storing; split-K adds one rescaling per split. float32
# inputs: tl.dot's TF32 operands, as in notebooks 06 and 07 (TF32_TOLERANCES); 16-bit: base.TOLERANCES,
# whose output rounding dominates. A wrong page lookup, a missed tail of keys, a wrong kv head or the
# default scale in place of sm_scale is off by O(0.1) (tests/test_autograder_specs_10.py).
PAGED_TOLERANCES = {**TF32_TOLERANCES, torch.float16: TOLERANCES[torch.float16],
                    torch.bfloat16: TOLERANCES[torch.bfloat16]}

HINT_PAGES = ("key j of sequence b is k_pages[block_table[b, j // page_size], j % page_size]: look the page up "
              "for every key of a tile, and read only j < seq_lens[b]")
HINT_SPLITS = ("very different lengths: a split past a sequence's end must count for nothing (max -inf, sum 0) "
               "in the combination; a sequence of one key is its v")
HINT_GQA_ATT = "query head h reads key/value head h // (H / H_kv)"
HINT_PAGE_SIZE = "a page size that is not a power of two (or smaller than your tile): j // P and j % P per key"


def _paged_args(g, lengths, H, H_kv, D, P, dtype, scale=None):
    from course import DEVICE
    from measure.serving import paged_inputs

    # the pages' values made on the device (base.rand): a GPU case holds up to 500 million of them
    q, kp, vp, table, lens = paged_inputs(lengths, H, H_kv, D, P, dtype, DEVICE,
                                          capacity=max(-(-n // P) for n in lengths) + 1, generator=g,
                                          values=lambda shape: rand(g, shape))
    return q, kp, vp, table, lens, 1.0 / math.sqrt(D) if scale is None else scale


def _paged_shapes(quick):
    """(lengths, H, H_kv, D, page_size): one key; lengths from 1 to many pages in one batch; on a GPU long
    contexts (the split over keys decides)."""
    return pick_shapes(quick, [((1,), 1, 1, 16, 4), ((1, 37, 100), 4, 2, 16, 8)],
                       [((1,), 1, 1, 16, 4), ((1, 37, 100), 4, 2, 16, 8), ((300, 5, 64, 129), 8, 2, 32, 16)],
                       [((1,), 1, 1, 16, 4), ((1, 37, 100), 4, 2, 16, 8), ((300, 5, 64, 129), 8, 2, 32, 16),
                        ((1, 4000, 17, 30000), 32, 8, 128, 16), ((8192,) * 6, 8, 8, 64, 32)])


def _paged_cases(quick):
    shapes = _paged_shapes(quick)
    cases = [Case(f"lengths {s[0]} H={s[1]} H_kv={s[2]} D={s[3]} page {s[4]} {dtype_name(d)}",
                  lambda g, s=s, d=d: _paged_args(g, *s, d), hint=HINT_PAGES if len(s[0]) > 1 else HINT_SPLITS,
                  family=family_of((len(s[0]), s[1], s[3]), d), public=s in shapes[:2])
             for s in shapes for d in float_dtypes()]
    cases += [
        Case("lengths (1, 2, 500) page 5 (not a power of two) H=2 D=16 float32",
             lambda g: _paged_args(g, (1, 2, 500), 2, 2, 16, 5, torch.float32), hint=HINT_PAGE_SIZE,
             family="paged", public=True),
        Case("8 query heads per kv head lengths (33, 70) H=8 H_kv=1 D=32 bfloat16",
             lambda g: _paged_args(g, (33, 70), 8, 1, 32, 16, torch.bfloat16), hint=HINT_GQA_ATT, family="heads",
             public=True),
        Case("sm_scale 0.3 lengths (50, 9) H=2 D=16 float32",
             lambda g: _paged_args(g, (50, 9), 2, 2, 16, 8, torch.float32, scale=0.3), family="scale",
             hint="use the sm_scale argument, not 1/sqrt(D)", public=True),
    ]
    return cases


def _paged_perf_inputs(g, dev):
    """16 sequences of 1 to 32k keys (4k on average... the long ones decide), 32 query heads over 8 kv
    heads of 128, pages of 16 tokens, bf16."""
    lengths = [int(n) for n in torch.randint(1, 32768, (16,), generator=g)]
    return tuple(t.to(dev) if isinstance(t, torch.Tensor) else t
                 for t in _paged_args(g, lengths, 32, 8, 128, 16, torch.bfloat16))


def gather_sdpa(q, k_pages, v_pages, block_table, seq_lens, sm_scale):
    """Gather the pages into a padded contiguous cache, then SDPA with a length mask."""
    from measure.serving import gather_then_sdpa

    return gather_then_sdpa(q, k_pages, v_pages, block_table, seq_lens, sm_scale)


def paged_fresh(bases, seed):
    """Fresh q and pages (jittered); the block table, the lengths and the scale as loaded."""
    return tuple(jittered(b, arg_seed(seed, i)) if i < 3 else b for i, b in enumerate(bases))


def _paged_bytes(args) -> int:
    q, k_pages, _, _, seq_lens, _ = args
    return 2 * int(seq_lens.sum()) * k_pages.shape[2] * k_pages.shape[3] * k_pages.element_size()


WHY_PAGED = {**dict.fromkeys(("_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
                              "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_flash_attention_for_cpu",
                              "scaled_dot_product_attention", "_softmax", "softmax", "bmm", "mm", "matmul",
                              "einsum", "baddbmm"),
                             "attention is your kernel's work: read the pages where they are"),
             **dict.fromkeys(("index", "index_select", "gather", "take", "embedding"),
                             "gathering the pages copies the cache: index the pages inside your kernel")}

EXERCISES = [
    Exercise(
        id="sample_top_p", notebook=NOTEBOOK, entry="sample_top_p",
        signature="sample_top_p(logits, temperature, top_p, uniform) -> tokens [B] int64",
        correctness_points=7, performance_points=3, cases=_sampling_cases, reference=reference.sample_top_p,
        out_dtypes=lambda a: (torch.int64,), tolerances=TOKEN_TOLERANCES, kind=TRITON, timeout_s=300.0,
        rules=triton_rules(WHY_SAMPLING, max_launches=1),
        performance=Performance(
            inputs=_sampling_perf_inputs, baseline=eager_sampling, fresh=sampling_fresh,
            baseline_name="softmax + sort + cumsum + search (eager PyTorch)", nbytes=_sampling_bytes,
            naive=eager_sampling,
            # The fused kernel reads the logits once from memory and bisects from L2 (~35 passes), the eager
            # path moves ~10x the logits' bytes through a segmented sort. Calibrated (results/h200-2026-11-27
            # and results/h100-2026-11-27, serving*/calibration.json): the solution ran 1.62x on an H200 and
            # 1.72x on an H100; five trusted gradings on an H200 (results/h200-2026-11-28, repeat-05h04) read
            # 1.60x-1.62x, so full credit from 1.35 (the slowest clears it by 15%). The naive version is the
            # baseline's own code (1.00x give or take noise of 0.07 seen below): nothing under 1.1x earns a point.
            threshold=1.35, floor=1.1),
    ),
    Exercise(
        id="rope_kv_append", notebook=NOTEBOOK, entry="rope_kv_append",
        signature="rope_kv_append(q, k, v, cos, sin, k_cache, v_cache, positions) -> q_rot (caches written)",
        correctness_points=7, performance_points=3, cases=_rope_cases, reference=reference.rope_kv_append,
        out_dtypes=lambda a: (a[0].dtype, a[5].dtype, a[6].dtype), kind=TRITON, harness=rope_outputs,
        writes=(5, 6), metadata=(7,), rules=ROPE_RULES,
        performance=Performance(
            inputs=_rope_perf_inputs, baseline=eager_rope, fresh=rope_fresh,
            baseline_name="eager PyTorch (slices, products, cat; two indexed cache writes)", nbytes=_rope_bytes,
            naive=eager_rope,
            # ~15 eager launches against one; at 64 sequences both are a few microseconds of memory traffic,
            # so launch cost decides. Calibrated: the solution ran 2.94-4.56x on an H200, 3.76x on an H100;
            # the naive version (the baseline's code, timed against itself) 0.95-1.14x: the ratio of two
            # microsecond timings of ~15 launches moves by 15%, so nothing under 1.3x earns a point.
            # Repeated gradings on an H200 read 2.14-2.94x (results/h200-2026-11-2{7,8}/repeat-*): the slowest
            # clears 1.85 by 15%, so full credit from 1.85.
            threshold=1.85, floor=1.3),
    ),
    Exercise(
        id="paged_decode_attention", notebook=NOTEBOOK, entry="paged_decode_attention",
        signature="paged_decode_attention(q, k_pages, v_pages, block_table, seq_lens, sm_scale) -> o [B, H, D]",
        correctness_points=7, performance_points=3, cases=_paged_cases, reference=reference.paged_decode_attention,
        tolerances=PAGED_TOLERANCES, kind=TRITON, timeout_s=300.0, metadata=(3, 4),
        # max: a launcher that sizes its key loop by int(seq_lens.max()), as vLLM's do (none of attention's work)
        rules=triton_rules(WHY_PAGED, max_launches=2, extra_ops={"max"}, kernel_library=TL_SOFTMAX),
        performance=Performance(
            inputs=_paged_perf_inputs, baseline=gather_sdpa, fresh=paged_fresh,
            baseline_name="gather the pages, then SDPA with a length mask", nbytes=_paged_bytes, naive=gather_sdpa,
            # The gather reads and writes the padded cache before SDPA reads it again (3x the bytes and the
            # padding of every sequence to the longest). Calibrated: the solution ran 2.52x and 2.78x on an
            # H200, 3.18x on an H100 (slowest / 1.15 = 2.19); the naive version (the baseline's code) 1.00x.
            threshold=2.0, floor=1.1),
    ),
]
