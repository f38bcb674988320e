"""What Triton compiles or interprets is a kernel the audit read, as it read it (autograder.kernel_source):
the texts Triton itself extracts (its compiler's and its interpreter's) are compared with the audited defs.
No process is started: the worker's install is exercised by tests/test_autograder_escapes.py."""
from __future__ import annotations

import importlib.util
import inspect
import sys

import pytest

from autograder.kernel_source import AuditedKernels, found_by_audit

HONEST = '''import functools
import triton
import triton.language as tl


@triton.jit
def kernel(x_ptr, n, BLOCK: tl.constexpr):
    """Doubles x in place."""
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(x_ptr + offs, x * 2, mask=offs < n)
    # a comment after the body, which inspect counts in the function's source


def _impl(x):
    return x + 1


impl = triton.jit(_impl)


# Triton's decorator called on a def of the module wherever the call is: an annotated assignment, a try, a
# cached factory, a dict of kernels; and a functools.partial of it used as a decorator
def _annotated(x_ptr):
    tl.store(x_ptr, 1.0)


annotated: triton.JITFunction = triton.jit(_annotated)


def _in_try(x_ptr):
    tl.store(x_ptr, 2.0)


try:
    in_try = triton.jit(_in_try)
except ImportError:
    in_try = None


def _factory_made(x_ptr):
    tl.store(x_ptr, 3.0)


@functools.cache
def factory():
    return triton.jit(_factory_made)


def _in_dict(x_ptr):
    tl.store(x_ptr, 4.0)


KERNELS = {"rows": triton.jit(_in_dict)}
jit_options = functools.partial(triton.jit, do_not_specialize=["n"])


@jit_options
def partial_jit(x_ptr, n):
    tl.store(x_ptr, 5.0)


def plain(x):
    return x


def shown(x_ptr):
    tl.store(x_ptr, 1.0)


def real(x_ptr):
    tl.store(x_ptr, tl.softmax(tl.load(x_ptr)))


wrapped = functools.wraps(real)(shown)


@triton.jit
def last_def(x_ptr):
    tl.store(x_ptr, 1.0)
    """
def last_def(x_ptr):
    tl.store(x_ptr, tl.softmax(tl.load(x_ptr)))
    return  # """
'''


def _kernels_without_an_audit(texts: dict) -> AuditedKernels:
    """The kernels as a worker finds them from its job: the grading process's table (``found_by_audit``),
    with no audit of its own (an audit in the worker fails here)."""
    from unittest import mock

    from autograder import audit

    found = found_by_audit(texts)
    with mock.patch.object(audit, "kernel_definitions", side_effect=AssertionError("the worker ran an audit")):
        return AuditedKernels(texts, found)


