"""naive_attention with torch.softmax where the exercise says to use naive_softmax: right values, a rule broken."""
import torch

from good_naive import attention_with


def naive_attention(q, k, v, causal=False):
    return attention_with(lambda s: torch.softmax(s, dim=-1), q, k, v, causal)
