"""naive_attention with torch.softmax where the exercise says to use naive_softmax: right values, a rule broken."""
import math

import torch


def naive_attention(q, k, v, causal=False):
    s = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if causal:
        i = torch.arange(s.shape[-2], device=q.device)[:, None]
        j = torch.arange(s.shape[-1], device=q.device)[None, :]
        s = s.masked_fill(j > i, float("-inf"))
    return (torch.softmax(s, dim=-1).to(v.dtype) @ v).to(q.dtype)
