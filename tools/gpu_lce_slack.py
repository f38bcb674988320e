"""linear_cross_entropy's float32 cases against what a GPU's dots compute, in one run.

    python -m tools.gpu_lce_slack OUT_DIR [--seeds 5] [--cases SUBSTRING] [--quick]

Each float32 case the grade uses on this machine (on a GPU: M=4096 H=1024 V=50257 with logits ~ N(0, 100^2)
among them) is built from ``--seeds`` fresh seeds and computed three ways, chunk by chunk as a fused loss
does: the course's reference kernel (cuBLAS in IEEE float32), the same with cuBLAS allowed TF32, and Triton
TF32 dots (tl.dot's default) for the logits and both gradient products. Each result is judged by the
grader's comparison twice: with the slack that allows for rounding to x's dtype alone (what was graded
before TF32 was allowed for) and with the slack graded now. Prints, last, one line per case and way: the
verdicts and the largest share of what is allowed that the loss, dx and dweight use (below 1 passes);
writes every run to OUT_DIR/lce_slack.json with the machine's keys. About 3 minutes on an H100 (the float64
references dominate); on a CPU the CPU's cases under the interpreter (``--quick``: check()'s, seconds).
"""
from __future__ import annotations

import argparse
import json
import pathlib
import platform
import time
from contextlib import contextmanager

import torch


@contextmanager
def _cublas_tf32(allowed: bool):
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = allowed
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def triton_tf32(x, weight, targets, grad_loss, chunk_rows: int = 1024):
    """(loss, dx, dweight) with every product a Triton dot (float32 operands read as TF32)."""
    from kernels_ref.matmul import matmul_untuned

    m = x.shape[0]
    loss = torch.zeros((), dtype=torch.float32, device=x.device)
    dx, dw = torch.empty_like(x), torch.zeros_like(weight)
    for s in range(0, m, chunk_rows):
        x_c, t = x[s:s + chunk_rows], targets[s:s + chunk_rows]
        z = matmul_untuned(x_c, weight.T)
        rows = torch.arange(z.shape[0], device=x.device)
        loss += (torch.logsumexp(z, -1) - z[rows, t]).sum()
        p = torch.softmax(z, -1)
        p[rows, t] -= 1
        dx[s:s + chunk_rows] = matmul_untuned(p, weight) * (grad_loss / m)
        dw += matmul_untuned(p.T.contiguous(), x_c) * (grad_loss / m)
    return loss / m, dx, dw


def reference_kernel(x, weight, targets, grad_loss):
    from kernels_ref.cross_entropy import linear_cross_entropy

    xl, wl = x.detach().requires_grad_(), weight.detach().requires_grad_()
    loss = linear_cross_entropy(xl, wl, targets)
    loss.backward(grad_loss)
    return loss.detach(), xl.grad, wl.grad


def ways(on_gpu: bool) -> dict:
    def cublas(tf32):
        def run(*args):
            with _cublas_tf32(tf32):
                return reference_kernel(*args)
        return run

    found = {"cuBLAS float32": cublas(False), "Triton TF32": triton_tf32}
    if on_gpu:
        found["cuBLAS TF32"] = cublas(True)
    return found


def shares(out, ref, spec, case) -> list[float]:
    """Per output, the share of what the tolerance and the slack allow that it uses."""
    from measure.tolerance import share_of_allowed

    return [share_of_allowed(o, r, spec.tolerance(torch.float32, case)) for o, r in zip(out, ref)]


def judge(spec, case, seed: int, way, args) -> dict:
    from autograder import correctness

    out = way(*args)
    ref, before = spec.reference(*args), spec.reference(*args, dot_error=0.0)
    dtypes = correctness.expected_dtypes(args, ref, spec)
    ok_now, _, msg = correctness.compare_outputs(out, ref, dtypes, spec, case)
    ok_before = correctness.compare_outputs(out, before, dtypes, spec, case)[0]
    return {"seed": seed, "passed": bool(ok_now), "passed_before": bool(ok_before), "message": msg,
            "shares": shares(out, ref, spec, case)}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=pathlib.Path)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--cases", default="", help="only the cases whose name contains this")
    parser.add_argument("--quick", action="store_true", help="the quick cases (check()'s)")
    opts = parser.parse_args(argv)
    import course
    from autograder import specs

    spec = specs.get("linear_cross_entropy")
    cases = [c for c in spec.cases(opts.quick) if c.name.endswith("float32") and opts.cases in c.name
             and not c.name.startswith("memory")]
    record = {"gpu": torch.cuda.get_device_name() if course.ON_GPU else None, "torch": torch.__version__,
              "python": platform.python_version(), "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
              "method": "python -m tools.gpu_lce_slack", "runs": []}
    for case in cases:
        for name, way in ways(course.ON_GPU).items():
            for seed in range(opts.seeds):
                args = case.build(torch.Generator().manual_seed(seed))
                record["runs"].append({"case": case.name, "way": name, **judge(spec, case, seed, way, args)})
                print(json.dumps(record["runs"][-1])[:300], flush=True)
    opts.out.mkdir(parents=True, exist_ok=True)
    (opts.out / "lce_slack.json").write_text(json.dumps(record, indent=2))
    _table(record["runs"])
    return record


def _table(runs: list) -> None:
    print(f"\n{'case':46s} {'way':15s} {'before':>7s} {'now':>5s}  worst share of allowed: loss / dx / dweight")
    for key in dict.fromkeys((r["case"], r["way"]) for r in runs):
        group = [r for r in runs if (r["case"], r["way"]) == key]
        worst = [max(r["shares"][i] for r in group) for i in range(3)]
        print(f"{key[0]:46s} {key[1]:15s} {sum(r['passed_before'] for r in group):>3d}/{len(group):<3d} "
              f"{sum(r['passed'] for r in group):>2d}/{len(group):<2d}  " + " / ".join(f"{w:.3g}" for w in worst))


if __name__ == "__main__":
    main()
