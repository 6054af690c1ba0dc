"""Notebook 15's exercise checkers accept right answers and reject the usual mistakes with the right hint."""

import math

import pytest
import torch

from shared import exercises as ex
from shared.fast_attention import tiled_attention_forward

from .helpers import accepts, rejects, verdict

ALL = ex.CHECKERS["15"]


@pytest.mark.parametrize("check", ALL, ids=lambda c: c.__name__)
def test_stub_wrong_shape_and_crash_are_feedback(check, capsys):
    def stub(*args):
        raise NotImplementedError

    result, out = verdict(check, stub, capsys)
    assert result is False and "not solved yet" in out
    result, out = verdict(check, lambda *a: torch.zeros(3, 1, 7), capsys)
    assert result is False and "expected a tuple" in out
    result, out = verdict(check, lambda *a: 1 / 0, capsys)
    assert result is False and "ZeroDivisionError" in out and "Traceback" not in out


def step(m, l, acc, s, v, mistake=None):  # noqa: E741
    """A learner's step; `mistake` plants one of the usual ones."""
    m_new = s.amax(-1) if mistake == "drop running max" else torch.maximum(m, s.amax(-1))
    safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
    if mistake == "nan":
        safe = m_new
    block = s.amax(-1)
    p = torch.exp(s - (torch.where(torch.isneginf(block), 0.0, block) if mistake == "block max" else safe)[..., None])
    alpha = torch.exp(m - safe)
    l_new = (l if mistake == "l" else alpha * l) + p.sum(-1)
    acc_new = (acc if mistake == "acc" else alpha[..., None] * acc) + p @ v
    return m_new, l_new, acc_new


def test_online_softmax_step(capsys):
    accepts(ex.check_online_softmax_step, step, capsys)
    rejects(ex.check_online_softmax_step, lambda *a: step(*a, mistake="l"), capsys, "l_new", "rescale the old sum")
    rejects(ex.check_online_softmax_step, lambda *a: step(*a, mistake="acc"), capsys, "acc_new",
            "accumulator needs the same rescaling")
    rejects(ex.check_online_softmax_step, lambda *a: step(*a, mistake="block max"), capsys, "RUNNING maximum")
    rejects(ex.check_online_softmax_step, lambda *a: step(*a, mistake="nan"), capsys, "NaN", "read a -inf maximum")
    rejects(ex.check_online_softmax_step, lambda *a: step(*a, mistake="drop running max"), capsys, "m_new",
            "m_new = max(m, this block's max), so that")


def tiled(q, k, v, block, mistake=None):
    """A learner's tiled forward built on `step`; `mistake` plants one of the usual ones."""
    scale = 1.0 if mistake == "scale" else 1 / math.sqrt(q.size(-1))
    outs, lses = [], []
    for i0 in range(0, q.size(-2), block):
        q_i = q[..., i0:i0 + block, :] * scale
        m = torch.full(q_i.shape[:-1], -math.inf)
        l, acc = torch.zeros(q_i.shape[:-1]), torch.zeros(*q_i.shape[:-1], v.size(-1))  # noqa: E741
        for j0 in range(0, k.size(-2), block):
            s = q_i @ k[..., j0:j0 + block, :].transpose(-2, -1)
            m, l, acc = step(m, l, acc, s, v[..., j0:j0 + block, :], mistake)  # noqa: E741
        outs.append(acc if mistake == "divide" else acc / l[..., None])
        lses.append(torch.log(l) if mistake == "lse" else m + torch.log(l))
    return torch.cat(outs, dim=-2), torch.cat(lses, dim=-1)


def test_tiled_forward(capsys):
    accepts(ex.check_tiled_forward, tiled, capsys)
    accepts(ex.check_tiled_forward, lambda q, k, v, b: tiled_attention_forward(q, k, v, block_q=b, block_k=b), capsys)
    for mistake, hint in {"divide": "divide the accumulator", "scale": "1 / sqrt(d_k)", "lse": "m + log(l)",
                          "acc": "same rescaling", "l": "rescale the old sum", "block max": "RUNNING maximum"}.items():
        rejects(ex.check_tiled_forward, lambda q, k, v, b, mistake=mistake: tiled(q, k, v, b, mistake), capsys, hint)
    rejects(ex.check_tiled_forward, lambda q, k, v, b: tiled(q, k, v, b)[0], capsys, "expected a tuple (out, lse)")
