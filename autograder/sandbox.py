"""Run a grading worker in a sandbox where the platform has one (bubblewrap, ``bwrap``).

The learner's code runs in the worker; the sandbox decides what that code can touch outside its process:

- the filesystem is visible read-only; it writes only its scratch folder (the worker's job folder), a
  cache folder, the folders the caller lists as ``writable``, and a private ``/tmp`` (a tmpfs); the host's
  ``/tmp`` and ``/run`` are hidden (other submissions' folders, sockets of daemons), files the caller
  lists as ``readable`` are shown again read-only;
- no network (a namespace with only a loopback device of its own: 127.0.0.1 reaches nothing outside);
- its own process and IPC namespaces (it cannot see or signal the grader), a private ``/dev`` with the GPU's
  device files (``/dev/nvidia*``) bound in, a fresh ``/proc``;
- no capabilities (as root too: bwrap started by root otherwise keeps them, and could remount ``/``
  read-write), no new privileges, a new session (no terminal injection);
- it dies with the process that started it (``--die-with-parent``: the death of the starting *thread*).

Triton, CUDA, matplotlib and Inductor caches are pointed into the cache folder (the scratch folder unless
``cache_dir`` is given: one per submission keeps compiled kernels between its exercises, never between
submissions, where one learner could plant a compiled kernel for another's).

``sandbox_argv(argv, scratch_dir, ...)`` returns the wrapped command line and a note for the report; where
bwrap is missing or does not work (containers that forbid namespaces), the command line unchanged and
a note "no sandbox available: <why>". Whether it works is probed once per process by running the same
sandbox around ``true``. ``AUTOGRADER_SANDBOX=0`` turns it off (debugging), ``=1`` makes a missing sandbox
an error (``SandboxUnavailable``) for graders that must never run unsandboxed; ``AUTOGRADER_BWRAP`` names
the bwrap binary (default: ``bwrap`` on PATH).

``python -m autograder.sandbox`` says whether it works here, checks what a sandboxed worker can and cannot
do (torch, Triton, the GPU, writes, the network) and times a python + torch start inside and outside.
"""
from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

SWITCH = "AUTOGRADER_SANDBOX"
BWRAP = "AUTOGRADER_BWRAP"
_OFF = ("0", "off", "no", "false")
_REQUIRED = ("1", "on", "yes", "true", "require")
# Environment variables a learner's code has no business reading (printed into its own feedback, say).
_SECRET = re.compile(r"TOKEN|SECRET|PASSW|CREDENTIAL|API_KEY|ACCESS_KEY|PRIVATE_KEY|AUTH", re.IGNORECASE)
# Where libraries write caches, relative to the cache folder.
_CACHES = {"TRITON_CACHE_DIR": "triton", "CUDA_CACHE_PATH": "nv", "MPLCONFIGDIR": "matplotlib",
           "TORCHINDUCTOR_CACHE_DIR": "inductor", "XDG_CACHE_HOME": "xdg"}

_probed: dict[str, str | None] = {}


class SandboxUnavailable(RuntimeError):
    """AUTOGRADER_SANDBOX=1 and no sandbox works here."""


def bwrap_path() -> str | None:
    return os.environ.get(BWRAP) or shutil.which("bwrap")


def status() -> tuple[bool, str]:
    """(whether commands will be sandboxed, a note saying how or why not)."""
    mode = os.environ.get(SWITCH, "auto").strip().lower()
    if mode in _OFF:
        return False, f"no sandbox: turned off ({SWITCH}={os.environ[SWITCH]})"
    bwrap = bwrap_path()
    why = "bwrap (bubblewrap) is not installed (apt-get install bubblewrap)" if bwrap is None else probe(bwrap)
    if why:
        return False, f"no sandbox available: {why}"
    return True, "sandboxed (bubblewrap): read-only filesystem except its scratch folder, no network"


