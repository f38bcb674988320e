"""sample_top_p by the eager sort path, behind a token Triton kernel that copies the tokens: right tokens,
but the sort, softmax and cumsum are torch's (violations), and the kernel does not do the sampling."""
import torch
import triton
import triton.language as tl


@triton.jit
def _copy(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)


def sample_top_p(logits, temperature, top_p, uniform):
    x = logits.float()
    p = torch.softmax(x / temperature[:, None], dim=-1)
    sorted_x, order = torch.sort(x, dim=-1, descending=True)
    sorted_p = p.gather(1, order)
    n_keep = ((sorted_p.cumsum(-1) - sorted_p) < top_p[:, None]).sum(-1, keepdim=True).clamp_min(1)
    cut = torch.where(top_p[:, None] >= 1, torch.full_like(n_keep, x.shape[1]), n_keep)
    kept = torch.where((x >= sorted_x.gather(1, cut - 1)) & (p > 0), p, 0.0)
    cdf = kept.cumsum(-1)
    token = torch.searchsorted(cdf, uniform[:, None] * cdf[:, -1:], right=True)[:, 0]
    token = torch.minimum(token, (cdf < cdf[:, -1:]).sum(-1))
    out = torch.empty_like(token)
    _copy[(1,)](token, out, token.numel(), BLOCK=triton.next_power_of_2(max(token.numel(), 2)))
    return out
