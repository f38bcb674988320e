"""The grader's raw tensor frames (autograder.frames through autograder.protocol): what a message holds
arrives as it was sent (values, dtypes, views and their strides, shared storage, tuples), malformed frames
close the channel, and a frame is cheaper than torch.save's archive."""
from __future__ import annotations

import json
import os
import socket
import struct
import time

import pytest
import torch

from autograder import frames, protocol


def _round_trip(obj):
    a, b = socket.socketpair()
    with a, b:
        # a writer process, so that a frame larger than the socket's buffer cannot block this one
        pid = os.fork()
        if pid == 0:
            try:
                protocol.send(a, obj)
            finally:
                os._exit(0)
        try:
            return protocol.recv(b)
        finally:
            os.waitpid(pid, 0)


def test_values_dtypes_views_and_structure_arrive_as_sent():
    g = torch.Generator().manual_seed(0)
    base = torch.randn(6, 10, generator=g)
    strided = base[:, 1:8]                    # a view: offset 1, row stride 10
    shared = base.t()                         # the same storage again, transposed
    msg = {"type": "Shipped",
           "output": (strided, torch.tensor(3.5, dtype=torch.bfloat16), [torch.arange(5, dtype=torch.int8)]),
           "inputs_after": [shared, torch.zeros(0, 4), torch.tensor([True, False]), None, 2, "x", 0.5],
           "nested": {"w": torch.randn(3, generator=g).to(torch.float16).requires_grad_()}}
    got = _round_trip(msg)
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
    got = _round_trip(msg)
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
], ids=["past-the-end", "offset-past-the-end", "dtype", "index", "negative-index", "storage", "negative-stride",
        "sizes"])
def test_a_malformed_raw_frame_closes_the_channel(skeleton, payload):
    a, b = socket.socketpair()
    with a, b:
        a.sendall(_raw(skeleton, payload))
        a.shutdown(socket.SHUT_WR)
        with pytest.raises(protocol.ChannelClosed):
            protocol.recv(b)


def test_a_raw_frame_is_faster_than_torch_save():
    t = torch.randn(2048, 4096)  # 32 MB
    msg = {"output": [t], "inputs_after": []}

    def seconds(send):
        best = float("inf")
        for _ in range(3):
            a, b = socket.socketpair()
            with a, b:
                pid = os.fork()
                if pid == 0:
                    try:
                        send(a)
                    finally:
                        os._exit(0)
                start = time.perf_counter()
                got = protocol.recv(b)
                best = min(best, time.perf_counter() - start)
                os.waitpid(pid, 0)
            assert torch.equal(got["output"][0], t)
        return best

    def archive(sock):
        import io

        buf = io.BytesIO()
        torch.save(msg, buf)
        sock.sendall(struct.pack("<Q", len(buf.getvalue()) + 1) + b"T" + buf.getvalue())

    raw, saved = seconds(lambda sock: protocol.send(sock, msg)), seconds(archive)
    assert raw < saved, (raw, saved)
