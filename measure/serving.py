"""Inputs and PyTorch baselines of the serving exercises (notebook 10): the rotary tables, a paged KV cache
and its block table, the bytes a decode attention must read, and what one writes with PyTorch alone.

They solve no exercise (no Triton kernel here; the float64 judges are in ``measure.reference``): the
notebook, the grader's cases and the reference kernels' benchmarks all make their inputs with them, so a
learner's hand-out, which has no reference kernels, runs notebook 10 too.
"""
from __future__ import annotations

import torch


def rope_tables(max_position: int, head_dim: int, base: float = 10000.0, device=None):
    """(cos, sin) ``[max_position, head_dim / 2]`` float32: angle ``pos * base^(-2i / head_dim)``."""
    inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = torch.arange(max_position, dtype=torch.float64)[:, None] * inv_freq[None, :]
    return angles.cos().float().to(device), angles.sin().float().to(device)


def paged_inputs(lengths, H: int, H_kv: int, D: int, page_size: int, dtype, device, capacity: int | None = None,
                 generator=None, values=None):
    """(q, k_pages, v_pages, block_table, seq_lens): each sequence's pages scattered over a shuffled pool
    (as a paged cache is after many sequences came and went), block table rows padded with page 0.
    ``values(shape)``: where q's and the pages' float32 values come from (else Gaussian, from ``generator``
    on the CPU when one is given)."""
    B = len(lengths)
    pages_per = [-(-n // page_size) for n in lengths]
    width = capacity or max(pages_per)
    total = sum(pages_per)
    perm = torch.randperm(total, generator=generator)
    table = torch.zeros(B, width, dtype=torch.int32)
    used = 0
    for b, n in enumerate(pages_per):
        table[b, :n] = perm[used:used + n].to(torch.int32)
        used += n

    def rand(*shape):
        if values is not None:
            return values(shape).to(device=device, dtype=dtype)
        if generator is None:  # made where they are used (a GPU makes a GiB of pages in milliseconds)
            return torch.randn(*shape, device=device).to(dtype)
        return torch.randn(*shape, generator=generator).to(device=device, dtype=dtype)

    return (rand(B, H, D), rand(total, page_size, H_kv, D), rand(total, page_size, H_kv, D), table.to(device),
            torch.tensor(lengths, dtype=torch.int32, device=device))


def kv_bytes(k_pages, block_table, seq_lens) -> int:
    """The bytes that must be read: every sequence's keys and values, once."""
    per_token = k_pages.shape[2] * k_pages.shape[3] * k_pages.element_size()
    return 2 * int(seq_lens.sum()) * per_token


def gather_then_sdpa(q, k_pages, v_pages, block_table, seq_lens, sm_scale=None) -> torch.Tensor:
    """What one writes with PyTorch alone: gather every sequence's pages into a contiguous ``[B, H_kv,
    L_max, D]`` cache (padded to the block table's capacity, the padding masked out), then SDPA."""
    B, H, D = q.shape
    P, H_kv = k_pages.shape[1], k_pages.shape[2]
    L = block_table.shape[1] * P
    k = k_pages[block_table.long()].reshape(B, L, H_kv, D).transpose(1, 2)
    v = v_pages[block_table.long()].reshape(B, L, H_kv, D).transpose(1, 2)
    mask = torch.arange(L, device=q.device)[None, None, None, :] < seq_lens.long()[:, None, None, None]
    o = torch.nn.functional.scaled_dot_product_attention(q[:, :, None, :], k, v, attn_mask=mask, scale=sm_scale,
                                                         enable_gqa=H != H_kv)
    return o[:, :, 0, :]
