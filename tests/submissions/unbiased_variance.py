"""naive_layer_norm with the unbiased variance (torch.var's default divides by N - 1): NaN on rows of one
element, every other value off by sqrt((N-1)/N)."""
import torch


def naive_layer_norm(x, weight, bias, eps=1e-5):
    xf = x.float()
    var = xf.var(dim=-1, keepdim=True)  # bug: unbiased (N - 1); LayerNorm divides by N
    y = (xf - xf.mean(dim=-1, keepdim=True)) * torch.rsqrt(var + eps)
    return (y * weight.float() + bias.float()).to(x.dtype)
