"""What Triton compiles or interprets is a kernel the audit read, as the audit read it.

The audit judges a kernel from the text of its ``def`` in the submission (or a module beside it). Triton
reads the text it compiles itself, at run time, with ``inspect.getsourcelines``, and two ways of reading
give other text than the def the audit judged:

- ``inspect`` unwraps: a function carrying ``__wrapped__`` (``functools.wraps(real)(shown)``) has the source
  of ``real``, so Triton compiles (or interprets) ``real`` while the audit judged ``shown``;
- the interpreter starts a kernel's text at the *last* line of its source that begins with ``def ``: a
  string inside the body holding ``def ...`` runs in place of the body the audit read (a GPU's compiler
  takes the first).

So, in a grading worker (``install``), every text Triton is about to compile (``JITFunction.parse``: the
kernel launched, the Triton functions it calls, their cache keys) or to interpret
(``FunctionRewriter.rewrite_ast``) must be one of the audited kernel defs (``audit.kernel_definitions``):
the same function (a plain function, not wrapped, defined where the audit saw a kernel) and the same
statements (the text reads as that one def, token by token, decorators and comments aside). Triton's own
functions (``tl.softmax``'s body, reductions' combine functions) and the course's (``course.triton_compat``,
the grader's fresh values in ``autograder.fresh``) are not the learner's. Anything else is refused where
Triton reads it, during the launch that needs it: the call is recorded as a refused launch
(``legality.judge`` names the line) and raises ``KernelSourceRefused``.
"""
from __future__ import annotations

import ast
import functools
import hashlib
import io
import os
import sys
import textwrap
import tokenize
import types

_REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# the course's packages: their kernels are the course's own (the grader's fresh-values kernel runs in the
# worker on a GPU; course.triton_compat's helpers are called from learners' kernels)
_COURSE = tuple(os.path.join(_REPOSITORY, p) + os.sep for p in ("course", "measure", "autograder"))
_WHY = ("Triton compiles (or, on the CPU, interprets) the text it reads for a kernel, and that text must be a "
        "kernel the grader audited, exactly as the audit read it: a function decorated with @triton.jit (or "
        "given to triton.jit) in your file, not wrapped (functools.wraps points Triton at another function's "
        "source) and with no other def line in its text (the interpreter starts a kernel at its last one)")


class KernelSourceRefused(RuntimeError):
    """Triton was about to compile or interpret text that is not an audited kernel."""


class AuditedKernels:
    """The kernel defs of the audited files: {(real path, first line): (def node, its tokens)}. Texts are
    compared token by token (comments and blank lines aside), read with ``tokenize``: no text is compiled
    while the worker's audit hook refuses code built at run time."""

    def __init__(self, texts: dict, found_by_grader: dict | None = None):
        self.defs: dict = {}
        for path, text in texts.items():
            if text is None:
                continue
            try:
                found = _definitions(text, (found_by_grader or {}).get(path))
                tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
            except (SyntaxError, ValueError, tokenize.TokenError):
                continue  # the audit reports an unreadable file; none of its text is a kernel
            real = os.path.realpath(path)
            for line, node in found.items():
                start, end = (node.lineno, node.col_offset), (node.end_lineno, node.end_col_offset)
                self.defs[(real, line)] = (node, _significant([t for t in tokens if start <= t.start < end]))

    def function_problem(self, fn) -> str | None:
        """Why ``fn`` (what Triton was handed) is not an audited kernel, or None. Triton's and the course's
        own functions are Triton's language."""
        if not isinstance(fn, types.FunctionType):
            return f"{_name(fn)} is not a function defined in your source"
        if _trusted(fn.__code__.co_filename):
            return None
        if getattr(fn, "__wrapped__", None) is not None:
            return (f"{fn.__code__.co_name} is wrapped (it has __wrapped__): Triton would read the source of "
                    f"{_name(fn.__wrapped__)}, not the kernel the grader audited")
        if self._audited(fn) is None:
            return f"{fn.__name__} is not a Triton kernel the grader audited (a def decorated with @triton.jit)"
        return None

    def text_problem(self, fn, text: str) -> str | None:
        """Why ``text`` (what Triton is about to compile or run for ``fn``) is not ``fn``'s audited def."""
        if isinstance(fn, types.FunctionType) and _trusted(fn.__code__.co_filename):
            return None
        problem = self.function_problem(fn)
        if problem is not None:
            return problem
        try:
            read = _significant(list(tokenize.generate_tokens(io.StringIO(textwrap.dedent(text)).readline)))
        except (SyntaxError, tokenize.TokenError):
            read = None
        if read != self._audited(fn)[1]:
            return (f"the text Triton reads for {fn.__name__} is not the def the grader audited (a line of "
                    f"its source that starts with 'def ' would make the interpreter run from there)")
        return None

    def _audited(self, fn):
        code = fn.__code__
        found = self.defs.get((os.path.realpath(code.co_filename), code.co_firstlineno))
        return found if found is not None and found[0].name == code.co_name else None


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def found_by_audit(texts: dict) -> dict:
    """{path: [digest of the text, [[first line, name] of each kernel def]]}: the kernel defs the grading
    process's audit found in each text (``audit.kernel_definitions``), handed to the worker in its job. The
    worker then needs no audit of its own: the audit resolves every name its rules use by importing the
    modules they name (matplotlib.pyplot, torch.utils.benchmark, torch.distributed.tensor: 0.2-0.5 s of CPU in
    each worker, which starts one per exercise graded)."""
    return {path: [_digest(text), [[line, node.name] for line, node in _kernel_definitions(text).items()]]
            for path, text in texts.items() if text is not None}


