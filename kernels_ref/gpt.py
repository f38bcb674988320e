"""A small GPT trained from the course's kernels (notebook 09): forward and backward of every block.

``gpt_loss(params, tokens, targets, ops)`` embeds the tokens, runs ``n_layers`` pre-LayerNorm GPT-2 blocks
(the block of ``kernels_ref.transformer_block``), a final LayerNorm and the LM head's mean cross-entropy.
What computes each step is ``ops`` (:class:`Ops`), so that one model definition runs three ways:

- ``EAGER``: what a PyTorch user writes (F.layer_norm, F.linear = cuBLAS, SDPA, F.gelu, F.cross_entropy
  over the full ``[tokens, vocab]`` logits);
- ``COURSE``: the course's kernels, each an ``autograd.Function`` with a Triton forward and backward:
  LayerNorm (05), FlashAttention (07, q/k/v read as strided views of the qkv projection and o written in
  the layout the output projection reads), the projections with their bias / residual / bias+GELU
  epilogues fused into the matmul (06; the backward's matmuls are cuBLAS's, as eager's), and the LM head's
  ``linear_cross_entropy`` (08: the logits never held);
- any mix (:func:`ops_with`): one course kernel at a time swapped for eager's tells which kernel earns what.

The MLP's fused epilogue writes ``gelu(z)`` and not ``z``: its backward recomputes ``z`` (one more matmul of
``2*M*4D*D`` FLOPs, 08's trade of time for memory: no ``[M, 4D]`` pre-activation kept per block) and applies
GELU's derivative in one Triton pass.

``training_step(...)`` is forward + backward (the optimizer's update is the same elementwise pass for every
variant and is left out). :func:`measure_training_step` times it on a GPU with the course's timer and reports
tokens/s, peak memory and the number of kernels one step launches.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable

import course  # noqa: F401  (first: sets TRITON_INTERPRET=1 without a GPU)
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from kernels_ref._launch import cdiv
from kernels_ref._triton_math import LOG2E, gelu_tanh_arg
from kernels_ref.cross_entropy import linear_cross_entropy
from kernels_ref.flash_attention import flash_attention_bwd, flash_attention_fwd
from kernels_ref.layer_norm import layer_norm
from kernels_ref.matmul import linear
from kernels_ref.transformer_block import EPS, make_params

# ------------------------------------------------------------------------------------------- course Functions


@triton.jit
def _gelu_tanh_bwd_kernel(dy_ptr, z_ptr, n, BLOCK: tl.constexpr):
    """z <- dy * gelu_tanh'(z), in place: d/dz z*sigmoid(2u) = s + z*s*(1-s)*2u', s = sigmoid(2u)."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    z = tl.load(z_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    s = 1.0 / (1.0 + tl.exp2(gelu_tanh_arg(z) * (-2.0 * LOG2E)))
    du = 0.7978845608028654 * (1.0 + 0.134145 * z * z)  # u' = sqrt(2/pi) (1 + 3 * 0.044715 z^2)
    tl.store(z_ptr + offs, (dy * (s + 2.0 * z * s * (1.0 - s) * du)).to(z_ptr.dtype.element_ty), mask=mask)


