"""probes.ptxas_usage: a kernel's registers and spills for sm_90a, measured without a GPU."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from probes import ptxas_usage

ROOT = Path(__file__).resolve().parents[2]


def test_programs_per_sm_is_limited_by_registers_and_threads():
    assert ptxas_usage.programs_per_sm(128, 16) == 1      # 512 threads x 128 registers: the whole file
    assert ptxas_usage.programs_per_sm(64, 8) == 4
    assert ptxas_usage.programs_per_sm(16, 4) == 16       # 2048 threads an SM


def test_a_reference_kernel_is_compiled_and_assembled_for_sm90():
    # a subprocess: the kernels must be defined with the interpreter off, which this test process has on
    run = subprocess.run(
        [sys.executable, "-m", "probes.ptxas_usage", "kernels_ref.layer_norm", "_layer_norm_bwd_dx_kernel",
         "--const", "BLOCK_M=1", "BLOCK_N=1024", "SPLIT=1", "--fp32", "mean_ptr", "rstd_ptr", "part_ptr",
         "--warps", "4"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    row = run.stdout.strip().splitlines()[-1].split()
    assert row[0] == "4" and 0 < int(row[1]) <= 255 and row[3] == "B", run.stdout
