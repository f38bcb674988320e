"""autograder.warm: more workers of a submission beside its graded worker change no grade.

Without a GPU the grader starts none (the interpreter compiles nothing, and the machine has no spare
cores); here they are forced on (AUTOGRADER_WARMERS) to check what matters on any machine: ``share``, every
case run once, by the graded worker or a warmer, and judged the same whichever ran it; a case a warmer could
not finish (a crash, a hang) run by the graded worker, which waits for the others' cases no longer than its
own time limit; ``before``, the verdicts the graded worker's alone, a warmer that hangs costing at most a
quarter of the time limit, and every warmer gone when the graded worker's cases start."""
from __future__ import annotations

import threading
import time

import pytest

from autograder import warm
from autograder.grading import grade_submission

from _autograder_helpers import SUBMISSIONS, graded


def test_shares_deal_every_case_once():
    assert warm.shares(7, 3) == [[0, 3, 6], [1, 4], [2, 5]]
    assert warm.shares(2, 4) == [[0], [1], [], []]
    assert warm.shares(5, 0) == []


def test_the_case_queue_hands_out_each_case_once_and_takes_back_what_a_worker_could_not_finish():
    queue = warm.CaseQueue(3)
    assert [queue.take(), queue.take()] == [0, 1]
    queue.give_back(0)  # its worker failed: the next to ask runs it
    assert queue.take() == 0
    queue.done(0, "run 0", 1)
    queue.done(0, "late", warm.GRADED)  # a case run twice (taken back at a deadline) keeps the first run
    assert queue.take() == 2 and queue.take() is None  # case 1 is another's: without a wait, nothing is left
    queue.done(2, "run 2", warm.GRADED)
    # the graded worker waits for the case still out; it comes back and is its own to run
    threading.Timer(0.2, queue.give_back, args=(1,)).start()
    assert queue.take(wait_until=time.monotonic() + 30) == 1
    queue.done(1, "run 1", warm.GRADED)
    assert queue.take(wait_until=time.monotonic() + 30) is None
    assert queue.runs == ["run 0", "run 1", "run 2"] and queue.ran_by == [1, warm.GRADED, warm.GRADED]


def test_the_graded_worker_waits_for_a_warmers_case_no_longer_than_its_own_time_limit():
    queue = warm.CaseQueue(1)
    assert queue.take() == 0  # a warmer's, which never comes back
    start = time.monotonic()
    assert queue.take(wait_until=start + 0.3) == 0  # past the limit the graded worker runs it itself
    assert 0.25 < time.monotonic() - start < 5


def test_a_warmer_that_fails_in_a_case_hands_it_back():
    from autograder.isolation import WorkerGone

    class Crashes:
        def __init__(self):
            self.requests = 0

        def request(self, req, reply=None):
            self.requests += 1
            if self.requests > 8:  # its second case: load, prepare, call, ship, refill, prepare, call, ship
                raise WorkerGone("the worker crashed")

    ahead = warm.Warmers({"code": "submission"}, 0, 60.0, None, "/nonexistent")
    ahead.plan = [type("P", (), {"a": (), "b": ()})() for _ in range(3)]
    ahead.queue = warm.CaseQueue(3)
    ahead.calls = [0]
    with pytest.raises(WorkerGone):
        ahead._share(0, Crashes())
    assert ahead.calls == [1] and ahead.queue.ran_by == [0, None, None]
    assert [ahead.queue.take(), ahead.queue.take()] == [1, 2]


def test_a_mistyped_mode_is_an_error_before_grading(monkeypatch):
    monkeypatch.setenv(warm.MODE_ENV, "sideways")
    with pytest.raises(ValueError, match="share, before"):
        warm.warmer_count(1)