def sandbox_argv(argv, scratch_dir, writable=(), readable=(), cache_dir=None, env=None) -> tuple[list[str], str]:
    """``argv`` wrapped to run in the sandbox, and a note; or ``argv`` unchanged and why not.

    ``scratch_dir``: the one folder the command writes (created if missing). ``writable``: more folders
    it may write. ``readable``: files or folders it must read that the sandbox would hide (anything under
    the host's /tmp or /run, e.g. the submission's source in a temporary folder). ``cache_dir``: where
    library caches go (default: a ``.cache`` folder in the scratch folder). ``env``: the environment the
    command will be started with (default ``os.environ``), whose secrets (tokens, passwords) are unset inside.
    """
    argv = [str(a) for a in argv]
    ok, note = status()
    if not ok:
        if os.environ.get(SWITCH, "auto").strip().lower() in _REQUIRED:
            raise SandboxUnavailable(f"{note} ({SWITCH}=1 requires one)")
        return argv, note
    return wrap(bwrap_path(), argv, scratch_dir, writable, readable, cache_dir, env), note


def wrap(bwrap: str, argv, scratch_dir, writable=(), readable=(), cache_dir=None, env=None) -> list[str]:
    """The bwrap command line (without probing whether it works)."""
    scratch = Path(scratch_dir).resolve()
    cache = Path(cache_dir).resolve() if cache_dir else scratch / ".cache"
    env = os.environ if env is None else env
    binds = [(Path(p).resolve(), "--ro-bind") for p in (*readable, *_hidden_but_needed(argv, env))]
    binds += [(Path(p).resolve(), "--bind") for p in (scratch, cache, *writable)]
    for path, kind in binds:
        if kind == "--bind":
            path.mkdir(parents=True, exist_ok=True)
    cmd = [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
           "--ro-bind", "/", "/", "--dev", "/dev"]
    for dev in sorted(glob.glob("/dev/nvidia*")):       # the GPU: nvidia0.., nvidiactl, nvidia-uvm, nvidia-caps
        cmd += ["--dev-bind", dev, dev]
    cmd += ["--proc", "/proc", "--tmpfs", "/tmp"]
    if os.path.isdir("/run"):
        cmd += ["--tmpfs", "/run"]
    # parents before children (a folder bound inside another bound folder must come after it)
    for path, kind in sorted(dict((p, k) for p, k in binds).items(), key=lambda pk: len(pk[0].parts)):
        cmd += [kind, str(path), str(path)]
    for var, sub in _CACHES.items():
        cmd += ["--setenv", var, str(cache / sub)]
    cmd += ["--setenv", "TMPDIR", "/tmp"]
    for name in sorted(env):
        if _SECRET.search(name):
            cmd += ["--unsetenv", name]
    return cmd + ["--", *argv]


def _hidden_but_needed(argv, env) -> list[str]:
    """The interpreter, its environment and the PYTHONPATH entries where the sandbox's own /tmp or /run
    would hide them (a checkout or a venv made under /tmp, as CI machines do)."""
    import sys

    candidates = [sys.prefix, os.path.dirname(os.path.realpath(argv[0])) if argv else "",
                  *env.get("PYTHONPATH", "").split(os.pathsep)]
    hidden = ("/tmp", "/run")
    return sorted({os.path.realpath(p) for p in candidates
                   if p and os.path.exists(p) and os.path.realpath(p).startswith(tuple(h + "/" for h in hidden))})


def probe(bwrap: str) -> str | None:
    """None when the sandbox works here, else why not (one line). Run once per process and binary."""
    if bwrap not in _probed:
        _probed[bwrap] = _probe(bwrap)
    return _probed[bwrap]


def _probe(bwrap: str) -> str | None:
    from autograder import scratch

    with scratch.folder("probe") as tmp:  # swept at the next start if this process is killed meanwhile
        cmd = wrap(bwrap, ["true"], tmp)
        try:
            run = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
        except OSError as exc:
            return f"{bwrap} could not be started: {exc}"
        except subprocess.TimeoutExpired:
            return f"`{bwrap} ... true` did not finish within 30 s"
    if run.returncode != 0:
        err = run.stderr.decode("utf-8", "replace").strip().splitlines()
        return (f"`{bwrap} ... true` failed here (exit code {run.returncode}: {err[-1] if err else 'no message'}); "
                "the platform forbids the namespaces it needs")
    return None


