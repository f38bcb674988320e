"""What happened to each learner's submission, and what a person should look at.

A batch's outcome for one learner (autograder.batch) holds one grading result per notebook; this module
reads it the same way for every class output (the run's summary, ``scores.csv``, the leaderboard, the
review list and nbgrader's manual-grade flag):

- ``status(result)``: one word per notebook (``STATUSES``) with its reason in plain words;
- ``flags(outcome)``: what a person should review, one entry per (notebook, exercise, reason): tampering
  (the learner's source names the grader: importing or patching it), other violations, an unreadable
  file, a crashed worker, a grading task that never came back, and speedups too large to believe.
"""
from __future__ import annotations

# A notebook's status, worst first: the first that applies is the one reported.
STATUSES = ("not graded", "unreadable", "not submitted", "violations", "crashed", "timed out", "graded")

# Speedups this far above an exercise's full-credit threshold beat the course's own baselines (torch,
# cuBLAS) by more than a learner's kernel plausibly can: worth a look before the grade stands.
SUSPICIOUS_OVER_THRESHOLD = 4.0
# A kernel above the roofline measured on the grading GPU is physically impossible: something was skipped.
SUSPICIOUS_FRACTION_OF_PEAK = 1.05


def _first_line(text: str, limit: int = 300) -> str:
    line = next((s.strip() for s in str(text).splitlines() if s.strip()), "")
    return line if len(line) <= limit else line[:limit - 3] + "..."


def exercise_status(ex: dict) -> tuple[str, str]:
    """(status, reason) of one graded exercise; the reason is empty only where it earned its correctness."""
    if ex.get("violations"):
        return "violations", _first_line(ex["violations"][0])
    if ex.get("ended") in ("crashed", "timed out"):
        return ex["ended"], _first_line((ex.get("feedback") or [""])[0])
    if not ex.get("correct"):  # graded, and wrong: the first failure says why (an exercise left undone, say)
        return "graded", _first_line((ex.get("feedback") or ["not correct"])[0])
    return "graded", ""


def status(result: dict | None) -> tuple[str, str]:
    """(status, reason) of one notebook's grading result (None: the notebook was not submitted)."""
    if result is None:
        return "not submitted", "no such notebook in the submission"
    if result.get("not_graded"):
        return "not graded", _first_line(result["not_graded"])
    if result.get("error"):
        return "unreadable", _first_line(result["error"])
    worst = min((exercise_status(ex) for ex in result.get("exercises", [])),
                key=lambda s: STATUSES.index(s[0]), default=("graded", ""))
    return worst


def _suspicious_speed(ex: dict) -> str | None:
    perf = ex.get("performance") or {}
    if not perf.get("graded"):
        return None
    speedup, threshold, peak = perf.get("speedup"), perf.get("threshold"), perf.get("fraction_of_peak")
    if peak is not None and peak > SUSPICIOUS_FRACTION_OF_PEAK:
        return f"suspiciously fast: {peak:.2f} of this GPU's measured peak"
    if speedup is not None and threshold and speedup > SUSPICIOUS_OVER_THRESHOLD * threshold:
        return (f"suspiciously fast: {speedup:.2f}x the baseline, over {SUSPICIOUS_OVER_THRESHOLD:g}x the "
                f"full-credit threshold ({threshold:g})")
    return None


def exercise_flags(ex: dict) -> list[str]:
    """Why a person should look at this exercise's grade (empty: nothing to review)."""
    out = []
    violations = ex.get("violations") or []
    tampering = [v for v in violations if "autograder" in str(v)]
    if tampering:
        out.append("tampering: " + _first_line(tampering[0]))
    elif violations:
        out.append("violations: " + _first_line(violations[0]))
    if ex.get("ended") == "crashed":
        out.append("crashed: " + _first_line((ex.get("feedback") or [""])[0]))
    speed = _suspicious_speed(ex)
    if speed:
        out.append(speed)
    return out


def flags(outcome: dict) -> list[dict]:
    """[{"notebook", "exercise" (None: the whole notebook), "reason"}] for one learner's outcome."""
    out = []
    for notebook, result in (outcome.get("notebooks") or {}).items():
        word, reason = status(result)
        if word in ("not graded", "unreadable"):
            out.append({"notebook": notebook, "exercise": None, "reason": f"{word}: {reason}"})
            continue
        for ex in result.get("exercises", []):
            out += [{"notebook": notebook, "exercise": ex["id"], "reason": r} for r in exercise_flags(ex)]
    return out
