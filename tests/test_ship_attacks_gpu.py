"""The path from a graded function's return value to the values the grading process judges, attacked.

A worker ships a CUDA output as a copy made on its GPU (``worker.ship``: ``Tensor.clone``), sent as a raw
frame (one synchronous copy to pinned host memory) and restored on the grading process's GPU, where it is
compared (``correctness``). What is judged is the copy the grading process holds: nothing the learner's code
keeps (the tensor it returned, a block of memory it freed, a pointer into it) reaches it, whatever layout the
output has. The grading process's own GPU memory and the worker's view of the host's GPUs are checked too.

Tests marked ``gpu`` run on the GPU runner (``pytest -m gpu tests/test_ship_attacks_gpu.py``); the rest,
the same checks where the CPU has them, run everywhere.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from _autograder_helpers import across_a_socket

from autograder import correctness, grading, isolation
from autograder.worker import ship

ROOT = Path(__file__).resolve().parent.parent
GPU_SUBS = ROOT / "tests" / "gpu_submissions"
SUBS = ROOT / "tests" / "submissions"
CUDA = pytest.param("cuda", marks=pytest.mark.gpu)


@lru_cache(maxsize=None)
def _graded(name: str, exercise: str, timeout: float = 300.0, folder: Path = GPU_SUBS) -> dict:
    result = grading.grade_submission(str(folder / name), [exercise], quick=True, timeout=timeout)
    return result["exercises"][0]


def _text(ex) -> str:
    return "\n".join(ex["feedback"] + ex["violations"])


def _layouts(device: str) -> dict:
    """Outputs an honest kernel may return, each a different layout of memory."""
    g = torch.Generator().manual_seed(0)
    wide = torch.randn(6, 20, generator=g).to(device)
    row = torch.randn(7, generator=g).to(device)
    return {"slice of a wider buffer": wide[:, 3:13], "transposed": wide.t(), "offset rows": wide[2:],
            "expanded (stride 0)": row.expand(5, 7), "overlapping": row.as_strided((4, 3), (1, 1)),
            "every other column": wide[:, ::2], "0-dim": wide[1, 1], "empty": wide[:0],
            "bf16": wide.to(torch.bfloat16), "int": torch.arange(12, device=device).view(3, 4)}


@pytest.mark.parametrize("device", ["cpu", CUDA])
def test_every_layout_arrives_as_its_values_and_shares_nothing(device):
    for name, out in _layouts(device).items():
        want = out.detach().cpu().clone()
        got = across_a_socket({"type": "Shipped", "output": ship(out), "inputs_after": []})["output"]
        assert got.device.type == device and got.dtype == out.dtype and got.shape == out.shape, name
        assert torch.equal(got.cpu(), want), name
        # only the output's own elements cross (a slice does not carry the buffer it lives in), densely
        assert got.untyped_storage().nbytes() == out.numel() * out.element_size(), name
        if out.numel():
            (out if out._base is None else out._base).fill_(0)  # the learner's memory, changed after shipping
            assert torch.equal(got.cpu(), want), name


@pytest.mark.parametrize("device", ["cpu", CUDA])
def test_frames_cross_through_host_memory_whatever_default_device_graded_code_set(device):
    """torch.set_default_device at a submission's import (PyTorch's tutorials do it) stays set in the worker:
    the host buffers a frame is read into and sent from name the CPU, or the socket would write to memory
    that is not the host's (a GPU's, a meta tensor's address 0) and an honest submission would lose its
    points with its first case."""
    x = torch.randn(4, 5, device=device)
    for default in ("meta", device):
        with torch.device(default):  # what set_default_device leaves on the worker's thread
            got = across_a_socket({"type": "Shipped", "output": ship(x), "inputs_after": [x]})
        assert got["output"].device.type == device and torch.equal(got["output"].cpu(), x.cpu()), default
        assert torch.equal(got["inputs_after"][0].cpu(), x.cpu()), default


@pytest.mark.gpu
def test_an_honest_submission_that_sets_the_default_device_keeps_its_points_on_the_gpu():
    ex = _graded("honest_default_device.py", "softmax")
    assert ex["correct"] and not ex["violations"], _text(ex)


@pytest.mark.gpu
def test_memory_the_learner_freed_and_points_to_holds_nothing_the_grader_reads():
    """The caching allocator hands the shipped copy's block, or the output's own block, to whoever asks next:
    writes there once ``ship`` has returned change nothing the grading process received."""
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    out = torch.randn(1024, 1024, device="cuda")
    want = out.cpu()
    where = out.data_ptr()
    shipped = ship(out)
    msg = {"type": "Shipped", "output": shipped, "inputs_after": []}
    del out
    _block_at(where, 1024 * 1024).fill_(7.0)  # the block the learner kept a pointer to, written after shipping
    got = across_a_socket(msg)["output"]
    copy_at = shipped.data_ptr()
    del msg, shipped
    _block_at(copy_at, 1024 * 1024).fill_(-1.0)  # the worker's own copy's block, freed once sent
    torch.cuda.synchronize()
    assert got.is_cuda and got.data_ptr() not in (where, copy_at) and torch.equal(got.cpu(), want)
    _HELD.clear()


_HELD: list = []


def _block_at(address: int, numel: int) -> torch.Tensor:
    """A float32 tensor the caching allocator places at ``address`` (a block freed there), asking until it
    does (the allocator hands out free blocks of a size best fit first); the others are kept until the end."""
    for _ in range(256):
        t = torch.empty(numel, device="cuda")
        _HELD.append(t)
        if t.data_ptr() == address:
            return t
    pytest.fail("the allocator never handed the freed block back")


@pytest.mark.gpu
def test_an_output_made_on_a_side_stream_and_waited_for_is_judged_as_it_is():
    """Honest side-stream work the caller's stream waits for ships its values (the course forbids streams in
    graded code, statically; the shipping path itself must not lose them)."""
    x = torch.randn(512, 1000, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(2_000_000)  # the work is still running when the caller's stream is told to wait
        y = torch.softmax(x, -1)
    torch.cuda.current_stream().wait_stream(side)
    got = across_a_socket({"type": "Shipped", "output": ship(y), "inputs_after": []})["output"]
    ref = torch.softmax(x.double(), -1)
    assert correctness.compare_tensor(got, ref, torch.float32, (1e-5, 1e-4))[0]


@pytest.mark.gpu
def test_values_judged_where_the_reference_is_whatever_device_they_came_back_on():
    ref = torch.randn(64, 33, dtype=torch.float64, device="cuda")
    for out in (ref.float(), ref.float().cpu()):
        assert correctness.compare_tensor(out, ref, torch.float32, (1e-5, 1e-4))[0]
        assert correctness.compare_tensor(out, ref.cpu(), torch.float32, (1e-5, 1e-4))[0]
    before = torch.randn(8, 9, device="cuda")
    assert correctness.same_values(before, before.cpu()) and correctness.same_values(before.cpu(), before)
    assert not correctness.same_values(before, (before + 1).cpu())


@pytest.mark.gpu
@pytest.mark.timeout(900)
def test_huge_outputs_leave_no_memory_reserved_in_the_grading_process():
    """1 GiB outputs of the wrong shape from every call come back onto the grading process's GPU: judged
    wrong, and none of that memory is still reserved there once the exercise is graded (the next worker on
    this GPU, another learner's in a batch, has it all)."""
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    before = torch.cuda.memory_reserved()
    ex = _graded("huge_outputs.py", "softmax", 600.0)
    assert not ex["correct"] and ex["score"] == 0.0, _text(ex)
    assert torch.cuda.memory_reserved() <= before + (256 << 20), (before, torch.cuda.memory_reserved())


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2,
                    reason="needs a host of two GPUs or more")
