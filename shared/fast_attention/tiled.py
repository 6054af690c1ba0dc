"""Tiled attention (FlashAttention, Dao et al. 2022, in plain PyTorch), in FlashAttention-2's loop order (Dao 2024):
query blocks outside and key blocks inside, a running max m, sum l and output accumulator per query row, divided by
l once at the end, and never the (T_q, T_k) scores. The forward saves only the output and the log-sum-exp per row;
the backward computes D = rowsum(dO * O) once and recomputes each tile from them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from ..validation import (
    check_attention_inputs,
    check_bool,
    check_float_tensor,
    check_instance,
    check_positive_int,
    describe,
)
from .online_softmax import rescale


@dataclass
class TileCounts:
    """How many (query block, key block) tiles a forward computed, and how many the causal mask let it skip."""

    computed: int = 0
    skipped: int = 0


def _above_diagonal(i0: int, bq: int, j0: int, T_q: int, T_k: int) -> bool:
    """True if every key of the tile lies after every query's last visible key (queries end at the last key)."""
    last_query = min(i0 + bq, T_q) - 1
    return j0 > last_query + (T_k - T_q)


def block_counts(T_q: int, T_k: int, block_q: int, block_k: int, causal: bool) -> TileCounts:
    """The tiles a forward over (T_q, T_k) computes and skips, without computing them (for plots and tables)."""
    for name, value in (("T_q", T_q), ("T_k", T_k), ("block_q", block_q), ("block_k", block_k)):
        check_positive_int(name, value)
    check_bool("causal", causal)
    _check_causal_lengths(causal, T_q, T_k)
    counts = TileCounts()
    for i0 in range(0, T_q, block_q):
        for j0 in range(0, T_k, block_k):
            skip = causal and _above_diagonal(i0, block_q, j0, T_q, T_k)
            counts.skipped += skip
            counts.computed += not skip
    return counts


def _tile_keep(mask: Tensor | None, causal: bool, i0: int, i1: int, j0: int, j1: int, T_q: int, T_k: int,
               device: torch.device) -> Tensor | None:
    """The tile's bool mask (True = may attend), (..., i1 - i0, j1 - j0), or None when every entry may attend."""
    keep = None if mask is None else mask[..., i0:i1, j0:j1]
    if causal and j1 - 1 > i0 + (T_k - T_q):  # some key of the tile lies after some query's last visible key
        rows = torch.arange(i0, i1, device=device)[:, None] + (T_k - T_q)  # (bq, 1)
        below = rows >= torch.arange(j0, j1, device=device)[None, :]  # (bq, bk)
        keep = below if keep is None else keep & below
    return keep


def _check_causal_lengths(causal: bool, T_q: int, T_k: int) -> None:
    """causal=True lines the last query up with the last key, so it needs at least as many keys as queries."""
    if causal and T_k < T_q:
        raise ValueError(f"causal=True needs T_k >= T_q (the last query lines up with the last key), got T_q={T_q} "
                         f"and T_k={T_k}")


def _check(q, k, v, mask, causal, block_q, block_k) -> Tensor | None:
    """Validate tiled attention's arguments; return the mask expanded (a view) to (..., T_q, T_k), or None."""
    check_attention_inputs(q, k, v, mask)
    if not q.shape[:-2] == k.shape[:-2] == v.shape[:-2]:
        raise ValueError(f"q, k and v must share their batch dims (..., e.g. B, H), got {tuple(q.shape)}, "
                         f"{tuple(k.shape)}, {tuple(v.shape)}: repeat shared key/value heads with repeat_kv first")
    check_bool("causal", causal)
    check_positive_int("block_q", block_q)
    check_positive_int("block_k", block_k)
    _check_causal_lengths(causal, q.size(-2), k.size(-2))
    return None if mask is None else mask.expand(*q.shape[:-1], k.size(-2))  # a view: no (T_q, T_k) copy


def tiled_attention_forward(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, causal: bool = False,
                            block_q: int = 64, block_k: int = 64,
                            counts: TileCounts | None = None) -> tuple[Tensor, Tensor]:
    """q (..., T_q, d_k), k (..., T_k, d_k), v (..., T_k, d_v) -> (out (..., T_q, d_v), lse (..., T_q)).

    lse is the log-sum-exp of each row's scores (-inf for a row with every key masked, whose output is 0).
    """
    mask = _check(q, k, v, mask, causal, block_q, block_k)
    check_instance("counts", counts, TileCounts, optional=True)
    T_q, T_k = q.size(-2), k.size(-2)
    out = q.new_empty(*q.shape[:-1], v.size(-1))  # (..., T_q, d_v)
    lse = q.new_empty(q.shape[:-1])  # (..., T_q)
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        q_i = q[..., i0:i1, :] / math.sqrt(q.size(-1))  # (..., bq, d_k), scaled once
        m = q.new_full(q_i.shape[:-1], -math.inf)  # (..., bq): running max
        l = q.new_zeros(q_i.shape[:-1])  # noqa: E741 (..., bq): running sum of exp(s - m)
        acc = q.new_zeros(*q_i.shape[:-1], v.size(-1))  # (..., bq, d_v): running sum of exp(s - m) v
        for j0 in range(0, T_k, block_k):
            if causal and _above_diagonal(i0, block_q, j0, T_q, T_k):
                if counts is not None:
                    counts.skipped += 1
                continue
            j1 = min(j0 + block_k, T_k)
            s = q_i @ k[..., j0:j1, :].transpose(-2, -1)  # (..., bq, bk): one tile of scores
            keep = _tile_keep(mask, causal, i0, i1, j0, j1, T_q, T_k, q.device)
            if keep is not None:
                s = s.masked_fill(~keep, -math.inf)
            m, alpha, p = rescale(m, s)  # alpha (..., bq) = exp(m_old - m_new), p (..., bq, bk)
            l = alpha * l + p.sum(dim=-1)  # noqa: E741
            acc = alpha[..., None] * acc + p @ v[..., j0:j1, :]
            if counts is not None:
                counts.computed += 1
        empty = l == 0  # every key of the row masked
        out[..., i0:i1, :] = acc / torch.where(empty, 1.0, l)[..., None]
        lse[..., i0:i1] = torch.where(empty, -math.inf, torch.where(torch.isneginf(m), 0.0, m) + torch.log(l))
    return out, lse


