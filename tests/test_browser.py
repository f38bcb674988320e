"""JupyterLab in a real browser: what a learner sees after `make lab`.

`make lab` serves a learner's copy of 03_triton_basics (the student notebook with every exercise filled in
with the solution's code, the way a learner who solved it has it) from a temporary folder. Headless
Chromium, driven by Playwright, opens it, runs every cell (Run > Run All Cells), waits for the kernel to
go idle and checks what the page shows: no dialog or warning, no output with a traceback, every code cell
ran, each `check(...)` printed its table of cases and PASSED, and the matplotlib plot is an image.
The untouched student notebook would stop Run All at its first `raise NotImplementedError()`: the filled-in
copy is the one on which "every cell runs" can be asserted. Screenshots go to out/browser/ (paths printed).

    make browser-test        # = python -m pytest tests/test_browser.py -s

Needs the `playwright` Python package (in pyproject.toml) and a system Chromium (`apt-get install
chromium`, or CHROMIUM=/path/to/chrome); never `playwright install`. Skipped with a reason where either is
missing, except where COURSE_BROWSER_TEST=required (CI sets it): there a missing browser fails.
"""
from __future__ import annotations

import contextlib
import json
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import nbformat
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
ASSIGNMENT = "03_triton_basics"
SCREENSHOTS = ROOT / "out" / "browser"
SERVER_START_S = 180      # a cold JupyterLab (first import of nbgrader's extensions) on a busy machine
RUN_ALL_S = 600           # every cell of 03 under the Triton interpreter (about a minute on 2 busy cores)

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(SERVER_START_S + RUN_ALL_S + 300)]


def _missing(what: str):
    msg = f"browser test: {what}"
    if os.environ.get("COURSE_BROWSER_TEST") == "required":
        pytest.fail(msg + " (COURSE_BROWSER_TEST=required: the browser test must run here)", pytrace=False)
    pytest.skip(msg)


@pytest.fixture(scope="session")  # kept to the end: xdist interleaves other modules, which would tear a module fixture down
def chromium() -> str:
    path = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not os.access(path, os.X_OK):
        _missing(f"no Chromium at {path}: `apt-get install chromium` (Debian) or set CHROMIUM=/path/to/chrome")
    return path


@pytest.fixture(scope="session")  # kept to the end: xdist interleaves other modules, which would tear a module fixture down
def sync_playwright():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("the `playwright` package is not installed: `pip install -e .` (it is in pyproject.toml); "
                 "the browser is the system Chromium, so no `playwright install`")
    return sync_playwright


