"""The operator recorder's own bookkeeping (what it reads of an operator's arguments and results, with no
watch over it and torch's modes off) runs no code of the learner's: each submission here tries to run some
there and compute the answer unrecorded. CPU, quick cases."""
from __future__ import annotations

from _autograder_helpers import graded


def escape(name: str) -> dict:
    return graded(f"escape_{name}.py", ("softmax",))["softmax"]


def _never_computed(ex: dict) -> bool:
    # the escape's own code never ran where it hoped: it hands its input back, and every value is off
    return ex["score"] == 0 and not ex["correct"] and any("values off" in f for f in ex["feedback"])


def test_a_method_set_on_one_of_torchs_subclasses_is_not_what_the_bookkeeping_calls():
    # an UninitializedBuffer passes the checks of plain tensors; the bookkeeping sizes a write into its foreign
    # storage through torch's class, so the learner's element_size never runs (it ran, unwatched, when the
    # bookkeeping asked the tensor itself)
    assert _never_computed(escape("uninitialized_buffer_element_size"))


def test_a_partial_set_on_one_of_torchs_subclasses_is_not_what_the_bookkeeping_calls():
    # the same with a functools.partial (called from C: no watch sees it start)
    ex = escape("uninitialized_buffer_partial")
    assert _never_computed(ex), ex
