"""Result files: written atomically, and each one says where and how it was measured."""
from __future__ import annotations

import datetime
import json
import math
import os
import platform
import tempfile
from pathlib import Path


def write_json_atomic(path, obj, *, nonfinite_as_null: bool = False) -> None:
    """Write JSON to a temporary file in the same folder, then rename over ``path``: readers see the old
    file or the new one, never a half-written one, even if this process dies mid-write.

    JSON has no NaN or infinity: by default one is an error (a grade must never hold one); measurement
    files pass ``nonfinite_as_null=True`` (a candidate that failed its check has an infinite error)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(_finite(obj) if nonfinite_as_null else obj, fh, indent=2, allow_nan=False, default=str)
            fh.flush()
            os.fsync(fh.fileno())
            # the mode a plain open() gives (a temporary file is 0600), before the file appears under its name:
            # a process killed after the rename leaves no file the course's group cannot read
            os.fchmod(fh.fileno(), 0o666 & ~umask())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def umask() -> int:
    """This process's umask (reading it means setting it: it is set back at once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _finite(obj):
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def driver_version() -> str | None:
    """The NVIDIA driver's version (e.g. "580.159.04") from nvidia-smi; None where there is none."""
    import subprocess

    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return out.splitlines()[0].strip() if out.strip() else None


def environment(method: str) -> dict:
    """What every result file records (results/README.md): the GPU and its driver (or None), versions, the
    date (UTC) and the method."""
    import torch
    import triton

    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else None
    return {
        "gpu": gpu,
        "driver": driver_version() if gpu else None,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "python": platform.python_version(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "method": method,
    }
