"""The online softmax (Milakov & Gimelshein 2018): one pass over blocks of scores, keeping a running maximum m
and a running sum l of exp(score - m), rescaled by exp(m_old - m_new) whenever the maximum grows.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..validation import check_float_tensor, check_positive_int, describe


def safe_max(m: Tensor) -> Tensor:
    """The running max with -inf (a row that has seen only masked scores) read as 0, so exp(x - m) is 0, not NaN."""
    return torch.where(torch.isneginf(m), torch.zeros_like(m), m)


def rescale(m: Tensor, scores: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Running max m (...) and a block's scores (..., b) -> (m_new, alpha = exp(m - m_new), p = exp(scores - m_new)).

    alpha <= 1 rescales everything summed so far to the new maximum; -inf scores (masked) get p = 0.
    """
    m_new = torch.maximum(m, scores.amax(dim=-1))  # the running max: the old one, or this block's if larger
    base = safe_max(m_new)[..., None]  # (..., 1)
    return m_new, torch.exp(m - base[..., 0]), torch.exp(scores - base)


def online_softmax_update(m: Tensor, l: Tensor, scores: Tensor) -> tuple[Tensor, Tensor]:  # noqa: E741 (paper's l)
    """One block: running max m (...), running sum l (...), the block's scores (..., b) -> (m_new, l_new).

    l is the sum of exp(score - m) over every score seen so far; -inf scores (masked) add nothing.
    """
    for name, x in (("m", m), ("l", l)):
        check_float_tensor(name, x, min_dim=0)
    check_float_tensor("scores", scores)
    if scores.shape[:-1] != m.shape or m.shape != l.shape:
        raise ValueError(f"m and l must have the shape of scores without its last dim, got m {describe(m)}, "
                         f"l {describe(l)} and scores {describe(scores)}")
    m_new, alpha, p = rescale(m, scores)
    return m_new, alpha * l + p.sum(dim=-1)  # the old sum rescaled to the new max, plus this block's terms


def online_softmax(x: Tensor, block_size: int) -> Tensor:
    """softmax(x, dim=-1) for x (..., n), computed block by block: one pass for (m, l), one to normalise."""
    check_float_tensor("x", x)
    check_positive_int("block_size", block_size)
    m = torch.full(x.shape[:-1], -torch.inf, dtype=x.dtype, device=x.device)  # (...,)
    l = torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)  # noqa: E741
    for start in range(0, x.size(-1), block_size):
        m, l = online_softmax_update(m, l, x[..., start:start + block_size])  # noqa: E741
    return torch.exp(x - safe_max(m)[..., None]) / l[..., None]
