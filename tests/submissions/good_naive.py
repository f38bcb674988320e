"""Correct answers for 01_naive_ops: tensor primitives only, float32 math for 16-bit inputs."""
import math

import torch


def naive_mlp(x, w1, b1, w2, b2):
    h = x @ w1.T + b1
    g = 0.5 * h * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * h * h * h)))
    return g @ w2.T + b2


def naive_softmax(x):
    xf = x.float()
    e = torch.exp(xf - xf.amax(dim=-1, keepdim=True))
    return (e / e.sum(dim=-1, keepdim=True)).to(x.dtype)


def naive_layer_norm(x, weight, bias, eps=1e-5):
    xf = x.float()
    xc = xf - xf.mean(dim=-1, keepdim=True)
    var = (xc * xc).mean(dim=-1, keepdim=True)
    return (xc * torch.rsqrt(var + eps) * weight.float() + bias.float()).to(x.dtype)


def attention_with(softmax, q, k, v, causal):
    """softmax(q @ k^T / sqrt(d) [+ causal mask]) @ v, scores in float32, with the softmax given."""
    s = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if causal:
        i = torch.arange(s.shape[-2], device=q.device)[:, None]
        j = torch.arange(s.shape[-1], device=q.device)[None, :]
        s = s.masked_fill(j > i, float("-inf"))
    return (softmax(s).to(v.dtype) @ v).to(q.dtype)


def naive_attention(q, k, v, causal=False):
    return attention_with(naive_softmax, q, k, v, causal)
