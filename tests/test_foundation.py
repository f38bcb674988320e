"""The course skeleton: one dependency list, the device switch, the Makefile's venv script."""
import os
import pathlib
import re
import subprocess
import sys
import tomllib

import pytest
import torch

import course
import triton
import triton.language as tl
from course.triton_compat import autotune, dot

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_environment_yml_installs_the_project_and_duplicates_nothing():
    import yaml  # jupyter brings PyYAML

    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    deps = env["dependencies"]
    pip_sections = [d["pip"] for d in deps if isinstance(d, dict) and "pip" in d]
    assert pip_sections, "environment.yml must install the project through a pip section"
    assert any(re.fullmatch(r"""["']?\.(\[[\w,]+\])?["']?""", item.split()[-1]) for item in pip_sections[0]), \
        "the pip section must install '.' (or '.[extra]')"
    conda_names = {d.split("=")[0].split("<")[0].split(">")[0].strip() for d in deps if isinstance(d, str)}
    assert conda_names <= {"python", "pip"}, f"list dependencies in pyproject.toml, not here: {conda_names}"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {d.split("=")[0].split(">")[0].split("<")[0].strip().lower() for d in project["dependencies"]}
    assert {"torch", "triton", "jupyterlab", "matplotlib"} <= names


def _requirements(group=None) -> dict:
    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    listed = project["dependencies"] if group is None else project["optional-dependencies"][group]
    return {Requirement(r).name: Requirement(r) for r in listed}


def test_the_dependency_range_admits_what_the_gpus_and_ci_ran():
    """Every GPU result was measured with torch 2.11 / triton 3.6, CI runs torch 2.13 / triton 3.9: the stated
    range admits both, and the CPU install still picks torch 2.13.0 first (an unpinned resolve pulls CUDA)."""
    deps = _requirements()
    for torch_version, triton_version in (("2.11.0", "3.6.0"), ("2.13.0", "3.9.0")):
        assert deps["torch"].specifier.contains(torch_version), deps["torch"]
        assert deps["triton"].specifier.contains(triton_version), deps["triton"]
    assert 'pip install --quiet "torch==2.13.0"' in (ROOT / "tools" / "ensure_venv.sh").read_text()


def test_each_person_installs_what_they_need():
    """A learner's install has no grading or test tools; an instructor's adds nbgrader and Dask; a developer's
    adds the test tools on top of the instructor's."""
    base, instructor, dev = _requirements(), _requirements("instructor"), _requirements("dev")
    assert not {"nbgrader", "dask", "pytest", "playwright"} & set(base)
    assert {"nbgrader", "dask"} <= set(instructor)
    assert {"pytest", "pytest-xdist", "playwright"} <= set(dev) and "instructor" in dev["gpu-kernels-course"].extras
    makefile = (ROOT / "Makefile").read_text()
    assert "test check browser-test gpu-test probes-test: EXTRA = dev" in makefile
    assert "notebooks release clean-nbgrader: EXTRA = instructor" in makefile


def test_the_suites_make_targets_hide_any_gpu_and_gpu_test_uses_it():
    """`make test` and `make check` run as on CI wherever they run (their kernel tests hold the interpreter's exact
    float32; a GPU's TF32 dots fail them); `make gpu-test` is the GPU's."""
    def recipe(target):
        out = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True, check=True).stdout
        return next(line for line in out.splitlines() if "-m pytest" in line)

    assert all(recipe(t).startswith("CUDA_VISIBLE_DEVICES= ") for t in ("test", "check"))
    assert "CUDA_VISIBLE_DEVICES" not in recipe("gpu-test")


def test_device_switch_matches_this_machine():
    if torch.cuda.is_available():
        assert course.ON_GPU and course.DEVICE.type == "cuda"
    else:
        assert not course.ON_GPU and course.DEVICE.type == "cpu"
        assert os.environ["TRITON_INTERPRET"] == "1" and course.INTERPRET
    # said outright either way: a learner's os.environ.setdefault("TRITON_INTERPRET", "1") changes nothing
    assert "TRITON_INTERPRET" in os.environ
    assert course.pick(small=1, large=2) == (2 if course.SIZE == "large" else 1)
    assert "torch" in course.describe() and "triton" in course.describe()


def _run_course(env_extra, code):
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "COURSE_SIZE", "COURSE_DEVICE")}
    env.update(env_extra)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=ROOT)


def test_size_override_and_bad_value():
    ok = _run_course({"COURSE_SIZE": "large", "COURSE_DEVICE": "cpu"}, "import course; print(course.SIZE, course.INTERPRET)")
    assert ok.returncode == 0 and ok.stdout.split() == ["large", "True"]
    bad = _run_course({"COURSE_SIZE": "huge"}, "import course")
    assert bad.returncode != 0 and "COURSE_SIZE must be 'small' or 'large'" in bad.stderr


