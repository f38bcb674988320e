"""probes/probe_kernel_configs on the CPU (the interpreter): every launch variant of every op is correct
against float64 on a small odd shape, a --quick run prints its tables and writes its JSON, and the best
variant is never one that is slower than the current kernel on another shape. On a GPU the probe checks
every variant itself before timing it."""
import json

import course
import pytest
import torch

from probes import probe_kernel_configs as probe
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
        assert {"copy", "current", "eager"} | {f"triton copy e{e} w{w}" for e, w in probe.TRITON_COPIES} <= set(rows)
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


def test_a_triton_copy_moves_the_bytes_it_is_timed_for():
    nbytes = 4 * 3000 + 4  # not a multiple of any block: the masked tail too
    run = probe.triton_copy_of(nbytes, block=1024, num_warps=4)
    src = torch.randn(nbytes // 4, dtype=torch.bfloat16)
    dst = torch.full_like(src, float("nan"))
    probe._copy_kernel[(3,)](src, dst, src.numel(), BLOCK=1024)
    assert torch.equal(src, dst)
    run()  # and the timed closure launches


def test_the_best_is_never_a_copy():
    rows = [{"variant": n, "params": {}, "ms": ms, "correct": True, "of_copy": None, "of_copy_1g": None,
             "x_current": 1.0 / ms, "x_eager": None}
            for n, ms in (("copy", 0.5), ("triton copy e8192 w8", 0.6), ("current", 1.0), ("eager", 2.0))]
    assert probe.best({"shape": "s", "rows": rows}, [])["variant"] == "current"


def test_shapes_and_variants_are_chosen_on_the_command_line():
    args = probe.parse_args(["--shapes", "8192x8192,4096x16384", "--variants", "split, w16"])
    assert args.shapes == ((8192, 8192), (4096, 16384)) and args.variants == ["split", "w16"]
    for bad in ("8192", "8x8x8", "0x4", "ax4"):
        with pytest.raises(SystemExit):
            probe.parse_args(["--shapes", bad])
    op = probe.ops()["layer_norm_bwd"]
    res = probe.probe_op(op, [(19, 72), (5, 40)], False, {"reps": 1, "warmup": 0, "max_seconds": 5.0}, None,
                         log=lambda *a, **k: None, only=["split"])
    head, other = ({r["variant"] for r in s["rows"]} for s in res["shapes"])
    splits = {v.name for v in op.variants(False) if "split" in v.name}
    assert len(splits) == 9 and splits <= head and splits <= other  # every split variant on every shape
    assert not {n for n in head if "split" not in n} - {"copy", *probe.BASELINES} - \
        {f"triton copy e{e} w{w}" for e, w in probe.TRITON_COPIES}


def test_a_float32_probe_checks_and_labels_float32_inputs():
    assert probe.parse_args(["--dtype", "fp32"]).dtype == "fp32"
    with pytest.raises(SystemExit):
        probe.parse_args(["--dtype", "int8"])
    op = probe.ops()["bias_gelu"]
    res = probe.probe_op(op, [(19, 72)], True, {"reps": 1, "warmup": 0, "max_seconds": 5.0}, None,
                         log=lambda *a, **k: None, only=["ev0"], dtype_name="fp32")
    shape = res["shapes"][0]
    assert shape["shape"] == "19x72 fp32" and shape["bytes"] == (2 * 19 * 72 + 72) * 4
    assert all(r["correct"] for r in shape["rows"] if r["variant"] in ("current", "var bm8 bn1024 w8 ev0 st0"))


@pytest.mark.parametrize("M,N,elems", [(19, 72, 64), (8, 64, 64), (3, 40, 256)])
def test_the_flat_bias_gelu_indexes_the_bias_by_column(M, N, elems):
    import torch

    from kernels_ref.bias_gelu import bias_gelu_torch

    x, b = torch.randn(M, N), torch.randn(N)
    got = probe.bias_gelu_flat(x, b, elems=elems, num_warps=4)
    assert torch.allclose(got.double(), bias_gelu_torch(x.double(), b.double()), rtol=1e-5, atol=1e-6)
