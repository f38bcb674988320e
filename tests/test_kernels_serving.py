"""The reference kernels of 10_serving against their float64 definitions (measure.reference), on odd shapes
and the hard inputs of each: sampling (kernels_ref/sampling.py: ties, -inf, top_p 1, strided rows, every
dtype), RoPE with the cache write (kernels_ref/rope_cache.py: nothing but the asked rows written), paged
decode attention (kernels_ref/paged_attention.py: lengths from 1 key to many pages, odd page sizes, grouped
heads, the split plan), the eager baselines the grader times them against, and clear errors for bad input.
CPU: the Triton interpreter, small sizes."""
from __future__ import annotations

import math

import pytest
import torch

from kernels_ref.paged_attention import gather_then_sdpa, paged_decode_attention, paged_inputs, split_plan
from kernels_ref.rope_cache import rope_kv_append, rope_kv_append_torch, rope_tables
from kernels_ref.sampling import sample_top_p, sample_top_p_torch
from measure import reference
from measure.tolerance import compare

DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _sampling(g, B, V, dtype, scale=3.0):
    logits = (scale * torch.randn(B, V, generator=g)).to(dtype)
    t, p, u = torch.rand(B, generator=g) + 0.5, torch.rand(B, generator=g), torch.rand(B, generator=g)
    p, u = reference.decisive_top_p_uniform(logits, t, p, u)
    return logits, t, p, u


@pytest.mark.parametrize("dtype", DTYPES)
def test_sampling_kernel_returns_the_reference_tokens(dtype):
    g = torch.Generator().manual_seed(0)
    for B, V in ((1, 1), (3, 257), (4, 700)):
        args = _sampling(g, B, V, dtype)
        want = reference.sample_top_p(*args)
        assert torch.equal(sample_top_p(*args), want), (B, V)
        assert torch.equal(sample_top_p_torch(*args), want), (B, V)


def test_sampling_kernel_keeps_ties_together_and_ignores_minus_inf():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(6, 300, generator=g)
    logits[:, 1::7] = float("-inf")
    logits[:, ::50] = 4.0                             # six tied largest logits in every row
    t = torch.ones(6)
    # top_p inside the tied group's mass, uniform at each sixth of it: every tied token is drawn once
    p = reference.decisive_top_p_uniform(logits, t, torch.full((6,), 1e-3), torch.zeros(6))[0]
    u = (torch.arange(6) + 0.5) / 6
    want = torch.arange(0, 300, 50)
    assert torch.equal(reference.sample_top_p(logits, t, p, u), want)
    assert torch.equal(sample_top_p(logits, t, p, u, block=64), want)  # several blocks per row


def test_sampling_kernel_top_p_one_keeps_everything_and_strided_rows_work():
    g = torch.Generator().manual_seed(2)
    wide = torch.full((3, 513), float("nan"))
    wide[:, :500] = torch.randn(3, 500, generator=g)
    logits = wide[:, :500]                            # rows of a wider buffer: the padding is NaN
    t, p = torch.ones(3), torch.ones(3)
    u = reference.decisive_top_p_uniform(logits, t, p, torch.tensor([0.0, 0.5, 0.999]))[1]
    assert torch.equal(sample_top_p(logits, t, p, u), reference.sample_top_p(logits, t, p, u))


def test_sampling_checks_its_arguments():
    x = torch.randn(2, 10)
    with pytest.raises(ValueError, match="one value per row"):
        sample_top_p(x, torch.ones(3), torch.ones(2), torch.zeros(2))
    with pytest.raises(TypeError, match="dtype"):
        sample_top_p(x, torch.ones(2, dtype=torch.float64), torch.ones(2), torch.zeros(2))


def _rope(g, B, H, H_kv, D, L, dtype):
    qkv = torch.randn(B, H + 2 * H_kv, D, generator=g).to(dtype)
    cos, sin = rope_tables(L, D)
    caches = [torch.randn(B, L, H_kv, D, generator=g).to(dtype) for _ in range(2)]
    pos = torch.randint(0, L, (B,), generator=g)
    return (qkv[:, :H], qkv[:, H:H + H_kv], qkv[:, H + H_kv:], cos, sin, *caches, pos)


@pytest.mark.parametrize("dtype", DTYPES)
def test_rope_kernel_rotates_and_writes_only_the_asked_rows(dtype):
    g = torch.Generator().manual_seed(3)
    for shape in ((1, 1, 1, 2, 1), (3, 6, 2, 24, 11), (2, 8, 8, 64, 5)):
        args = _rope(g, *shape, dtype)
        want = reference.rope_kv_append(*args)
        for fn in (rope_kv_append, rope_kv_append_torch):
            kc, vc = args[5].clone(), args[6].clone()
            got = fn(*args[:5], kc, vc, args[7])
            ok, err, msg = compare((got, kc, vc), want, dtypes=[dtype] * 3)
            assert ok, (fn.__name__, shape, msg)


def test_rope_tables_rotate_by_the_position():
    cos, sin = rope_tables(4, 8)
    assert torch.allclose(cos[0], torch.ones(4)) and torch.allclose(sin[0], torch.zeros(4))
    angle = 3 * 10000.0 ** (-2 / 8)                   # position 3, pair 1 of a head of 8
    assert abs(float(cos[3, 1]) - math.cos(angle)) < 1e-7
    assert abs(float(sin[3, 1]) - math.sin(angle)) < 1e-7


