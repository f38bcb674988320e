"""What a submission is: a notebook's graded code, or a Python file as it is.

Notebook submission (docs/CONTRACTS.md): its code cells, except nbgrader test cells (grade: true,
solution: false) and cells tagged ``demo``, as the Python IPython runs (``cell_lines``): IPython's own
transformer turns magics, shell escapes and help (``tl.load?``) into calls, and each becomes what it does
to the notebook's namespace: ``%time stmt`` and the bodies of ``%%time``/``%%capture`` run as Python,
``%run file.py`` runs that file's lines (each line remembers its file), ``%%writefile name.py`` writes a
module the later cells may import (audited as one; what the notebook writes wins over a file on the disk,
as when it runs), a shell command or ``%timeit`` runs nothing and a value taken from one (``r = %timeit
-o ...``, ``out = !cmd``) is a stand-in (``STAND_IN``); other cell magics drop their cell. The code is
joined into one source, written to a real ``.py`` file for the worker (Triton reads kernel source with
``inspect``), and every line remembers its cell so messages can say "cell 7, line 3".
"""
from __future__ import annotations

import ast
import json
import os
import re
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
            if isinstance(self.cells[lineno - 1], str):  # a line a %run brought in: "helper.py, line 3"
                return self.cells[lineno - 1]
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


# IPython's own cell magics that run their body as the cell's Python, in the notebook's namespace (what
# they define stays defined): the body is graded as Python. Every other cell magic runs its body as another
# language, only in Jupyter (%%bash, %%html), or in a scope of its own (%%timeit): the cell is dropped.
_BODY_RUNS = frozenset({"time", "capture", "prun"})
# Line magics that run their statement in the notebook's namespace (``%time y = f(x)`` defines y).
_STATEMENT_RUNS = frozenset({"time"})
# The name a magic's result takes while graded (``r = %timeit -o f(x)``, ``out = !cmd``): the grader runs no
# shell command and times nothing when it imports a notebook; the worker defines it (``autograder.worker``).
STAND_IN = "_ipython_only"


def _ipython_python(src: str) -> str:
    """A cell as IPython turns it into Python (``TransformerManager.transform_cell``, what IPython runs):
    magics, shell escapes and help become calls of ``get_ipython()``. Where IPython is not installed (a GPU
    runner's image), the same escape grammar is read here for the forms a notebook's line uses."""
    # IPython transforms at most 499 escapes a cell, each a pass over the whole cell (500 cost 5 s to refuse):
    # a cell with more lines of their shape is refused before, as Jupyter refuses to run it
    if sum(_may_escape(line.lstrip()) for line in src.splitlines()) > IPYTHON_ESCAPES:
        raise SubmissionError(f"a cell IPython cannot read (more than {IPYTHON_ESCAPES} %magics, !commands or "
                              "help? lines)")
    try:
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError:
        return "\n".join(_escapes_without_ipython(src.splitlines()))
    try:
        return TransformerManager().transform_cell(src)
    except RuntimeError as exc:  # more escapes than IPython transforms: Jupyter cannot run the cell either
        raise SubmissionError(f"a cell IPython cannot read ({exc})") from None


# IPython's TransformerManager transforms one escape a pass and gives up after 500 passes, the last of which
# must change nothing (inputtransformer2.TRANSFORM_LOOP_LIMIT): 499 escapes a cell at most
IPYTHON_ESCAPES = 499


_ASSIGNED = re.compile(r"^([\w.\[\], ()*]+?)\s*=\s*([%!])(.*)$")
_HELP = re.compile(r"\?{1,2}[A-Za-z_][\w.]*|[A-Za-z_][\w.]*\?{1,2}")  # tl.load?, ??tl.load: a name asked about, nothing else


def _escapes_without_ipython(lines: list[str]) -> list[str]:
    """IPython's escapes (``%magic args``, ``x = %magic args``, ``!cmd``, ``x = !cmd``, ``name?``) as the calls
    IPython makes of them, line by line, where a line starts a statement."""
    out = []
    for line in lines:
        stripped = line.lstrip()
        indent = line[: len(line) - len(stripped)]
        # the parse that tells a continued statement comes last, for lines that may be escapes alone: asked of
        # every line, it read a cell's lines again for each one (a 4000-line cell took 85 s to load)
        if not stripped or stripped.startswith("#") or not _may_escape(stripped) or _continues(out):
            out.append(line)
            continue
        assigned = _ASSIGNED.match(stripped)
        target, escape = (assigned.group(1), assigned.group(2) + assigned.group(3)) if assigned else (None, stripped)
        if escape.startswith("!"):
            call = f"get_ipython().getoutput({escape.lstrip('!')!r})" if target else \
                f"get_ipython().system({escape.lstrip('!')!r})"
        elif escape.startswith("%"):
            name, _, args = escape.lstrip("%").partition(" ")
            call = f"get_ipython().run_line_magic({name!r}, {args.strip()!r})"
        elif not target and _HELP.fullmatch(stripped):
            call = f"get_ipython().run_line_magic('pinfo', {stripped.strip('?')!r})"
        else:
            out.append(line)
            continue
        out.append(f"{indent}{target} = {call}" if target else indent + call)
    return out


