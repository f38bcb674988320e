"""Registers and spills of a Triton kernel on an H100 (sm_90a), without a GPU: each config compiled ahead
of time to PTX, then assembled by ptxas with ``-v``.

    python -m probes.ptxas_usage kernels_ref.layer_norm _layer_norm_bwd_dx_kernel \\
        --const BLOCK_M=1 BLOCK_N=8192 SPLIT=1 --fp32 mean_ptr rstd_ptr part_ptr --warps 4 8 16 32

Pointers (arguments named ``*_ptr``) are bfloat16 unless named in ``--fp32``; a constexpr with a default
takes it unless ``--const`` names it; every other non-constexpr argument is an int32 divisible by 16, as
the JIT sees sizes and strides of aligned tensors. ptxas runs as ``course.aot.ptxas_usage`` runs it (the
kernel tests' resource checks), so its register counts can differ a little from what the GPU's own Triton
and ptxas produce; what it is for is the order of magnitude: whether a config spills, and how many
programs of it fit on an SM (65536 registers).
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys

REGISTERS_PER_SM = 65536
THREADS_PER_SM = 2048


def compile_ptx(fn, consts: dict, fp32: set, num_warps: int, num_stages: int) -> str:
    """The PTX of ``fn`` for sm_90a with these constexprs and launch options."""
    import triton

    from course.aot import H100, constexpr_defaults
    from course.triton_internals import internal

    GPUTarget, ASTSource = internal("GPUTarget"), internal("ASTSource")

    signature, attrs = {}, {}
    consts = {**constexpr_defaults(fn), **consts}
    for i, name in enumerate(fn.arg_names):
        if name in consts:
            signature[name] = "constexpr"
            continue
        signature[name] = ("*fp32" if name in fp32 else "*bf16") if name.endswith("_ptr") else "i32"
        attrs[(i,)] = [["tt.divisibility", 16]]
    src = ASTSource(fn=fn, signature=signature, attrs=attrs,
                    constexprs={(fn.arg_names.index(k),): v for k, v in consts.items()})
    compiled = triton.compile(src, target=GPUTarget("cuda", *H100),
                              options={"num_warps": num_warps, "num_stages": num_stages})
    return compiled.asm["ptx"]


def programs_per_sm(registers: int, num_warps: int) -> int:
    """How many programs of this size an SM holds at once, by its registers and its threads (shared memory
    not counted)."""
    threads = num_warps * 32
    return min(REGISTERS_PER_SM // max(1, registers * threads), THREADS_PER_SM // threads)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("module")
    p.add_argument("kernel")
    p.add_argument("--const", nargs="*", default=[], metavar="NAME=INT", help="constexpr values")
    p.add_argument("--fp32", nargs="*", default=[], metavar="NAME", help="pointers to float32 (others: bf16)")
    p.add_argument("--warps", nargs="*", type=int, default=[4, 8, 16, 32])
    p.add_argument("--stages", type=int, default=1)
    args = p.parse_args(argv)
    # Compiled kernels, even on a machine without a GPU: Triton imported with the interpreter off (its own
    # jitted helpers must be compiled functions), then course told so (it turns the interpreter on without
    # a GPU), before the kernel's module defines anything.
    os.environ["TRITON_INTERPRET"] = "0"
    import triton.language  # noqa: F401

    import course.device

    os.environ["TRITON_INTERPRET"] = "0"
    course.device.INTERPRET = False
    from course.aot import ptxas_usage
    from kernels_ref._launch import _jit_function

    fn = _jit_function(getattr(importlib.import_module(args.module), args.kernel))
    consts = {k: int(v) for k, v in (c.split("=", 1) for c in args.const)}
    print(f"{args.kernel} {consts} on sm_90a (num_stages={args.stages})")
    print("warps  registers  spill stores  spill loads  stack  programs per SM (registers, threads)")
    for warps in args.warps:
        use = ptxas_usage(compile_ptx(fn, consts, set(args.fp32), warps, args.stages))
        print(f"{warps:5d}  {use['n_regs']:9d}  {use['n_spills']:10d} B  {use['spill_loads']:9d} B"
              f"  {use['stack']:4d} B  {programs_per_sm(use['n_regs'], warps):d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
