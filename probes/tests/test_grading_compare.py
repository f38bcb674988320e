"""probes.grading_compare: two grading runs of the same notebooks, side by side."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_grading_runs_compare_side_by_side():
    from probes import grading_compare

    folders = [ROOT / "results" / "h100-2026-11-26" / name for name in ("grading-before", "grading-after")]
    text = grading_compare.compare(folders)
    assert "h100-2026-11-26/grading-before" in text and "h100-2026-11-26/grading-after" in text
    row = next(line for line in text.splitlines() if line.startswith("07_flash_attention"))
    assert row.split()[1:] == ["79.5", "48.2"]  # docs/performance.md's grading-time table
    assert "15.5 + 9.7 + 8.8 (1.66x)" in text  # flash_attention_bwd after: compiling ahead, cases, timing, speedup
    assert grading_compare.main([str(ROOT / "results")]) == 2  # no autograde.json there: said, not a traceback
