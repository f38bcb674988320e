"""What a submission is: a notebook's graded code, or a Python file as it is.

Notebook submission (docs/CONTRACTS.md): its code cells, except nbgrader test cells (grade: true,
solution: false) and cells tagged ``demo``; lines starting with ``%`` or ``!`` are dropped. The code is
joined into one source, written to a real ``.py`` file for the worker (Triton reads kernel source with
``inspect``), and every line remembers its cell so messages can say "cell 7, line 3".
"""
from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from pathlib import Path

from autograder.audit import parse
from autograder.imports import local_sources


class SubmissionError(Exception):
    """Unusable input: the message is one line a learner can act on (CLI exit code 2)."""


@dataclass
class Submission:
    path: Path
    source: str
    kind: str                                     # "notebook" | "python"
    cells: list = field(default_factory=list)     # for each source line (1-based): (cell number, line) or None
    defined: set = field(default_factory=set)     # top-level names the code defines
    # {real path: text} of the modules beside it that it imports (autograder.imports.local_sources), read
    # once: what the audit judges is what the worker runs
    helpers: dict = field(default_factory=dict)

    def where(self, lineno: int | None) -> str:
        if lineno is None:
            return "an unknown line"
        if isinstance(lineno, str):  # already a place: a module beside the submission ("helper.py, line 3")
            return lineno
        if self.kind == "python":
            return f"line {lineno}"
        if 1 <= lineno <= len(self.cells) and self.cells[lineno - 1]:
            cell, line = self.cells[lineno - 1]
            return f"cell {cell}, line {line}"
        return f"line {lineno}"

    def write(self, directory: Path) -> Path:
        """The source as a file the worker can import (and Triton can read kernels from)."""
        target = Path(directory) / "submission.py"
        target.write_text(self.source, encoding="utf-8")
        return target


def is_test_cell(cell: dict) -> bool:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return bool(meta.get("grade")) and not meta.get("solution")


def is_demo_cell(cell: dict) -> bool:
    return "demo" in (cell.get("metadata", {}).get("tags") or [])


def _drop_magics(line: str) -> str:
    stripped = line.lstrip()
    indent = line[: len(line) - len(stripped)]
    return f"{indent}pass  # dropped for grading: {stripped[:60]}"


def _continues(previous: list[str]) -> bool:
    """Whether the next line continues the statement of ``previous`` (an open bracket, a backslash): then
    a leading % is Python's modulo (Black puts ``% group_size_m`` at the start of a line), not a magic."""
    if previous and previous[-1].rstrip().endswith("\\"):
        return True
    try:
        ast.parse("\n".join(previous))
    except SyntaxError as exc:
        return "was never closed" in str(exc.msg)
    return False


def code_lines(src: str) -> list[str]:
    """A cell's lines as Python: IPython's magics and shell escapes (``%time``, ``!pip``) each become a
    ``pass`` where they start a statement, and a cell magic (``%%bash``, ``%%timeit``) empties its cell,
    whose body is another language or runs only in Jupyter."""
    lines = src.splitlines()
    first = next((line.lstrip() for line in lines if line.strip()), "")
    if first.startswith("%%"):
        return [f"# dropped for grading: {line[:60]}" for line in lines]
    out = []
    for line in lines:
        magic = line.lstrip().startswith(("%", "!")) and not _continues(out)
        out.append(_drop_magics(line) if magic else line)
    return out


def notebook_source(nb: dict) -> tuple[str, list]:
    """Join the graded code cells of a notebook dict; return (source, line -> (cell number, line))."""
    lines, where = [], []
    for number, cell in enumerate(nb.get("cells", []), start=1):
        if cell.get("cell_type") != "code" or is_test_cell(cell) or is_demo_cell(cell):
            continue
        src = cell.get("source", "")
        src = "".join(src) if isinstance(src, list) else str(src)
        lines.append(f"# --- cell {number} ---")
        where.append(None)
        for i, line in enumerate(code_lines(src), start=1):
            lines.append(line)
            where.append((number, i))
        lines.append("")
        where.append(None)
    return "\n".join(lines) + "\n", where


def load(path) -> Submission:
    """Read and check a submission; raise SubmissionError with a one-line reason when it is unusable."""
    path = Path(path)
    if not path.exists():
        raise SubmissionError(f"no such file: {path}")
    if path.is_dir():
        raise SubmissionError(f"{path} is a directory; give a .ipynb notebook or a .py file")
    if path.suffix == ".ipynb":
        try:
            nb = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise SubmissionError(f"{path} is not a valid notebook (invalid JSON: {exc})") from None
        if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
            raise SubmissionError(f"{path} is not a notebook (no list of cells)")
        source, cells = notebook_source(nb)
        sub = Submission(path=path.resolve(), source=source, kind="notebook", cells=cells)
    elif path.suffix == ".py":
        try:
            source = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise SubmissionError(f"{path} is not a text file (not UTF-8)") from None
        sub = Submission(path=path.resolve(), source=source, kind="python")
    else:
        raise SubmissionError(f"{path} is not a notebook or a Python file (expected .ipynb or .py)")
    try:
        tree = parse(sub.source, filename=str(path))
    except SyntaxError as exc:
        raise SubmissionError(f"syntax error in {path.name} at {sub.where(exc.lineno)}: {exc.msg}") from None
    sub.defined = _top_level_names(tree)
    sub.helpers = local_sources(sub.source, sub.path.parent)
    return sub


def _top_level_names(tree: ast.Module) -> set:
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Name):
                    names.add(target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names