def gelu_tanh_backward_(dy: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """dy * gelu_tanh'(z), written over z (contiguous, same shape as dy); one launch."""
    dy = dy.contiguous()
    n = z.numel()
    block = 1024
    _gelu_tanh_bwd_kernel[(cdiv(n, block),)](dy, z, n, BLOCK=block)
    return z


def _linear_grads(ctx, dz, x2, weight):
    """(dx, dweight, dbias) of z = x2 @ weight.T + bias, with cuBLAS (eager's backward matmuls)."""
    dx = dz @ weight if ctx.needs_input_grad[0] else None
    dw = dz.T @ x2 if ctx.needs_input_grad[1] else None
    db = dz.sum(0) if ctx.needs_input_grad[2] else None
    return dx, dw, db


class LinearFunction(torch.autograd.Function):
    """y = x2 @ weight.T + bias [+ residual], one launch of the course's matmul with its epilogue."""

    @staticmethod
    def forward(ctx, x2, weight, bias, residual):
        ctx.save_for_backward(x2, weight)
        ctx.has_residual = residual is not None
        return linear(x2, weight, bias, residual=residual)

    @staticmethod
    def backward(ctx, dy):
        x2, weight = ctx.saved_tensors
        return (*_linear_grads(ctx, dy, x2, weight), dy if ctx.has_residual else None)


class LinearGeluFunction(torch.autograd.Function):
    """y = gelu_tanh(x2 @ weight.T + bias), the bias + GELU epilogue fused; backward recomputes z."""

    @staticmethod
    def forward(ctx, x2, weight, bias):
        ctx.save_for_backward(x2, weight, bias)
        return linear(x2, weight, bias, gelu=True)

    @staticmethod
    def backward(ctx, dy):
        x2, weight, bias = ctx.saved_tensors
        dz = gelu_tanh_backward_(dy, linear(x2, weight, bias))  # z recomputed, then overwritten by dz
        return _linear_grads(ctx, dz, x2, weight)


class QKVAttentionFunction(torch.autograd.Function):
    """Causal attention of the qkv projection ``[B, S, 3, H, d]`` -> o ``[B*S, H*d]``: q, k, v are read as
    strided views (no split copy) and o is written token-major (no transpose copy); the backward's
    dq, dk, dv land in one ``[B, S, 3, H, d]`` gradient of qkv."""

    @staticmethod
    def forward(ctx, qkv):
        B, S, _, H, d = qkv.shape
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        o = torch.empty((B, S, H, d), dtype=qkv.dtype, device=qkv.device)
        _, lse = flash_attention_fwd(q, k, v, causal=True, out=o.transpose(1, 2))
        ctx.save_for_backward(qkv, o, lse)
        return o.view(B * S, H * d)

    @staticmethod
    def backward(ctx, do):
        qkv, o, lse = ctx.saved_tensors
        B, S, _, H, d = qkv.shape
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        grads = flash_attention_bwd(do.reshape(B, S, H, d).transpose(1, 2), q, k, v, o.transpose(1, 2), lse,
                                    causal=True)
        return torch.stack(grads, dim=0).permute(1, 3, 0, 2, 4)  # [3, B, H, S, d] -> [B, S, 3, H, d]


class EmbeddingFunction(torch.autograd.Function):
    """wte[tokens], every variant's token embedding. Its backward sums the rows' gradients with index_add_ in
    float32, rounded once: F.embedding's backward sorts the tokens (above 3072 of them) and reads their count
    back to the host, a wait in the middle of the backward that a CUDA graph cannot hold."""

    @staticmethod
    def forward(ctx, tokens, wte):
        ctx.save_for_backward(tokens)
        ctx.vocab = wte.shape[0]
        return F.embedding(tokens, wte)

    @staticmethod
    def backward(ctx, dy):
        (tokens,) = ctx.saved_tensors
        dwte = torch.zeros((ctx.vocab, dy.shape[-1]), dtype=torch.float32, device=dy.device)
        return None, dwte.index_add_(0, tokens, dy.to(torch.float32)).to(dy.dtype)


# ------------------------------------------------------------------------------------------- the two op sets


@dataclass(frozen=True)
class Ops:
    """What computes each step of the model; x2 is ``[tokens, D]``, qkv ``[B, S, 3, H, d]``."""

    name: str
    layer_norm: Callable    # (x2, weight, bias) -> y
    attention: Callable     # (qkv) -> o [tokens, D], causal
    linear: Callable        # (x2, weight, bias, residual or None) -> y
    linear_gelu: Callable   # (x2, weight, bias) -> gelu_tanh(x2 @ weight.T + bias)
    loss: Callable          # (x2, weight, targets) -> mean cross-entropy of x2 @ weight.T


def _eager_attention(qkv):
    B, S, _, H, d = qkv.shape
    q, k, v = qkv.permute(2, 0, 3, 1, 4)
    return F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B * S, H * d)