def test_no_warmers_without_a_gpu_unless_asked(monkeypatch):
    import course

    monkeypatch.delenv(warm.ENV, raising=False)
    monkeypatch.setattr(course, "ON_GPU", False)
    assert warm.warmer_count(1) == 0
    monkeypatch.setattr(course, "ON_GPU", True)
    monkeypatch.setattr(warm.os, "cpu_count", lambda: 16)
    assert warm.warmer_count(3) == 3   # 16 cores over 3 exercises: 5 each, less the graded and baseline workers
    assert warm.warmer_count(1) == warm.MAX_WARMERS
    assert warm.warmer_count(1, cores=8) == 6  # a batch worker's share of the machine, not all of it
    assert warm.warmer_count(2, cores=8) == 2
    monkeypatch.setattr(warm.os, "cpu_count", lambda: 64)  # a 4-GPU host
    assert warm.warmer_count(2) == warm.MAX_WARMERS  # one submission alone
    assert warm.warmer_count(2, cores=16) == 2  # one of four graded at once: the host's warmers shared out
    monkeypatch.setenv(warm.HOST_ENV, "32")
    assert warm.warmer_count(2, cores=16) == 4
    monkeypatch.delenv(warm.HOST_ENV)
    monkeypatch.setattr(warm.os, "cpu_count", lambda: 2)
    assert warm.warmer_count(2) == 0
    monkeypatch.setenv(warm.ENV, "2")
    assert warm.warmer_count(8) == 2


def _remember_warmers(monkeypatch) -> list:
    """Every Warmers the grader runs from now on, in a list (filled as they start their cases)."""
    seen, real_run = [], warm.Warmers.run

    def remember(self, plan, timed_args=None):
        seen.append(self)
        real_run(self, plan, timed_args)

    monkeypatch.setattr(warm.Warmers, "run", remember)
    return seen


def _all_gone(warmers) -> bool:
    return all(s.proc.poll() is not None for s in warmers.sessions)


def _scores(result):
    return {ex["id"]: (ex["score"], ex["correct"]) for ex in result["exercises"]}


def _plain_grading(monkeypatch) -> dict:
    """good_triton's vector_add and softmax graded without warmers. Without a GPU the grader starts none, so
    this is the grading the run shares (tests/_autograder_helpers.graded: test_autograder_guarantees and
    test_feedback grade all of good_triton's exercises, asked for here too so that the run grades them once);
    on a GPU they are turned off here."""
    import course

    # here: a module-level `graded` would keep the module in one process
    from _autograder_helpers import GOOD_TRITON_EXERCISES, graded

    if not course.ON_GPU:
        done = graded("good_triton.py", GOOD_TRITON_EXERCISES)
        return {"exercises": [done["vector_add"], done["softmax"]]}
    monkeypatch.setenv(warm.ENV, "0")
    return grade_submission(SUBMISSIONS / "good_triton.py", ["vector_add", "softmax"], quick=True)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("mode", warm.MODES)
def test_warmers_change_no_verdict(monkeypatch, mode):
    monkeypatch.setenv(warm.MODE_ENV, mode)
    monkeypatch.setenv("AUTOGRADER_JOBS", "1")
    plain = _plain_grading(monkeypatch)
    monkeypatch.setenv(warm.ENV, "2")
    warmed = grade_submission(SUBMISSIONS / "good_triton.py", ["vector_add", "softmax"], quick=True)
    assert _scores(warmed) == _scores(plain)
    assert all(correct for _, correct in _scores(warmed).values())
    # "before": the graded worker waited for them (a lap of its own); "share": it waited for nothing
    assert all(("compiling ahead" in ex["seconds"]) == (mode == "before") for ex in warmed["exercises"])
    assert all("compiling ahead" not in ex["seconds"] for ex in plain["exercises"])
    wrong = grade_submission(SUBMISSIONS / "wrong_on_odd.py", ["softmax"], quick=True)
    assert not wrong["exercises"][0]["correct"]


