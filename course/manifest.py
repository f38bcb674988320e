"""What the course contains, written once: notebooks in order, their graded exercises, the spec module
that grades them and the reference modules whose kernels (and benchmark cases) they are measured against.

Everything that lists the course derives from ``NOTEBOOKS``: nbgrader's assignment list
(``nbgrader_config.py``), the autograder's spec registry (``autograder.specs``), the benchmark suite
(``kernels_ref.bench``), the README's curriculum table (``python -m tools.results_tables``) and the tests
that walk the course. Adding a notebook means adding one entry here.

This module imports nothing heavy (no torch): nbgrader and the Makefile read it too.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass(frozen=True)
class Notebook:
    name: str                         # "04_fused_softmax": folder and file name under solutions/ and notebooks/
    teaches: str                      # one line for the curriculum table
    exercises: tuple[str, ...] = ()   # graded exercise ids, in the order the notebook asks for them
    references: tuple[str, ...] = ()  # kernels_ref modules (their bench_cases) that this notebook builds up to

    @property
    def spec_module(self) -> str | None:
        """The autograder module holding this notebook's exercise specs (None: no graded exercise)."""
        return f"autograder.specs.nb{self.name}" if self.exercises else None

    @property
    def source(self) -> str:
        return os.path.join(ROOT, "solutions", self.name, f"{self.name}.ipynb")

    @property
    def released(self) -> bool:
        """Whether the notebook exists yet (nbgrader releases only those with a source notebook)."""
        return os.path.exists(self.source)


NOTEBOOKS: tuple[Notebook, ...] = (
    Notebook("00_measure",
             "GPU timing done right (async launches, events, warm-up, medians, L2), bytes and FLOPs, "
             "arithmetic intensity, this machine's roofline",
             ("time_floor", "softmax_bytes", "benchmark")),
    Notebook("01_naive_ops",
             "MLP, stable softmax, LayerNorm, causal attention from tensor primitives; where each reads and "
             "writes memory",
             ("naive_mlp", "naive_softmax", "naive_layer_norm", "naive_attention")),
    Notebook("02_profiling",
             "torch.profiler (kernel time, launch counts, memory), memory- vs compute-bound, torch.compile "
             "and its generated code",
             ("count_kernel_launches", "peak_memory_bytes", "classify_bound")),
    Notebook("03_triton_basics",
             "programs, blocks, masks, pointer arithmetic, the interpreter, elementwise fusion",
             ("vector_add", "bias_gelu"), ("kernels_ref.bias_gelu",)),
    Notebook("04_fused_softmax",
             "one-pass row softmax, online softmax for long rows",
             ("softmax", "online_softmax"), ("kernels_ref.softmax",)),
    Notebook("05_layer_norm",
             "fused LayerNorm forward and backward, partial sums and determinism, an autograd.Function, "
             "normalization + activation fusion",
             ("layer_norm_fwd", "layer_norm_bwd", "layer_norm_gelu"), ("kernels_ref.layer_norm", "kernels_ref.rms_norm")),
    Notebook("06_matmul_fused_mlp",
             "tiled matmul, tensor cores, autotuning, grouped ordering, fused bias + GELU epilogue, when "
             "fusion hurts",
             ("matmul", "linear_bias_gelu"), ("kernels_ref.matmul",)),
    Notebook("07_flash_attention",
             "tiling + online softmax, causal block skipping, O(N) memory, backward by recomputation",
             ("flash_attention_fwd", "flash_attention_bwd"), ("kernels_ref.flash_attention",)),
    Notebook("08_memory",
             "activation memory measured, recomputation, never materializing what you can stream, buffer "
             "reuse and mixed precision, weight-only quantization",
             ("linear_cross_entropy", "checkpointed_mlp", "int8_weight_linear"),
             ("kernels_ref.cross_entropy", "kernels_ref.checkpoint", "kernels_ref.quant")),
    Notebook("09_capstone",
             "a transformer block from your kernels, profiled end to end against eager and torch.compile; "
             "prefill, and decode with a KV cache and CUDA graphs",
             ("transformer_block",),
             ("kernels_ref.layer_norm", "kernels_ref.matmul", "kernels_ref.flash_attention",
              "kernels_ref.transformer_block", "kernels_ref.gpt")),
    Notebook("10_serving",
             "kernels of a serving stack: temperature + top-p sampling in one pass over the vocabulary, rotary "
             "embedding fused with the KV-cache write, paged decode attention split over keys; the decode step "
             "rebuilt from them and graphed",
             ("sample_top_p", "rope_kv_append", "paged_decode_attention"),
             ("kernels_ref.sampling", "kernels_ref.rope_cache", "kernels_ref.paged_attention",
              "kernels_ref.decode_step")),
)


def by_name(name: str) -> Notebook:
    for nb in NOTEBOOKS:
        if nb.name == name:
            return nb
    raise KeyError(f"unknown notebook {name!r}; known: {', '.join(n.name for n in NOTEBOOKS)}")


def assignments() -> list[str]:
    """Every notebook of the course, in order (nbgrader's assignment list)."""
    return [nb.name for nb in NOTEBOOKS]


def released() -> list[str]:
    """The notebooks that exist (have a source in solutions/), in order."""
    return [nb.name for nb in NOTEBOOKS if nb.released]


def spec_modules() -> list[str]:
    return [nb.spec_module for nb in NOTEBOOKS if nb.spec_module]


def reference_modules() -> list[str]:
    """Every reference module once, in course order (the benchmark suite's order)."""
    return list(dict.fromkeys(m for nb in NOTEBOOKS for m in nb.references))


def exercise_notebook() -> dict[str, str]:
    """exercise id -> notebook name."""
    return {ex: nb.name for nb in NOTEBOOKS for ex in nb.exercises}
