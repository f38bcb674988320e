"""Check FlashAttention fwd/bwd config by config on a GPU (autotune pinned to one config at a time).

    python -m probes.probe_flash_configs [S] [D]

Prints the worst error of o, lse, dq, dk, dv against float64 for every config of each kernel, causal and
not, so a wrong tile combination is found without the autotuner hiding which config ran.
"""
import sys

import course
import torch

import kernels_ref.flash_attention as fa


def errors(q, k, v, do, causal, ref):
    o, lse = fa.flash_attention_fwd(q, k, v, causal, None)
    grads = fa.flash_attention_bwd(do, q, k, v, o, lse, causal, None)
    ro, rl, rgrads = ref
    def rel(a, b):
        return ((a.double() - b).norm() / b.norm()).item()
    return [rel(o, ro), (lse.double() - rl).abs().max().item()] + [rel(g, r) for g, r in zip(grads, rgrads)]


def main():
    S = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
    D = int(sys.argv[2]) if len(sys.argv) > 2 else 64
    assert course.ON_GPU
    torch.manual_seed(0)
    q, k, v, do = [torch.randn(2, 4, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(4)]
    kernels = {"fwd": fa._fwd_kernel, "dkdv": fa._bwd_dkdv_kernel, "dq": fa._bwd_dq_kernel}
    all_configs = {name: list(k_.configs) for name, k_ in kernels.items()}
    for causal in (False, True):
        qq, kk, vv = [t.double().requires_grad_() for t in (q, k, v)]
        ro, rl = fa.attention_torch(qq, kk, vv, causal)
        ro.backward(do.double())
        ref = (ro.detach(), rl, (qq.grad, kk.grad, vv.grad))
        for name, kern in kernels.items():
            for cfg in all_configs[name]:
                for other, ok in kernels.items():
                    ok.configs = [all_configs[other][0]]
                    ok.cache.clear()
                kern.configs = [cfg]
                kern.cache.clear()
                try:
                    e = errors(q, k, v, do, causal, ref)
                    print(f"causal={causal} {name:4s} {cfg}: o {e[0]:.1e} lse {e[1]:.1e} dq {e[2]:.1e} dk {e[3]:.1e} dv {e[4]:.1e}", flush=True)
                except Exception as exc:  # noqa: BLE001
                    print(f"causal={causal} {name:4s} {cfg}: FAILED {type(exc).__name__}: {str(exc)[:300]}", flush=True)
    for kern, cfgs in zip(kernels.values(), all_configs.values()):
        kern.configs = cfgs


if __name__ == "__main__":
    main()