def test_shared_cases_are_judged_as_the_graded_workers_own(monkeypatch):
    """A wrong submission and one that crashes get the same verdicts and feedback whichever worker ran their cases
    (the same seed, so the same cases): the first failure in the plan's order, the crash found again by the
    graded worker when a warmer's case came back."""
    import course

    from autograder import grading

    if course.ON_GPU:  # graded alone, without the warmers a GPU gets
        monkeypatch.setenv(warm.ENV, "0")
        plain = {name: {"softmax": grade_submission(SUBMISSIONS / name, ["softmax"], quick=True,
                                                    timeout=120.0)["exercises"][0]}
                 for name in ("wrong_on_odd.py", "crashes.py")}
    else:  # the gradings the run shares (no warmers without a GPU)
        plain = {name: graded(name, exercises) for name, exercises in (
            ("wrong_on_odd.py", ("softmax",)),
            ("crashes.py", ("softmax", "online_softmax", "naive_softmax", "bias_gelu", "vector_add")))}
    seen, real_share = _remember_warmers(monkeypatch), warm.Warmers.share_cases

    def share_cases(self, session, deadline):  # the graded worker starts once a warmer has run a case (or failed)
        give_up = time.monotonic() + 60
        while not sum(self.calls) and any(t.is_alive() for t in self.threads) and time.monotonic() < give_up:
            time.sleep(0.05)
        return real_share(self, session, deadline)

    monkeypatch.setattr(warm.Warmers, "share_cases", share_cases)
    seeds = iter([plain["wrong_on_odd.py"]["softmax"]["seed"], plain["crashes.py"]["softmax"]["seed"]])
    monkeypatch.setattr(grading, "fresh_seed", lambda: next(seeds))
    monkeypatch.setenv("AUTOGRADER_JOBS", "1")
    monkeypatch.setenv(warm.ENV, "2")
    monkeypatch.setenv(warm.MODE_ENV, "share")
    for name in plain:
        shared = grade_submission(SUBMISSIONS / name, ["softmax"], quick=True, timeout=120.0)["exercises"][0]
        alone = plain[name]["softmax"]
        assert not shared["correct"] and shared.get("ended") == alone.get("ended"), name
        # the verdicts, not the errors: what an element left unwritten holds (poison, or a value an earlier call of
        # that worker left in memory it freed) depends on what that worker ran before (on a GPU: 3x17 float32's
        # largest error inf in one run, 0.074 in another), and its error is past any tolerance either way
        assert [(r["case"], r["verdict"]) for r in shared["cases"]] == \
            [(r["case"], r["verdict"]) for r in alone["cases"]], name
        assert shared["feedback"][0].split(":")[:2] == alone["feedback"][0].split(":")[:2], name  # the first failure
    assert len(seen) == 2 and sum(seen[0].calls) >= 1  # the wrong outputs: some judged from the warmers


@pytest.mark.parametrize("mode", warm.MODES)
def test_a_hanging_warmer_is_cut_off_and_the_graded_worker_judges(monkeypatch, mode):
    monkeypatch.setenv(warm.MODE_ENV, mode)
    monkeypatch.setenv("AUTOGRADER_JOBS", "1")
    monkeypatch.setenv(warm.ENV, "2")
    start = time.monotonic()
    # a hang asleep: the limits are wall-clock, and a busy loop would spend 30 s of CPU a mode waiting them out
    result = grade_submission(SUBMISSIONS / "hangs_asleep.py", ["softmax"], quick=True, timeout=8.0)
    ex = result["exercises"][0]
    assert not ex["correct"] and "time limit" in "\n".join(ex["feedback"])
    # before: the warmers waited at most 2 s (a quarter of the limit), and that wait was given back to the worker
    assert ex["seconds"].get("compiling ahead", 0.0) <= 3.0
    assert time.monotonic() - start < 8.0 + 3.0 + 15.0  # limit, warm wait, process starts and teardown


def test_every_warmer_is_gone_before_the_graded_cases(monkeypatch):
    """``before``: the warmers' processes are dead when the graded worker runs its first case: none shares
    the GPU with a judged call."""
    from autograder import grading, runner

    seen = _remember_warmers(monkeypatch)
    real_run_cases = runner.run_cases

    def run_cases(session, plan, on_case=None):
        for warmers in seen:
            assert _all_gone(warmers)
        return real_run_cases(session, plan, on_case)

    monkeypatch.setattr(grading.runner, "run_cases", run_cases)
    monkeypatch.setenv("AUTOGRADER_JOBS", "1")
    monkeypatch.setenv(warm.ENV, "2")
    monkeypatch.setenv(warm.MODE_ENV, "before")
    result = grade_submission(SUBMISSIONS / "good_triton.py", ["bias_gelu"], quick=True)
    assert seen and result["exercises"][0]["correct"]
    assert sum(seen[0].calls) == len(seen[0].plan)  # between them they called every case


