"""probes/probe_matmul_configs and probes/matmul_launch_cost on a machine without a GPU: the probe's variant
names, its choice of the best, and both tools' clear refusal (the launch path the probe times, ``config=``,
is checked in test_kernels_matmul.py)."""
import course
import pytest

from probes import probe_matmul_configs as probe


def test_variants_have_distinct_names():
    params = [probe.tile_params(t) for t in probe.TILES]
    params += [{**p, **k} for p in params for k in probe.KNOBS]
    names = [probe._name(p) for p in params]
    assert len(set(names)) == len(names)
    assert probe._name(probe.tile_params(probe.TILES[0])) == "128x256x64 s3 w8 sub1 g8 flat1 ws0"


def test_best_skips_a_variant_that_regresses_elsewhere():
    def shape(label, **x_current):
        rows = [{"variant": n, "params": {} if n == "current" else {"n": n}, "ms": 1 / x, "x_current": x}
                for n, x in sorted(x_current.items(), key=lambda item: -item[1])]
        return {"shape": label, "rows": rows}

    head = shape("big", current=1.0, fast=1.5, faster=2.0)
    assert probe.best(head, [shape("small", current=1.0, fast=1.0, faster=0.9)])["variant"] == "fast"
    assert probe.best(head, [shape("small", current=1.0, fast=0.5, faster=0.9)])["variant"] == "current"


@pytest.mark.skipif(course.ON_GPU, reason="on a GPU the probe runs")
def test_refuses_without_a_tma_gpu(capsys):
    assert probe.main([]) == 2
    assert "needs a GPU with TMA" in capsys.readouterr().out


@pytest.mark.skipif(course.ON_GPU, reason="on a GPU the tool runs")
def test_launch_cost_refuses_without_a_gpu(capsys):
    from probes import matmul_launch_cost

    assert matmul_launch_cost.main([]) == 2
    assert "needs a GPU" in capsys.readouterr().out
