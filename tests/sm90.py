"""Run tests/_sm90_compile.py in a subprocess (it needs TRITON_INTERPRET=0, which this process cannot undo)."""
import json
import os
import functools
import subprocess
import sys
import tempfile


@functools.cache
def _cache_dir() -> str:
    """A Triton cache of this test run only: a cached kernel skips compiling, which once hid a failure that a
    fresh machine (CI) meets."""
    return tempfile.mkdtemp(prefix="sm90-triton-cache-")


def compile_sm90(module: str, kernel: str, head_dim: int) -> dict:
    """Compile every config of ``module.kernel`` for sm_90 ahead of time; the script's JSON report."""
    script = os.path.join(os.path.dirname(__file__), "_sm90_compile.py")
    env = dict(os.environ, COURSE_DEVICE="cpu", TRITON_CACHE_DIR=_cache_dir())
    run = subprocess.run([sys.executable, script, module, kernel, str(head_dim)], capture_output=True,
                         text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])