def test_the_last_warmer_calls_the_timed_workload_first(tmp_path):
    import torch

    from autograder import grading, runner, specs
    from autograder.submission import load

    spec = specs.get("bias_gelu")
    sub = load(SUBMISSIONS / "good_triton.py")
    source = sub.write(tmp_path)
    plan = runner.make_plan(spec, True, 7)[:3]
    timed_args = (torch.randn(64, 96), torch.randn(96))  # the timed workload's layout, small
    ahead = warm.Warmers(grading.submission_job(spec, sub, source), 2, 60.0, str(sub.path.parent),
                         str(tmp_path / "bias_gelu")).start()
    ahead.run(plan, timed_args)
    # (no graded worker here: the two warmers ran every case between them but the first, kept for it)
    assert ahead.wait(60.0) == 2 and ahead.graded_first == 0
    assert ahead.timed_call_done and ahead.queue.runs[0] is None and all(run is not None for run in ahead.queue.runs[1:])
    assert _all_gone(ahead)


def test_the_warmer_autotuning_the_timed_workload_outlives_the_cases_and_its_wait_is_bounded(tmp_path):
    """After the graded worker's cases the warmer calling the timed workload lives on until its call is done
    (then the timing's warm-up finds every config compiled); the wait for it is bounded, and afterwards no
    warmer is left: one whose timed call hangs is killed at the bound."""
    import torch

    from autograder import grading, runner, specs
    from autograder.submission import load

    spec = specs.get("softmax")
    plan = runner.make_plan(spec, True, 7)[:2]
    timed_args = (torch.randn(64, 96),)
    for name, done in (("good_triton.py", True), ("hangs_asleep.py", False)):
        sub = load(SUBMISSIONS / name)
        (tmp_path / name).mkdir()
        source = sub.write(tmp_path / name)
        ahead = warm.Warmers(grading.submission_job(spec, sub, source), 2, 60.0, str(sub.path.parent),
                             str(tmp_path / name / "softmax")).start()
        ahead.run(plan, timed_args)
        ahead.close(but_the_timed_call=True)
        assert ahead.sessions[0].proc.poll() is not None  # the other warmer is killed at once
        start = time.monotonic()
        waited = ahead.finish_timed_call(4.0 if not done else 60.0)
        assert ahead.timed_call_done == done and _all_gone(ahead)
        assert abs(waited - (time.monotonic() - start)) < 0.5 and (done or 3.9 <= waited < 8.0)


def test_shared_out_every_case_is_run_once_and_the_warmers_are_gone_before_judging(monkeypatch):
    from autograder import grading, runner

    seen, alive_when_judged = _remember_warmers(monkeypatch), []
    real_judge = runner.judge_cases

    def judge_cases(spec, plan, runs, where):
        for warmers in seen:  # killed when the cases ended (but for one still autotuning the timed workload)
            alive_when_judged.append([i for i, s in enumerate(warmers.sessions) if s.proc.poll() is None
                                      and (i != warmers.timed_warmer or warmers.timed_call_done)])
        assert all(run is not None for run in runs)
        return real_judge(spec, plan, runs, where)

    monkeypatch.setattr(grading.runner, "judge_cases", judge_cases)
    monkeypatch.setenv("AUTOGRADER_JOBS", "1")
    monkeypatch.setenv(warm.ENV, "2")
    monkeypatch.setenv(warm.MODE_ENV, "share")
    result = grade_submission(SUBMISSIONS / "good_triton.py", ["bias_gelu"], quick=True)
    ex = result["exercises"][0]
    assert ex["correct"] and "compiling ahead" not in ex["seconds"]  # nothing waited for them
    warmers = seen[0]
    assert warmers.mode == "share" and alive_when_judged == [[]]
    ran = ex["seconds"]["cases, where run"]
    assert ran == {"graded worker": warmers.queue.ran_by.count(warm.GRADED), "warmers": sum(warmers.calls)}
    assert sum(ran.values()) == len(warmers.plan) == len(ex["cases"])  # every case once


