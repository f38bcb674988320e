"""Results as a readable report and as the JSON report object of docs/CONTRACTS.md (written atomically).

JSON: {"submission", "device", "exercises": [{"id", "score" (0..1, of this exercise's points),
"points" (the exercise's points), "correct", "performance", "violations", "feedback"}],
"total" (points earned), "max_total"}.
"""
from __future__ import annotations

from measure.files import write_json_atomic  # noqa: F401  (the CLI writes reports with it)

EXERCISE_KEYS = ("id", "score", "points", "correct", "performance", "violations", "feedback", "seconds")


def to_json(result: dict) -> dict:
    exercises = [{k: ex.get(k) for k in EXERCISE_KEYS} for ex in result["exercises"]]
    return {"submission": result["submission"], "device": result["device"], "exercises": exercises,
            "total": result["total"], "max_total": result["max_total"]}


def memory_line(m: dict, baseline: str) -> str:
    from measure.memory import fmt_bytes

    return (f"held between forward and backward {fmt_bytes(m['held_bytes'])} (limit {fmt_bytes(m['held_limit_bytes'])}; "
            f"{baseline}: {fmt_bytes(m['baseline_held_bytes'])}, {m['held_case']}); peak of forward + backward "
            f"{fmt_bytes(m['peak_bytes'])} (allowed {fmt_bytes(m['peak_allowed_bytes'])}; {baseline}: "
            f"{fmt_bytes(m['baseline_peak_bytes'])}, {m['peak_case']})")


def render_text(result: dict, show_cases: bool = True) -> str:
    lines = [f"Submission: {result['submission']}", f"Device:     {result['device']}", ""]
    for ex in result["exercises"]:
        earned = ex["score"] * ex["points"]
        mark = "PASS" if ex["correct"] else "FAIL"
        lines.append(f"[{mark}] {ex['id']}: {earned:.2f} / {ex['points']:g} points")
        if show_cases and ex.get("cases"):
            from autograder.correctness import case_table

            lines += case_table(ex["cases"], indent="    ")
        for v in ex["violations"]:
            lines.append(f"    violation: {v}")
        perf = ex["performance"]
        if perf and perf["graded"] and perf.get("memory"):
            lines.append("    memory: " + memory_line(perf["memory"], perf["baseline"]))
        elif perf and perf["graded"]:
            ach = perf["achieved"]
            frac = perf["fraction_of_peak"]
            lines.append(f"    performance: {perf['time_ms']:.4g} ms vs {perf['baseline']} {perf['baseline_ms']:.4g} ms "
                         f"(speedup {perf['speedup']:.2f}, threshold {perf['threshold']:g}); "
                         f"{ach['value']:.4g} {ach['unit']}"
                         + (f" = {100 * frac:.0f}% of this GPU's peak" if frac else ""))
        for f in ex["feedback"]:
            lines.append(f"    - {f}")
        lines.append("")
    lines.append(f"Total: {result['total']:.2f} / {result['max_total']:g} points")
    return "\n".join(lines)