def _filled_in(assignment: str) -> nbformat.NotebookNode:
    """The student notebook with every exercise cell replaced by the solution's code, markers removed."""
    student = nbformat.read(ROOT / "notebooks" / assignment / f"{assignment}.ipynb", as_version=4)
    solution = nbformat.read(ROOT / "solutions" / assignment / f"{assignment}.ipynb", as_version=4)
    answers = {c.metadata["nbgrader"]["grade_id"]: c.source for c in solution.cells
               if c.metadata.get("nbgrader", {}).get("solution")}
    for cell in student.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution"):
            lines = answers[meta["grade_id"]].splitlines()
            cell.source = "\n".join(ln for ln in lines if ln.strip() not in ("### BEGIN SOLUTION", "### END SOLUTION"))
    return student


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _make_lab(lab_dir: pathlib.Path, home: pathlib.Path):
    """`make lab` on lab_dir at a free port; yields (base URL, token); shuts it down, kernels included."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}  # never open a browser
    env.update(
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),  # the kernel imports this checkout
        # A fresh JupyterLab profile: no workspace or settings of the machine's user leak in.
        JUPYTERLAB_SETTINGS_DIR=str(home / "settings"), JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
    )
    log_path = home / "lab.log"
    # BIN: the Python running the tests (CI: .venv/bin, as `make lab` has it); -o venv: that venv is ready.
    cmd = ["make", "--no-print-directory", "-o", "venv", "lab", f"BIN={pathlib.Path(sys.executable).parent}",
           f"LAB_DIR={lab_dir}", f"PORT={port}", "IP=127.0.0.1"]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    token = None
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            text = log_path.read_text()
            token = token or next(iter(re.findall(r"/lab\?token=([0-9a-f]+)", text)), None)
            if token and _get(f"http://127.0.0.1:{port}/api/status", token) is not None:
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"`{' '.join(cmd)}` did not serve JupyterLab within {SERVER_START_S} s "
                            f"(exit code {proc.poll()}):\n{text[-3000:]}", pytrace=False)
            time.sleep(0.5)
        yield f"http://127.0.0.1:{port}", token
    finally:
        _stop(proc, port, token)


def _get(url: str, token: str | None, method: str = "GET"):
    req = urllib.request.Request(url, method=method, headers={"Authorization": f"token {token}"} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read() or b"null")
    except (OSError, ValueError):  # not up yet, or an HTTP error
        return None


def _stop(proc: subprocess.Popen, port: int, token: str | None) -> None:
    # The server's own shutdown stops its kernels, which run in sessions of their own (a signal to the
    # server's process group would not reach them); then the group: make and the server.
    if token and proc.poll() is None:
        _get(f"http://127.0.0.1:{port}/api/shutdown", token, method="POST")
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=20)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
            return


# An output that shows an error: IPython's traceback, or the one-line form a SyntaxError takes.
_JS_TRACEBACK = r"o => o.textContent.includes('Traceback') || /^\w+(Error|Exception):/m.test(o.textContent)"

# What the notebook shows, read from the DOM: per cell its type, input prompt ("[3]:", "[*]:", "[ ]:"),
# the text of each output, the outputs that show a traceback, and its images.
_READ_CELLS = """() => [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell')]
  .map(cell => ({
    code: cell.classList.contains('jp-CodeCell'),
    prompt: (cell.querySelector('.jp-InputPrompt') || {}).textContent || '',
    outputs: [...cell.querySelectorAll('.jp-OutputArea-output')].map(o => o.textContent),
    tracebacks: [...cell.querySelectorAll('.jp-OutputArea-output')].filter(%s).map(o => o.textContent),
    images: [...cell.querySelectorAll('.jp-OutputArea-output img')].map(i => [i.naturalWidth, i.naturalHeight]),
  }))""" % _JS_TRACEBACK

# Error and warning notifications (JupyterLab's toasts), e.g. a kernel that cannot start.
_ALERTS = ".Toastify__toast--error, .Toastify__toast--warning"

# The kernel's state as the status bar shows it ("Python 3 (ipykernel) | Idle"): "Idle" only once the
# kernel is started and connected (the toolbar's execution indicator reads idle before that).
_KERNEL_STATUS = """() => {
  const item = [...document.querySelectorAll('#jp-main-statusbar .jp-StatusBar-TextItem')]
    .find(e => e.textContent.includes('|'));
  return item ? item.textContent.split('|').pop().trim() : null;
}"""


def _ran(prompt: str) -> bool:
    return re.fullmatch(r"\s*\[\d+\]:?\s*", prompt) is not None


def _no_dialog(page, when: str) -> None:
    dialog = page.locator(".jp-Dialog")
    if dialog.count():
        pytest.fail(f"JupyterLab shows a dialog {when}: {dialog.first.inner_text()!r}", pytrace=False)


def _wait_for_kernel_idle(page, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while page.evaluate(_KERNEL_STATUS) != "Idle":
        _no_dialog(page, "on opening the notebook")
        if time.monotonic() > deadline:
            pytest.fail(f"the kernel was not idle {timeout_s:.0f} s after opening the notebook "
                        f"(status bar: {page.evaluate(_KERNEL_STATUS)!r})", pytrace=False)
        time.sleep(0.5)


def _run_all_cells(page) -> None:
    """Run > Run All Cells, on the notebook made the active document first (the command acts on it)."""
    page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell").first.click()
    page.locator("#jp-MainMenu .lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    item = page.locator('.lm-Menu-item[data-command="runmenu:run-all"]')
    assert "lm-mod-disabled" not in (item.get_attribute("class") or ""), "Run > Run All Cells is disabled"
    item.click()


def _wait_for_all_cells(page, n_code: int, timeout_s: float):
    """Until the kernel is idle and no cell is queued or running; returns the cells as _READ_CELLS reads them."""
    start = time.monotonic()
    while True:
        _no_dialog(page, "after Run All Cells")
        cells = page.evaluate(_READ_CELLS)
        busy = any("*" in c["prompt"] for c in cells if c["code"])
        done = sum(_ran(c["prompt"]) for c in cells if c["code"])
        if done and not busy and page.evaluate(_KERNEL_STATUS) == "Idle":
            time.sleep(2)  # idle between two cells of the queue would look the same: look again
            again = page.evaluate(_READ_CELLS)
            if not any("*" in c["prompt"] for c in again if c["code"]) and page.evaluate(_KERNEL_STATUS) == "Idle":
                return again
        waited = time.monotonic() - start
        if waited > timeout_s or (not done and not busy and waited > 60):
            pytest.fail(f"Run All Cells did not finish within {waited:.0f} s ({done} of {n_code} code cells ran, "
                        f"kernel {page.evaluate(_KERNEL_STATUS)!r})", pytrace=False)
        time.sleep(1)


def _excerpt(nb, i: int) -> str:
    return f"cell {i + 1} (`{nb.cells[i].source.splitlines()[0] if nb.cells[i].source else ''}`)"


def test_lab_runs_the_learners_notebook(tmp_path, chromium, sync_playwright):
    nb = _filled_in(ASSIGNMENT)
    lab_dir = tmp_path / "lab"
    (lab_dir / ASSIGNMENT).mkdir(parents=True)
    nbformat.write(nb, lab_dir / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    checked = [m for c in nb.cells if c.cell_type == "code" for m in re.findall(r"^check\(\"(\w+)\"", c.source, re.M)]
    assert checked, f"{ASSIGNMENT} has no check(...) cell"
    n_code = sum(c.cell_type == "code" for c in nb.cells)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shot = SCREENSHOTS / f"{ASSIGNMENT}.png"                  # the plot, or the first traceback
    shot_check = SCREENSHOTS / f"{ASSIGNMENT}-check.png"     # the last check(...) table
    page_errors, console_errors = [], []
    started = time.monotonic()

    with _make_lab(lab_dir, tmp_path) as (base, token), sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, headless=True, args=["--disable-dev-shm-usage"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on("pageerror", lambda err: page_errors.append(str(err)))
            page.on("console", lambda msg: console_errors.append(msg.text) if msg.type == "error" else None)
            try:
                page.goto(f"{base}/lab/tree/{ASSIGNMENT}/{ASSIGNMENT}.ipynb?token={token}", timeout=120_000)
                page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell").first.wait_for(timeout=120_000)
                _wait_for_kernel_idle(page, 120)
                alerts = page.locator(_ALERTS)
                assert alerts.count() == 0, f"JupyterLab warns on opening: {alerts.all_inner_texts()}"
                opened_s = time.monotonic() - started

                _run_all_cells(page)
                cells = _wait_for_all_cells(page, n_code, RUN_ALL_S)
                ran_s = time.monotonic() - started - opened_s
                alerts_after_run = page.locator(_ALERTS).all_inner_texts()
            finally:
                _screenshot(page, shot_check, f"o => o.textContent.includes(\"check('{checked[-1]}')\")")
                _screenshot(page, shot, _JS_TRACEBACK, "o => o.querySelector('img')")
                print(f"\nscreenshots: {shot} (the plot, or the first traceback), {shot_check} (a check table)")
        finally:
            browser.close()

    assert len(cells) == len(nb.cells), (
        f"the page shows {len(cells)} cells, the notebook has {len(nb.cells)} (a notebook windowing mode that "
        "leaves cells out of the page? see Settings > Notebook > Windowing mode)")
    assert not alerts_after_run, f"JupyterLab warned while running: {alerts_after_run}"
    tracebacks = [f"{_excerpt(nb, i)}:\n{out[-1500:]}" for i, c in enumerate(cells) for out in c["tracebacks"]]
    assert not tracebacks, "outputs with a traceback:\n" + "\n".join(tracebacks) + f"\nscreenshot {shot}"
    not_run = [_excerpt(nb, i) for i, c in enumerate(cells) if c["code"] and not _ran(c["prompt"])]
    assert not not_run, f"cells that did not run (an earlier cell failed?): {not_run}; screenshot {shot}"
    text = "\n".join(out for c in cells for out in c["outputs"])
    for ex in checked:
        table = re.search(rf"check\('{ex}'\): \d+ public cases.*?\n(.*?)\n  (PASSED|NOT YET)", text, re.S)
        assert table, f"no check('{ex}') table in the outputs; screenshot {shot}"
        assert "max error" in table.group(1) and "verdict" in table.group(1), table.group(0)
        assert table.group(2) == "PASSED", f"check('{ex}') did not pass:\n{table.group(0)}"
    images = [size for c in cells for size in c["images"]]
    assert images and all(w > 100 and h > 100 for w, h in images), f"no rendered plot (images: {images}); {shot}"
    assert not page_errors, f"JavaScript errors in the page: {page_errors}"
    print(f"opened in {opened_s:.1f} s, ran {n_code} code cells in {ran_s:.1f} s; "
          f"console errors: {console_errors or 'none'}")


def _screenshot(page, path: pathlib.Path, *wanted: str) -> None:
    """The page scrolled to the first cell output that the first matching JS predicate in `wanted` accepts."""
    with contextlib.suppress(Exception):  # a screenshot is evidence: it never hides the failure being shown
        for _ in range(3):  # cells drawn as they scroll in take their real height and move the target: again
            for predicate in wanted:
                found = page.evaluate(f"""() => {{
                  const el = [...document.querySelectorAll('.jp-OutputArea-output')].find({predicate});
                  if (el) el.scrollIntoView({{block: 'center'}});
                  return !!el;
                }}""")
                if found:
                    break
            page.wait_for_timeout(300)
    page.screenshot(path=str(path))
