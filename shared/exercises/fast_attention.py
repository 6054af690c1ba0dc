"""Exercise checkers for notebook 15 (making attention fast): one step of the online softmax with its output
accumulator, and a whole tiled attention forward.

Import them from `shared.exercises`; see `shared.exercises.feedback` for how a checker reports.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ..fast_attention import tiled_attention_forward
from .feedback import Checker, exercise, random_tensor

_NAN_HINT = ("a row whose scores are all -inf (masked) so far has m = -inf, and exp(-inf - (-inf)) is NaN: read a "
             "-inf maximum as 0 before subtracting it, e.g. torch.where(torch.isneginf(m_new), 0.0, m_new).")
_NO_RESCALE_L = "rescale the old sum to the new maximum before adding: l_new = exp(m - m_new) * l + p.sum(-1)."
_NO_RESCALE_ACC = ("the accumulator needs the same rescaling as the sum: "
                   "acc_new = exp(m - m_new)[..., None] * acc + p @ v.")
_DROP_RUNNING_MAX = ("keep the running maximum: m_new = max(m, this block's max), so that a block whose scores are "
                     "all below the old maximum does not lower it.")
_BLOCK_MAX = ("subtract the RUNNING maximum m_new = max(m, this block's max), not this block's own maximum: every "
              "term must be measured against the same m so that old and new terms add up.")


def _safe(m: Tensor) -> Tensor:
    return torch.where(torch.isneginf(m), torch.zeros_like(m), m)


def _step(m, l, acc, s, v, mistake: str | None = None):  # noqa: E741 (the paper's l)
    """One online-softmax step with its accumulator, or with one of the usual mistakes."""
    m_new = s.amax(dim=-1) if mistake == "drop running max" else torch.maximum(m, s.amax(dim=-1))
    base = _safe(s.amax(dim=-1) if mistake == "block max" else m_new)
    p = torch.exp(s - base[..., None])
    alpha = torch.exp(m - _safe(m_new))
    l_new = (l if mistake == "no rescale l" else alpha * l) + p.sum(dim=-1)
    acc_new = (acc if mistake == "no rescale acc" else alpha[..., None] * acc) + p @ v
    return m_new, l_new, acc_new


@exercise("one step of the online softmax")
def check_online_softmax_step(c: Checker) -> None:
    """fn(m (..., n), l (..., n), acc (..., n, d_v), s (..., n, b), v (..., b, d_v)) -> (m_new, l_new, acc_new)."""
    s1 = random_tensor(2, 3, 4, seed=1)
    v1, v2 = random_tensor(2, 4, 5, seed=2), random_tensor(2, 4, 5, seed=3)
    start = (torch.full((2, 3), -math.inf), torch.zeros(2, 3), torch.zeros(2, 3, 5))
    after_one = _step(*start, s1, v1)
    masked = s1.clone()
    masked[0, 1, :] = -math.inf  # a row whose first block is all masked
    masked[1, 2, 1:] = -math.inf
    cases = {
        "the first block (m = -inf, l = 0, acc = 0)": (*start, s1, v1),
        "a second block with a larger maximum": (*after_one, s1 + 2.0, v2),
        "a second block with a smaller maximum": (*after_one, s1 - 2.0, v2),
        "a first block with masked (-inf) scores": (*start, masked, v1),
    }
    for case, args in cases.items():
        expected = _step(*args)
        result = c.unpack(c.call(case, *(a.clone() for a in args)), case, ("m_new", "l_new", "acc_new"))
        hints = {"no rescale l": _NO_RESCALE_L, "no rescale acc": _NO_RESCALE_ACC, "block max": _BLOCK_MAX,
                 "drop running max": _DROP_RUNNING_MAX}
        variants = {name: _step(*args, mistake=name) for name in hints}
        for i, (name, shape) in enumerate((("m_new", "(..., n)"), ("l_new", "(..., n)"),
                                           ("acc_new", "(..., n, d_v)"))):
            c.close(result[i], expected[i], case, name, shape, nan_hint=_NAN_HINT, atol=1e-5,
                    variants=[(variants[k][i], hints[k]) for k in variants if not torch.allclose(
                        variants[k][i], expected[i], atol=1e-5, rtol=1e-4)])
        c.passed()


def _tiled_with(q, k, v, block, mistake=None):
    """A tiled forward with one of the usual mistakes -> (out, lse)."""
    scale = 1.0 if mistake == "no scale" else 1.0 / math.sqrt(q.size(-1))
    outs, lses = [], []
    for i0 in range(0, q.size(-2), block):
        q_i = q[..., i0:i0 + block, :] * scale
        m = torch.full(q_i.shape[:-1], -math.inf)
        l, acc = torch.zeros(q_i.shape[:-1]), torch.zeros(*q_i.shape[:-1], v.size(-1))  # noqa: E741
        for j0 in range(0, k.size(-2), block):
            s = q_i @ k[..., j0:j0 + block, :].transpose(-2, -1)
            m, l, acc = _step(m, l, acc, s, v[..., j0:j0 + block, :], mistake)  # noqa: E741
        outs.append(acc if mistake == "no divide" else acc / l[..., None])
        lses.append(torch.log(l) if mistake == "lse without m" else m + torch.log(l))
    return torch.cat(outs, dim=-2), torch.cat(lses, dim=-1)


@exercise("tiled attention forward")
def check_tiled_forward(c: Checker) -> None:
    """fn(q (B, H, T, d_k), k (B, H, T, d_k), v (B, H, T, d_v), block) -> (out (B, H, T, d_v), lse (B, H, T))."""
    hints = {
        "no divide": "divide the accumulator by the row's sum l at the end: out = acc / l[..., None].",
        "no rescale acc": _NO_RESCALE_ACC, "no rescale l": _NO_RESCALE_L, "block max": _BLOCK_MAX,
        "no scale": "scale the scores by 1 / sqrt(d_k), as notebook 01's attention does.",
        "lse without m": "l was summed relative to the running max m: the log-sum-exp is m + log(l).",
    }
    sizes = {"T=8, block=4": (2, 2, 8, 4, 3, 4), "T=10, block=4 (a short last block)": (1, 2, 10, 4, 5, 4),
             "T=3, block=8 (one block)": (1, 1, 3, 4, 2, 8), "T=1": (1, 1, 1, 4, 4, 2)}
    for case, (B, H, T, d_k, d_v, block) in sizes.items():
        q, k = random_tensor(B, H, T, d_k, seed=4) * 2, random_tensor(B, H, T, d_k, seed=5) * 2
        v = random_tensor(B, H, T, d_v, seed=6)
        expected = tiled_attention_forward(q, k, v, block_q=block, block_k=block)
        result = c.unpack(c.call(case, q.clone(), k.clone(), v.clone(), block), case, ("out", "lse"))
        wrong = {name: _tiled_with(q, k, v, block, name) for name in hints}
        for i, (name, shape) in enumerate((("out", "(B, H, T, d_v)"), ("lse", "(B, H, T)"))):
            c.close(result[i], expected[i], case, name, shape, atol=1e-5,
                    variants=[(wrong[n][i], hints[n]) for n in hints
                              if not torch.allclose(wrong[n][i], expected[i], atol=1e-5, rtol=1e-4)])
        c.passed()
