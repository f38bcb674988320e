"""Right values, wrong means: each entry point of notebooks 05-08 calls the torch operator its exercise
teaches (or materializes what it must not). Every one must score zero with that operator named."""
import math

import torch
import torch.nn.functional as F


def layer_norm_fwd(x, weight, bias, eps):
    y = F.layer_norm(x, (x.shape[-1],), weight, bias, eps)  # aten.native_layer_norm
    xf = x.float()
    mean = xf.mean(-1)
    return y, mean, torch.rsqrt(((xf - mean[:, None]) ** 2).mean(-1) + eps)


def layer_norm_bwd(dy, x, weight, mean, rstd):
    # (on the CPU eager wants the statistics in x's dtype)
    dx, dw, db = torch.ops.aten.native_layer_norm_backward(dy, x, [x.shape[-1]], mean[:, None].to(x.dtype),
                                                           rstd[:, None].to(x.dtype),
                                                           weight, weight, [True, True, True])
    return dx, dw, db


def layer_norm_gelu(x, weight, bias, eps):
    return F.gelu(F.layer_norm(x, (x.shape[-1],), weight, bias, eps), approximate="tanh")  # the two launches


def matmul(a, b):
    return a @ b  # aten.mm: cuBLAS doing the exercise


def linear_bias_gelu(x, weight, bias):
    return F.gelu(F.linear(x, weight, bias), approximate="tanh")  # aten.addmm + aten.gelu


def flash_attention_fwd(q, k, v, causal, sm_scale):
    scale = 1 / math.sqrt(q.shape[-1]) if sm_scale is None else sm_scale
    o = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal, scale=scale)
    s = q.float() @ k.float().transpose(-1, -2) * scale
    if causal:
        s = s.masked_fill(torch.ones_like(s, dtype=torch.bool).triu(1), float("-inf"))
    return o.to(q.dtype), torch.logsumexp(s, -1)


def flash_attention_bwd(do, q, k, v, o, lse, causal, sm_scale):
    leaves = [t.detach().float().requires_grad_() for t in (q, k, v)]
    with torch.enable_grad():
        out = F.scaled_dot_product_attention(*leaves, is_causal=causal, scale=sm_scale)
        grads = torch.autograd.grad(out, leaves, do.float())
    return tuple(g.to(q.dtype) for g in grads)


def linear_cross_entropy(x, weight, targets):
    return F.cross_entropy((x @ weight.T).float(), targets)  # the full [M, V] logits, log_softmax, nll_loss


def int8_weight_linear(x, w_q, w_scale, bias):
    return F.linear(x, (w_q.float() * w_scale[:, None]).to(x.dtype), bias)  # the weight dequantized, cuBLAS
