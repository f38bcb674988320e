"""The worker's sandbox (autograder/sandbox.py): what a sandboxed process can and cannot touch.

The tests that run something in the sandbox are skipped, with the reason, where bubblewrap does not work
(not installed, or a container that forbids namespaces); .ci/run installs it so CI runs them.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from autograder import sandbox

WORKS, NOTE = sandbox.status()
needs_sandbox = pytest.mark.skipif(not WORKS, reason=f"no sandbox on this machine: {NOTE}")


ROOT = Path(__file__).resolve().parent.parent


def run_in_sandbox(tmp_path, code, *args, readable=(), writable=(), env=None, timeout=120):
    # The project on PYTHONPATH, as the grader starts its workers (autograder.isolation): the sandbox then
    # shows it even from a checkout under /tmp, which it hides otherwise.
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    scratch = tmp_path / "scratch"
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(code))
    argv, note = sandbox.sandbox_argv([sys.executable, str(script), *map(str, args)], scratch,
                                      readable=[script, *readable], writable=writable, env=env)
    assert argv[0] != sys.executable, note
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)


@needs_sandbox
def test_writes_only_its_scratch_folder_and_a_private_tmp(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = tmp_path / "other_submission.txt"       # under the host's /tmp: hidden unless listed as readable
    secret.write_text("someone else's code")
    run = run_in_sandbox(tmp_path, """
        import os, sys
        scratch, outside, secret = sys.argv[1:]
        def attempt(path):
            try:
                with open(path, "w") as fh:
                    fh.write("x")
                return "written"
            except OSError as exc:
                return exc.strerror
        print("scratch", attempt(os.path.join(scratch, "out.txt")))
        print("outside", attempt(os.path.join(outside, "out.txt")))
        print("home", attempt(os.path.expanduser("~/autograder-sandbox-test")))
        print("tmp", attempt("/tmp/private.txt"), sorted(os.listdir("/tmp"))[:1] != [])
        print("sees-other", os.path.exists(secret))
    """, tmp_path / "scratch", outside, secret)
    assert run.returncode == 0, run.stderr
    said = dict(line.split(" ", 1) for line in run.stdout.splitlines())
    assert said["scratch"] == "written" and (tmp_path / "scratch/out.txt").read_text() == "x"
    assert said["outside"] != "written" and not (outside / "out.txt").exists()
    assert said["home"] != "written"
    assert said["tmp"].startswith("written")          # its own /tmp (a tmpfs) ...
    assert not Path("/tmp/private.txt").exists()      # ... is not the host's
    assert said["sees-other"] == "False"


@needs_sandbox
def test_no_network_not_even_the_hosts_loopback(tmp_path):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()   # reachable from outside
        run = run_in_sandbox(tmp_path, """
            import socket, sys
            try:
                socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
                print("connected")
            except OSError as exc:
                print("refused:", exc.strerror)
        """, port)
    finally:
        listener.close()
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("refused"), run.stdout


@needs_sandbox
def test_no_capabilities_own_pids_and_no_secrets(tmp_path):
    env = dict(os.environ, GITHUB_TOKEN="not-for-learners", COURSE_THREADS="1")
    run = run_in_sandbox(tmp_path, """
        import os
        status = dict(line.split(":", 1) for line in open("/proc/self/status"))
        print(int(status["CapEff"].strip(), 16), status["NoNewPrivs"].strip(), os.getpid() < 10,
              "GITHUB_TOKEN" in os.environ, os.environ.get("COURSE_THREADS"))
    """, env=env)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["0", "1", "True", "False", "1"]


@needs_sandbox
def test_torch_and_triton_work_with_their_cache_in_scratch(tmp_path):
    run = run_in_sandbox(tmp_path, """
        import os
        import course  # noqa: F401  (the Triton interpreter without a GPU)
        import torch, triton, triton.language as tl

        @triton.jit
        def twice(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(y_ptr + offs, 2 * tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

        x = torch.arange(100, dtype=torch.float32, device=course.DEVICE)
        y = torch.empty_like(x)
        twice[(2,)](x, y, 100, BLOCK=64)
        print(bool(torch.equal(y.cpu(), 2 * x.cpu())), os.environ["TRITON_CACHE_DIR"])
    """, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    ok, cache = run.stdout.split()
    assert ok == "True" and cache.startswith(str((tmp_path / "scratch").resolve()))


@needs_sandbox
def test_killing_the_group_ends_everything_inside(tmp_path):
    """The grader kills a worker's process group at the time limit: the sandbox and anything the learner's
    code started inside it (in its own session) must end too."""
    marker = f"autograder-sandbox-test-{os.getpid()}-{time.monotonic_ns()}"
    scratch = tmp_path / "scratch"
    script = tmp_path / "spawn.py"
    script.write_text(textwrap.dedent(f"""
        import subprocess, sys, time
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "{marker}"], start_new_session=True)
        print("started", flush=True)
        time.sleep(120)
    """))
    argv, _ = sandbox.sandbox_argv([sys.executable, str(script)], scratch, readable=[script])
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert proc.stdout.readline().strip() == "started"
        # the child's command line can show in /proc a moment after Popen returned (seen under load)
        deadline = time.monotonic() + 10
        while not _pids_with(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _pids_with(marker)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    deadline = time.monotonic() + 10
    while _pids_with(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = _pids_with(marker)
    for pid in left:  # clean up what this test started, then fail
        os.kill(pid, signal.SIGKILL)
    assert not left, "a process started inside the sandbox outlived it"


def _pids_with(marker: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
            except OSError:
                pass
    return pids


# -------------------------------------------------------------------- the switches (run on every machine)

def test_switched_off_runs_the_command_as_it_is(tmp_path, monkeypatch):
    monkeypatch.setenv(sandbox.SWITCH, "0")
    argv, note = sandbox.sandbox_argv(["python", "-c", "pass"], tmp_path)
    assert argv == ["python", "-c", "pass"] and "turned off" in note


def test_missing_bwrap_falls_back_with_a_note_or_fails_when_required(tmp_path, monkeypatch):
    monkeypatch.setenv(sandbox.BWRAP, str(tmp_path / "no-such-bwrap"))
    monkeypatch.delenv(sandbox.SWITCH, raising=False)
    argv, note = sandbox.sandbox_argv(["python", "-c", "pass"], tmp_path / "s")
    assert argv == ["python", "-c", "pass"] and note.startswith("no sandbox available:")
    monkeypatch.setenv(sandbox.SWITCH, "1")
    with pytest.raises(sandbox.SandboxUnavailable, match="no sandbox available"):
        sandbox.sandbox_argv(["python"], tmp_path / "s")


def test_a_bwrap_that_fails_its_probe_is_not_used(tmp_path, monkeypatch):
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv(sandbox.BWRAP, str(fake))
    monkeypatch.delenv(sandbox.SWITCH, raising=False)
    argv, note = sandbox.sandbox_argv(["python"], tmp_path / "s")
    assert argv == ["python"] and "No permissions to creating new namespace" in note


def test_the_probe_works_in_a_scratch_folder_that_a_killed_process_leaves_to_the_sweep(tmp_path, monkeypatch):
    import tempfile

    from autograder import scratch

    said = tmp_path / "args.txt"
    fake = tmp_path / "bwrap"
    fake.write_text(f'#!/bin/sh\necho "$@" > {said}\n')
    fake.chmod(0o755)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(sandbox, "_probed", {})
    assert sandbox.probe(str(fake)) is None
    folders = {Path(a).name for a in said.read_text().split() if Path(a).parent == tmp_path / "tmp"}
    assert len(folders) == 1 and scratch._NAME.match(folders.pop())  # named for scratch.sweep
    assert list((tmp_path / "tmp").iterdir()) == []  # and gone once probed


def test_the_command_line_binds_scratch_cache_and_readable_paths(tmp_path):
    src = tmp_path / "submission.py"
    src.write_text("")
    cmd = sandbox.wrap("bwrap", ["python", "-m", "autograder.worker"], tmp_path / "job", readable=[src],
                       cache_dir=tmp_path / "cache")
    joined = " ".join(cmd)
    assert cmd[-4:] == ["--", "python", "-m", "autograder.worker"]
    for part in ("--unshare-all", "--die-with-parent", "--cap-drop ALL", "--ro-bind / /", "--tmpfs /tmp",
                 f"--bind {tmp_path / 'job'} {tmp_path / 'job'}", f"--ro-bind {src} {src}",
                 f"--setenv TRITON_CACHE_DIR {tmp_path / 'cache' / 'triton'}"):
        assert part in joined
    assert (tmp_path / "job").is_dir() and (tmp_path / "cache").is_dir()
