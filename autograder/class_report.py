"""The class report of a batch run: what every learner scored, and how fast their kernels ran.

    write_report(results_dir, out_dir, assignment) -> {"csv", "scores", "speedups", "html"}

Reads the per-submission results (autograder.batch writes one JSON per student) and writes:
- ``scores.csv``: student, notebook, exercise, score (points earned), points, correct, speedup;
- ``scores.png``: the distribution of points per exercise;
- ``speedups.png``: speedups over each exercise's baseline, with the full-credit threshold;
- ``leaderboard.html``: a static page with both plots and, per exercise, learners ranked by speedup.
Speedups exist only where grading ran on a GPU (without one, performance is not graded).
"""
from __future__ import annotations

import csv
import html
import json
from pathlib import Path

FIELDS = ("student", "notebook", "exercise", "score", "points", "correct", "speedup", "time_ms", "baseline_ms")


def rows(results_dir, students=None) -> list[dict]:
    out = []
    for path in sorted(Path(results_dir).glob("*.json")):
        if path.name.startswith("."):
            continue
        outcome = json.loads(path.read_text(encoding="utf-8"))
        if students is not None and outcome.get("student") not in students:
            continue
        for notebook, result in outcome.get("notebooks", {}).items():
            for ex in result.get("exercises", []):
                perf = ex.get("performance") or {}
                graded = bool(perf.get("graded"))
                out.append({"student": outcome["student"], "notebook": notebook, "exercise": ex["id"],
                            "score": round(ex["score"] * ex["points"], 4), "points": ex["points"],
                            "correct": bool(ex["correct"]),
                            "speedup": perf.get("speedup") if graded else None,
                            "time_ms": perf.get("time_ms") if graded else None,
                            "baseline_ms": perf.get("baseline_ms") if graded else None})
    return out


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


def plot_scores(table: list[dict], path: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    groups = _by_exercise(table)
    fig, axes = plt.subplots(1, max(len(groups), 1), figsize=(3.2 * max(len(groups), 1), 3), squeeze=False)
    for ax, (exercise, rs) in zip(axes[0], groups.items()):
        points = max(r["points"] for r in rs)
        ax.hist([r["score"] for r in rs], bins=[i * points / 10 for i in range(11)], color="tab:blue",
                edgecolor="white")
        ax.set_title(exercise)
        ax.set_xlabel(f"points (of {points:g})")
        ax.set_xlim(0, points)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    axes[0][0].set_ylabel("learners")
    if not groups:
        axes[0][0].text(0.5, 0.5, "no graded submissions", ha="center", va="center")
    fig.suptitle(f"{title}: points per exercise")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_speedups(table: list[dict], path: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = {e: [r["speedup"] for r in rs if r["speedup"] is not None] for e, rs in _by_exercise(table).items()}
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
        ax.set_xticks(range(len(groups)), list(groups))
        ax.set_ylabel("speedup over the baseline")
        ax.legend(loc="best", fontsize=8)
    else:
        ax.text(0.5, 0.5, "no speedups: graded without a GPU\n(performance is graded on a GPU only)",
                ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
    ax.set_title(f"{title}: speedup per exercise")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_csv(table: list[dict], path: Path) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=FIELDS)
        writer.writeheader()
        for r in table:
            writer.writerow({k: ("" if r[k] is None else r[k]) for k in FIELDS})
    return path


def _fmt(x, spec="{:.2f}"):
    return "-" if x is None else spec.format(x)


def leaderboard_html(table: list[dict], title: str, images: list[str]) -> str:
    e = html.escape
    students = sorted({r["student"] for r in table})
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{e(title)}</title>",
             "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto}table{border-collapse:collapse;"
             "margin-bottom:2em}td,th{padding:.2em .8em;border-bottom:1px solid #ddd;text-align:right}"
             "td:nth-child(2),th:nth-child(2){text-align:left}.no{color:#b00}</style></head><body>",
             f"<h1>{e(title)}</h1><p>{len(students)} learners graded. Speedup: the learner's kernel against the "
             "exercise's baseline, timed in the same run on the grading GPU (higher is faster)."
             + ("" if any(r["speedup"] is not None for r in table) else
                " None here: this class was graded without a GPU, where performance is not graded.") + "</p>"]
    parts += [f"<img src='{e(img)}' alt='{e(img)}' style='max-width:100%'>" for img in images]
    for exercise, rs in _by_exercise(table).items():
        ranked = sorted(rs, key=lambda r: (r["speedup"] is None, -(r["speedup"] or 0), -r["score"], r["student"]))
        mean = sum(r["score"] for r in rs) / len(rs)
        parts.append(f"<h2>{e(exercise)}</h2><p>mean {mean:.2f} of {max(r['points'] for r in rs):g} points; "
                     f"{sum(r['correct'] for r in rs)} of {len(rs)} correct</p>")
        parts.append("<table><tr><th>#</th><th>learner</th><th>speedup</th><th>time (ms)</th>"
                     "<th>baseline (ms)</th><th>correct</th><th>points</th></tr>")
        for rank, r in enumerate(ranked, start=1):
            parts.append(f"<tr><td>{rank if r['speedup'] is not None else ''}</td><td>{e(r['student'])}</td>"
                         f"<td>{_fmt(r['speedup'])}</td><td>{_fmt(r['time_ms'], '{:.4g}')}</td>"
                         f"<td>{_fmt(r['baseline_ms'], '{:.4g}')}</td>"
                         f"<td{'' if r['correct'] else ' class=no'}>{'yes' if r['correct'] else 'no'}</td>"
                         f"<td>{r['score']:.2f} / {r['points']:g}</td></tr>")
        parts.append("</table>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(results_dir, out_dir, assignment: str, students=None) -> dict:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    table = rows(results_dir, students)
    paths = {"csv": write_csv(table, out / "scores.csv"),
             "scores": plot_scores(table, out / "scores.png", assignment),
             "speedups": plot_speedups(table, out / "speedups.png", assignment)}
    page = leaderboard_html(table, f"{assignment}: class report", ["scores.png", "speedups.png"])
    (out / "leaderboard.html").write_text(page, encoding="utf-8")
    paths["html"] = out / "leaderboard.html"
    return paths