@functools.lru_cache(maxsize=64)  # a submission's texts, for each exercise graded
def _kernel_definitions(text: str) -> dict:
    from autograder import audit

    try:
        return audit.kernel_definitions(text)
    except (SyntaxError, ValueError):
        return {}  # the audit reports an unreadable file; none of its text is a kernel


def _definitions(text: str, found) -> dict:
    """The kernel defs of ``text``: those the grading process's audit found (``found_by_audit``) where it
    audited this very text, picked from the worker's own parse by first line and name; else the audit's own
    answer (``audit.kernel_definitions``)."""
    from autograder import audit

    if found is None or found[0] != _digest(text):
        return audit.kernel_definitions(text)
    wanted = {line: name for line, name in found[1]}
    return {_first_line(node): node for node in ast.walk(audit.parse(text))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and wanted.get(_first_line(node)) == node.name}


def _first_line(node) -> int:
    """A def's first line as ``audit.kernel_definitions`` keys it (its first decorator's, else the def's)."""
    return min([node.lineno, *(d.lineno for d in node.decorator_list)])


_LAYOUT = (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)


def _significant(tokens) -> list:
    """A text's tokens as Python reads its statements: comments, blank lines and the ends of the text aside;
    indentation by its structure (a dedented copy reads the same)."""
    out = [(t.type, "" if t.type in _LAYOUT else t.string) for t in tokens
           if t.type not in (tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER)]
    while out and out[-1][0] in _LAYOUT:
        out.pop()
    while out and out[0][0] in _LAYOUT:  # the dedent that ends the statement before the def
        out.pop(0)
    return out


@functools.cache
def _triton_dir() -> str:
    import triton

    return os.path.dirname(os.path.abspath(triton.__file__)) + os.sep


def _trusted(filename: str) -> bool:
    """Triton's own files and the course's package: the language and its helpers, never the learner's."""
    real = os.path.realpath(filename)
    return real.startswith((_triton_dir(), *_COURSE))


def _name(obj) -> str:
    return getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or type(obj).__name__


KERNELS: AuditedKernels | None = None


def refuse(problem: str) -> None:
    """Record the refusal in the running call's recorder (the learner's line that launched) and raise."""
    from autograder import legality

    rec = legality.ThreadGuard.recorder
    if rec is not None:
        rec.note(f"{legality.LAUNCH_ARGUMENT}:a kernel whose source is not the audited one "
                 f"({problem}){legality._WHY_SEP}{_WHY}", sys._getframe(1))
    raise KernelSourceRefused(f"{problem}: {_WHY}")


def install(texts: dict, found_by_grader: dict | None = None) -> None:
    """From now on (for the life of the worker) Triton compiles and interprets only the audited kernels of
    ``texts`` ({path: audited text}; ``found_by_grader``: the grading process's ``found_by_audit``); once
    per process."""
    global KERNELS
    if KERNELS is not None:
        return
    KERNELS = AuditedKernels(texts, found_by_grader)
    from course.triton_internals import internal

    jit = sys.modules[internal("JITFunction").__module__]
    callable_cls = getattr(jit, "JITCallable", internal("JITFunction"))
    parse = callable_cls.parse

    def audited_parse(self):
        problem = KERNELS.text_problem(self.fn, self._src)
        if problem is not None:
            refuse(problem)
        return parse(self)

    audited_parse.__wrapped__ = parse
    callable_cls.parse = audited_parse

    rewriter = internal("interpreter").FunctionRewriter
    rewrite, transform = rewriter.rewrite_ast, rewriter._transform_ast

    def audited_rewrite(self):
        problem = KERNELS.function_problem(self.fn)  # before Triton falls back to running it as it is
        if problem is not None:
            refuse(problem)
        return rewrite(self)

    def audited_transform(self, src):
        problem = KERNELS.text_problem(self.fn, src)
        if problem is not None:
            refuse(problem)
        return transform(self, src)

    audited_rewrite.__wrapped__, audited_transform.__wrapped__ = rewrite, transform
    rewriter.rewrite_ast, rewriter._transform_ast = audited_rewrite, audited_transform