def test_rope_checks_its_arguments():
    args = list(_rope(torch.Generator().manual_seed(4), 2, 2, 1, 8, 4, torch.float32))
    args[5] = args[5].transpose(2, 3)
    with pytest.raises(ValueError, match="contiguous heads"):
        rope_kv_append(*args)
    odd = list(_rope(torch.Generator().manual_seed(4), 2, 2, 1, 8, 4, torch.float32))
    odd[0] = odd[0][..., :7]
    with pytest.raises(ValueError, match="even"):
        rope_kv_append(*odd)


@pytest.mark.parametrize("dtype", DTYPES)
def test_paged_kernel_matches_float64_at_every_length(dtype):
    g = torch.Generator().manual_seed(5)
    tol = {torch.float32: (2e-3, 2e-3)}
    for lengths, H, H_kv, D, P in (((1,), 1, 1, 16, 4), ((1, 37, 100), 4, 2, 16, 8), ((3, 250), 8, 1, 32, 5)):
        args = paged_inputs(lengths, H, H_kv, D, P, dtype, "cpu", capacity=-(-max(lengths) // P) + 2, generator=g)
        want = reference.paged_decode_attention(*args, 0.3)
        for fn in (paged_decode_attention, gather_then_sdpa):
            ok, _, msg = compare(fn(*args, 0.3), want, tol)
            assert ok, (fn.__name__, lengths, msg)


def test_split_plan_fills_the_gpu_and_covers_every_key():
    n, per = split_plan(1, 1, 131072, 64, torch.device("cpu"))   # one sequence and head: split
    assert n > 1 and per % 64 == 0 and n * per >= 131072 and (n - 1) * per < 131072
    assert split_plan(64, 8, 100, 16, torch.device("cpu")) == (1, 112)  # a full batch: one split each


def test_paged_checks_its_arguments():
    q, kp, vp, table, lens = paged_inputs([5, 9], 3, 2, 16, 4, torch.float32, "cpu",
                                          generator=torch.Generator().manual_seed(6))
    with pytest.raises(ValueError, match="evenly"):
        paged_decode_attention(q, kp, vp, table, lens)
    with pytest.raises(ValueError, match="one row per sequence"):
        paged_decode_attention(q[:, :2], kp, vp, table[:1], lens)


# ------------------------------------------------------------------------------------------- GPU, full size

@pytest.mark.gpu
@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16))
def test_gpu_sampling_a_128k_vocabulary(dtype):
    logits, t, p, u = (a.cuda() for a in _sampling(torch.Generator().manual_seed(7), 64, 128256, dtype))
    want = reference.sample_top_p(logits, t, p, u)
    assert torch.equal(sample_top_p(logits, t, p, u), want)
    assert torch.equal(sample_top_p_torch(logits, t, p, u), want)


@pytest.mark.gpu
def test_gpu_rope_at_a_decode_step():
    args = [a.cuda() for a in _rope(torch.Generator().manual_seed(8), 64, 32, 8, 128, 1024, torch.bfloat16)]
    want = reference.rope_kv_append(*args)
    kc, vc = args[5].clone(), args[6].clone()
    ok, _, msg = compare((rope_kv_append(*args[:5], kc, vc, args[7]), kc, vc), want, dtypes=[torch.bfloat16] * 3)
    assert ok, msg


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_gpu_paged_attention_long_and_mixed(dtype):
    from autograder.specs.nb10_serving import PAGED_TOLERANCES

    for lengths, H, H_kv in (([1, 4000, 17, 30000], 32, 8), ([131072], 8, 8), ([300] * 64, 32, 8)):
        args = paged_inputs(lengths, H, H_kv, 128, 16, dtype, "cuda")
        ok, _, msg = compare(paged_decode_attention(*args, 0.088), reference.paged_decode_attention(*args, 0.088),
                             PAGED_TOLERANCES)
        assert ok, (lengths, msg)


def test_bench_cases_are_well_formed_and_check_out_at_small_size():
    """The serving cases are built (their full-size inputs live on the GPU), and small versions of each pass
    the suite's float64 check here (stub timer and meter): sampling, RoPE, paged attention and the decode
    step, graphed and not (without a GPU a graphed candidate is the plain call)."""
    from kernels_ref import bench, benchmarking, decode_step, paged_attention, rope_cache, sampling

    ops = ["sample_top_p", "rope_kv_append", "paged_decode_attention", "decode_step"]
    for quick in (True, False):
        cases, notes = bench.collect_cases(quick, ops)
        assert {c.op for c in cases} == set(ops) and not notes
    assert any(g.quantity == "fraction_of_peak" and g.threshold == 0.8 for c in cases for g in c.goals)
    small = [sampling.sampling_case(3, 500), rope_cache.rope_case(3, 4, 2, 16, 8, torch.float32),
             paged_attention.paged_case([1, 37, 100], "small", 4, 2, 16, 8, dtype=torch.float32),
             decode_step.step_case(2, 32, 4, 2, 300, 16, torch.float32)]
    _, rows, _ = benchmarking.run_suite(small, ceilings=benchmarking.Ceilings(1.0, 1.0), timer=lambda fn: 1.0,
                                        peak_memory=lambda fn: 1, progress=False)
    assert len(rows) == 10 and all(r.correct for r in rows), [(r.op, r.candidate, r.note) for r in rows if not r.correct]
