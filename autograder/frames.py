"""Raw tensor frames (``R``, ``autograder.protocol``): a message holding tensors, without pickle or archive.

A message is a tree of dicts (string keys), lists, tuples, plain values and tensors on the CPU or a CUDA
device. It travels as ``<8-byte length of the skeleton><skeleton JSON><storage bytes>...``:

- the skeleton is the tree with each tensor replaced by ``{"__tensor__": i}`` and each tuple by
  ``{"__tuple__": [...]}``, plus ``tensors`` ([dtype, shape, strides, storage offset, storage index,
  requires_grad] each), ``storages`` (byte lengths) and ``devices`` (each storage's device: ``"cpu"`` or
  ``"cuda:N"``);
- each storage's bytes follow in order. Tensors that share a storage (views of one buffer) share it here
  too, and a view keeps its strides and offset, as ``torch.save`` would keep them: a case built as a
  strided view reaches the worker as that view.

The reader allocates each storage itself and reads the bytes straight into it (``socket.recv_into``), moves
it to its device (one copy to the GPU, from pinned memory), then rebuilds the views with ``Tensor.set_``,
after checking that each stays inside the bytes received and that the device is one this process has.
A CUDA storage is sent from a pinned host copy of it (one copy from the GPU), so the case tensors a grading
process keeps on the GPU and the outputs a worker ships back cross as raw bytes, as torch.load would
restore them (same device, views sharing one buffer), without torch.save's archive. Nothing in
a frame is executed or unpickled: dtypes come from a fixed list, every size is checked against the frame's
length before anything is allocated, and anything malformed closes the channel.

For ``torch.save``'s archive the bytes were copied into a zip (with a checksum) and out of it again; this
frame costs one copy each way, and one more to and from a GPU (measured in tests/test_protocol_frames.py).
"""
from __future__ import annotations

import struct
from json import dumps as _dumps, loads as _loads

import torch

# The library functions a frame is made and read with, bound when this module is imported (in a worker,
# before any graded code: autograder.worker imports it first): graded code that replaces json.dumps or
# torch.save (functools.update_wrapper on the module) would otherwise run inside the worker's own sending of
# a call's outputs, with the outputs in hand, after the call.
SAVE, LOAD = torch.save, torch.load
# torch's tensor class, bound alike: the name torch.Tensor is a module attribute graded code can replace by a
# class of its own, whose objects would then pass for tensors and whose methods the worker would call
TENSOR = torch.Tensor
# ... and torch.empty, with which a CUDA storage is viewed and its pinned copy made while a reply is sent
_EMPTY = torch.empty

_LENGTH = struct.Struct("<Q")
DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.complex64, torch.complex128,
    torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool)}
for _name in ("float8_e4m3fn", "float8_e5m2", "uint16", "uint32", "uint64"):
    if hasattr(torch, _name):
        DTYPES[_name] = getattr(torch, _name)


class Unframeable(Exception):
    """The message holds something a raw frame does not carry (the caller falls back to torch.save)."""


def encode(obj):
    """(head bytes, [storage buffers]) for ``obj``, or None when a raw frame cannot carry it."""
    try:
        tensors, storages, index = [], [], {}
        skeleton = _skeleton(obj, tensors, storages, index)
    except Unframeable:
        return None
    skeleton = {"tree": skeleton, "tensors": tensors, "storages": [b.nbytes for b, _ in storages],
                "devices": [device for _, device in storages]}
    try:
        text = _dumps(skeleton).encode()
    except (TypeError, ValueError):
        return None
    return _LENGTH.pack(len(text)) + text, [b for b, _ in storages]


def _skeleton(obj, tensors, storages, index):
    if isinstance(obj, TENSOR):
        return {"__tensor__": _describe(obj, tensors, storages, index)}
    if isinstance(obj, tuple):
        return {"__tuple__": [_skeleton(o, tensors, storages, index) for o in obj]}
    if isinstance(obj, list):
        return [_skeleton(o, tensors, storages, index) for o in obj]
    if isinstance(obj, dict):
        if not all(isinstance(k, str) for k in obj) or "__tensor__" in obj or "__tuple__" in obj:
            raise Unframeable
        return {k: _skeleton(v, tensors, storages, index) for k, v in obj.items()}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise Unframeable


def _describe(t: torch.Tensor, tensors, storages, index) -> int:
    name = str(t.dtype).removeprefix("torch.")
    if type(t) is not TENSOR or t.layout != torch.strided \
            or t.device.type not in ("cpu", "cuda") or name not in DTYPES or t.is_conj() or t.is_neg():
        raise Unframeable
    storage = t.untyped_storage()
    key = (str(t.device), storage.data_ptr(), storage.nbytes())  # empty storages all start at 0
    if key not in index:
        index[key] = len(storages)
        storages.append(_host_bytes(storage, t.device))
    tensors.append([name, list(t.shape), list(t.stride()), t.storage_offset(), index[key], t.requires_grad])
    return len(tensors) - 1


