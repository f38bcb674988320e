"""tools/probe_kernel_configs on the CPU (the interpreter): every launch variant of every op is correct
against float64 on a small odd shape, a --quick run prints its tables and writes its JSON, and the best
variant is never one that is slower than the current kernel on another shape. On a GPU the probe checks
every variant itself before timing it."""
import json

import course
import pytest
import torch

from tools import probe_kernel_configs as probe
from tools.results import META_KEYS, file_kind

pytestmark = pytest.mark.skipif(course.ON_GPU, reason="the interpreter's run; on a GPU the probe checks itself")


@pytest.mark.parametrize("name", probe.OPS)
def test_every_variant_is_correct(name):
    torch.manual_seed(0)
    op = probe.ops()[name]
    variants = op.variants(quick=False)
    assert len({v.name for v in variants}) == len(variants), "two variants share a name"
    inputs = op.make_inputs(19, 72, torch.bfloat16)
    ref = op.reference(*inputs)
    wrong = {v.name: row.note for v in variants if not (row := probe.check(v.fn, inputs, ref)).correct}
    assert not wrong


def test_quick_run_prints_and_writes_json(tmp_path, capsys):
    path = tmp_path / "probe-configs.json"
    assert probe.main(["--quick", "--ops", "bias_gelu,layer_norm_bwd", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert "== summary" in out and "== bias_gelu 40x96 bf16" in out
    data = json.loads(path.read_text())
    assert set(META_KEYS) <= set(data) and file_kind(path.name) == "probe"
    assert list(data["ops"]) == ["bias_gelu", "layer_norm_bwd"]
    for res in data["ops"].values():
        assert [s["shape"] for s in res["shapes"]] == data["shapes"]
        rows = {r["variant"]: r for r in res["shapes"][0]["rows"]}
        assert {"copy", "current", "eager"} <= set(rows)
        # eager LayerNorm backward's bf16 sums on a CPU miss the tolerance; every variant is right
        assert all(r["correct"] and r["ms"] for n, r in rows.items() if n != "eager")
        assert res["best"]["variant"] in rows


def test_best_skips_a_variant_that_regresses_elsewhere():
    def shape(label, **x_current):
        rows = [{"variant": n, "params": {}, "ms": 1 / x, "correct": True, "of_copy": None, "of_copy_1g": None,
                 "x_current": x, "x_eager": None} for n, x in x_current.items()]
        return {"shape": label, "rows": rows}

    head = shape("big", current=1.0, fast=1.5, faster=2.0)
    others = [shape("small", current=1.0, fast=1.0, faster=0.9)]
    assert probe.best(head, others)["variant"] == "fast"
    assert probe.best(head, [shape("small", current=1.0, fast=0.5, faster=0.9)])["variant"] == "current"


def test_unknown_op_is_refused():
    with pytest.raises(SystemExit):
        probe.parse_args(["--ops", "matmul"])