def test_the_exercises_as_handed_out_are_known_and_nothing_else_is():
    """Every released exercise whose function is only ``raise NotImplementedError`` is known as left
    undone (08's loss hands out a function that calls an autograd.Function: not known, so warmed as
    before); no solution is; a name bound twice, rebound through ``global`` or a body with anything else is
    not."""
    from pathlib import Path

    from autograder import specs
    from autograder.submission import left_as_handed_out, load

    root = Path(__file__).resolve().parent.parent
    for solution in sorted((root / "solutions").glob("*/*.ipynb")):
        released = load(root / "notebooks" / solution.parent.name / solution.name)
        solved = load(solution)
        for spec in specs.for_notebook(solution.parent.name):
            assert not left_as_handed_out(solved.source, spec.entry), spec.id
            assert left_as_handed_out(released.source, spec.entry) == (spec.id != "linear_cross_entropy"), spec.id
    stub = 'def f(x):\n    """Doc."""\n    # YOUR CODE HERE\n    raise NotImplementedError()\n'
    assert left_as_handed_out(stub, "f") and left_as_handed_out("def f():\n    raise NotImplementedError\n", "f")
    for bound_again in ("f = len\n", "import os as f\n", "def g():\n    global f\n", "for f in ():\n    pass\n",
                        "def f(x):\n    return x\n"):
        assert not left_as_handed_out(stub + bound_again, "f"), bound_again
    assert not left_as_handed_out("def f(x):\n    y = 1\n    raise NotImplementedError()\n", "f")
    assert not left_as_handed_out("def f(x):\n    raise ValueError()\n", "f")
    assert not left_as_handed_out("def f(:\n", "f")


def test_an_exercise_left_as_handed_out_starts_no_warmers_and_scores_zero(monkeypatch, tmp_path):
    from autograder import isolation

    monkeypatch.setenv(warm.ENV, "2")
    seen = _remember_warmers(monkeypatch)
    started, real_start = [], isolation.WorkerSession.start

    def start(self):
        started.append(self.job.get("code"))
        return real_start(self)

    monkeypatch.setattr(isolation.WorkerSession, "start", start)
    stub = tmp_path / "untouched.py"
    stub.write_text("import torch\n\n\ndef vector_add(x, y):\n    # YOUR CODE HERE\n    raise NotImplementedError()\n")
    result = grade_submission(stub, ["vector_add"], quick=True, timeout=60)
    ex = result["exercises"][0]
    assert ex["score"] == 0 and not ex["correct"]
    assert "not written yet" in " ".join(ex.get("feedback", [])) + str(ex.get("hint", "")), ex
    assert started == ["submission"] and seen == []  # the graded worker alone


def test_a_baseline_the_timing_opens_itself_has_the_wait_for_the_gpu_added_to_its_time_limit(monkeypatch):
    """Working code the source's reading takes for the stub as handed out (the stub kept, the learner's
    function brought in below it by a star import) starts no early baseline: the timing opens its own, whose
    deadline must grow by the wait for the GPU as the early one's does (else a long wait behind the other
    exercises' timings ended the baseline's time limit inside the timing: the exercise graded as timed out).
    The GPU path, forced on the CPU: the timing itself faked, the wait reported as 1000 s."""

    from autograder import grading
    from autograder.submission import left_as_handed_out

    path = SUBMISSIONS / "honest_stub_kept_star_import.py"
    assert left_as_handed_out(path.read_text(), "vector_add")  # (what makes this the late baseline's path)
    monkeypatch.delenv(warm.ENV, raising=False)
    monkeypatch.setattr(grading.timing, "should_time", lambda on_gpu, perf: (perf is not None, ""))
    monkeypatch.setattr(grading._Alone, "time_alone", lambda self: 1000.0)
    left = []

    def time_against_baseline(worker, spec, seed, loaded=None, **kw):
        left.append(loaded.sessions["baseline"].deadline - time.monotonic())
        return None, 0.0, True, []

    monkeypatch.setattr(grading, "time_against_baseline", time_against_baseline)
    monkeypatch.setattr(grading, "timed_shape_violations", lambda *a, **k: [])
    result = grade_submission(path, ["vector_add"], quick=True, timeout=60)
    ex = result["exercises"][0]
    assert ex["correct"], ex
    assert len(left) == 1 and left[0] > 1000, left  # the 60 s limit, and the 1000 s waited on top