def test_kernel_defined_after_course_runs_in_interpreter_on_cpu():
    code = """
import course, torch, triton, triton.language as tl
@triton.jit
def twice(x, y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + offs, 2 * tl.load(x + offs, mask=offs < n), mask=offs < n)
x = torch.randn(37, device=course.DEVICE); y = torch.full_like(x, float("nan"))
twice[(triton.cdiv(37, 16),)](x, y, 37, BLOCK=16)
assert torch.equal(y, 2 * x), (y, x)
print("ok")
"""
    res = _run_course({}, code)
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr[-2000:]


@autotune([triton.Config({"B": 16}), triton.Config({"B": 32})], key=["n"])
@triton.jit
def _small_matmul(a, b, c, n, B: tl.constexpr):
    r = tl.arange(0, B)
    m = (r[:, None] < n) & (r[None, :] < n)
    x = tl.load(a + r[:, None] * n + r[None, :], mask=m, other=0.0)
    y = tl.load(b + r[:, None] * n + r[None, :], mask=m, other=0.0)
    acc = dot(x, y, tl.zeros((B, B), dtype=tl.float32))
    tl.store(c + r[:, None] * n + r[None, :], acc, mask=m)


def test_fixed_config_autotune_and_exact_bf16_dot():
    n = 13
    a = torch.randn(n, n, dtype=torch.bfloat16, device=course.DEVICE)
    b = torch.randn(n, n, dtype=torch.bfloat16, device=course.DEVICE)
    c = torch.full((n, n), float("nan"), device=course.DEVICE)
    _small_matmul[(1,)](a, b, c, n)
    ref = a.double() @ b.double()
    # bf16 tl.dot under the interpreter without the upcast errs by ~1e10; compiled, fp32 accumulation.
    assert (c.double() - ref).abs().max() < 1e-3


def test_ensure_venv_explains_a_broken_venv(tmp_path):
    work = tmp_path / "repo"
    (work / "tools").mkdir(parents=True)
    (work / "tools" / "ensure_venv.sh").write_text((ROOT / "tools" / "ensure_venv.sh").read_text())
    (work / "pyproject.toml").write_text("")
    (work / ".venv" / "bin").mkdir(parents=True)
    (work / ".venv" / "bin" / "python").symlink_to("/nonexistent/python3")
    res = subprocess.run(["bash", str(work / "tools" / "ensure_venv.sh")], capture_output=True, text=True)
    assert res.returncode != 0
    assert "rm -rf .venv" in res.stderr


def test_ensure_venv_explains_missing_python(tmp_path):
    work = tmp_path / "repo"
    (work / "tools").mkdir(parents=True)
    (work / "tools" / "ensure_venv.sh").write_text((ROOT / "tools" / "ensure_venv.sh").read_text())
    (work / "pyproject.toml").write_text("")
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    for tool in ("bash", "dirname", "env"):  # a PATH with no python at all
        (fake_bin / tool).symlink_to(subprocess.check_output(["which", tool], text=True).strip())
    res = subprocess.run(["bash", str(work / "tools" / "ensure_venv.sh")], capture_output=True, text=True,
                         env={"PATH": str(fake_bin)})
    assert res.returncode != 0
    assert "Python 3.10 or newer is needed" in res.stderr


def test_ci_script_runs_make_test_and_fails_on_no_tests():
    text = (ROOT / ".ci" / "run").read_text()
    assert "make test" in text and '"$rc" -eq 5' in text


