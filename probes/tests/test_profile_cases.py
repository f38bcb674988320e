"""probes.profile_cases: an exercise's plan run in a process, then in a new one under cProfile, then
again there; each pass says its seconds by request and what the cases imported."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_three_passes_are_reported_with_their_requests():
    run = subprocess.run([sys.executable, "-m", "probes.profile_cases", "vector_add", "--top", "3"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    out = run.stdout
    for label in ("compiling", "a new process, kernels in the cache", "again in that process"):
        assert f"vector_add, {label}: " in out and "cases in" in out, out[-2000:]
    assert "by request: load" in out and "by cumulative:" in out and "by tottime:" in out
