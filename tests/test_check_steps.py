"""check(id, fn, step=...): a kernel an entry point is built from, checked alone (07's backward: delta, then
dK/dV, then dQ), against float64 on its own cases, with the exercise's tolerances and rules."""
from __future__ import annotations

from pathlib import Path

import pytest

from autograder import check, specs, submission

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")  # kept to the end: xdist interleaves other modules, which would tear a module fixture down
def flash_steps():
    """The solution notebook of 07, its graded code run here (its check() cells do nothing while it loads)."""
    sub = submission.load(ROOT / "solutions" / "07_flash_attention" / "07_flash_attention.ipynb")
    namespace = {"__name__": "solution_07"}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AUTOGRADER_WORKER", "1")
        exec(compile(sub.source, "07_flash_attention.ipynb", "exec"), namespace)  # noqa: S102
    return namespace


def test_every_step_names_an_entry_point_of_the_notebook_and_checks_one_launch():
    spec = specs.get("flash_attention_bwd")
    assert list(spec.steps) == ["delta", "dkdv", "dq"]
    for name in spec.steps:
        step = spec.step(name)
        assert step.performance is None and step.memory is None and step.rules.max_launches == 1
        assert step.id == f"flash_attention_bwd:{name}" and all(c.public for c in step.cases(False))
    with pytest.raises(KeyError, match="'delta', 'dkdv', 'dq'"):
        spec.step("softmax")


def test_each_step_of_the_solution_passes_its_check(flash_steps, capsys):
    for name, entry in (("delta", "attention_delta"), ("dkdv", "attention_dkdv"), ("dq", "attention_dq")):
        assert check("flash_attention_bwd", flash_steps[entry], step=name) is True, capsys.readouterr().out
        out = capsys.readouterr().out
        assert f"check('flash_attention_bwd', step='{name}')" in out and "PASSED" in out and "FAIL" not in out


def test_a_wrong_step_fails_its_own_check_and_says_where(flash_steps, capsys):
    dkdv = flash_steps["attention_dkdv"]

    def dkdv_without_the_mask(do, q, k, v, lse, delta, causal, sm_scale):
        return dkdv(do, q, k, v, lse, delta, False, sm_scale)  # causal ignored: every key sees every query

    assert check("flash_attention_bwd", dkdv_without_the_mask, step="dkdv") is False
    out = capsys.readouterr().out
    verdicts = [line.split()[-1] for line in out.splitlines() if line.startswith("  ") and "causal=" in line
                and line.split()[-1] in ("ok", "FAIL")]
    assert verdicts == ["ok", "FAIL", "FAIL"], out  # the causal cases fail, the plain one passes
    assert "first failure" in out and "causal=True" in out and "NOT YET" in out


def test_a_step_left_unwritten_is_named_not_written(capsys):
    def attention_delta(o, do):
        raise NotImplementedError()

    assert check("flash_attention_bwd", attention_delta, step="delta") is False
    assert "not written yet" in capsys.readouterr().out
