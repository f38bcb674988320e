"""A FlashAttention forward with the "contiguous" mistake of flash_fwd_layout_bugs.py."""
from flash_fwd_layout_bugs import launch


def flash_attention_fwd(q, k, v, causal, sm_scale):
    return launch(q, k, v, causal, sm_scale, "contiguous")