# ------------------------------------------------------------------------------------------ self-check

_CHECK = r"""
import json, os, socket, sys, time
t0 = time.perf_counter()
import torch, triton, triton.language as tl
out = {"import_s": time.perf_counter() - t0}
@triton.jit
def _twice(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, 2 * tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
dev = "cuda" if torch.cuda.is_available() else "cpu"
x = torch.arange(1000, dtype=torch.float32, device=dev)
y = torch.empty_like(x)
_twice[(4,)](x, y, 1000, BLOCK=256)
out["device"] = torch.cuda.get_device_name() if dev == "cuda" else "cpu (Triton interpreter)"
out["triton_ok"] = bool(torch.equal(y.cpu(), 2 * x.cpu()))
out["triton_cache"] = os.environ.get("TRITON_CACHE_DIR")
def attempt(fn):
    try:
        fn()
        return "allowed"
    except OSError as exc:
        return f"refused ({exc.strerror})"
scratch = sys.argv[1]
out["write_scratch"] = attempt(lambda: open(os.path.join(scratch, "w.txt"), "w").write("x"))
out["write_outside"] = attempt(lambda: open(os.path.join(sys.argv[2], "w.txt"), "w").write("x"))
out["write_home"] = attempt(lambda: open(os.path.expanduser("~/.autograder-sandbox-check"), "w").write("x"))
out["connect_127"] = attempt(lambda: socket.create_connection(("127.0.0.1", int(sys.argv[3])), timeout=3))
out["connect_net"] = attempt(lambda: socket.create_connection(("1.1.1.1", 53), timeout=3))
print("RESULT " + json.dumps(out))
"""


def _median_start_s(argv, reps) -> float:
    import statistics
    import time

    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        subprocess.run(argv, check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def self_check(reps: int = 5) -> int:
    """Print whether the sandbox works here, what a sandboxed python can do, and its start-up overhead."""
    import json
    import socket
    import sys

    ok, note = status()
    print(f"sandbox: {note}")
    print(f"bwrap: {bwrap_path() or '-'}; running as uid {os.getuid()}")
    if not ok:
        return 1
    with tempfile.TemporaryDirectory(prefix="autograder-check-") as tmp:
        scratch, outside = Path(tmp) / "scratch", Path.cwd()
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        code = Path(tmp) / "check.py"
        code.write_text(_CHECK)
        argv, _ = sandbox_argv([sys.executable, str(code), str(scratch), str(outside), str(port)], scratch,
                               readable=[code])
        run = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        listener.close()
        lines = [ln for ln in run.stdout.splitlines() if ln.startswith("RESULT ")]
        if run.returncode != 0 or not lines:
            print(f"sandboxed python failed (exit code {run.returncode}):\n{run.stderr[-2000:]}")
            return 1
        result = json.loads(lines[-1][len("RESULT "):])
        for key, value in result.items():
            print(f"  {key:<14} {value}")
        expected = {"triton_ok": True, "write_scratch": "allowed"}
        refused = ("write_outside", "write_home", "connect_127", "connect_net")
        good = all(result[k] == v for k, v in expected.items()) and all(result[k] != "allowed" for k in refused)
        print("  -> " + ("as intended" if good else "NOT as intended"))
        py = [sys.executable, "-c", "import torch, triton"]
        inside, _ = sandbox_argv(py, scratch)
        bare, _ = sandbox_argv(["true"], scratch)
        t_out, t_in, t_true = (_median_start_s(a, reps) for a in (py, inside, bare))
        print(f"start-up, median of {reps}: python + import torch, triton: {t_out:.2f} s outside, {t_in:.2f} s "
              f"inside ({t_in - t_out:+.2f} s); an empty sandbox (bwrap ... true): {t_true * 1e3:.0f} ms")
    return 0 if good else 1


if __name__ == "__main__":
    raise SystemExit(self_check())