def test_work_on_another_gpu_of_the_host_is_not_there_to_do():
    ex = _graded("other_gpu.py", "softmax")
    assert not ex["correct"] and ex["score"] == 0.0, _text(ex)


# graded where the suite runs (the GPU's memory where there is one); the `gpu` copy puts it in `make gpu-test`
@pytest.mark.parametrize("tier", [pytest.param("here", marks=pytest.mark.worker),
                                  pytest.param("gpu", marks=pytest.mark.gpu)])
def test_an_honest_strided_output_keeps_its_points(tier):
    ex = _graded("honest_strided_output.py", "softmax")
    assert ex["correct"] and not ex["violations"], _text(ex)


@pytest.mark.worker
@pytest.mark.parametrize("name, method", [("escape_patches_a_tensor_property.py", "Tensor.is_cuda"),
                                          ("escape_patches_clone.py", "Tensor.clone"),
                                          ("escape_patches_a_storage_method.py", "UntypedStorage.nbytes")])
def test_a_method_added_over_torchs_own_for_the_shipping_scores_zero(name, method):
    """The worker reads ``torch.Tensor.is_cuda`` on every output and copies a CUDA one with
    ``torch.Tensor.clone``; the frame reads each storage's ``nbytes``: all live on torch's C base classes, so a
    name added to torch.Tensor's (torch.UntypedStorage's) own dict hides them. Found (the name removed, torch's
    back) after every call and before any shipping, it costs the points; the torch.softmax it would have run
    there never runs (on the CPU as on a GPU)."""
    ex = _graded(name, "softmax", folder=SUBS)
    assert ex["score"] == 0 and not ex["correct"], _text(ex)
    assert any(v.startswith(f"replaces torch.{method}") for v in ex["violations"]), _text(ex)


