"""Compile one config of a kernel for sm_90 ahead of time, without a GPU, and report what the PTX uses.

Run as a script by the kernel tests (a subprocess, because the kernels must be defined with
TRITON_INTERPRET=0 while ``course`` set it to 1 on this machine):
    python tests/_sm90_compile.py MODULE KERNEL HEAD_DIM
prints one JSON object: shared bytes, whether wgmma and cp.async appear. Strides of the last dim are 1
and every other integer / pointer argument is marked divisible by 16, as the JIT would see them for
aligned tensors (without that, loads are not vectorized and the pipeliner leaves them synchronous).
"""
import importlib
import json
import os
import sys

# Triton first, with the interpreter off: triton.language's own jitted helpers (cdiv, ...) must be compiled
# functions, or compiling asserts (a warm Triton cache hides that, since nothing is compiled then).
os.environ["TRITON_INTERPRET"] = "0"
import triton  # noqa: E402
import triton.language  # noqa: E402,F401
import course.device  # noqa: E402  (without a GPU it turns the interpreter back on: undone below)
from course.aot import constexpr_defaults  # noqa: E402
from course.triton_internals import internal  # noqa: E402

GPUTarget, ASTSource = internal("GPUTarget"), internal("ASTSource")

os.environ["TRITON_INTERPRET"] = "0"
course.device.INTERPRET = False  # before course.triton_compat is imported: real autotune, native dots

POINTERS_FP32 = {"LSE", "DELTA", "scale_ptr"}
POINTERS_INT8 = {"wq_ptr"}  # kernels_ref.quant's int8 weight
UNIT_STRIDES = ("stride_ak", "stride_bk", "stride_cn", "stride_xk", "stride_wk")


def main(module_name: str, kernel_name: str, head_dim: int) -> None:
    module = importlib.import_module(module_name)
    kernel = getattr(module, kernel_name)
    configs = list(getattr(kernel, "configs", []))
    fn = kernel
    while not isinstance(fn, internal("JITFunction")):
        fn = fn.fn
    consts = {**constexpr_defaults(fn),  # e.g. the attention forward's TMA off, unless named below
              "HAS_BIAS": True, "GELU": True, "HAS_RESIDUAL": False, "CAUSAL": True, "HEAD_DIM": head_dim,
              "EVEN_K": True, "EVEN_M": True, "EVEN_N": True}
    consts.update(configs[0].kwargs)
    signature, attrs = {}, {}
    # matmul names its pointers x_ptr (M, N, K are sizes); attention names them Q, K, V, ... (H, S sizes)
    suffixed = any(n.endswith("_ptr") for n in fn.arg_names)

    def is_pointer(name):
        return name.endswith("_ptr") if suffixed else (name.isupper() and name not in ("H", "S"))

    for i, name in enumerate(fn.arg_names):
        if name in consts:
            signature[name] = "constexpr"
            continue
        if name.startswith("stride_") and (name.endswith("d") or name in UNIT_STRIDES):
            signature[name] = "constexpr"
            consts[name] = 1
            continue
        if is_pointer(name):
            signature[name] = "*fp32" if name in POINTERS_FP32 else "*i8" if name in POINTERS_INT8 else "*bf16"
        elif name == "sm_scale":
            signature[name] = "fp32"
            continue
        else:
            signature[name] = "i32"
        if name != "H":
            attrs[(i,)] = [["tt.divisibility", 16]]
    consts = {k: v for k, v in consts.items() if k in fn.arg_names}
    src = ASTSource(fn=fn, signature=signature,
                    constexprs={(fn.arg_names.index(k),): v for k, v in consts.items()}, attrs=attrs)
    compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                              options={"num_warps": configs[0].num_warps, "num_stages": configs[0].num_stages})
    ptx = compiled.asm["ptx"]
    print(json.dumps({"config": str(configs[0]), "shared": compiled.metadata.shared,
                      "wgmma": "wgmma" in ptx, "mma": "mma.sync" in ptx or "wgmma" in ptx,
                      "cp_async": "cp.async" in ptx}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