def _may_escape(stripped: str) -> bool:
    """Whether a line (without its indentation) has the shape of one of IPython's escapes."""
    return stripped.startswith(("%", "!")) or bool(_ASSIGNED.match(stripped)) or bool(_HELP.fullmatch(stripped))


def _continues(previous: list[str]) -> bool:
    """Whether the next line continues the statement of ``previous`` (an open bracket, a backslash): then
    a leading % is Python's modulo (Black puts ``% group_size_m`` at the start of a line), not a magic."""
    if previous and previous[-1].rstrip().endswith("\\"):
        return True
    try:
        parse("\n".join(previous))
    except SyntaxError as exc:
        return "was never closed" in str(exc.msg)
    return False


def _ipython_call(node) -> tuple[str, list] | None:
    """(method, constant arguments) of ``get_ipython().method('...', ...)``, else None."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Call)
            and isinstance(node.func.value.func, ast.Name) and node.func.value.func.id == "get_ipython"):
        return None
    if not all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in node.args):
        return None
    return node.func.attr, [a.value for a in node.args]


def _run_target(args: str, folder) -> Path | None:
    """The file ``%run [-i] file`` runs, found as IPython finds it (``get_py_filename``: the name, else the
    name with ``.py``), when it lies in the notebook's folder or a folder below it (the submission's own
    files; wherever a link leads, a file outside is never read in as the learner's)."""
    import shlex

    try:
        words = [w for w in shlex.split(args) if w != "-i"]
    except ValueError:
        return None
    if folder is None or len(words) != 1 or words[0].endswith((".ipy", ".ipynb")):
        return None
    root = Path(folder).resolve()
    for name in dict.fromkeys((words[0], words[0] if words[0].endswith(".py") else words[0] + ".py")):
        path = (root / name).resolve()
        if path.is_file():
            return path if path.is_relative_to(root) else None
    return None


def _replacement(node, statement: bool, folder):
    """What a call of ``get_ipython()`` becomes in the graded Python: a statement's text, a file's lines
    (``%run``: a list of (line, place)), or an expression."""
    method, args = _ipython_call(node)
    if method == "run_line_magic" and args and args[0] in _STATEMENT_RUNS and len(args) == 2 and args[1].strip():
        body = args[1].strip()
        try:
            parse(body, mode="exec" if statement else "eval")
            return body if statement else f"({body})"
        except SyntaxError:
            pass
    if statement and method == "run_line_magic" and args and args[0] == "run" and len(args) == 2:
        path = _run_target(args[1], folder)
        if path is not None:
            name = path.relative_to(Path(folder).resolve()).as_posix()
            try:
                text = path.read_text(encoding="utf-8")
            except UnicodeDecodeError:  # IPython cannot run it either
                raise SubmissionError(f"%run {name}: not a text file (not UTF-8)") from None
            return [(line, f"{name}, line {i}") for i, line in enumerate(text.splitlines(), start=1)]
    what = args[0] if method in ("run_line_magic", "run_cell_magic") and args else method
    return "pass" if statement else f"{STAND_IN}({what!r})"


