"""MemoryMeter(limit=...): the bytes past the limit may be an input's storage grown in place (no storage of
the call's own is alive): the meter counts them and names no line, and the call it watches goes on."""
from __future__ import annotations

import course  # noqa: F401  (the course's device and interpreter settings)
import torch

from measure.memory import MemoryMeter


def test_an_inputs_growth_alone_past_the_limit_is_counted_not_raised():
    x = torch.zeros(4)
    with MemoryMeter(inputs=(x,), limit=1000) as meter:
        x.resize_(10000)  # an operator with no fresh output: nothing of the call's own is alive
        x.add_(1.0)
    assert meter.peak > 30000  # the growth
    assert meter.held_most_at == []


def test_a_grown_input_beside_a_storage_of_the_calls_own_names_that_storage():
    x = torch.zeros(4)
    with MemoryMeter(inputs=(x,), limit=1000) as meter:
        kept = torch.ones(20000)  # more bytes than the growth below
        x.resize_(10000)
    here = [line for name, line in meter.held_most_at if name == __file__]
    assert meter.peak > 100000 and here and kept.numel() == 20000


def test_an_inputs_storage_grown_past_what_the_calls_own_storages_hold_names_no_line():
    x = torch.zeros(4)
    with MemoryMeter(inputs=(x,), limit=1000) as meter:
        x.resize_(10000)  # the line that grew it is not kept: the bytes are the input's
        y = torch.ones(300)
    assert meter.peak > 30000 and meter.held_most_at == [] and y.numel() == 300
