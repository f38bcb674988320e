"""Memory over time as a picture: every allocation a band, stacked, from allocation to free.

Two recorders, one picture (notebook 08 draws both):
- on a GPU, the CUDA caching allocator's own history: ``torch.cuda.memory._record_memory_history()``,
  run the step, ``torch.cuda.memory._snapshot()``; ``from_snapshot`` pairs each ``alloc`` with its
  ``free_completed`` by address and names it by the innermost Python frame outside torch (allocations
  made by the autograd engine's C++ threads in backward have no Python frame: "backward");
- on the CPU, the profiler's memory events: ``torch.profiler.profile(profile_memory=True)``;
  ``from_profile`` reads each ``[memory]`` event of the profiler's exported trace (+bytes allocated,
  -bytes freed, with the address, in time order), pairs a free with the allocation at its address, and
  names it by the outermost operator running at that moment (``aten::mm``, ``TanhBackward0``, ...).
  Each free counts where it happens, also inside an operator (the autograd engine frees the tensors a
  backward function saved inside ``evaluate_function``): ``peak(from_profile(prof))`` is exact where
  summing each operator's net ``self_cpu_memory_usage`` is not.

``plot(blocks)`` stacks the live blocks at every event in allocation order, as PyTorch's memory_viz does:
when a block is freed, those above it drop down. The top of the stack is the memory allocated at that
moment; the highest point is the peak.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass


@dataclass
class Block:
    start: int             # index of the allocation event
    end: int | None        # index of the free event (None: still allocated at the end of the recording)
    size: int              # bytes
    label: str


def from_snapshot(snapshot: dict, device: int = 0) -> list[Block]:
    """Blocks from ``torch.cuda.memory._snapshot()`` recorded with ``_record_memory_history()``."""
    blocks, live = [], {}
    events = [e for e in snapshot["device_traces"][device] if e["action"] in ("alloc", "free_completed")]
    for i, e in enumerate(events):
        if e["action"] == "alloc":
            live[e["addr"]] = Block(i, None, e["size"], _frame_label(e.get("frames") or []))
            blocks.append(live[e["addr"]])
        elif e["addr"] in live:
            live.pop(e["addr"]).end = i
    return blocks


def _frame_label(frames: list) -> str:
    for f in frames:  # innermost first
        name = f.get("filename", "")
        if "/torch/" not in name and "/site-packages/" not in name and not name.startswith("<"):
            return f"{f.get('name', '?')}:{f.get('line', '?')}"
    return "backward" if not frames else frames[0].get("name", "?")


def trace_events(prof) -> list[dict]:
    """The events of a finished ``torch.profiler.profile`` as its public export writes them
    (``prof.export_chrome_trace``, the file chrome://tracing and Perfetto read): operators are complete
    events (``"ph": "X"``, ``ts`` and ``dur`` in microseconds); with ``profile_memory=True`` every
    allocation and free is an event named ``[memory]`` whose ``args`` hold ``Bytes`` (+ allocated,
    - freed), ``Addr`` and ``Device Type`` (0: the CPU)."""
    import json
    import os
    import tempfile

    with tempfile.TemporaryDirectory(prefix="memory-timeline-") as folder:
        path = os.path.join(folder, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            trace = json.load(f)
    return trace["traceEvents"] if isinstance(trace, dict) else trace


def from_profile(prof) -> list[Block]:
    """Blocks from a ``torch.profiler.profile(profile_memory=True)`` run on the CPU."""
    events = trace_events(prof)
    memory = sorted((e["ts"], e["args"]["Bytes"], e["args"].get("Addr")) for e in events
                    if e.get("name") == "[memory]" and e.get("args", {}).get("Device Type", 0) == 0)
    ops = sorted((e["ts"], -(e["ts"] + e["dur"]), e["name"]) for e in events
                 if e.get("ph") == "X" and e.get("dur", 0) > 0 and _is_op(e.get("name", "")))
    blocks, live = [], {}  # address -> the block allocated there
    for i, (t, nbytes, addr) in enumerate(memory):
        if nbytes > 0:
            live[addr] = Block(i, None, nbytes, _op_at(ops, t))
            blocks.append(live[addr])
        elif addr in live:  # a free of memory allocated before the recording started is not drawn
            live.pop(addr).end = i
    return blocks


def _is_op(name: str) -> bool:
    return name.startswith(("aten::", "autograd::engine::evaluate_function")) or "Backward" in name


def _op_at(ops, t) -> str:
    """The outermost operator running at time t (what the learner's code called), shortened."""
    for start, neg_end, name in ops:
        if start > t:
            break
        if -neg_end >= t:
            return name.replace("autograd::engine::evaluate_function: ", "").replace("aten::", "")
    return "other"


def peak(blocks: list[Block]) -> int:
    """The most bytes alive at once."""
    deltas = defaultdict(int)
    for b in blocks:
        deltas[b.start] += b.size
        if b.end is not None:
            deltas[b.end] -= b.size
    now = best = 0
    for i in sorted(deltas):
        now += deltas[i]
        best = max(best, now)
    return best


def peak_bytes(fn, *args) -> int:
    """Peak extra memory allocated during one call of ``fn(*args)``: ``measure.memory.peak_bytes`` on a GPU;
    on the CPU from this timeline, where every allocation and free counts where it happens (the autograd
    engine frees what a backward function saved inside its own operator, which the profiler's per-operator
    totals attribute elsewhere)."""
    import torch

    if any(isinstance(a, torch.Tensor) and a.is_cuda for a in args):
        from measure.memory import peak_bytes as allocator_peak

        return allocator_peak(fn, *args)
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        out = fn(*args)
        del out
    return peak(from_profile(prof))


def plot(blocks: list[Block], ax=None, title: str = "", top: int = 8, unit: float = 2**20):
    """A stacked timeline; the ``top`` labels holding the most bytes x time get their own colour."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 3.5))
    n = max([b.start for b in blocks] + [b.end or 0 for b in blocks] + [0]) + 1
    weight = defaultdict(float)
    for b in blocks:
        weight[b.label] += b.size * ((b.end if b.end is not None else n) - b.start)
    named = sorted(weight, key=weight.get, reverse=True)[:top]
    colours = {label: plt.cm.tab10(i % 10) for i, label in enumerate(named)}
    starts = defaultdict(list)
    for b in blocks:
        starts[b.start].append(b)
    stack, bottoms = [], defaultdict(list)  # block id -> [(event, bottom)]
    for t in range(n):
        stack = [b for b in stack if b.end is None or b.end > t] + starts.get(t, [])
        level = 0.0
        for b in stack:
            bottoms[id(b)].append((t, level))
            level += b.size / unit
    for b in blocks:
        pts = bottoms[id(b)]
        if not pts:
            continue
        ts = [p[0] for p in pts] + [pts[-1][0] + 1]
        lows = [p[1] for p in pts] + [pts[-1][1]]
        ax.fill_between(ts, lows, [lo + b.size / unit for lo in lows], step="post", linewidth=0,
                        color=colours.get(b.label, (0.75, 0.75, 0.75)))
    for label in named:
        ax.fill_between([], [], [], color=colours[label], label=label)
    ax.fill_between([], [], [], color=(0.75, 0.75, 0.75), label="other")
    ax.set(xlabel="allocation / free event", ylabel="MiB allocated" if unit == 2**20 else "allocated",
           title=title or f"peak {peak(blocks) / unit:.3g} MiB")
    ax.legend(fontsize=7, loc="upper left", ncol=2)
    return ax