@pytest.mark.worker
def test_the_channels_library_functions_replaced_by_graded_code_never_run_in_the_sending():
    """json.dumps replaced at import (functools.update_wrapper on json: the audit reads no write there) would run
    inside the worker's sending of a reply, the call's outputs in hand: the channel's functions are the ones
    bound when the worker started, so it never runs there and the unwritten output is judged as it is."""
    ex = _graded("escape_patches_the_channels_json.py", "softmax", folder=SUBS)
    assert ex["score"] == 0 and not ex["correct"], _text(ex)
    assert "NaN" in _text(ex), _text(ex)


@pytest.mark.worker
def test_torchs_tensor_name_replaced_by_a_class_of_the_submissions_passes_for_nothing():
    """torch.Tensor replaced as the call returns (functools.update_wrapper on torch) by the class of the object
    the call returns: the worker's exact-type test and its unbound methods are torch's class, bound when the
    worker started, so the object is refused as the learner's own and none of its methods runs."""
    ex = _graded("escape_replaces_torchs_tensor_name.py", "softmax", folder=SUBS)
    assert ex["score"] == 0 and not ex["correct"], _text(ex)
    assert "OutputRefused" in _text(ex), _text(ex)


@pytest.mark.worker
def test_a_builtin_replaced_for_the_framing_scores_zero():
    """The builtin memoryview (the frame takes each storage's bytes with it) replaced in a call: the builtins
    module is refused by the audit, by every spelling (``__builtins__``, ``torch.builtins``, ``print.__self__``)."""
    ex = _graded("escape_patches_a_builtin.py", "softmax", folder=SUBS)
    assert ex["score"] == 0 and not ex["correct"], _text(ex)
    assert any("import builtins" in v for v in ex["violations"]), _text(ex)


# ------------------------------------------------------------------- CPU: the fixes' logic, without a GPU

def test_a_worker_sees_only_the_gpu_it_is_graded_on(monkeypatch):
    import course

    monkeypatch.setattr(course, "ON_GPU", True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    assert isolation.graded_gpu_only({}) == {"CUDA_VISIBLE_DEVICES": "0"}
    assert isolation.graded_gpu_only({"CUDA_VISIBLE_DEVICES": "3, 5"}) == {"CUDA_VISIBLE_DEVICES": "3"}
    assert isolation.graded_gpu_only({"CUDA_VISIBLE_DEVICES": "GPU-a1,GPU-b2"}) == {"CUDA_VISIBLE_DEVICES": "GPU-a1"}
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    assert isolation.graded_gpu_only({"CUDA_VISIBLE_DEVICES": "3,5"}) == {"CUDA_VISIBLE_DEVICES": "3"}
    # on another GPU than its first, the frames' device indices would not line up with the worker's one GPU
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    with pytest.raises(RuntimeError, match="CUDA_VISIBLE_DEVICES"):
        isolation.graded_gpu_only({"CUDA_VISIBLE_DEVICES": "3,5"})
    monkeypatch.setattr(course, "ON_GPU", False)
    assert isolation.graded_gpu_only({"CUDA_VISIBLE_DEVICES": "3,5"}) == {}


@pytest.mark.parametrize("fails", [False, True])
def test_an_exercise_hands_the_gpu_memory_it_cached_back_however_it_ends(monkeypatch, fails):
    """Released before the gate lets another exercise time, with nothing the exercise received still held:
    not by its frames, not by the traceback of the error it ended with (its own out of memory, say)."""
    import weakref

    from autograder import specs

    received, released = [], []
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: released.append(received[0]() is None))

    def graded(*args, **kwargs):
        output = torch.ones(3)  # what came back from the worker
        received.append(weakref.ref(output))
        if fails:
            raise RuntimeError("CUDA out of memory")
        return {"score": 0.0}

    monkeypatch.setattr(grading, "_grade_exercise", graded)
    spec = specs.get("softmax")
    sub = SimpleNamespace(defined={spec.entry})
    if fails:
        with pytest.raises(RuntimeError):
            grading.grade_exercise(spec, sub, Path("x.py"), Path("w"), True, 10.0)
    else:
        grading.grade_exercise(spec, sub, Path("x.py"), Path("w"), True, 10.0)
    assert released == [True]
