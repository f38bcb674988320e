"""The serving notebook's specs (10: ``sample_top_p``, ``rope_kv_append``, ``paged_decode_attention``): the
solution notebook earns every correctness point and the untouched one none, the exact token contract
tolerates a float32 kernel and nothing else (ties, the sorted-order draw, a missing temperature fail),
the caches written in place are judged whole (a stray write fails, an input outside them still may not
change), the paged cases catch the plausible bugs of a paged kernel, and timed calls' fresh values are
reproducible. CPU, quick cases."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from _autograder_helpers import listed
from _solutions import solution_graded  # noqa: F401  (the fixture)

ROOT = Path(__file__).resolve().parent.parent
EX = ("sample_top_p", "rope_kv_append", "paged_decode_attention")


def test_list_shows_the_serving_exercises():
    out = listed()
    assert out.returncode == 0, out.stderr
    for ex in EX:
        line = next(l for l in out.stdout.splitlines() if l.startswith(f"{ex} "))
        assert "10_serving" in line and "10  (7 + 3)" in line


def test_specs_are_complete_and_their_cases_cover_the_families():
    from autograder import specs
    from course import manifest

    assert manifest.by_name("10_serving").exercises == EX
    assert [e.id for e in specs.for_notebook("10_serving")] == list(EX)
    for ex in EX:
        spec = specs.get(ex)
        perf = spec.performance
        assert spec.points == 10 and spec.kind == "triton" and spec.rules.min_launches == 1
        assert perf.floor < perf.threshold and perf.naive is not None and perf.fresh is not None
        cases = spec.cases(True)
        names = [c.name for c in cases]
        assert len(names) == len(set(names))
        for family in {c.family for c in cases}:  # every family has a public member: check predicts the grade
            assert any(c.public and c.family == family for c in cases), (ex, family)
        for dtype in ("float32", "float16", "bfloat16"):
            assert any(dtype in n for n in names), (ex, dtype)
    families = {c.family for c in specs.get("sample_top_p").cases(False)}  # the grade's cases on this machine
    assert {"ties", "top-p", "large", "temperature", "strided", "long-rows"} <= families
    shapes = [c.build(torch.Generator().manual_seed(0))[0].shape for c in specs.get("sample_top_p").cases(True)]
    assert any(s[0] > 1 for s in shapes) and any(s[1] % 2 for s in shapes)
    assert specs.get("rope_kv_append").writes == (5, 6)
    assert specs.get("paged_decode_attention").rules.max_launches == 2


# ------------------------------------------------------------------------- the notebook, graded

@pytest.fixture(scope="session")
def serving_graded(solution_graded):
    """The solution notebook graded whole, as tests/test_solutions_graded.py grades it (one grading serves both)."""
    done = solution_graded("10_serving")
    assert done.result, done.log
    return {ex["id"]: ex for ex in done.result["exercises"]}


@pytest.mark.xdist_group("solution-10_serving")  # with the other tests that read the notebook's grade
@pytest.mark.parametrize("exercise", EX)
def test_solution_earns_every_correctness_point(serving_graded, exercise):
    from autograder.specs import get

    ex = serving_graded[exercise]
    # correct: every case's verdict ok (autograder.runner.Verdicts.all_ok) and no violation
    assert ex["correct"] and not ex["violations"], ex["feedback"] + ex["violations"]
    assert ex["score"] * ex["points"] == pytest.approx(get(exercise).correctness_points)


def test_untouched_notebook_scores_zero():
    from autograder.grading import grade_submission

    result = grade_submission(ROOT / "notebooks" / "10_serving" / "10_serving.ipynb", list(EX), quick=True,
                              timeout=300.0)
    assert [ex["score"] for ex in result["exercises"]] == [0, 0, 0]


# ------------------------------------------------------------------------- judged in process

def _judged(exercise, impl, quick=True, seed=None):
    """{case name: passed} for ``impl`` (plain torch, in this process) on the spec's fresh cases, judged like
    the grader judges: outputs (through the spec's harness) against the references, inputs unchanged."""
    from autograder import correctness, specs
    from autograder.runner import make_plan
    from autograder.specs.base import fresh_seed

    spec = specs.get(exercise)
    verdicts = {}
    for case, a, _b, ref, _ in make_plan(spec, quick, fresh_seed() if seed is None else seed):
        before = [t.clone() if isinstance(t, torch.Tensor) else t for t in a]
        out, _ = spec.call(impl, a)
        ok = correctness.compare_outputs(out, ref, correctness.expected_dtypes(a, ref, spec), spec, case)[0]
        unchanged = all(i in spec.writes or correctness.same_values(x, y) for i, (x, y) in enumerate(zip(before, a)))
        verdicts[case.name] = ok and unchanged
    return verdicts


def _sorted_order_draw(logits, temperature, top_p, uniform):
    """The textbook sampler: the kept tokens drawn in sorted (descending) order, not vocabulary order."""
    p = torch.softmax(logits.double() / temperature.double()[:, None], -1)
    sp, order = p.sort(-1, descending=True)
    before = sp.cumsum(-1) - sp
    kept = torch.where(before < top_p.double()[:, None], sp, 0.0)
    cdf = kept.cumsum(-1)
    i = torch.searchsorted(cdf, uniform.double()[:, None] * cdf[:, -1:], right=True).clamp_max(p.shape[1] - 1)
    return order.gather(1, i)[:, 0]


def _count_cut(logits, temperature, top_p, uniform):
    """Ties cut by the sort: the first tokens in sorted order until the mass reaches top_p, the draw in
    vocabulary order (what a sort + cumsum sampler that keeps no tie group does)."""
    p = torch.softmax(logits.double() / temperature.double()[:, None], -1)
    sp, order = p.sort(dim=-1, descending=True, stable=True)
    keep_sorted = (sp.cumsum(-1) - sp) < top_p.double()[:, None]
    kept = p * torch.zeros_like(keep_sorted).scatter(1, order, keep_sorted)
    cdf = kept.cumsum(-1)
    return torch.searchsorted(cdf, uniform.double()[:, None] * cdf[:, -1:], right=True)[:, 0]


def test_the_token_contract_passes_a_float32_sampler_and_fails_the_wrong_ones():
    from kernels_ref.sampling import sample_top_p_torch
    from measure import reference

    assert all(_judged("sample_top_p", sample_top_p_torch).values())  # float32 throughout: rounding never decides
    assert all(_judged("sample_top_p", reference.sample_top_p).values())
    # a wrong sampler can be right on a row by chance (a draw of its first token): fixed seeds here
    assert sum(not ok for ok in _judged("sample_top_p", _sorted_order_draw, seed=1).values()) >= 5
    assert not _judged("sample_top_p", _count_cut, seed=1)["tied largest logits B=8 V=300 float32"]
    no_temperature = _judged("sample_top_p", lambda l, t, p, u: sample_top_p_torch(l, torch.ones_like(t), p, u),
                             seed=1)
    assert not no_temperature["temperatures 0.05 and 3 B=3 V=300 float32"]


def test_decisive_values_leave_every_decision_a_margin():
    """After the move, the nucleus boundary and the sampled position sit at least the margin away from the
    nearest decision: perturbing every probability by float32's rounding changes no token."""
    from measure import reference

    g = torch.Generator().manual_seed(5)
    logits = 2.0 * torch.randn(64, 3000, generator=g)
    logits[:8, :40] = logits[:8].max(-1, keepdim=True).values  # tie groups
    t, p, u = torch.rand(64, generator=g) + 0.5, torch.rand(64, generator=g), torch.rand(64, generator=g)
    p2, u2 = reference.decisive_top_p_uniform(logits, t, p, u)
    want = reference.sample_top_p(logits, t, p2, u2)
    # float32's rounding: every probability off by ~1e-6 relative, equal logits still equal (ties are exact)
    x = logits.double() / t[:, None].double()
    bumped = x + 1e-6 * torch.sin(977.0 * x)
    assert torch.equal(reference.sample_top_p(bumped, torch.ones(64), p2, u2), want)
    # and the values really moved where it mattered: undecided inputs can flip the token of a float32 sampler
    assert not torch.equal(p2, p) and not torch.equal(u2, u)


def test_timed_calls_get_reproducible_fresh_values_with_margins():
    from autograder import specs
    from measure import reference

    spec = specs.get("sample_top_p")
    bases = spec.cases(True)[3].build(torch.Generator().manual_seed(1))
    one, two = spec.performance.fresh_args(bases, 7), spec.performance.fresh_args(bases, 7)
    assert all(torch.equal(a, b) for a, b in zip(one, two))
    other = spec.performance.fresh_args(bases, 8)
    assert not torch.equal(one[0], other[0])
    assert torch.equal(reference.decisive_top_p_uniform(*one)[1], one[3])  # already decisive: a fixed point


def _rope_bug(bug):
    from measure import reference

    def impl(q, k, v, cos, sin, k_cache, v_cache, positions):
        q_rot, kc, vc = reference.rope_kv_append(q, k, v, cos, sin, k_cache, v_cache, positions)
        if bug == "interleaved":  # pairs (x[2i], x[2i+1]) instead of (x[i], x[i + D/2])
            def rot(x):
                c, s = cos[positions.long()][:, None].double(), sin[positions.long()][:, None].double()
                x1, x2 = x.double()[..., 0::2], x.double()[..., 1::2]
                return torch.stack([x1 * c - x2 * s, x2 * c + x1 * s], -1).flatten(-2)
            q_rot = rot(q)
        if bug == "extra row":  # also writes the next row of the cache
            nxt = (positions.long() + 1) % k_cache.shape[1]
            kc[torch.arange(q.shape[0]), nxt] = 0.0
        if bug == "v rotated":
            vc[torch.arange(q.shape[0]), positions.long()] = reference.rotate_half(
                v, cos[positions.long()][:, None], sin[positions.long()][:, None])
        if bug == "modifies q":
            q.mul_(2.0)
        k_cache.copy_(kc.to(k_cache.dtype))
        v_cache.copy_(vc.to(v_cache.dtype))
        return q_rot.to(q.dtype)

    return impl


def test_rope_caches_are_judged_whole_and_other_inputs_still_may_not_change():
    from kernels_ref.rope_cache import rope_kv_append_torch

    assert all(_judged("rope_kv_append", rope_kv_append_torch).values())
    for bug in ("interleaved", "extra row", "v rotated", "modifies q"):
        verdicts = _judged("rope_kv_append", _rope_bug(bug))
        wrong = [name for name, ok in verdicts.items() if not ok]
        tiny = [n for n in verdicts if "D=2 L=1" in n]  # one row, two features: some bugs cannot show there
        assert set(verdicts) - set(tiny) <= set(wrong), (bug, verdicts)


def _paged_bug(bug):
    from kernels_ref.paged_attention import gather_then_sdpa

    def impl(q, k_pages, v_pages, block_table, seq_lens, sm_scale):
        if bug == "contiguous pages":  # ignores the block table: sequence b's pages assumed consecutive from 0
            table = torch.arange(block_table.numel(), dtype=block_table.dtype).view_as(block_table)
            table = table.clamp_max(k_pages.shape[0] - 1)
            return gather_then_sdpa(q, k_pages, v_pages, table, seq_lens, sm_scale)
        if bug == "whole table":  # reads every page of the table, past seq_lens
            full = torch.full_like(seq_lens, block_table.shape[1] * k_pages.shape[1])
            return gather_then_sdpa(q, k_pages, v_pages, block_table, full, sm_scale)
        if bug == "default scale":
            return gather_then_sdpa(q, k_pages, v_pages, block_table, seq_lens, None)
        raise AssertionError(bug)

    return impl


def test_paged_cases_catch_the_bugs_of_a_paged_kernel():
    from kernels_ref.paged_attention import gather_then_sdpa

    assert all(_judged("paged_decode_attention", gather_then_sdpa).values())
    for bug, must_fail in (("contiguous pages", "lengths (1, 37, 100) H=4 H_kv=2 D=16 page 8 float32"),
                           ("whole table", "lengths (1, 2, 500) page 5 (not a power of two) H=2 D=16 float32"),
                           ("default scale", "sm_scale 0.3 lengths (50, 9) H=2 D=16 float32")):
        assert not _judged("paged_decode_attention", _paged_bug(bug))[must_fail], bug


def test_a_written_argument_is_exempt_from_the_input_check_and_no_other():
    from autograder import runner, specs
    from autograder.protocol import CallDone, Shipped
    from autograder.runner import make_plan

    spec = specs.get("rope_kv_append")
    case, a, _b, ref, _ = make_plan(spec, True, 3)[3]
    outputs = tuple(t.to(o.dtype) for t, o in zip(ref, (a[0], a[5], a[6])))
    after = list(a)
    after[5], after[6] = outputs[1], outputs[2]
    ok = runner.judge_call(spec, case, a, ref, CallDone(ok=True), Shipped(outputs, after))
    assert ok.ok, ok.message
    after[0] = a[0] * 2
    bad = runner.judge_call(spec, case, a, ref, CallDone(ok=True), Shipped(outputs, after))
    assert not bad.ok and "modified its input argument 0" in bad.message


def test_the_sort_path_behind_a_token_kernel_scores_zero_and_names_the_operators():
    from _autograder_helpers import graded

    ex = graded("later/sort_sampler_10.py", ("sample_top_p",), 300.0)["sample_top_p"]
    assert ex["score"] == 0 and not ex["correct"]
    for named in ("aten.sort", "aten._softmax", "aten.cumsum"):
        assert any(named in v for v in ex["violations"]), (named, ex["violations"])


def test_cache_rows_copied_by_torch_are_a_violation():
    from _autograder_helpers import graded

    ex = graded("later/rope_torch_cache_write_10.py", ("rope_kv_append",), 300.0)["rope_kv_append"]
    assert ex["score"] == 0 and any("aten.copy_" in v for v in ex["violations"]), ex["violations"]


def test_sampling_cases_are_built_on_one_device_whatever_the_course_device(monkeypatch):
    """On a GPU the logits went to the course device while temperature, top_p and uniform stayed on the CPU,
    and every sampling case failed to build. Here the course device is `meta`, which mixes with the CPU no
    better than CUDA does: the arguments must be computed together, then moved together."""
    import course
    from autograder.specs import nb10_serving

    monkeypatch.setattr(course, "DEVICE", "meta")
    args = nb10_serving._sampling_args(torch.Generator().manual_seed(0), 3, 300, torch.float32)
    assert [a.device.type for a in args] == ["meta"] * 4


def test_a_launcher_that_sizes_its_key_loop_by_the_longest_sequence_is_honest():
    """vLLM-style launchers pass int(seq_lens.max()) to the kernel as its loop bound: none of attention's
    work, so no operator of it may cost points."""
    from autograder import legality, specs

    rec = legality.OpRecorder(None)
    seq_lens = torch.tensor([3, 90, 17])
    with rec:
        max_len = int(seq_lens.max())
    assert max_len == 90
    ops = {op for op, _line, _n in rec.records()}
    assert "max" in ops and ops <= specs.get("paged_decode_attention").rules.allowed_ops, ops


@pytest.mark.parametrize("exercise, names", [("paged_decode_attention", ("block_table", "seq_lens")),
                                             ("rope_kv_append", ("positions",))])
def test_a_launcher_may_read_the_metadata_out_of_torch_and_never_the_data(exercise, names, monkeypatch):
    """Lengths, block tables and positions say where the data is: `seq_lens.tolist()` (a copy, a row, another
    integer type) sizes a grid, as the grader gave them. The float inputs, the metadata's storage after
    anything was written into it, and values computed from the metadata stay in torch."""
    from autograder import legality, specs

    spec = specs.get(exercise)
    signature = spec.signature.split("(", 1)[1].split(")")[0].split(", ")
    assert tuple(signature[i] for i in spec.metadata) == names
    monkeypatch.setattr(legality.Metadata, "positions", spec.metadata)
    data = torch.randn(4, 8)
    meta = torch.tensor([[3, 90, 17, 5], [0, 1, 2, 3]], dtype=torch.int32)
    args = [data] * (max(spec.metadata) + 1)
    for i in spec.metadata:
        args[i] = meta

    def left_torch(fn):
        rec = legality.OpRecorder(None, inputs=tuple(args))
        with rec:
            fn()
        return [op for op, _line, _n in rec.records() if op.startswith(legality.LEAVES_TORCH)]

    assert left_torch(lambda: (max(meta[0].tolist()), meta.cpu().tolist(), meta.to(torch.int64).numpy(),
                               meta.clone().tolist(), [int(v) for v in meta.view(-1)])) == []
    assert left_torch(lambda: data.tolist())
    assert left_torch(lambda: data.view(torch.int32).tolist())
    assert left_torch(lambda: (meta + 1).tolist())

    def written():
        meta.view(-1).copy_(data.view(-1)[:8].view(torch.int32))
        return meta.tolist()

    assert left_torch(written)