def decode(sock, nbytes: int):
    """The message of a raw frame of ``nbytes`` (after its kind byte), read from ``sock``."""
    from autograder.protocol import ChannelClosed as closed, _recv_exact, recv_into

    try:
        (head_len,) = _LENGTH.unpack(_recv_exact(sock, _LENGTH.size))
        if head_len > nbytes - _LENGTH.size:
            raise ValueError("skeleton longer than the frame")
        head = _loads(bytes(_recv_exact(sock, head_len)))
        sizes = [int(n) for n in head["storages"]]
        if any(n < 0 for n in sizes) or _LENGTH.size + head_len + sum(sizes) != nbytes:
            raise ValueError("storage sizes do not add up to the frame")
        devices = [_device(d) for d in head.get("devices", ["cpu"] * len(sizes))]
        if len(devices) != len(sizes):
            raise ValueError("a device for every storage")
    except closed:
        raise
    except Exception as exc:  # noqa: BLE001  (malformed: the other side is not speaking the protocol)
        raise closed(f"an unreadable frame ({type(exc).__name__})") from None
    storages = []
    for n, device in zip(sizes, devices):
        host = _host_buffer(n, pinned=device.type == "cuda")
        recv_into(sock, _bytes_of(host.untyped_storage()))
        storages.append((host if device.type == "cpu" else host.to(device)).untyped_storage())
    try:
        tensors = [_view(spec, storages, devices) for spec in head["tensors"]]
        return _tree(head["tree"], tensors)
    except Exception as exc:  # noqa: BLE001
        raise closed(f"an unreadable frame ({type(exc).__name__})") from None


def _host_bytes(storage, device: torch.device):
    """(the storage's bytes in host memory, its device's name): a CPU storage as it is; a CUDA storage copied
    into pinned memory first, once for every tensor that shares it (the view keeps the copy alive)."""
    if device.type == "cpu":
        return _bytes_of(storage), "cpu"
    on_gpu = _EMPTY(0, dtype=torch.uint8, device=device).set_(storage)
    host = _host_buffer(storage.nbytes(), pinned=True)
    host.copy_(on_gpu)
    return memoryview(host.numpy()), str(device)  # a CUDA tensor's device names its index: "cuda:N"


def _host_buffer(n: int, pinned: bool) -> torch.Tensor:
    """n bytes of host memory, pinned (page-locked, cached by torch's host allocator) for a copy to or from a
    GPU where that works, else pageable. On the CPU by name: a worker's graded code may have set torch's
    default device (``torch.set_default_device("cuda")`` at import), and the socket reads into these bytes."""
    if pinned:
        try:
            return _EMPTY(n, dtype=torch.uint8, device="cpu", pin_memory=True)
        except RuntimeError:  # no pinnable memory here (a locked-memory limit): the copy is only slower
            pass
    return _EMPTY(n, dtype=torch.uint8, device="cpu")


def _device(name) -> torch.device:
    """A device the frame names, if this process has it: the CPU or one of its CUDA devices."""
    if name == "cpu":
        return torch.device("cpu")
    if type(name) is str and name.startswith("cuda:") and name[5:].isdigit() and torch.cuda.is_available() \
            and int(name[5:]) < torch.cuda.device_count():
        return torch.device(name)
    raise ValueError(f"a device this process does not have: {name!r}"[:120])


def _bytes_of(storage) -> memoryview:
    """A CPU storage's bytes as a writable memoryview over the same memory (no copy, no numpy). The view
    is only used while the storage is alive: the message (sending) or the tensors made from it (reading)
    hold it."""
    import ctypes

    n = storage.nbytes()
    if n == 0:
        return memoryview(bytearray())
    return memoryview((ctypes.c_char * n).from_address(storage.data_ptr())).cast("B")


def _view(spec, storages, devices) -> torch.Tensor:
    name, shape, stride, offset, which, requires_grad = spec
    shape, stride = [int(n) for n in shape], [int(n) for n in stride]
    if len(shape) != len(stride) or min(shape + stride + [int(offset)], default=0) < 0:
        raise ValueError("a bad view")
    which = _index(which, len(storages))
    dtype, storage = DTYPES[name], storages[which]
    # the last element the view reaches must lie inside the bytes received (set_ would grow the storage)
    reach = (int(offset) + sum((n - 1) * st for n, st in zip(shape, stride)) + 1) if all(shape) else 0
    if reach * dtype.itemsize > storage.nbytes():
        raise ValueError("a view past the end of its storage")
    t = _EMPTY(0, dtype=dtype, device=devices[which]).set_(storage, int(offset), shape, stride)
    return t.requires_grad_() if requires_grad is True else t


def _index(value, count: int) -> int:
    if type(value) is not int or not 0 <= value < count:
        raise ValueError("an index out of range")
    return value


def _tree(node, tensors):
    if isinstance(node, list):
        return [_tree(n, tensors) for n in node]
    if isinstance(node, dict):
        if set(node) == {"__tensor__"}:
            return tensors[_index(node["__tensor__"], len(tensors))]
        if set(node) == {"__tuple__"}:
            return tuple(_tree(n, tensors) for n in node["__tuple__"])
        return {k: _tree(v, tensors) for k, v in node.items()}
    return node
