"""tools/capstone_gpu.py: the claims' verdicts are computed from the numbers beside them, against each thing
a claim could be compared with; the tables show every variant; bad arguments are clear errors. (The whole
run on the CPU, at tiny sizes, takes minutes under the interpreter: `python -m tools.capstone_gpu OUT`.)"""
import pytest

from tools import capstone_gpu as cg


def _case(shape, **ms):
    return {"shape": shape, "rows": {n: {"ms": v, "check": {"ok": True, "max_error": 0.0}, "kernels": 7,
                                         "peak_bytes": 1024} for n, v in ms.items()}}


def test_each_claim_meets_every_comparison_and_its_verdict_follows_the_numbers():
    results = {"prefill": [_case("busy", **{"naive (01)": 4.0, "eager": 2.2, "course": 2.0,
                                            "course, CUDA graph": 1.9, "eager, CUDA graph": 2.1})],
               "decode": [_case("B1", **{"naive (01)": 0.30, "eager": 0.12, "course": 0.10})]}
    got = {(c["claim"], c["compares"]): c for c in cg.claims(results)}
    assert got[("prefill", "course vs naive (01)")]["verdict"] == "2.00x is within 1.72-2.22x"
    assert got[("prefill", "course vs eager")]["verdict"] == "1.10x is below 1.72-2.22x"
    assert got[("decode", "course vs naive (01)")]["verdict"] == "3.00x is above 1.1-1.5x"
    assert got[("decode", "course vs eager")]["speedup"] == pytest.approx(1.2)
    assert ("decode", "course, CUDA graph vs eager, CUDA graph") not in got  # not measured: no verdict
    text = cg.tables({**results, "claims": cg.claims(results)})
    assert "| naive (01) | 4.0000 | 0.55x |" in text and "2.00x is within 1.72-2.22x" in text


def test_unknown_sections_are_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        cg.main([str(tmp_path), "--only", "loss,nope"])
    assert "unknown section" in capsys.readouterr().err
