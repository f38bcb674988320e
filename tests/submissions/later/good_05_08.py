"""Correct, deliberately simple submissions for the exercises of notebooks 05-08 (small fixed tiles, fp32
compute, interpreter-friendly). Not fast: they exist so the autograder's specs can be tested on the CPU."""
import course  # noqa: F401  (TRITON_INTERPRET before the kernels are defined)
import torch
import triton
import triton.language as tl

from course.triton_compat import dot


# ------------------------------------------------------------------------------------------- 05 LayerNorm

@triton.jit
def _ln_fwd_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, N, stride_x, eps, BLOCK: tl.constexpr,
                   GELU: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    xc = tl.where(mask, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(xc * xc, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=mask).to(tl.float32)
    y = xc * rstd * w + b
    if GELU:
        y = _gelu_tanh(y)  # (defined with the matmul below)
    tl.store(y_ptr + row * N + cols, y.to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)


def layer_norm_fwd(x, weight, bias, eps, gelu=False):
    if x.dim() != 2 or weight.shape != x.shape[1:] or bias.shape != x.shape[1:] or x.shape[1] > 65536:
        raise ValueError("layer_norm_fwd needs x [M, N] (N <= 65536) and weight, bias [N]")  # the exercise's rule
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    mean = torch.empty(m, dtype=torch.float32, device=x.device)
    rstd = torch.empty(m, dtype=torch.float32, device=x.device)
    _ln_fwd_kernel[(m,)](x, weight, bias, y, mean, rstd, n, x.stride(0), eps, BLOCK=triton.next_power_of_2(n),
                         GELU=gelu)
    return y, mean, rstd


def layer_norm_gelu(x, weight, bias, eps):
    return layer_norm_fwd(x, weight, bias, eps, gelu=True)[0]  # the same kernel, GELU in its epilogue


@triton.jit
def _ln_bwd_kernel(dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, dx_ptr, dw_part_ptr, db_part_ptr, M, N,
                   stride_dy, stride_x, G, BLOCK: tl.constexpr):
    """Program g: dx of rows g, g+G, ...; its partial sums of dy*xhat and dy go to row g of the partials."""
    g = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    dw = tl.zeros((BLOCK,), dtype=tl.float32)
    db = tl.zeros((BLOCK,), dtype=tl.float32)
    for row in range(g, M, G):
        dy = tl.load(dy_ptr + row * stride_dy + cols, mask=mask, other=0.0).to(tl.float32)
        x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
        mean = tl.load(mean_ptr + row)
        rstd = tl.load(rstd_ptr + row)
        xhat = tl.where(mask, (x - mean) * rstd, 0.0)
        wdy = w * dy
        c1 = tl.sum(xhat * wdy, axis=0) / N
        c2 = tl.sum(wdy, axis=0) / N
        tl.store(dx_ptr + row * N + cols, ((wdy - (xhat * c1 + c2)) * rstd).to(dx_ptr.dtype.element_ty), mask=mask)
        dw += dy * xhat
        db += dy
    tl.store(dw_part_ptr + g * N + cols, dw, mask=mask)
    tl.store(db_part_ptr + g * N + cols, db, mask=mask)


@triton.jit
def _column_sums_kernel(dw_part_ptr, db_part_ptr, dw_ptr, db_ptr, G, N, BLOCK_G: tl.constexpr, BLOCK_N: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    dw = tl.zeros((BLOCK_N,), dtype=tl.float32)
    db = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for start in range(0, G, BLOCK_G):
        rows = start + tl.arange(0, BLOCK_G)
        mask = (rows[:, None] < G) & (cols[None, :] < N)
        offs = rows[:, None] * N + cols[None, :]
        dw += tl.sum(tl.load(dw_part_ptr + offs, mask=mask, other=0.0), axis=0)
        db += tl.sum(tl.load(db_part_ptr + offs, mask=mask, other=0.0), axis=0)
    tl.store(dw_ptr + cols, dw.to(dw_ptr.dtype.element_ty), mask=cols < N)
    tl.store(db_ptr + cols, db.to(db_ptr.dtype.element_ty), mask=cols < N)


def layer_norm_bwd(dy, x, weight, mean, rstd):
    m, n = x.shape
    groups = min(m, 4)
    dx = torch.empty((m, n), dtype=x.dtype, device=x.device)
    dw_part = torch.empty((groups, n), dtype=torch.float32, device=x.device)
    db_part = torch.empty((groups, n), dtype=torch.float32, device=x.device)
    _ln_bwd_kernel[(groups,)](dy, x, weight, mean, rstd, dx, dw_part, db_part, m, n, dy.stride(0), x.stride(0),
                              groups, BLOCK=triton.next_power_of_2(n))
    dw = torch.empty(n, dtype=weight.dtype, device=x.device)
    db = torch.empty(n, dtype=weight.dtype, device=x.device)
    block_n = min(128, triton.next_power_of_2(n))
    _column_sums_kernel[(triton.cdiv(n, block_n),)](dw_part, db_part, dw, db, groups, n, BLOCK_G=4, BLOCK_N=block_n)
    return dx, dw, db


# ------------------------------------------------------------------------------------------- 06 matmul

@triton.jit
def _gelu_tanh(z):
    u = 0.7978845608028654 * (z + 0.044715 * z * z * z)
    return 0.5 * z * (1.0 + (1.0 - 2.0 / (tl.exp(2.0 * u) + 1.0)))  # tanh that saturates without overflow


@triton.jit
def _matmul_kernel(a_ptr, b_ptr, bias_ptr, c_ptr, M, N, K, s_am, s_ak, s_bk, s_bn,
                   EPILOGUE: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        a = tl.load(a_ptr + rm[:, None] * s_am + rk[None, :] * s_ak, mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + rk[:, None] * s_bk + rn[None, :] * s_bn, mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = dot(a, b, acc)
    if EPILOGUE:
        acc = _gelu_tanh(acc + tl.load(bias_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :])
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


def _launch(a, b_ptr_tensor, strides_b, bias, m, k, n, epilogue):
    c = torch.empty((m, n), dtype=a.dtype, device=a.device)
    _matmul_kernel[(triton.cdiv(m, 16), triton.cdiv(n, 16))](
        a, b_ptr_tensor, bias if bias is not None else a, c, m, n, k, a.stride(0), a.stride(1), *strides_b,
        EPILOGUE=epilogue, BM=16, BN=16, BK=16)
    return c


def matmul(a, b):
    (m, k), n = a.shape, b.shape[1]
    return _launch(a, b, (b.stride(0), b.stride(1)), None, m, k, n, False)


def linear_bias_gelu(x, weight, bias):
    (m, k), n = x.shape, weight.shape[0]
    return _launch(x, weight, (weight.stride(1), weight.stride(0)), bias, m, k, n, True)  # weight.T by strides


# ------------------------------------------------------------------------------------------- 07 flash attention

@triton.jit
def _flash_fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, H, S, scale,
                      sqb, sqh, sqs, sqd, skb, skh, sks, skd, svb, svh, svs, svd, sob, soh, sos, sod,
                      CAUSAL: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr):
    bh = tl.program_id(1)
    b, h = bh // H, bh % H
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rd = tl.arange(0, D)
    q = tl.load(q_ptr + b * sqb + h * sqh + rm[:, None] * sqs + rd[None, :] * sqd, mask=rm[:, None] < S, other=0.0)
    m_i = tl.full((BM,), float("-inf"), tl.float32)
    l_i = tl.zeros((BM,), tl.float32)
    acc = tl.zeros((BM, D), tl.float32)
    for n0 in range(0, S, BN):
        rn = n0 + tl.arange(0, BN)
        kt = tl.load(k_ptr + b * skb + h * skh + rn[None, :] * sks + rd[:, None] * skd, mask=rn[None, :] < S, other=0.0)
        v = tl.load(v_ptr + b * svb + h * svh + rn[:, None] * svs + rd[None, :] * svd, mask=rn[:, None] < S, other=0.0)
        s = dot(q, kt, tl.zeros((BM, BN), tl.float32)) * scale
        keep = rn[None, :] < S
        if CAUSAL:
            keep = keep & (rn[None, :] <= rm[:, None])
        s = tl.where(keep, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # padded query rows see no key at all
        p = tl.exp(s - m_safe[:, None])
        alpha = tl.exp(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    l_safe = tl.where(l_i == 0.0, 1.0, l_i)
    tl.store(o_ptr + b * sob + h * soh + rm[:, None] * sos + rd[None, :] * sod,
             (acc / l_safe[:, None]).to(o_ptr.dtype.element_ty), mask=rm[:, None] < S)
    tl.store(lse_ptr + bh * S + rm, m_i + tl.log(l_safe), mask=rm < S)


def _scale(sm_scale, d):
    return 1.0 / d ** 0.5 if sm_scale is None else float(sm_scale)


def _strides(t):
    return t.stride(0), t.stride(1), t.stride(2), t.stride(3)


def flash_attention_fwd(q, k, v, causal, sm_scale):
    B, H, S, D = q.shape
    o = torch.empty((B, H, S, D), dtype=q.dtype, device=q.device)
    lse = torch.empty((B, H, S), dtype=torch.float32, device=q.device)
    _flash_fwd_kernel[(triton.cdiv(S, 16), B * H)](q, k, v, o, lse, H, S, _scale(sm_scale, D), *_strides(q),
                                                  *_strides(k), *_strides(v), *_strides(o),
                                                  CAUSAL=causal, BM=16, BN=16, D=D)
    return o, lse


@triton.jit
def _delta_kernel(o_ptr, do_ptr, delta_ptr, H, S, sob, soh, sos, sod, sdb, sdh, sds, sdd,
                  BM: tl.constexpr, D: tl.constexpr):
    bh = tl.program_id(1)
    b, h = bh // H, bh % H
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rd = tl.arange(0, D)
    o = tl.load(o_ptr + b * sob + h * soh + rm[:, None] * sos + rd[None, :] * sod, mask=rm[:, None] < S, other=0.0)
    do = tl.load(do_ptr + b * sdb + h * sdh + rm[:, None] * sds + rd[None, :] * sdd, mask=rm[:, None] < S, other=0.0)
    tl.store(delta_ptr + bh * S + rm, tl.sum(o.to(tl.float32) * do.to(tl.float32), axis=1), mask=rm < S)


@triton.jit
def _probs(q, kt, lse, rm, rn, S, scale, CAUSAL: tl.constexpr):
    """P tile recomputed from the saved lse (0 where masked)."""
    s = dot(q, kt, tl.zeros((q.shape[0], kt.shape[1]), tl.float32)) * scale
    keep = (rn[None, :] < S) & (rm[:, None] < S)
    if CAUSAL:
        keep = keep & (rn[None, :] <= rm[:, None])
    return tl.where(keep, tl.exp(s - lse[:, None]), 0.0)


@triton.jit
def _flash_bwd_kernel(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dq_ptr, dk_ptr, dv_ptr, H, S, scale,
                      sqb, sqh, sqs, sqd, skb, skh, sks, skd, svb, svh, svs, svd, sdb, sdh, sds, sdd,
                      FOR_DQ: tl.constexpr, CAUSAL: tl.constexpr, B_: tl.constexpr, D: tl.constexpr):
    """FOR_DQ=False: program = one key tile, dK and dV over all query tiles; True: one query tile, dQ."""
    bh = tl.program_id(1)
    b, h = bh // H, bh % H
    rd = tl.arange(0, D)
    t = tl.program_id(0) * B_ + tl.arange(0, B_)
    q_base, k_base, v_base, do_base = q_ptr + b * sqb + h * sqh, k_ptr + b * skb + h * skh, v_ptr + b * svb + h * svh, do_ptr + b * sdb + h * sdh
    if FOR_DQ:
        q = tl.load(q_base + t[:, None] * sqs + rd[None, :] * sqd, mask=t[:, None] < S, other=0.0)
        do = tl.load(do_base + t[:, None] * sds + rd[None, :] * sdd, mask=t[:, None] < S, other=0.0)
        lse = tl.load(lse_ptr + bh * S + t, mask=t < S, other=0.0)
        delta = tl.load(delta_ptr + bh * S + t, mask=t < S, other=0.0)
        dq = tl.zeros((B_, D), tl.float32)
        for n0 in range(0, S, B_):
            rn = n0 + tl.arange(0, B_)
            kt = tl.load(k_base + rn[None, :] * sks + rd[:, None] * skd, mask=rn[None, :] < S, other=0.0)
            vt = tl.load(v_base + rn[None, :] * svs + rd[:, None] * svd, mask=rn[None, :] < S, other=0.0)
            p = _probs(q, kt, lse, t, rn, S, scale, CAUSAL)
            dp = dot(do, vt, tl.zeros((B_, B_), tl.float32))
            ds = p * (dp - delta[:, None])
            dq = dot(ds, tl.trans(kt).to(tl.float32), dq)
        tl.store(dq_ptr + bh * S * D + t[:, None] * D + rd[None, :], (dq * scale).to(dq_ptr.dtype.element_ty),
                 mask=t[:, None] < S)
    else:
        k = tl.load(k_base + t[:, None] * sks + rd[None, :] * skd, mask=t[:, None] < S, other=0.0)
        v = tl.load(v_base + t[:, None] * svs + rd[None, :] * svd, mask=t[:, None] < S, other=0.0)
        dk = tl.zeros((B_, D), tl.float32)
        dv = tl.zeros((B_, D), tl.float32)
        for m0 in range(0, S, B_):
            rm = m0 + tl.arange(0, B_)
            q = tl.load(q_base + rm[:, None] * sqs + rd[None, :] * sqd, mask=rm[:, None] < S, other=0.0)
            do = tl.load(do_base + rm[:, None] * sds + rd[None, :] * sdd, mask=rm[:, None] < S, other=0.0)
            lse = tl.load(lse_ptr + bh * S + rm, mask=rm < S, other=0.0)
            delta = tl.load(delta_ptr + bh * S + rm, mask=rm < S, other=0.0)
            p = _probs(q, tl.trans(k), lse, rm, t, S, scale, CAUSAL)  # [queries, keys]
            dv = dot(tl.trans(p), do.to(tl.float32), dv)
            dp = dot(do, tl.trans(v), tl.zeros((B_, B_), tl.float32))
            ds = p * (dp - delta[:, None])
            dk = dot(tl.trans(ds), q.to(tl.float32), dk)
        out = bh * S * D + t[:, None] * D + rd[None, :]
        tl.store(dk_ptr + out, (dk * scale).to(dk_ptr.dtype.element_ty), mask=t[:, None] < S)
        tl.store(dv_ptr + out, dv.to(dv_ptr.dtype.element_ty), mask=t[:, None] < S)


def flash_attention_bwd(do, q, k, v, o, lse, causal, sm_scale):
    B, H, S, D = q.shape
    scale = _scale(sm_scale, D)
    delta = torch.empty((B, H, S), dtype=torch.float32, device=q.device)
    grid = (triton.cdiv(S, 16), B * H)
    _delta_kernel[grid](o, do, delta, H, S, *_strides(o), *_strides(do), BM=16, D=D)
    dq, dk, dv = (torch.empty((B, H, S, D), dtype=q.dtype, device=q.device) for _ in range(3))
    args = (q, k, v, do, lse, delta, dq, dk, dv, H, S, scale, *_strides(q), *_strides(k), *_strides(v), *_strides(do))
    _flash_bwd_kernel[grid](*args, FOR_DQ=False, CAUSAL=causal, B_=16, D=D)
    _flash_bwd_kernel[grid](*args, FOR_DQ=True, CAUSAL=causal, B_=16, D=D)
    return dq, dk, dv


# ------------------------------------------------------------------------------------------- 08 memory

@triton.jit
def _row_loss_kernel(logits_ptr, targets_ptr, loss_ptr, lse_ptr, V, stride_l, BLOCK: tl.constexpr):
    """loss[row] = logsumexp(logits[row]) - logits[row, target[row]], streaming the row in blocks; the
    row's log-sum-exp is kept for the backward."""
    row = tl.program_id(0)
    m = tl.full((BLOCK,), float("-inf"), tl.float32)
    s = tl.zeros((BLOCK,), tl.float32)
    for v0 in range(0, V, BLOCK):
        cols = v0 + tl.arange(0, BLOCK)
        x = tl.load(logits_ptr + row * stride_l + cols, mask=cols < V, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        s = s * tl.exp(m - m_safe) + tl.exp(x - m_safe)
        m = m_new
    m_row = tl.max(m, axis=0)
    lse = m_row + tl.log(tl.sum(s * tl.exp(m - m_row), axis=0))
    target = tl.load(targets_ptr + row)
    tl.store(loss_ptr + row, lse - tl.load(logits_ptr + row * stride_l + target).to(tl.float32))
    tl.store(lse_ptr + row, lse)


@triton.jit
def _row_grad_kernel(logits_ptr, targets_ptr, lse_ptr, V, stride_l, scale, BLOCK: tl.constexpr):
    """logits[row] <- (softmax(logits[row]) - onehot(target[row])) * scale, in place."""
    row = tl.program_id(0)
    lse = tl.load(lse_ptr + row)
    target = tl.load(targets_ptr + row)
    for v0 in range(0, V, BLOCK):
        cols = v0 + tl.arange(0, BLOCK)
        z = tl.load(logits_ptr + row * stride_l + cols, mask=cols < V, other=0.0).to(tl.float32)
        g = tl.exp(z - lse) - tl.where(cols == target, 1.0, 0.0)
        tl.store(logits_ptr + row * stride_l + cols, (g * scale).to(logits_ptr.dtype.element_ty), mask=cols < V)


def _chunk(m, h, v):
    return max(1, min(m, max(16, -(-m * h // v))))  # about the size of x, at least 16 rows: never [m, v] at once


class _LinearCrossEntropy(torch.autograd.Function):
    """Keeps one float32 log-sum-exp per row; the backward recomputes each chunk's logits."""

    @staticmethod
    def forward(ctx, x, weight, targets):
        m, h = x.shape
        v = weight.shape[0]
        losses = torch.empty(m, dtype=torch.float32, device=x.device)
        lse = torch.empty(m, dtype=torch.float32, device=x.device)
        for i in range(0, m, _chunk(m, h, v)):
            logits = x[i:i + _chunk(m, h, v)] @ weight.T
            _row_loss_kernel[(logits.shape[0],)](logits, targets[i:], losses[i:], lse[i:], v, logits.stride(0),
                                                 BLOCK=1024)
            del logits
        ctx.save_for_backward(x, weight, targets, lse)
        return losses.sum() / m

    @staticmethod
    def backward(ctx, grad_loss):
        x, weight, targets, lse = ctx.saved_tensors
        m, h = x.shape
        v = weight.shape[0]
        dx, dw = torch.empty_like(x), torch.zeros_like(weight)
        scale = grad_loss.item() / m
        c = _chunk(m, h, v)
        for i in range(0, m, c):
            logits = x[i:i + c] @ weight.T
            _row_grad_kernel[(logits.shape[0],)](logits, targets[i:], lse[i:], v, logits.stride(0), scale, BLOCK=1024)
            torch.mm(logits, weight, out=dx[i:i + c])
            dw.addmm_(logits.T, x[i:i + c])
            del logits
        return dx, dw, None


def linear_cross_entropy(x, weight, targets):
    return _LinearCrossEntropy.apply(x, weight, targets)