def _free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_make_lab_serves_jupyterlab_with_a_token():
    import re
    import signal
    import time
    import urllib.request

    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env["PORT"] = str(port)
    proc = subprocess.Popen(["make", "--no-print-directory", "lab"], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        url = None
        for line in proc.stdout:
            m = re.search(rf"http://127\.0\.0\.1:{port}/lab\?token=[0-9a-f]+", line)
            if m:
                url = m.group(0)
                break
        assert url, "make lab printed no URL with a token"
        deadline = time.time() + 90
        while True:
            try:
                with urllib.request.urlopen(url, timeout=5) as page:
                    assert page.status == 200 and b"JupyterLab" in page.read()
                break
            except OSError:
                assert time.time() < deadline, "JupyterLab did not answer on /lab within 90 s"
                assert proc.poll() is None, "make lab exited"
                time.sleep(1)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def test_ceilings_count_read_plus_write_bytes_and_matmul_flops():
    from measure.ceilings import CPU_COPY_BYTES as COPY_BYTES, CPU_MATMUL_N as MATMUL_N, measure_ceilings

    timed = []
    copy_gbps, tflops = measure_ceilings(lambda fn: timed.append(fn) or 2.0, device="cpu")  # every fn "takes" 2 ms
    assert len(timed) == 2
    assert copy_gbps == pytest.approx(2 * COPY_BYTES / 2e-3 / 1e9)
    assert tflops == pytest.approx(2 * MATMUL_N**3 / 2e-3 / 1e12)


def test_autotune_max_trims_the_configs_on_a_gpu(monkeypatch):
    import course.triton_compat as compat

    @triton.jit
    def kernel(x):
        pass

    configs = [triton.Config({"B": b}) for b in (16, 32, 64)]
    monkeypatch.setattr(compat, "INTERPRET", False)  # the GPU branch: triton.autotune itself
    monkeypatch.setenv("COURSE_AUTOTUNE_MAX", "2")
    assert [c.kwargs["B"] for c in compat.autotune(configs, key=[])(kernel).configs] == [16, 64]  # + the last
    monkeypatch.setenv("COURSE_AUTOTUNE_MAX", "1")
    assert [c.kwargs["B"] for c in compat.autotune(configs, key=[])(kernel).configs] == [64]
    monkeypatch.delenv("COURSE_AUTOTUNE_MAX")
    assert len(compat.autotune(configs, key=[])(kernel).configs) == 3
    monkeypatch.setenv("COURSE_AUTOTUNE_MAX", "zero")
    with pytest.raises(ValueError, match="COURSE_AUTOTUNE_MAX must be a positive whole number"):
        compat.autotune(configs, key=[])


# ----------------------------------------------------------------------------- Triton's internals

INTERNAL_PACKAGES = ("triton.runtime", "triton.compiler", "triton.backends", "triton._C", "triton.knobs")


def test_every_triton_internal_the_course_uses_is_in_the_installed_triton():
    from course import triton_internals

    for name in triton_internals.INTERNALS:
        assert triton_internals.internal(name) is not None, name


def test_an_untested_triton_is_named_once_with_what_to_install(monkeypatch):
    from course import triton_internals

    assert triton_internals.is_tested("3.6.0") and triton_internals.is_tested("3.9.0")
    assert not triton_internals.is_tested("3.10.0") and not triton_internals.is_tested("3.7.1")
    monkeypatch.setattr(triton_internals, "version", lambda: "3.10.0")
    monkeypatch.setattr(triton_internals, "_warned", False)
    with pytest.warns(triton_internals.UntestedTriton, match=r"triton 3\.10\.0 .*3\.6, 3\.9.*triton==3\.9\.0"):
        assert triton_internals.check_version() is False
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert triton_internals.check_version() is False  # once a process


def test_a_missing_internal_says_which_who_uses_it_and_the_fix(monkeypatch):
    from course import triton_internals

    monkeypatch.setitem(triton_internals.INTERNALS, "Gone", ("triton.runtime.jit.NoSuchThing", "course.x"))
    with pytest.raises(ImportError, match=r"triton\.runtime\.jit\.NoSuchThing \(used by course\.x\).*triton==3\.9\.0"):
        triton_internals.internal("Gone")


def test_only_one_module_reaches_into_triton_internals():
    """course/triton_internals.py is the one place: a new use elsewhere must be registered there."""
    import ast

    found = []
    files = [p for d in ("course", "autograder", "kernels_ref", "measure", "tools", "probes")
             for p in (ROOT / d).rglob("*.py")] + [ROOT / "tests" / "_sm90_compile.py"]
    for path in files:
        if path.name == "triton_internals.py" or "tests" in path.relative_to(ROOT).parts[1:]:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom)
                     else [ast.unparse(node)] if isinstance(node, ast.Attribute) else [])
            if any(n.startswith(INTERNAL_PACKAGES) for n in names):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found, found


def test_reading_a_notebook_imports_no_iri_grammar():
    """A process that imports the course reads, validates and writes notebooks without rfc3987_syntax (whose
    grammars took most of nbformat's import time): the schemas it reads check no IRI."""
    code = ("import sys, course, nbformat\n"
            "nb = nbformat.read('solutions/01_naive_ops/01_naive_ops.ipynb', as_version=4)\n"
            "nbformat.validate(nb)\n"
            "print(sys.modules.get('rfc3987_syntax'), len(nb.cells) > 0)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["None", "True"], out.stdout + out.stderr


def test_the_unit_tier_knows_a_sandboxed_worker_for_a_python_process(tmp_path):
    """`make check` refuses every test that starts a Python process (tests/conftest.py): a grading worker's
    command line starts with the sandbox where there is one (bwrap ... python -m autograder.worker), and a test
    that started one went unnoticed into the unit tier."""
    from conftest import _is_python

    from autograder.sandbox import sandbox_argv

    worker = [sys.executable, "-m", "autograder.worker", "3"]
    wrapped, _ = sandbox_argv(worker, tmp_path / "scratch")
    assert _is_python(worker) and _is_python(wrapped)
    assert not _is_python(["git", "status"]) and not _is_python("ls")
