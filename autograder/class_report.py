"""The class report of a batch run: every learner, what they scored, how fast their kernels ran, and
what a person should review.

    write_report(results_dir, out_dir, assignment) -> {"csv", "review", "flagged", "scores", "speedups", "html",
                                                       "plotted": {"scores"/"speedups": {exercise: learners}}}

Reads the per-submission results (autograder.batch writes one JSON per student, graded or not) and
writes, with every learner in each (a notebook that could not be read or graded scores 0 and says why):
- ``scores.csv``: one row per learner and exercise, columns ``FIELDS``;
- ``review.csv``: what a person should look at (autograder.review): student, notebook, exercise, reason;
- ``scores.png``: the distribution of points per exercise;
- ``speedups.png``: speedups over each exercise's baseline, with the full-credit threshold;
- ``leaderboard.html``: both plots, the review list and, per exercise, learners ranked by speedup.
Speedups exist only where grading ran on a GPU (without one, performance is not graded).
"""
from __future__ import annotations

import csv
import html
import json
from pathlib import Path

from autograder import review

FIELDS = ("student", "notebook", "exercise", "status", "reason", "score", "points", "correct", "speedup",
          "time_ms", "baseline_ms", "review")
REVIEW_FIELDS = ("student", "notebook", "exercise", "reason")


def outcomes(results_dir, students=None) -> list[dict]:
    found = []
    for path in sorted(Path(results_dir).glob("*.json")):
        if path.name.startswith("."):
            continue
        outcome = json.loads(path.read_text(encoding="utf-8"))
        if students is None or outcome.get("student") in students:
            found.append(outcome)
    return found


def _points(exercise: str):
    from autograder import specs

    try:
        return specs.get(exercise).points
    except KeyError:  # an exercise this grader does not know: worth nothing here
        return 0


def _exercise_row(student, notebook, ex, flagged) -> dict:
    perf = ex.get("performance") or {}
    graded = bool(perf.get("graded"))
    status, reason = review.exercise_status(ex)
    return {"student": student, "notebook": notebook, "exercise": ex["id"], "status": status, "reason": reason,
            "score": round(ex["score"] * ex["points"], 4), "points": ex["points"], "correct": bool(ex["correct"]),
            "speedup": perf.get("speedup") if graded else None, "time_ms": perf.get("time_ms") if graded else None,
            "baseline_ms": perf.get("baseline_ms") if graded else None,
            "review": "; ".join(f["reason"] for f in flagged if f["exercise"] in (ex["id"], None))}


def outcome_rows(outcome: dict) -> list[dict]:
    """One row per exercise the learner was to be graded on, whatever happened to the notebook."""
    student, flagged = outcome["student"], review.flags(outcome)
    expected = outcome.get("expected") or {n: [e["id"] for e in r.get("exercises", [])]
                                           for n, r in outcome.get("notebooks", {}).items()}
    out = []
    for notebook, exercises in expected.items():
        result = outcome.get("notebooks", {}).get(notebook)
        graded = {ex["id"]: ex for ex in (result or {}).get("exercises", [])}
        status, reason = review.status(result)
        for exercise in exercises:
            if exercise in graded:
                out.append(_exercise_row(student, notebook, graded[exercise], flagged))
                continue
            mine = [f["reason"] for f in flagged if f["notebook"] == notebook and f["exercise"] in (exercise, None)]
            out.append({"student": student, "notebook": notebook, "exercise": exercise, "status": status,
                        "reason": reason, "score": 0.0, "points": _points(exercise), "correct": False,
                        "speedup": None, "time_ms": None, "baseline_ms": None, "review": "; ".join(mine)})
    return out


def rows(results_dir, students=None) -> list[dict]:
    return [r for outcome in outcomes(results_dir, students) for r in outcome_rows(outcome)]


def review_rows(results_dir, students=None) -> list[dict]:
    return [{"student": o["student"], **f} for o in outcomes(results_dir, students) for f in review.flags(o)]


def _by_exercise(table: list[dict]) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = {}
    for r in table:
        groups.setdefault(r["exercise"], []).append(r)
    return groups


