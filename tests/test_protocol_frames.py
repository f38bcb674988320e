"""The grader's raw tensor frames (autograder.frames through autograder.protocol): what a message holds
arrives as it was sent (values, dtypes, views and their strides, shared storage, tuples), malformed frames
close the channel, and a frame is cheaper than torch.save's archive."""
from __future__ import annotations

import json
import socket
import struct
import time

import pytest
import torch

from _autograder_helpers import across_a_socket

from autograder import frames, protocol


def test_values_dtypes_views_and_structure_arrive_as_sent():
    g = torch.Generator().manual_seed(0)
    base = torch.randn(6, 10, generator=g)
    strided = base[:, 1:8]                    # a view: offset 1, row stride 10
    shared = base.t()                         # the same storage again, transposed
    msg = {"type": "Shipped",
           "output": (strided, torch.tensor(3.5, dtype=torch.bfloat16), [torch.arange(5, dtype=torch.int8)]),
           "inputs_after": [shared, torch.zeros(0, 4), torch.tensor([True, False]), None, 2, "x", 0.5],
           "nested": {"w": torch.randn(3, generator=g).to(torch.float16).requires_grad_()}}
    got = across_a_socket(msg)
    out, after = got["output"], got["inputs_after"]
    assert isinstance(out, tuple) and isinstance(after, list) and after[3:] == [None, 2, "x", 0.5]
    assert torch.equal(out[0], strided) and out[0].stride() == (10, 1) and out[0].storage_offset() == 1
    assert after[1].shape == (0, 4) and torch.equal(after[2], torch.tensor([True, False]))
    assert out[1].dtype == torch.bfloat16 and float(out[1]) == 3.5 and out[2][0].dtype == torch.int8
    assert torch.equal(after[0], shared) and after[0].stride() == (1, 10)
    assert after[0].untyped_storage().data_ptr() == out[0].untyped_storage().data_ptr()  # still one buffer
    w = got["nested"]["w"]
    assert w.dtype == torch.float16 and w.requires_grad and torch.equal(w.detach(), msg["nested"]["w"].detach())


def test_what_a_raw_frame_cannot_carry_goes_as_torch_save():
    msg = {"p": torch.nn.Parameter(torch.ones(2)), "k": {1: torch.ones(1)}}
    assert frames.encode(msg) is None
    got = across_a_socket(msg)
    assert isinstance(got["p"], torch.nn.Parameter) and torch.equal(got["k"][1], torch.ones(1))


def _raw(skeleton: dict, payload: bytes) -> bytes:
    text = json.dumps(skeleton).encode()
    body = b"R" + struct.pack("<Q", len(text)) + text + payload
    return struct.pack("<Q", len(body)) + body


@pytest.mark.parametrize("skeleton, payload", [
    ({"tree": {"__tensor__": 0}, "tensors": [["float32", [4], [1], 0, 0, False]], "storages": [8]}, bytes(8)),
    ({"tree": {"__tensor__": 0}, "tensors": [["float32", [2], [1], 1, 0, False]], "storages": [8]}, bytes(8)),
    ({"tree": {"__tensor__": 0}, "tensors": [["object", [1], [1], 0, 0, False]], "storages": [8]}, bytes(8)),
    ({"tree": {"__tensor__": 1}, "tensors": [["float32", [1], [1], 0, 0, False]], "storages": [4]}, bytes(4)),
    ({"tree": {"__tensor__": -1}, "tensors": [["float32", [1], [1], 0, 0, False]], "storages": [4]}, bytes(4)),
    ({"tree": {"__tensor__": 0}, "tensors": [["float32", [1], [1], 0, 3, False]], "storages": [4]}, bytes(4)),
    ({"tree": {"__tensor__": 0}, "tensors": [["float32", [2], [-1], 1, 0, False]], "storages": [8]}, bytes(8)),
    ({"tree": None, "tensors": [], "storages": [16]}, bytes(8)),
    ({"tree": {"__tensor__": 0}, "tensors": [["float32", [1], [1], 0, 0, False]], "storages": [4],
      "devices": ["cuda:64"]}, bytes(4)),
    ({"tree": {"__tensor__": 0}, "tensors": [["float32", [1], [1], 0, 0, False]], "storages": [4],
      "devices": ["xla:0"]}, bytes(4)),
    ({"tree": {"__tensor__": 0}, "tensors": [["float32", [1], [1], 0, 0, False]], "storages": [4],
      "devices": [0]}, bytes(4)),
    ({"tree": {"__tensor__": 0}, "tensors": [["float32", [1], [1], 0, 0, False]], "storages": [4],
      "devices": ["cpu", "cpu"]}, bytes(4)),
], ids=["past-the-end", "offset-past-the-end", "dtype", "index", "negative-index", "storage", "negative-stride",
        "sizes", "a-device-not-here", "not-a-cuda-device", "device-not-a-name", "devices-not-one-each"])