def _eager_linear(x2, weight, bias, residual):
    y = F.linear(x2, weight, bias)
    return y if residual is None else residual + y


EAGER = Ops(
    name="eager",
    layer_norm=lambda x2, w, b: F.layer_norm(x2, (x2.shape[-1],), w, b, EPS),
    attention=_eager_attention,
    linear=_eager_linear,
    linear_gelu=lambda x2, w, b: F.gelu(F.linear(x2, w, b), approximate="tanh"),
    loss=lambda x2, w, t: F.cross_entropy(F.linear(x2, w), t),
)

def _eager_loss_over_a_padded_vocabulary(x2, weight, targets, multiple: int = 64):
    """Eager's loss as a PyTorch user who knows the trick writes it (nanoGPT pads GPT-2's 50257 to 50304):
    the weight with zero rows up to a multiple of 64 and a bias of -inf on them, so cuBLAS reads aligned rows
    and the loss and gradients are still those of V words (softmax gives the padding 0)."""
    V, D = weight.shape
    pad = (-V) % multiple
    if pad == 0:
        return EAGER.loss(x2, weight, targets)
    bias = torch.zeros(V + pad, dtype=weight.dtype, device=weight.device)
    bias[V:] = -math.inf
    return F.cross_entropy(F.linear(x2, torch.cat([weight, weight.new_zeros(pad, D)]), bias), targets)


COURSE = Ops(
    name="course",
    layer_norm=lambda x2, w, b: layer_norm(x2, w, b, EPS),
    attention=QKVAttentionFunction.apply,
    linear=LinearFunction.apply,
    linear_gelu=LinearGeluFunction.apply,
    loss=linear_cross_entropy,
)

STEPS = ("layer_norm", "attention", "linear", "linear_gelu", "loss")


def ops_with(base: Ops, name: str | None = None, **steps) -> Ops:
    """``base`` with some steps replaced (e.g. ``ops_with(COURSE, attention=EAGER.attention)``)."""
    unknown = set(steps) - set(STEPS)
    if unknown:
        raise ValueError(f"unknown step(s) {sorted(unknown)}; the steps are {STEPS}")
    return replace(base, name=name or f"{base.name} with eager {'+'.join(steps)}", **steps)


def ablations() -> dict[str, Ops]:
    """The course's model with one step at a time done eagerly: what each kernel earns is the difference."""
    return {step: ops_with(COURSE, **{step: getattr(EAGER, step)}) for step in STEPS}


# ------------------------------------------------------------------------------------------- the model


@dataclass(frozen=True)
class GPTConfig:
    n_layers: int
    d_model: int
    n_heads: int
    vocab: int

    def __post_init__(self):
        if min(self.n_layers, self.d_model, self.n_heads, self.vocab) < 1 or self.d_model % self.n_heads:
            raise ValueError(f"{self}: every size must be positive and n_heads must divide d_model")

    def label(self) -> str:
        return f"L{self.n_layers} D{self.d_model} H{self.n_heads} V{self.vocab}"


def make_gpt(cfg: GPTConfig, dtype=torch.bfloat16, device=None, seed: int = 0) -> dict:
    """Parameters (leaves that require grad): ``wte [V, D]``, ``blocks`` (each as ``make_params``), the final
    LayerNorm and the LM head ``[V, D]`` (untied from the embedding, as in Llama)."""
    device = device or course.DEVICE
    torch.manual_seed(seed)
    D, V = cfg.d_model, cfg.vocab
    blocks = [make_params(D, cfg.n_heads, dtype, device) for _ in range(cfg.n_layers)]
    params = {"wte": torch.randn(V, D, device=device).to(dtype), "blocks": blocks,
              "lnf_weight": (1 + 0.1 * torch.randn(D, device=device)).to(dtype),
              "lnf_bias": (0.1 * torch.randn(D, device=device)).to(dtype),
              "lm_head": (torch.randn(V, D, device=device) * D ** -0.5).to(dtype)}
    for t in leaves(params):
        t.requires_grad_(True)
    return params


