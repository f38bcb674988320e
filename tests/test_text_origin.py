"""autograder.text_origin: whose text torch and Triton compile at run time (the worker's audit hook asks)."""
import sys

import triton.language as tl
from triton.runtime.jit import JITFunction, create_function_from_signature

from autograder import text_origin

class _Seen:
    """The texts compiled while listening (an object of the test's own class: the kernel's globals reach
    it, but text_origin reads no field of it, as it reads none of a learner's objects)."""
    listening = False
    texts: list = []


_SEEN = _Seen()


def _keep_compiled_text(event, args):
    if _SEEN.listening and event == "compile" and isinstance(args[0], (str, bytes)):
        _SEEN.texts.append(args[0] if isinstance(args[0], str) else args[0].decode())


sys.addaudithook(_keep_compiled_text)  # inert outside _binder_text


def spread_signature(q_ptr, out_ptr, H,
                     stride_q, stride_k,
                     BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(q_ptr + stride_q * offs))


def _binder_text(kernel: JITFunction) -> str:
    """The launch binder Triton builds for a kernel on a GPU (its text, as the worker's hook sees it)."""
    _SEEN.texts = []
    _SEEN.listening = True
    try:
        create_function_from_signature(kernel.signature, kernel.params, None)
    finally:
        _SEEN.listening = False
    (text,) = [t for t in _SEEN.texts if "dynamic_func" in t]
    return text


def test_a_kernel_signature_over_several_lines_is_not_text_handed_to_the_binder():
    """Triton's binder lists the parameters as the kernel's continuation line does ("stride_q, stride_k,"):
    the kernel's own source lines, which the launch reaches through the JITFunction, are not the learner's
    code in Triton's text (every multi-line kernel lost its points on a GPU to this)."""
    kernel = JITFunction(spread_signature)
    text = _binder_text(kernel)
    assert any("stride_q, stride_k," in line for line in kernel.raw_src) and "stride_q, stride_k," in text
    assert text_origin.handed_piece([kernel, 1, 2, {"grid": (1,), "warmup": False}], text) is None


def test_code_handed_to_a_library_is_still_found_in_its_text():
    payload = "__import__('os').getpid()"
    text = f"def f():\n    return {payload}\n"
    assert text_origin.handed_piece([{"stmt": payload}], text) == payload
    assert text_origin.handed_piece([["a, b,", "x.y"]], "def f(a, b, x):\n    return x.y\n") is None


def test_a_refusal_is_explained_to_the_course_developers_where_they_ask(tmp_path):
    """AUTOGRADER_EXPLAIN_REFUSALS (read when the worker's hook is made) writes each refused event, its
    arguments and the stack down to the code that raised it."""
    from autograder import runtime_audit

    target = tmp_path / "explained.txt"

    def hook_call():  # stands for the hook's __call__, one frame above the event's origin
        runtime_audit._explain(str(target), "compile", (b"print(1)", "<string>"), "runs code built at run time")

    def origin():
        hook_call()

    origin()
    text = target.read_text()
    assert text.startswith("=== compile: runs code built at run time") and "print(1)" in text
    assert "in origin" in text and "in hook_call" not in text