# every test below holds for the kernels the worker's own audit finds and for those the grader's table names
@pytest.fixture(scope="module", params=["audited in the worker", "named by the grader"])
def module(tmp_path_factory, request):
    path = tmp_path_factory.mktemp("kernels") / "learner_kernels.py"
    path.write_text(HONEST)
    spec = importlib.util.spec_from_file_location("learner_kernels", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    texts = {str(path): HONEST}
    yield mod, AuditedKernels(texts) if request.param == "audited in the worker" else _kernels_without_an_audit(texts)
    sys.modules.pop("learner_kernels", None)


def test_the_graders_table_names_the_defs_the_audit_finds():
    from autograder import audit

    table = found_by_audit({"a.py": HONEST, "unreadable.py": "def broken(:\n"})
    assert table["a.py"][1] == [[line, node.name] for line, node in audit.kernel_definitions(HONEST).items()]
    assert "partial_jit" in {name for _, name in table["a.py"][1]} and table["unreadable.py"][1] == []
    found = _kernels_without_an_audit({"a.py": HONEST}).defs
    assert {(line, node.name) for (_, line), (node, _) in found.items()} == {tuple(d) for d in table["a.py"][1]}


def test_a_text_other_than_the_one_the_grader_audited_is_audited_in_the_worker():
    """The table holds for the text it was made from (its digest): a file that reads otherwise in the worker
    gets the audit's own answer there, never the table's lines applied to other defs."""
    from unittest import mock

    from autograder import audit

    changed = HONEST.replace("def plain(x):", "@triton.jit\ndef plain(x):")
    table = found_by_audit({"a.py": HONEST})
    with mock.patch.object(audit, "kernel_definitions", wraps=audit.kernel_definitions) as audited:
        names = {node.name for node, _ in AuditedKernels({"a.py": changed}, table).defs.values()}
    assert audited.call_count == 1 and "plain" in names
    assert names == {node.name for node, _ in AuditedKernels({"a.py": changed}).defs.values()}


def _raw(obj):
    while not inspect.isfunction(obj):
        obj = obj.fn
    return obj


def triton_texts(fn) -> dict:
    """The texts Triton reads for ``fn``: its compiler's (``JITCallable._src``) and its interpreter's."""
    from triton.runtime import jit
    from triton.runtime.interpreter import FunctionRewriter

    callable_cls = getattr(jit, "JITCallable", jit.JITFunction)
    compiled = callable_cls.__new__(callable_cls)
    callable_cls.__init__(compiled, fn)
    rewriter = FunctionRewriter(fn)
    lines, _ = inspect.getsourcelines(fn)
    rewriter.def_lineno = rewriter._find_def(lines)
    return {"compiler": compiled._src, "interpreter": rewriter._prepare_source(lines)}


_MADE = {"kernel": lambda m: m.kernel, "impl": lambda m: m.impl, "annotated": lambda m: m.annotated,
         "in_try": lambda m: m.in_try, "from_factory": lambda m: m.factory(), "in_dict": lambda m: m.KERNELS["rows"],
         "partial_jit": lambda m: m.partial_jit}


@pytest.mark.parametrize("name", sorted(_MADE))
def test_an_audited_kernel_is_what_triton_reads_on_both_paths(module, name):
    mod, kernels = module
    fn = _raw(_MADE[name](mod))
    assert kernels.function_problem(fn) is None
    for where, text in triton_texts(fn).items():
        assert kernels.text_problem(fn, text) is None, where


def test_a_wrapped_kernel_is_refused_whatever_its_own_text(module):
    mod, kernels = module
    problem = kernels.function_problem(mod.wrapped)
    assert problem is not None and "shown is wrapped" in problem and "source of real" in problem
    assert kernels.text_problem(mod.wrapped, triton_texts(mod.wrapped)["compiler"]) is not None


def test_a_second_def_line_in_a_kernel_is_refused_where_the_interpreter_would_run_it(module):
    mod, kernels = module
    fn = _raw(mod.last_def)
    texts = triton_texts(fn)
    assert "tl.softmax" in texts["interpreter"].splitlines()[1]  # the interpreter would run the string's def
    assert "the text Triton reads for last_def is not the def" in kernels.text_problem(fn, texts["interpreter"])
    assert kernels.text_problem(fn, texts["compiler"]) is None  # a GPU compiles the def the audit read


def test_functions_the_audit_did_not_judge_as_kernels_are_refused(module):
    mod, kernels = module
    assert "not a Triton kernel the grader audited" in kernels.function_problem(mod.plain)
    assert "not a Triton kernel the grader audited" in kernels.function_problem(mod.real)
    assert "is not a function" in kernels.function_problem(print)
    assert "is not a function" in kernels.function_problem(__import__("functools").partial(mod.plain, 1))


def test_tritons_own_functions_are_the_language(module):
    import triton.language as tl

    _, kernels = module
    fn = _raw(tl.standard.softmax) if hasattr(tl, "standard") else None
    if fn is None or not inspect.isfunction(fn):
        pytest.skip("this Triton's softmax is no jit function")
    assert kernels.function_problem(fn) is None and kernels.text_problem(fn, "anything") is None


def test_a_kernel_text_changed_after_the_audit_is_refused(module):
    mod, kernels = module
    fn = _raw(mod.kernel)
    text = triton_texts(fn)["compiler"].replace("x * 2", "x * 3")
    assert kernels.text_problem(fn, text) is not None


def test_the_courses_own_kernels_run_in_a_worker(module):
    """The grader makes a timed call's fresh values with its own Triton kernel in the worker (on a GPU), and
    learners' kernels call course.triton_compat's helpers: the course's kernels are not the learner's."""
    from autograder import fresh
    from course import triton_compat

    _, kernels = module
    for kernel in (fresh._jitter_kernel, triton_compat.dot):
        fn = _raw(kernel)
        assert kernels.function_problem(fn) is None
        assert kernels.text_problem(fn, triton_texts(fn)["compiler"]) is None
