"""Results as a readable report and as the JSON object of DESIGN.md, written atomically (guarantee 6).

JSON: {"submission", "device", "exercises": [{"id", "score" (0..1, of this exercise's points),
"points" (the exercise's points), "correct", "performance", "violations", "feedback"}],
"total" (points earned), "max_total"}.
"""
from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path

EXERCISE_KEYS = ("id", "score", "points", "correct", "performance", "violations", "feedback")


def to_json(result: dict) -> dict:
    exercises = [{k: ex[k] for k in EXERCISE_KEYS} for ex in result["exercises"]]
    return {"submission": result["submission"], "device": result["device"], "exercises": exercises,
            "total": result["total"], "max_total": result["max_total"]}


def write_json_atomic(path, obj) -> None:
    """Write JSON to a temporary file in the same folder, then rename over ``path``: readers see the old
    file or the new one, never a half-written one, even if this process dies mid-write."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(obj, fh, indent=2, allow_nan=False, default=_plain)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _plain(obj):
    return str(obj)


def finite_or_none(x):
    return x if isinstance(x, (int, float)) and math.isfinite(x) else None


def _fmt(x, digits=3):
    return "-" if x is None else (f"{x:.{digits}g}" if isinstance(x, float) else str(x))


def render_text(result: dict, show_cases: bool = True) -> str:
    lines = [f"Submission: {result['submission']}", f"Device:     {result['device']}", ""]
    for ex in result["exercises"]:
        earned = ex["score"] * ex["points"]
        mark = "PASS" if ex["correct"] else "FAIL"
        lines.append(f"[{mark}] {ex['id']}: {earned:.2f} / {ex['points']:g} points")
        if show_cases and ex.get("cases"):
            lines.append(f"    {'case':<42} {'shape':>14} {'dtype':>9} {'max error':>10}  verdict")
            for c in ex["cases"]:
                lines.append(f"    {c['case'][:42]:<42} {c['shape'][:14]:>14} {c['dtype']:>9} "
                             f"{_fmt(c['max_error']):>10}  {c['verdict']}")
        for v in ex["violations"]:
            lines.append(f"    violation: {v}")
        perf = ex["performance"]
        if perf and perf["graded"]:
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
