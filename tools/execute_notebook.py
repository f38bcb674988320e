"""Execute a notebook top to bottom with nbclient and name the cell that failed.

    python -m tools.execute_notebook solutions/04_fused_softmax/04_fused_softmax.ipynb [--timeout 600]
        [--save-to DIR] [--print-output]

Runs in the notebook's own folder (as JupyterLab and nbgrader do), never writes the notebook back,
and prints how long it took. ``--save-to DIR`` writes the executed copy (outputs and plots) into DIR;
``--print-output`` prints what its cells printed (a GPU run's log then holds the notebook's own numbers).
Used by tests/test_notebooks.py and by the GPU runs.
"""
from __future__ import annotations

import argparse
import pathlib
import sys
import time
from dataclasses import dataclass

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError


class NotebookFailed(Exception):
    """A cell failed: the message names the notebook, the cell number and the start of its source;
    ``notebook`` holds the outputs of the cells run until then."""

    def __init__(self, message: str, notebook=None):
        super().__init__(message)
        self.notebook = notebook


@dataclass
class Executed:
    path: pathlib.Path
    seconds: float
    notebook: nbformat.NotebookNode


def _describe(path, index, cell, detail: str) -> str:
    head = "\n".join(cell.source.splitlines()[:6])
    return f"{path}: cell {index + 1} of {path.name} failed: {detail}\n--- cell source ---\n{head}"


def execute(path, timeout: int = 600, kernel_name: str = "python3", env: dict | None = None) -> Executed:
    """Run every cell; ``env`` is the kernel's environment (this process's when None)."""
    path = pathlib.Path(path)
    nb = nbformat.read(path, as_version=4)
    current = {"index": -1}

    def on_cell_start(cell, cell_index, **_):
        current["index"] = cell_index

    client = NotebookClient(nb, timeout=timeout, kernel_name=kernel_name, on_cell_start=on_cell_start,
                            resources={"metadata": {"path": str(path.parent.resolve())}})
    start = time.perf_counter()
    try:
        client.execute(**({"env": env} if env is not None else {}))
    except CellExecutionError as err:
        cell = nb.cells[current["index"]]
        error = next((o for o in cell.get("outputs", []) if o.get("output_type") == "error"), None)
        detail = f"{error.get('ename')}: {error.get('evalue')}" if error else str(err).splitlines()[-1]
        raise NotebookFailed(_describe(path, current["index"], cell, detail), nb) from None
    except CellTimeoutError:
        cell = nb.cells[current["index"]]
        raise NotebookFailed(_describe(path, current["index"], cell, f"timed out after {timeout} s"), nb) from None
    except Exception as err:  # noqa: BLE001
        # nbclient's clean-up after a dead kernel can raise an AssertionError of its own in its place
        dead = next((e for e in (err, err.__context__) if isinstance(e, DeadKernelError)), None)
        if dead is None:
            raise
        cell = nb.cells[current["index"]]
        why = (f"the kernel died ({dead}): the process ended without a Python error (out of host or GPU "
               "memory, or a crash in native code); the outputs before it are kept")
        raise NotebookFailed(_describe(path, current["index"], cell, why), nb) from None
    return Executed(path, time.perf_counter() - start, nb)


def printed(nb) -> str:
    """The text a notebook's code cells printed, each cell's under a '--- cell N ---' line."""
    parts = []
    for i, cell in enumerate(nb.cells, start=1):
        text = "".join(o.get("text", "") for o in cell.get("outputs", [])
                       if o.get("output_type") == "stream" and o.get("name") == "stdout")
        if text.strip():
            parts.append(f"--- cell {i} ---\n{text.rstrip()}")
    return "\n".join(parts)


def warnings_printed(nb) -> list[str]:
    """'cell N: <the warning's line>' for every Python warning a code cell wrote to stderr."""
    import re

    found = []
    for i, cell in enumerate(nb.cells, start=1):
        text = "".join(o.get("text", "") for o in cell.get("outputs", [])
                       if o.get("output_type") == "stream" and o.get("name") == "stderr")
        found += [f"cell {i}: {line.strip()}" for line in text.splitlines() if re.search(r"\b\w*Warning: ", line)]
    return found


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("notebooks", nargs="+")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    ap.add_argument("--save-to", metavar="DIR", help="write each executed notebook (with outputs) into DIR")
    ap.add_argument("--print-output", action="store_true", help="print what each notebook's cells printed")
    args = ap.parse_args(argv)
    failed = 0
    for p in args.notebooks:
        try:
            done = execute(p, timeout=args.timeout)
            print(f"ok    {p}  {done.seconds:.1f} s", flush=True)
            notebook = done.notebook
        except NotebookFailed as err:
            failed += 1
            print(f"FAIL  {err}", flush=True)
            notebook = err.notebook  # what ran before the failure: its numbers are still measurements
        if notebook is None:
            continue
        if args.print_output:
            print(printed(notebook), flush=True)
        if args.save_to:
            out = pathlib.Path(args.save_to)
            out.mkdir(parents=True, exist_ok=True)
            nbformat.write(notebook, out / pathlib.Path(p).name)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