def tiled_attention_backward(q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor, d_out: Tensor,
                             mask: Tensor | None = None, causal: bool = False, block_q: int = 64,
                             block_k: int = 64) -> tuple[Tensor, Tensor, Tensor]:
    """(dq, dk, dv) from the forward's out and lse: each tile's P = exp(S - lse) is recomputed, not stored.

    dS = P * (dP - D) with dP = dO V^T and D = rowsum(dO * O) (equal to rowsum(P * dP), but needs no P).
    """
    mask = _check(q, k, v, mask, causal, block_q, block_k)
    for name, x, shape in (("out", out, (*q.shape[:-1], v.size(-1))), ("lse", lse, q.shape[:-1]),
                           ("d_out", d_out, (*q.shape[:-1], v.size(-1)))):
        check_float_tensor(name, x)
        if x.shape != shape:
            raise ValueError(f"{name} must have shape {tuple(shape)} (the forward's, from q {tuple(q.shape)} and v "
                             f"{tuple(v.shape)}), got {describe(x)}")
    T_q, T_k, scale = q.size(-2), k.size(-2), 1.0 / math.sqrt(q.size(-1))
    D = (d_out * out).sum(dim=-1)  # (..., T_q)
    lse = torch.where(torch.isneginf(lse), math.inf, lse)  # a fully masked row: P = exp(-inf) = 0, not NaN
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    for j0 in range(0, T_k, block_k):
        j1 = min(j0 + block_k, T_k)
        k_j, v_j = k[..., j0:j1, :], v[..., j0:j1, :]  # (..., bk, d_k), (..., bk, d_v)
        for i0 in range(0, T_q, block_q):
            if causal and _above_diagonal(i0, block_q, j0, T_q, T_k):
                continue
            i1 = min(i0 + block_q, T_q)
            q_i, do_i = q[..., i0:i1, :], d_out[..., i0:i1, :]
            s = (q_i @ k_j.transpose(-2, -1)) * scale  # (..., bq, bk), recomputed
            keep = _tile_keep(mask, causal, i0, i1, j0, j1, T_q, T_k, q.device)
            if keep is not None:
                s = s.masked_fill(~keep, -math.inf)
            p = torch.exp(s - lse[..., i0:i1, None])  # (..., bq, bk): the forward's probabilities
            dv[..., j0:j1, :] += p.transpose(-2, -1) @ do_i
            ds = p * (do_i @ v_j.transpose(-2, -1) - D[..., i0:i1, None])  # (..., bq, bk)
            dq[..., i0:i1, :] += (ds @ k_j) * scale
            dk[..., j0:j1, :] += (ds.transpose(-2, -1) @ q_i) * scale
    return dq, dk, dv


class TiledAttention(torch.autograd.Function):
    """Autograd for tiled attention: saves q, k, v, out and lse (linear in T), recomputes the tiles backward."""

    @staticmethod
    def forward(ctx, q, k, v, mask, causal, block_q, block_k, counts):
        out, lse = tiled_attention_forward(q, k, v, mask, causal, block_q, block_k, counts)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.mask, ctx.options = mask, (causal, block_q, block_k)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable  # the backward is not itself differentiable: no second derivatives
    def backward(ctx, d_out):
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = tiled_attention_backward(q, k, v, out, lse, d_out.contiguous(), ctx.mask, *ctx.options)
        return dq, dk, dv, None, None, None, None, None


def tiled_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, causal: bool = False,
                    block_q: int = 64, block_k: int = 64, counts: TileCounts | None = None) -> Tensor:
    """softmax(q k^T / sqrt(d_k)) v, (..., T_q, d_k) -> (..., T_q, d_v), tile by tile; differentiable.

    fp16/bf16 inputs are computed in fp32 and the output cast back. counts, if given, counts the forward's tiles.
    causal=True with T_q < T_k lines up the last query with the last key (bottom-right, as the course's
    causal_mask(T_q, n_keys=T_k)); F.scaled_dot_product_attention's is_causal lines up the first ones (top-left).
    """
    mask_view = _check(q, k, v, mask, causal, block_q, block_k)
    low = q.dtype in (torch.float16, torch.bfloat16)
    args = (q.float(), k.float(), v.float()) if low else (q, k, v)
    out = TiledAttention.apply(*args, mask_view, causal, block_q, block_k, counts)
    return out.to(q.dtype) if low else out