def leaves(params: dict) -> list[torch.Tensor]:
    """Every parameter tensor, in a fixed order."""
    out = [params["wte"]]
    for p in params["blocks"]:
        out += [v for k, v in p.items() if k != "n_heads"]
    return out + [params["lnf_weight"], params["lnf_bias"], params["lm_head"]]


def cast(params: dict, dtype) -> dict:
    """A copy of the parameters in ``dtype``, leaves that require grad (the float64 reference's)."""
    def c(t):
        return t.detach().to(dtype).requires_grad_(True)

    return {"wte": c(params["wte"]), "lnf_weight": c(params["lnf_weight"]), "lnf_bias": c(params["lnf_bias"]),
            "lm_head": c(params["lm_head"]),
            "blocks": [{k: (v if k == "n_heads" else c(v)) for k, v in p.items()} for p in params["blocks"]]}


def gpt_loss(params: dict, tokens: torch.Tensor, targets: torch.Tensor, ops: Ops = COURSE) -> torch.Tensor:
    """Mean next-token cross-entropy of the model on ``tokens [B, S]`` against ``targets [B, S]``."""
    B, S = tokens.shape
    x = EmbeddingFunction.apply(tokens.reshape(-1), params["wte"])  # [B*S, D]: the same in every variant
    D = x.shape[-1]
    for p in params["blocks"]:
        H = int(p["n_heads"])
        qkv = ops.linear(ops.layer_norm(x, p["ln1_weight"], p["ln1_bias"]), p["w_qkv"], p["b_qkv"], None)
        h = ops.linear(ops.attention(qkv.view(B, S, 3, H, D // H)), p["w_out"], p["b_out"], x)
        f = ops.linear_gelu(ops.layer_norm(h, p["ln2_weight"], p["ln2_bias"]), p["w_fc"], p["b_fc"])
        x = ops.linear(f, p["w_proj"], p["b_proj"], h)
    return ops.loss(ops.layer_norm(x, params["lnf_weight"], params["lnf_bias"]), params["lm_head"],
                    targets.reshape(-1))


def training_step(params: dict, tokens, targets, ops: Ops = COURSE):
    """Forward + backward: (loss, the gradients in ``leaves`` order). Gradients are returned, not
    accumulated into ``.grad``, so repeated steps keep no state."""
    ps = leaves(params)
    loss = gpt_loss(params, tokens, targets, ops)
    return loss.detach(), torch.autograd.grad(loss, ps)


def make_batch(cfg: GPTConfig, B: int, S: int, device=None, generator=None):
    """(tokens, targets) ``[B, S]``: random tokens, targets the next token."""
    device = device or course.DEVICE
    seq = torch.randint(0, cfg.vocab, (B, S + 1), generator=generator).to(device)
    return seq[:, :-1].contiguous(), seq[:, 1:].contiguous()


def float64_check(params, tokens, targets, ops: Ops = COURSE):
    """(loss error, [(name, max abs error, max |expected|) per gradient]) of ``training_step`` with ``ops``
    against float64 eager autograd on the same parameters."""
    loss, grads = training_step(params, tokens, targets, ops)
    p64 = cast(params, torch.float64)
    loss64, grads64 = training_step(p64, tokens, targets, EAGER)
    names = _leaf_names(params)
    errs = [(n, (g.double() - r).abs().max().item(), r.abs().max().item()) for n, g, r in zip(names, grads, grads64)]
    return abs(loss.double().item() - loss64.item()), errs


def _leaf_names(params) -> list[str]:
    names = ["wte"]
    for i, p in enumerate(params["blocks"]):
        names += [f"blocks.{i}.{k}" for k in p if k != "n_heads"]
    return names + ["lnf_weight", "lnf_bias", "lm_head"]


# ------------------------------------------------------------------------------------------- measurement


def step_flops(cfg: GPTConfig, B: int, S: int) -> int:
    """Matmul FLOPs of forward + backward (3x the forward's): projections 24*T*D^2 per block, causal
    attention 2*B*S^2*D per block, the LM head 2*T*D*V; T = B*S tokens. The recomputed MLP up-projection
    is extra work of the course's variant, not counted."""
    T, D = B * S, cfg.d_model
    return 3 * (cfg.n_layers * (24 * T * D * D + 2 * B * S * S * D) + 2 * T * D * cfg.vocab)


def _profiled(fn) -> tuple[float, list]:
    """(wall ms, the kernels) of one call of ``fn()`` under torch.profiler: the device kernels it launched
    (CUDA events); without a GPU, the top-level aten operators that launch one."""
    import time

    from torch.profiler import ProfilerActivity, profile

    from measure.launches import NO_KERNEL_OPS

    acts = [ProfilerActivity.CUDA] if course.ON_GPU else [ProfilerActivity.CPU]
    with profile(activities=acts) as prof:
        start = time.perf_counter()
        fn()
        if course.ON_GPU:
            torch.cuda.synchronize()
        wall_ms = (time.perf_counter() - start) * 1e3
    if course.ON_GPU:
        return wall_ms, [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return wall_ms, [e for e in prof.events() if e.name.startswith("aten::") and e.name not in NO_KERNEL_OPS
                     and e.cpu_parent is None]


def count_kernels(fn) -> int:
    """Device kernels one call of ``fn()`` launches (torch.profiler's CUDA events; CPU ops without a GPU)."""
    return len(_profiled(fn)[1])


def where_time_goes(fn, top: int = 8) -> dict:
    """One profiled call of ``fn()``: its wall time, the summed time of the kernels it launched (on a GPU; the
    operators' own CPU time without one) and the ``top`` kernels by total time. Kernel time well under the
    wall time means the device waited (for the host's launches or a synchronization)."""
    wall_ms, events = _profiled(fn)
    kernels = {}
    for e in events:
        ms = (e.device_time if course.ON_GPU else e.self_cpu_time_total) / 1e3
        total, count = kernels.get(e.name, (0.0, 0))
        kernels[e.name] = (total + ms, count + 1)
    ranked = sorted(kernels.items(), key=lambda kv: -kv[1][0])
    return {"wall_ms": wall_ms, "kernel_ms": sum(ms for ms, _ in kernels.values()),
            "top": [{"kernel": name[:120], "ms": ms, "launches": n} for name, (ms, n) in ranked[:top]]}


def measure_training_step(cfg: GPTConfig, B: int, S: int, variants: dict[str, Callable], dtype=torch.bfloat16,
                          reps: int = 20, warmup: int = 3, graphs: tuple[str, ...] = ()) -> list[dict]:
    """One row per variant (``{name: fn(params, tokens, targets)}``, e.g. ``training_step`` with EAGER,
    COURSE or a compiled step): step ms (median, interleaved with the others), tokens/s, peak bytes of one
    step above the parameters, kernels launched, TFLOP/s, the host's ms to launch one step, and the speedup
    and memory ratio to "eager". The variants named in ``graphs`` are measured once more as CUDA graphs
    ("<name>, CUDA graph": the same kernels replayed without the host; no peak, their memory is the graph's)."""
    from measure.memory import peak_bytes
    from measure.timer import bench_interleaved, graph_replay

    params = make_gpt(cfg, dtype)
    tokens, targets = make_batch(cfg, B, S)
    runs = {name: (lambda fn=fn: fn(params, tokens, targets)) for name, fn in variants.items()}
    for name, run in list(runs.items()):  # compile, autotune and warm the allocator outside every measurement
        try:
            run()
        except Exception as exc:  # noqa: BLE001  (a variant that cannot run here is reported, not fatal)
            print(f"training step {name}: could not run here ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})")
            del runs[name]
    graphed = {}
    for name in (g for g in graphs if g in runs and course.ON_GPU):
        try:
            graphed[f"{name}, CUDA graph"] = graph_replay(runs[name])
        except Exception as exc:  # noqa: BLE001  (e.g. a step that reads the GPU from the host cannot be captured)
            print(f"training step {name}: no CUDA graph ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})")
    ms = bench_interleaved({**runs, **graphed}, reps=reps, warmup=warmup)
    rows = []
    for name, run in {**runs, **graphed}.items():
        rows.append({"variant": name, "ms": ms[name], "tokens_per_s": B * S / (ms[name] / 1e3),
                     "peak_bytes": None if name in graphed else peak_bytes(run), "kernels": count_kernels(run),
                     "host_ms": None if name in graphed else host_ms(run),
                     "tflops": step_flops(cfg, B, S) / (ms[name] / 1e3) / 1e12})
    base = next((r for r in rows if r["variant"] == "eager"), None)
    for r in rows:
        r["speedup_vs_eager"] = base["ms"] / r["ms"] if base else math.nan
        r["memory_vs_eager"] = r["peak_bytes"] / base["peak_bytes"] if base and r["peak_bytes"] else math.nan
    return rows


def host_ms(fn: Callable, reps: int = 5) -> float:
    """The host's time to launch one call of ``fn()`` (median ms, the device idle at each start): next to the
    call's time, it says whether the device or the host sets the pace (a step whose host time is its whole
    time is launch-bound, and a wait for the device inside it counts here too)."""
    import statistics
    import time

    times = []
    for _ in range(reps):
        course.synchronize()
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    course.synchronize()
    return statistics.median(times)


def step_variants(compiled: bool = True, with_ablations: bool = True) -> dict[str, Callable]:
    """The variants the notebook and the GPU script measure: eager, eager with its vocabulary padded (the fair
    baseline at an odd vocabulary), eager under torch.compile, the course's kernels, and the course's with one
    step at a time done eagerly."""
    padded = ops_with(EAGER, name="eager, padded vocabulary", loss=_eager_loss_over_a_padded_vocabulary)
    variants = {"eager": lambda p, x, t: training_step(p, x, t, EAGER),
                "eager, padded vocabulary": lambda p, x, t: training_step(p, x, t, padded),
                "course": lambda p, x, t: training_step(p, x, t, COURSE)}
    if compiled:
        variants["torch.compile"] = torch.compile(lambda p, x, t: training_step(p, x, t, EAGER))
    if with_ablations:
        for step, ops in ablations().items():
            variants[f"course, eager {step}"] = lambda p, x, t, ops=ops: training_step(p, x, t, ops)
    return variants


def bench_cases(quick: bool = False):
    """The training step at a size that keeps an H100 busy (8 x 1024 tokens through 8 blocks of D = 1024 and
    GPT-2's 50257-token vocabulary, bf16) against eager and torch.compile; the issue's goals: 1.15x eager's
    step time and at most 0.6x its peak memory."""
    from kernels_ref.benchmarking import BenchCase, Goal

    shapes = [(GPTConfig(8, 1024, 16, 50257), 8, 1024)]
    if not quick:
        shapes.append((GPTConfig(12, 2048, 16, 128256), 4, 2048))
    cases = []
    for cfg, B, S in shapes:
        def make(cfg=cfg, B=B, S=S):
            return (make_gpt(cfg), *make_batch(cfg, B, S))

        def run(ops):
            return lambda p, x, t: training_step(p, x, t, ops)

        common = dict(op="gpt_training_step", make_inputs=make, flops=step_flops(cfg, B, S),
                      candidates={"triton": run(COURSE), "eager": run(EAGER),
                                  "compiled": torch.compile(run(EAGER))},
                      # 16-bit training through 8+ blocks: gradients agree with float64 to bf16's few ulps
                      # only relative to their own scale; the CPU test checks them at float32 exactly.
                      reference=None)
        label = f"{cfg.label()} B{B} S{S} bf16"
        cases.append(BenchCase(label=label, goals=[Goal.faster("triton", "eager", 1.15)], **common))
        cases.append(BenchCase(label=f"{label} memory", metric="peak_memory", goals=[Goal.faster("triton", "eager", 1 / 0.6)],
                               **common))
    return cases