def test_a_case_runs_the_config_its_number_pins_whatever_its_worker_ran_before(tmp_path):
    """An autotuner caches its choice by its key's arguments and the dtypes: a case whose key an earlier case of
    the same worker had would run that case's config, not its own, so which configs ran on which cases (and the
    verdicts) would depend on how the cases were shared out between the workers. Case 3 (float32, pinned to the
    wrong config of two) fails after case 0 (float32, the right config) in one worker as it fails alone."""
    from autograder import grading, runner, specs
    from autograder.isolation import WorkerSession
    from autograder.submission import load

    spec = specs.get("vector_add")
    sub = load(SUBMISSIONS / "autotune_bad_config_one_key.py")
    job = grading.submission_job(spec, sub, sub.write(tmp_path))
    plan = runner.make_plan(spec, True, 7)
    assert [plan[k].case.name for k in (0, 3)] == ["n=1 float32", "n=17 float32"]
    verdicts = []
    for order in ([3], [0, 3]):
        with WorkerSession(job, 60.0, cwd=str(sub.path.parent), scratch=str(tmp_path / f"after{order[0]}")) as worker:
            runs = {number: runner.run_case(worker, plan[number], number) for number in order}
        judged = runner.judge_cases(spec, [plan[3]], [runs[3]], sub.where)
        verdicts.append((judged.rows[0]["verdict"], judged.first_fail and judged.first_fail.message))
    assert verdicts[0] == verdicts[1] and verdicts[0][0] == "FAIL", verdicts
    assert "BIAS: 1" in verdicts[1][1]


def test_the_graded_workers_own_refusals_are_judged_with_a_case_of_its_own(monkeypatch):
    """Code that tells the graded worker from the warmers (its sandbox's scratch folder) is refused a change of
    the environment at import in the graded worker alone, then waits there until the warmers took every case:
    the refusal, charged to the graded worker's next checked call, costs the points as it does without warmers
    (the graded worker runs the first case itself, however late it starts: here it starts once the warmers have
    taken every other case)."""
    from autograder import grading

    real_share = warm.Warmers.share_cases

    def share_cases(self, session, deadline):  # the graded worker late: every case left has been taken (or failed)
        give_up = time.monotonic() + 60
        while (self.queue._todo and any(t.is_alive() for t in self.threads)
               and time.monotonic() < give_up):
            time.sleep(0.05)
        return real_share(self, session, deadline)

    monkeypatch.setattr(warm.Warmers, "share_cases", share_cases)
    monkeypatch.setattr(grading, "fresh_seed", lambda: 12345)
    monkeypatch.setenv("AUTOGRADER_JOBS", "1")
    monkeypatch.setenv(warm.MODE_ENV, "share")
    monkeypatch.setenv(warm.ENV, "2")
    ex = grade_submission(SUBMISSIONS / "escape_tells_the_graded_worker.py", ["softmax"], quick=True,
                          timeout=90.0)["exercises"][0]
    assert not ex["correct"] and ex["score"] == 0, ex
    assert any("COURSE_FLAG" in v and "refused" in v for v in ex["violations"]), ex["violations"]
    assert ex["seconds"]["cases, where run"]["graded worker"] >= 1
