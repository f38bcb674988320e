"""The grader's process boundary: typed messages between a grading process and a worker.

A worker (``autograder.worker``) holds the code under test: the learner's entry point, or a trusted
baseline timed through the identical path. The grading process sends requests and reads replies over a
socket pair; it never unpickles what a worker sends (that would run the worker's code in the grader):
every reply is a dict of plain values and tensors, loaded with ``torch.load(weights_only=True)`` and
rebuilt into the dataclasses below. Requests go the other way as plain dicts too.

Frames: an 8-byte little-endian length, a one-byte kind, then the payload: ``J`` JSON for control messages
(plain values: cheap enough to sit inside a timed round trip); ``R`` tensors raw (``autograder.frames``: a
JSON skeleton naming each tensor's dtype, shape, strides and storage, then the storages' bytes, read
straight into tensors made by the reader: no pickle, no archive, one copy each way, and one to or from
the GPU for a CUDA tensor, restored on its device); ``T`` a ``torch.save`` payload, for what ``R`` cannot
carry (a tensor that is not a plain strided CPU or CUDA tensor). Inputs going in
and outputs coming back, always outside any timed window.

Requests (grading process -> worker):
- ``load``    {"slot", "args"}: keep device copies of ``args`` (CPU tensors, probe dicts, plain values).
- ``refill``  {"slot", "args"}: copy new values into the slot's tensors in place (same pointers).
- ``jitter``  {"slot", "seed"}: give the slot's float tensors fresh values in place, derived from their
  current ones and ``seed`` by ``autograder.fresh`` (the grading process can derive the same on its side).
- ``clone``   {"slot", "to"}: a second argument slot holding a copy of the first (new tensors).
- ``prepare`` {"poison", "jitter"}: make the device ready for a call: ``jitter`` ([[slot, seed], ...]) done
  first, as ``jitter`` requests would, then L2 flushed, free cached memory poisoned (not
  before timed calls: their fresh values already make any memory left from an earlier call wrong),
  every stream idle; replies when done. Outside any timed window.
- ``call``    {"slots", "record", "empty", "config"}: call the entry point (or nothing, for the empty call) on each
  slot's arguments in turn, back to back as a program would, then wait for every stream and reply
  ``CallDone``. ``record``: under the operator recorder (one slot; checked calls, to name the learner's
  lines). The grading process times this request from outside: the worker's own clocks are never read.
  ``config`` (checked calls): every ``triton.autotune`` kernel new to these arguments runs its config number
  ``config`` (modulo how many it has) instead of benchmarking them all (``worker.AutotunePin``).
- ``ship``    {"index", "inputs"}: send that call's output and (unless ``inputs`` is False) the inputs as
  they are after it (``Shipped``).
- ``drop``    {}: forget the last call's output.
- ``bye``     {}: exit.
Every call is made the same way, whatever the grading process intends to do with it.
"""
from __future__ import annotations

import socket
import struct
from dataclasses import dataclass, field, fields
from io import BytesIO
from json import dumps as _dumps, loads as _loads  # bound before graded code runs (see autograder.frames)

HEADER = struct.Struct("<Q")
MAX_FRAME = 8 << 30  # a reply larger than this is not a course output (8 GiB): refuse it


class ChannelClosed(Exception):
    """The other side went away (exited, crashed, or closed the socket)."""


def send(sock: socket.socket, obj) -> None:
    try:
        sock.sendall(_frame_head(_dumps(obj).encode(), b"J"))  # one write: inside timed round trips
        return
    except (TypeError, ValueError):  # tensors inside
        pass
    from autograder import frames

    raw = frames.encode(obj)
    if raw is not None:
        head, buffers = raw
        sock.sendall(HEADER.pack(1 + len(head) + sum(b.nbytes for b in buffers)) + b"R" + head)
        for buf in buffers:
            sock.sendall(buf)  # each storage's bytes as they are: not copied to be framed
        return
    buf = BytesIO()
    frames.SAVE(obj, buf)
    payload = buf.getbuffer()
    sock.sendall(HEADER.pack(len(payload) + 1) + b"T")
    sock.sendall(payload)


