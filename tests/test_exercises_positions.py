"""Notebook 09's exercise checkers accept right answers and reject plausible wrong ones with the right hint."""

import pytest
import torch

from shared import exercises as ex
from shared.positions import randomized_positions

from .helpers import accepts, rejects, verdict


@pytest.mark.parametrize("check", ex.CHECKERS["09"], ids=lambda c: c.__name__)
def test_stub_and_crash_are_feedback(check, capsys):
    def stub(*args):
        raise NotImplementedError

    result, out = verdict(check, stub, capsys)
    assert result is False and "not solved yet" in out
    result, out = verdict(check, lambda *a: 1 / 0, capsys)
    assert result is False and "ZeroDivisionError" in out and "Traceback" not in out
    result, out = verdict(check, lambda *a: torch.zeros(3, 1, 7), capsys)
    assert result is False and "shape" in out


def rope_complex(x, positions, base):
    """An independent solution: pairs as complex numbers times exp(i m theta)."""
    d = x.size(-1)
    z = torch.view_as_complex(x.double().reshape(-1, d // 2, 2).contiguous())
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    return torch.view_as_real(z * torch.polar(torch.ones_like(theta), positions.double()[:, None] * theta)).reshape(
        x.shape).float()


def rope_half(x, positions, base):
    d = x.size(-1)
    angles = positions[:, None].float() * base ** (-torch.arange(0, d, 2).float() / d)
    a, b = x[:, : d // 2], x[:, d // 2 :]
    return torch.cat([a * angles.cos() - b * angles.sin(), a * angles.sin() + b * angles.cos()], -1)


def rope_loop(x, positions, base, sign=1.0, step=2):
    out = x.clone()
    d = x.size(-1)
    for t in range(x.size(0)):
        for i in range(d // 2):
            angle = sign * positions[t].item() * base ** (-step * i / d)
            a, b = x[t, 2 * i].item(), x[t, 2 * i + 1].item()
            out[t, 2 * i] = a * torch.cos(torch.tensor(angle)) - b * torch.sin(torch.tensor(angle))
            out[t, 2 * i + 1] = a * torch.sin(torch.tensor(angle)) + b * torch.cos(torch.tensor(angle))
    return out


def test_rope_one_head(capsys):
    accepts(ex.check_rope_one_head, rope_complex, capsys)
    accepts(ex.check_rope_one_head, rope_loop, capsys)
    rejects(ex.check_rope_one_head, rope_half, capsys, "neighbours")
    rejects(ex.check_rope_one_head, lambda x, p, b: rope_loop(x, p, b, sign=-1.0), capsys, "rotate by +angle")
    rejects(ex.check_rope_one_head, lambda x, p, b: rope_loop(x, p, b, step=1), capsys, "steps of 2/d")
    rejects(ex.check_rope_one_head, lambda x, p, b: x, capsys, "differ")


def slopes_paper(n):
    def power(k):
        return [2 ** (-8 * (h + 1) / k) for h in range(k)]

    below = 1
    while below * 2 <= n:
        below *= 2
    return power(below) + power(2 * below)[0::2][: n - below]


def test_alibi_slopes(capsys):
    accepts(ex.check_alibi_slopes, slopes_paper, capsys)
    accepts(ex.check_alibi_slopes, lambda n: torch.tensor(slopes_paper(n)), capsys)
    rejects(ex.check_alibi_slopes, lambda n: [2 ** (-8 * (h + 1) / n) for h in range(n)], capsys, "power of two")
    rejects(ex.check_alibi_slopes, lambda n: [2 ** (-8 * h / n) for h in range(n)], capsys, "start at h + 1")
    rejects(ex.check_alibi_slopes, lambda n: slopes_paper(n)[::-1], capsys, "largest slope first")
    rejects(ex.check_alibi_slopes, lambda n: [2.0 ** -(h + 1) for h in range(n)], capsys, "depends on the number")


def test_randomized_positions(capsys):
    accepts(ex.check_randomized_positions, randomized_positions, capsys)
    accepts(ex.check_randomized_positions,
            lambda b, n, m: torch.stack([torch.randperm(m)[:n].sort().values for _ in range(b)]), capsys)
    rejects(ex.check_randomized_positions, lambda b, n, m: torch.randint(0, m, (b, n)), capsys, "strictly increasing")
    rejects(ex.check_randomized_positions, lambda b, n, m: torch.randperm(m)[:n].sort().values.repeat(b, 1), capsys,
            "ids ever appear")
    rejects(ex.check_randomized_positions, lambda b, n, m: torch.arange(n).repeat(b, 1), capsys, "ids ever appear")
    rejects(ex.check_randomized_positions, lambda b, n, m: randomized_positions(b, n, m).float(), capsys, "dtype")
    rejects(ex.check_randomized_positions, lambda b, n, m: randomized_positions(b, n, m) + 1, capsys, "expected 0..")


def test_checker_leaves_global_random_state_alone(capsys):
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    ex.check_randomized_positions(randomized_positions)
    assert torch.equal(torch.rand(3), expected)