def cell_lines(src: str, folder=None, written: dict | None = None) -> list[tuple[str, int | str]]:
    """A cell's lines as the Python IPython runs (module docstring), each with its place: the line of the
    cell (1-based), or the file and line a ``%run`` brought in. ``written``: where a ``%%writefile`` cell's
    file is recorded ({file name: text}), as running the notebook writes it beside the notebook."""
    lines = src.splitlines()
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is not None and lines[first].lstrip().startswith("%%"):
        name, _, args = lines[first].strip()[2:].partition(" ")
        head = [(f"# graded as IPython runs it: {line[:60]}", i + 1) for i, line in enumerate(lines[:first + 1])]
        if name == "writefile" and written is not None:
            _record_written(args, "\n".join(lines[first + 1:]) + "\n", written)
        if name not in _BODY_RUNS:
            return head + [(f"# dropped for grading: {line[:60]}", i + 1) for i, line in enumerate(lines) if i > first]
        variable = next((w for w in args.split() if not w.startswith("-")), None) if name == "capture" else None
        if variable and variable.isidentifier():
            head[-1] = (f"{variable} = {STAND_IN}('capture')", first + 1)
        body = cell_lines("\n".join(lines[first + 1:]), folder)
        return head + [(text, place + first + 1 if isinstance(place, int) else place) for text, place in body]
    python = _ipython_python(src).splitlines()
    while python and not python[0].strip():
        python.pop(0)
    python = [""] * (len(lines) if first is None else first) + python  # IPython drops leading blank lines
    python += [""] * (len(lines) - len(python))  # a magic continued by a backslash is one line in IPython's
    try:
        tree = parse("\n".join(python))
    except SyntaxError:
        return [(line, i) for i, line in enumerate(python, start=1)]  # the load says where it does not parse
    parents = {id(c): n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
    calls = sorted((n for n in ast.walk(tree) if _ipython_call(n) is not None),
                   key=lambda n: (n.lineno, -n.col_offset))
    out: dict[int, list] = {i: [(line, i)] for i, line in enumerate(python, start=1)}
    for node in calls:
        if node.lineno != node.end_lineno:
            continue  # IPython writes each escape on one line
        statement = isinstance(parents.get(id(node)), ast.Expr)
        new = _replacement(node, statement, folder)
        line = out[node.lineno][0][0]
        if isinstance(new, list):  # a %run file's lines, in place of the statement, at its indentation
            indent = line[: node.col_offset]
            out[node.lineno] = [(indent + text if text.strip() else text, place) for text, place in new] or [
                (indent + "pass", node.lineno)]
        else:
            out[node.lineno] = [(line[: node.col_offset] + new + line[node.end_col_offset:], node.lineno)]
    return [entry for i in sorted(out) for entry in out[i]]


def _record_written(args: str, text: str, written: dict) -> None:
    """``%%writefile [-a] name.py``: the Python file the cell writes beside the notebook when it runs (a
    module its later cells may import, audited as one), appended to with ``-a``."""
    words = args.split()
    append = "-a" in words or "--append" in words
    names = [w for w in words if not w.startswith("-")]
    if len(names) != 1 or not re.fullmatch(r"[A-Za-z_]\w*\.py", names[0]):
        return  # another folder or not a Python module: nothing the graded code can import from here
    written[names[0]] = (written.get(names[0], "") if append else "") + text


def code_lines(src: str) -> list[str]:
    """A cell's lines as the Python IPython runs (``cell_lines``), without the notebook's folder."""
    return [text for text, _ in cell_lines(src)]


def notebook_source(nb: dict, folder=None, written: dict | None = None) -> tuple[str, list]:
    """Join the graded code cells of a notebook dict; return (source, line -> (cell number, line), or the
    place a ``%run`` file's line came from). ``folder``: the notebook's, where ``%run`` finds files;
    ``written``: filled with the files its ``%%writefile`` cells write ({name: text})."""
    lines, where = [], []
    for number, cell in enumerate(nb.get("cells", []), start=1):
        if cell.get("cell_type") != "code" or is_test_cell(cell) or is_demo_cell(cell):
            continue
        src = cell.get("source", "")
        src = "".join(src) if isinstance(src, list) else str(src)
        lines.append(f"# --- cell {number} ---")
        where.append(None)
        for line, place in cell_lines(src, folder, written):
            lines.append(line)
            where.append((number, place) if isinstance(place, int) else place)
        lines.append("")
        where.append(None)
    return "\n".join(lines) + "\n", where


def _cell_problem(cell) -> str | None:
    """What makes ``cell`` something other than an nbformat cell, in words; None for a cell."""
    if not isinstance(cell, dict):
        return f"a {type(cell).__name__}, not a cell"
    metadata = cell.get("metadata", {})
    if not isinstance(metadata, dict) or not isinstance(metadata.get("nbgrader", {}), dict):
        return "its metadata is not a mapping"
    tags = metadata.get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        return "its tags are not a list of words"
    source = cell.get("source", "")
    if not isinstance(source, str) and not (isinstance(source, list) and all(isinstance(s, str) for s in source)):
        return "its source is not text"
    return None


def load(path) -> Submission:
    """Read and check a submission; raise SubmissionError with a one-line reason when it is unusable."""
    path = Path(path)
    if not path.exists():
        raise SubmissionError(f"no such file: {path}")
    if path.is_dir():
        raise SubmissionError(f"{path} is a directory; give a .ipynb notebook or a .py file")
    written: dict = {}  # the files a notebook's %%writefile cells write beside it
    if path.suffix == ".ipynb":
        try:
            nb = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise SubmissionError(f"{path} is not a valid notebook (invalid JSON: {exc})") from None
        except (RecursionError, MemoryError):  # [[[...]]] deeper than the JSON reader's stack
            raise SubmissionError(f"{path} is not a valid notebook (JSON nested too deeply to read)") from None
        if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
            raise SubmissionError(f"{path} is not a notebook (no list of cells)")
        problem = next((f"cell {i}: {why}" for i, c in enumerate(nb["cells"], start=1) if (why := _cell_problem(c))),
                       None)
        if problem:  # the readers below take a cell's fields as nbformat writes them
            raise SubmissionError(f"{path} is not a valid notebook ({problem})")
        try:
            source, cells = notebook_source(nb, path.parent, written)
        except RecursionError:  # %%time inside %%time ..., each read as the cell below it
            raise SubmissionError(f"{path}: cell magics nested too deeply to read") from None
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
    sub.helpers = local_sources(sub.source, sub.path.parent, written)
    sub.defined = _top_level_names(tree) | star_imported(tree, sub.path.parent, sub.helpers)
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


def star_imported(tree: ast.Module, folder: Path, helpers: dict, depth: int = 0) -> set:
    """The names ``from module import *`` binds at the top level of ``tree`` where the module is one of the
    learner's beside the submission (``helpers``: their text, as ``local_sources`` read it): its ``__all__``
    where that is a literal list of strings, else its public top-level names, its own star imports of modules
    beside it included. What ``check`` finds in the learner's process, read from the source. (A library's
    star import binds nothing of the learner's: an entry point it brings is not the learner's to grade.)"""
    names: set = set()
    if depth > 4:  # modules that star-import each other: as deep as anyone writes
        return names
    for node in tree.body:
        if not (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                and any(a.name == "*" for a in node.names)):
            continue
        text = _beside_text(folder, node.module, helpers)
        try:
            module = parse(text) if text is not None else None
        except SyntaxError:
            module = None
        if module is None:
            continue
        public = _literal_all(module)
        if public is None:
            public = {n for n in _top_level_names(module) | star_imported(module, folder, helpers, depth + 1)
                      if not n.startswith("_")}
        names |= public
    return names


def _beside_text(folder: Path, module: str, helpers: dict) -> str | None:
    """The text of module ``module`` beside the submission, as ``local_sources`` read it (None: not one); a
    package before a module file of the same name, as Python finds them (``imports._module_files``)."""
    relative = Path(*module.split("."))
    for candidate in (folder / relative / "__init__.py", folder / relative.with_suffix(".py")):
        text = helpers.get(os.path.realpath(candidate))
        if text is not None:
            return text
    return None


def _literal_all(module: ast.Module) -> set | None:
    for node in module.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            if isinstance(node.value, (ast.List, ast.Tuple)) and all(
                    isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.value.elts):
                return {e.value for e in node.value.elts}
    return None


def left_as_handed_out(source: str, entry: str) -> bool:
    """Whether ``entry`` is the exercise's stub as handed out: the source binds the name once, anywhere, to a
    function whose body (after its docstring) is only ``raise NotImplementedError(...)``. Its first call
    raises, so there is nothing to compile ahead or to time: grading starts no warmers and no early
    baseline for it. Only a saving: a name bound again at run time (``globals()``, ``exec``) that this
    reading misses costs the grading their head start, never a point (a timing opens its baseline itself)."""
    try:
        tree = parse(source)
    except SyntaxError:
        return False
    bindings = [node for node in ast.walk(tree) if _binds(node, entry)]
    if len(bindings) != 1 or not isinstance(bindings[0], ast.FunctionDef):
        return False
    body = bindings[0].body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    if len(body) != 1 or not isinstance(body[0], ast.Raise):
        return False
    exc = body[0].exc.func if isinstance(body[0].exc, ast.Call) else body[0].exc
    return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"


def _binds(node, name: str) -> bool:
    """Whether ``node`` binds ``name`` (a definition, an assignment target, an import, a global or nonlocal
    statement, which lets a function rebind it)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.name == name
    if isinstance(node, ast.Name):
        return node.id == name and isinstance(node.ctx, (ast.Store, ast.Del))
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return any((a.asname or a.name).split(".")[0] == name for a in node.names)
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return name in node.names
    return isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name == name