def _frame_head(payload: bytes, kind: bytes) -> bytes:
    return HEADER.pack(len(payload) + 1) + kind + payload


def recv_into(sock: socket.socket, view: memoryview) -> None:
    """Fill ``view`` from the socket, exactly."""
    got = 0
    while got < len(view):
        count = sock.recv_into(view[got:], min(len(view) - got, 1 << 22))
        if not count:
            raise ChannelClosed("the other side closed the channel")
        got += count


def _recv_exact(sock: socket.socket, n: int) -> bytearray:
    """Exactly ``n`` bytes, read straight into one buffer."""
    data = bytearray(n)
    recv_into(sock, memoryview(data))
    return data


def recv(sock: socket.socket):
    """One frame: JSON, raw tensors (plain values, tensors made here from bytes), or tensors loaded with
    weights_only=True: plain values and tensors only, never code."""
    (n,) = HEADER.unpack(_recv_exact(sock, HEADER.size))
    if n > MAX_FRAME or n < 1:
        raise ChannelClosed(f"a frame of {n} bytes is not a message")
    kind = bytes(_recv_exact(sock, 1))
    if kind == b"R":
        from autograder import frames

        return frames.decode(sock, n - 1)
    payload = _recv_exact(sock, n - 1)
    try:
        if kind == b"J":
            return _loads(bytes(payload))
        if kind == b"T":
            from autograder import frames

            return frames.LOAD(BytesIO(payload), weights_only=True)
    except Exception as exc:  # noqa: BLE001  (malformed: the other side is not speaking the protocol)
        raise ChannelClosed(f"an unreadable frame ({type(exc).__name__})") from None
    raise ChannelClosed(f"a frame of unknown kind {kind!r}")


# ------------------------------------------------------------------------------------------- replies

@dataclass
class Ready:
    """The worker's first reply: whether the code under test loaded."""

    status: str                      # "ok" | "import_error" | "missing"
    error: str | None = None         # what went wrong, with the learner's line
    kernels_ref: bool = False        # the code imported the course's reference kernels


@dataclass
class CallDone:
    """A call returned (or raised). What the code under test reported about itself is feedback only."""

    ok: bool
    error: str | None = None
    ops: list = field(default_factory=list)       # [aten op, learner line, count]: to name lines in feedback
    largest: list = field(default_factory=lambda: [0, None, None])  # [elements, op, line] of the largest tensor
    launches: int = 0                              # Triton launches counted in the call
    # What the exercise's harness measured around the call (specs.base.Exercise.harness), e.g. the bytes
    # held between forward and backward; None without a harness.
    measured: dict | None = None
    # The configurations autotuned kernels ran with when the call pinned one (``call``'s "config"): named
    # in feedback when the call was wrong.
    autotune: list = field(default_factory=list)
    # The device time (ms) of the kernels the call ran, from torch.profiler's CUDA activity, when asked
    # ("device_time": the checked call on the timed workload); None otherwise.
    device_ms: float | None = None


@dataclass
class Shipped:
    output: object                   # the call's output, on the CPU
    inputs_after: list               # the arguments as they are after the call (inputs must not change)


def to_wire(reply) -> dict:
    # the fields as they are (dataclasses.asdict would deep-copy every shipped tensor once more)
    return {"type": type(reply).__name__, **{f.name: getattr(reply, f.name) for f in fields(reply)}}


_REPLIES = {cls.__name__: cls for cls in (Ready, CallDone, Shipped)}


def from_wire(msg):
    """Rebuild a reply; anything that is not a well-formed reply raises ChannelClosed."""
    if not isinstance(msg, dict) or msg.get("type") not in _REPLIES:
        raise ChannelClosed(f"the worker sent something that is not a reply: {type(msg).__name__}")
    cls = _REPLIES[msg["type"]]
    fields = {k: v for k, v in msg.items() if k != "type"}
    try:
        return cls(**fields)
    except TypeError as exc:
        raise ChannelClosed(f"malformed {cls.__name__}: {exc}") from None