def _threshold(exercise: str):
    try:
        from autograder import specs

        perf = specs.get(exercise).performance
        return perf.threshold if perf is not None else None
    except KeyError:
        return None


def plot_scores(table: list[dict], path: Path, title: str) -> dict[str, int]:
    """Each exercise's histogram of points, every learner in it; returns how many each histogram holds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    groups = _by_exercise(table)
    plotted = {}
    fig, axes = plt.subplots(1, max(len(groups), 1), figsize=(3.2 * max(len(groups), 1), 3), squeeze=False)
    for ax, (exercise, rs) in zip(axes[0], groups.items()):
        points = max(r["points"] for r in rs)
        counts, _, _ = ax.hist([r["score"] for r in rs], bins=[i * points / 10 for i in range(11)],
                               color="tab:blue", edgecolor="white")
        plotted[exercise] = int(sum(counts))
        ax.set_title(f"{exercise} ({plotted[exercise]} learners)")
        ax.set_xlabel(f"points (of {points:g})")
        ax.set_xlim(0, points)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    axes[0][0].set_ylabel("learners")
    if not groups:
        axes[0][0].text(0.5, 0.5, "no graded submissions", ha="center", va="center")
    fig.suptitle(f"{title}: points per exercise")
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Description": _described("learners", plotted)})
    plt.close(fig)
    return plotted


def plot_speedups(table: list[dict], path: Path, title: str) -> dict[str, int]:
    """Each exercise's speedups (only learners timed on a GPU have one: each label says how many of the
    class); returns how many points each exercise's column holds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    everyone = _by_exercise(table)
    groups = {e: [r["speedup"] for r in rs if r["speedup"] is not None] for e, rs in everyone.items()}
    groups = {e: s for e, s in groups.items() if s}
    fig, ax = plt.subplots(figsize=(max(4, 1.6 * len(groups) + 2), 3.2))
    if groups:
        for i, (exercise, speedups) in enumerate(groups.items()):
            jitter = [i + 0.25 * ((k * 0.618) % 1 - 0.5) for k in range(len(speedups))]
            ax.scatter(jitter, speedups, s=14, alpha=0.7, color="tab:green")
            threshold = _threshold(exercise)
            if threshold is not None:
                ax.hlines(threshold, i - 0.35, i + 0.35, colors="tab:red", linestyles="--",
                          label="full credit from" if i == 0 else None)
        ax.set_xticks(range(len(groups)), [f"{e}\n({len(s)} of {len(everyone[e])} timed)" for e, s in groups.items()])
        ax.set_ylabel("speedup over the baseline")
        ax.legend(loc="best", fontsize=8)
    else:
        ax.text(0.5, 0.5, "no speedups: graded without a GPU\n(performance is graded on a GPU only)",
                ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
    ax.set_title(f"{title}: speedup per exercise")
    plotted = {e: len(s) for e, s in groups.items()}
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Description": _described("learners timed", plotted)})
    plt.close(fig)
    return plotted


def _described(what: str, plotted: dict[str, int]) -> str:
    """What a plot holds, in the PNG's own Description (read by tools and tests without looking at pixels)."""
    return f"{what} per exercise: " + (", ".join(f"{e} {n}" for e, n in plotted.items()) or "none")


def write_csv(table: list[dict], path: Path, fields=FIELDS) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        for r in table:
            writer.writerow({k: ("" if r[k] is None else r[k]) for k in fields})
    return path


def _fmt(x, spec="{:.2f}"):
    return "-" if x is None else spec.format(x)


def _statuses(table: list[dict]) -> str:
    """'6 learners: 4 graded, 1 unreadable, 1 violations' (each learner counted once, at their worst)."""
    worst: dict[str, str] = {}
    for r in table:
        now = worst.get(r["student"], "graded")
        worst[r["student"]] = min(now, r["status"], key=review.STATUSES.index)
    counts = {s: list(worst.values()).count(s) for s in review.STATUSES if s in worst.values()}
    return f"{len(worst)} learners: " + ", ".join(f"{n} {s}" for s, n in counts.items())


def _review_list(flags: list[dict]) -> list[str]:
    e = html.escape
    if not flags:
        return ["<p>Nothing to review.</p>"]
    parts = ["<h2>To review</h2><table><tr><th>learner</th><th>notebook</th><th>exercise</th><th>why</th></tr>"]
    parts += [f"<tr><td>{e(f['student'])}</td><td>{e(f['notebook'])}</td><td>{e(f['exercise'] or '(all)')}</td>"
              f"<td style='text-align:left'>{e(f['reason'])}</td></tr>" for f in flags]
    return parts + ["</table>"]


def leaderboard_html(table: list[dict], title: str, images: list[str], flags: list[dict] = ()) -> str:
    e = html.escape
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{e(title)}</title>",
             "<style>body{font-family:sans-serif;max-width:70em;margin:2em auto}table{border-collapse:collapse;"
             "margin-bottom:2em}td,th{padding:.2em .8em;border-bottom:1px solid #ddd;text-align:right}"
             "td:nth-child(2),th:nth-child(2){text-align:left}.no{color:#b00}</style></head><body>",
             f"<h1>{e(title)}</h1><p>{e(_statuses(table))}. Speedup: the learner's kernel against the "
             "exercise's baseline, timed in the same run on the grading GPU (higher is faster)."
             + ("" if any(r["speedup"] is not None for r in table) else
                " None here: this class was graded without a GPU, where performance is not graded.") + "</p>"]
    parts += _review_list(list(flags))
    parts += [f"<img src='{e(img)}' alt='{e(img)}' style='max-width:100%'>" for img in images]
    for exercise, rs in _by_exercise(table).items():
        ranked = sorted(rs, key=lambda r: (r["speedup"] is None, -(r["speedup"] or 0), -r["score"], r["student"]))
        mean = sum(r["score"] for r in rs) / len(rs)  # over every learner: one who could not be graded scores 0
        parts.append(f"<h2>{e(exercise)}</h2><p>mean {mean:.2f} of {max(r['points'] for r in rs):g} points over "
                     f"{len(rs)} learners; {sum(r['correct'] for r in rs)} correct</p>")
        parts.append("<table><tr><th>#</th><th>learner</th><th>speedup</th><th>time (ms)</th>"
                     "<th>baseline (ms)</th><th>correct</th><th>points</th><th>status</th><th>review</th></tr>")
        for rank, r in enumerate(ranked, start=1):
            parts.append(f"<tr><td>{rank if r['speedup'] is not None else ''}</td><td>{e(r['student'])}</td>"
                         f"<td>{_fmt(r['speedup'])}</td><td>{_fmt(r['time_ms'], '{:.4g}')}</td>"
                         f"<td>{_fmt(r['baseline_ms'], '{:.4g}')}</td>"
                         f"<td{'' if r['correct'] else ' class=no'}>{'yes' if r['correct'] else 'no'}</td>"
                         f"<td>{r['score']:.2f} / {r['points']:g}</td>"
                         f"<td title='{e(r['reason'])}'>{e(r['status'])}</td>"
                         f"<td style='text-align:left'>{e(r['review'])}</td></tr>")
        parts.append("</table>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(results_dir, out_dir, assignment: str, students=None) -> dict:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    table, flags = rows(results_dir, students), review_rows(results_dir, students)
    paths = {"csv": write_csv(table, out / "scores.csv"),
             "review": write_csv(flags, out / "review.csv", REVIEW_FIELDS),
             "flagged": len({f["student"] for f in flags}),
             "scores": out / "scores.png", "speedups": out / "speedups.png"}
    paths["plotted"] = {"scores": plot_scores(table, paths["scores"], assignment),
                        "speedups": plot_speedups(table, paths["speedups"], assignment)}
    page = leaderboard_html(table, f"{assignment}: class report", ["scores.png", "speedups.png"], flags)
    (out / "leaderboard.html").write_text(page, encoding="utf-8")
    paths["html"] = out / "leaderboard.html"
    return paths