def test_a_malformed_raw_frame_closes_the_channel(skeleton, payload):
    a, b = socket.socketpair()
    with a, b:
        a.sendall(_raw(skeleton, payload))
        a.shutdown(socket.SHUT_WR)
        with pytest.raises(protocol.ChannelClosed):
            protocol.recv(b)


def _raw_and_archive_seconds(msg: dict) -> tuple[float, float]:
    """The fastest of three deliveries of ``msg`` (a sender thread, a receiver here, from the first byte sent
    to the message rebuilt), as a raw frame and as a torch.save archive; each delivery checked."""
    import io
    import threading

    def archive(sock):
        buf = io.BytesIO()
        torch.save(msg, buf)
        sock.sendall(struct.pack("<Q", len(buf.getvalue()) + 1) + b"T" + buf.getvalue())

    def seconds(send):
        best = float("inf")
        for _ in range(3):
            a, b = socket.socketpair()
            with a, b:
                sender = threading.Thread(target=send, args=(a,))
                start = time.perf_counter()
                sender.start()
                got = protocol.recv(b)
                best = min(best, time.perf_counter() - start)
                sender.join()
            assert torch.equal(got["output"][0], msg["output"][0])
        return best

    return seconds(lambda sock: protocol.send(sock, msg)), seconds(archive)


def test_a_raw_frame_is_faster_than_torch_save():
    raw, saved = _raw_and_archive_seconds({"output": [torch.randn(2048, 4096)], "inputs_after": []})  # 32 MB
    assert raw < saved, (raw, saved)


@pytest.mark.gpu
def test_cuda_tensors_arrive_on_their_device_as_raw_bytes_faster_than_torch_save():
    """The grading process keeps its cases on the GPU and a worker ships its outputs from there: both cross
    as raw frames (a pinned host copy), restored on the device they left, views still sharing one buffer."""
    g = torch.Generator().manual_seed(0)
    base = torch.randn(1024, 4097, generator=g).cuda()
    msg = {"args": (base[:, 1:], base.t(), torch.arange(7, device="cuda"), torch.ones(3)), "seed": 3}
    assert frames.encode(msg) is not None
    got = across_a_socket(msg)["args"]
    assert [t.device.type for t in got] == ["cuda", "cuda", "cuda", "cpu"]
    assert torch.equal(got[0], msg["args"][0]) and got[0].stride() == (4097, 1) and got[0].storage_offset() == 1
    assert torch.equal(got[1], msg["args"][1]) and got[1].stride() == (1, 4097)
    assert got[0].untyped_storage().data_ptr() == got[1].untyped_storage().data_ptr()
    assert torch.equal(got[2], msg["args"][2]) and torch.equal(got[3], msg["args"][3])
    raw, saved = _raw_and_archive_seconds({"output": [torch.randn(4096, 16384, device="cuda")], "inputs_after": []})
    print(f"256 MB from a GPU: raw frame {raw:.3f} s, torch.save archive {saved:.3f} s")
    assert raw < saved, (raw, saved)
