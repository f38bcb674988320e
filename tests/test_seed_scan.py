"""tools.gpu_seed_scan: the measured and counted exercises graded again and again, each grading's seed kept."""
import json

from tools import gpu_seed_scan


def _graded(seed, correct=True, failed=()):
    cases = [{"case": "small", "verdict": "ok"}]
    cases += [{"case": name, "verdict": "FAIL", "got": 2301952, "expected": 1753600, "unit": "bytes"} for name in failed]
    return {"id": "peak_memory_bytes", "score": 1.0 if correct else 0.625, "points": 8, "correct": correct,
            "violations": [], "feedback": [], "cases": cases, "seed": seed, "seconds": {"total": 1.0}}


def test_a_grading_that_loses_a_point_is_named_with_its_seed_and_case(tmp_path, monkeypatch):
    seeds = iter([11, 12, 13])
    graded = {11: _graded(11), 12: _graded(12, False, ["1 live temporaries"]), 13: _graded(13)}

    def fake_grade(path, ids, jobs):
        assert path.name == "02_profiling.ipynb" and path.exists() and ids == ["peak_memory_bytes"] and jobs == 1
        return {"exercises": [graded[next(seeds)]]}

    monkeypatch.setattr("autograder.grading.grade_submission", fake_grade)
    assert gpu_seed_scan.main([str(tmp_path), "--gradings", "3", "--exercises", "peak_memory_bytes"]) == 1
    record = json.loads((tmp_path / "seed-scan.json").read_text())
    rows = record["exercises"]["peak_memory_bytes"]
    assert [r["seed"] for r in rows] == [11, 12, 13] and [r["correct"] for r in rows] == [True, False, True]
    assert rows[1]["failed"] == [{"case": "1 live temporaries", "got": 2301952, "expected": 1753600, "unit": "bytes"}]
    line = gpu_seed_scan.table(record).splitlines()[1]
    assert line.split()[:4] == ["peak_memory_bytes", "3", "4", "1"]
    assert "seed 12: 1 live temporaries: got 2301952, expected 1753600" in line
    assert record["gradings"] == 3 and "method" in record


def test_a_scan_stops_before_a_grading_past_its_time(tmp_path, monkeypatch):
    monkeypatch.setattr("autograder.grading.grade_submission", lambda *a, **k: {"exercises": [_graded(1)]})
    assert gpu_seed_scan.main([str(tmp_path), "--exercises", "time_floor", "--stop-after", "-1"]) == 0
    record = json.loads((tmp_path / "seed-scan.json").read_text())
    assert record["stopped"] and record["exercises"] == {"time_floor": []}


def test_every_scanned_exercise_measures_counts_or_meters():
    from autograder import specs

    for ex_id in gpu_seed_scan.SCANNED:
        spec = specs.get(ex_id)
        assert spec.kind == "value" or spec.memory is not None, ex_id
        assert gpu_seed_scan.solution_notebook(spec).exists()
    assert {e for e in specs.EXERCISES if specs.get(e).kind == "value"} <= set(gpu_seed_scan.SCANNED)


def test_a_real_grading_keeps_its_seed_and_the_seed_remakes_its_cases(tmp_path):
    """The grader records the seed it drew, a new one every grading; runner.make_plan remakes from it every
    case built from the seed's generator (the tensor cases: linear_cross_entropy's here). 00's and 02's
    cases draw their numbers afresh and carry them in their names."""
    import torch

    from autograder import specs
    from autograder.runner import make_plan

    assert gpu_seed_scan.main([str(tmp_path), "--gradings", "2", "--exercises", "time_floor"]) == 0
    rows = json.loads((tmp_path / "seed-scan.json").read_text())["exercises"]["time_floor"]
    assert all(r["correct"] and r["score"] == 1.0 and r["cases"] > 0 for r in rows)
    first, second = (r["seed"] for r in rows)
    assert isinstance(first, int) and first != second
    spec = specs.get("linear_cross_entropy")
    again, once_more = make_plan(spec, True, first), make_plan(spec, True, first)
    assert all(p.case.name == q.case.name and all(torch.equal(x, y) for x, y in zip(p.a, q.a))
               for p, q in zip(again, once_more))
    assert not all(torch.equal(x, y) for x, y in zip(again[-1].a, make_plan(spec, True, second)[-1].a))


def test_a_resumed_scan_keeps_the_earlier_gradings_and_grades_only_what_is_missing(tmp_path, monkeypatch):
    from tools import results

    earlier = tmp_path / "earlier.json"
    gpu = results.this_machine()["gpu"]
    earlier.write_text(json.dumps({"gpu": gpu, "exercises": {"peak_memory_bytes": [
        gpu_seed_scan.grading_row(_graded(s)) for s in (1, 2)]}}))
    seeds = iter([3, 4, 5, 6])
    monkeypatch.setattr("autograder.grading.grade_submission",
                        lambda *a, **k: {"exercises": [_graded(next(seeds))]})
    out = tmp_path / "out"
    assert gpu_seed_scan.main([str(out), "--gradings", "3", "--exercises", "peak_memory_bytes,time_floor",
                               "--resume", str(earlier)]) == 0
    record = json.loads((out / "seed-scan.json").read_text())
    assert [r["seed"] for r in record["exercises"]["peak_memory_bytes"]] == [1, 2, 3]
    assert [r["seed"] for r in record["exercises"]["time_floor"]] == [4, 5, 6]
    assert record["resumed_from"] == str(earlier)


def test_a_scan_from_another_gpu_is_not_resumed(tmp_path):
    import pytest

    earlier = tmp_path / "earlier.json"
    earlier.write_text(json.dumps({"gpu": "some other GPU", "exercises": {}}))
    with pytest.raises(SystemExit, match="was scanned on some other GPU"):
        gpu_seed_scan.main([str(tmp_path / "out"), "--resume", str(earlier)])
