"""Notebook 10's exercise checkers accept right answers and reject plausible wrong ones with the right hint."""

import pytest
import torch
import torch.nn.functional as F

from shared import exercises as ex
from shared.norms import RMSNorm

from .helpers import accepts, rejects, verdict

ALL = ex.CHECKERS["10"]


@pytest.mark.parametrize("check", ALL, ids=lambda c: c.__name__)
def test_stub_wrong_shape_and_crash_are_feedback(check, capsys):
    def stub(*args):
        raise NotImplementedError

    result, out = verdict(check, stub, capsys)
    assert result is False and "not solved yet" in out
    result, out = verdict(check, lambda *a: torch.zeros(3, 1, 7), capsys)
    assert result is False and "shape" in out
    result, out = verdict(check, lambda *a: 1 / 0, capsys)
    assert result is False and "ZeroDivisionError" in out and "Traceback" not in out


def test_rms_norm(capsys):
    def with_module(x, weight, eps):
        norm = RMSNorm(x.size(-1), eps=eps)
        norm.weight.data.copy_(weight)
        return norm(x)

    accepts(ex.check_rms_norm, lambda x, w, eps: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w, capsys)
    accepts(ex.check_rms_norm, with_module, capsys)
    accepts(ex.check_rms_norm, lambda x, w, eps: F.rms_norm(x, x.shape[-1:], w, eps), capsys)
    rejects(ex.check_rms_norm, lambda x, w, eps: F.layer_norm(x, x.shape[-1:], w, None, eps), capsys,
            "does not subtract the mean")
    rejects(ex.check_rms_norm, lambda x, w, eps: x / (x.pow(2).mean(-1, keepdim=True).sqrt() + eps) * w, capsys,
            "eps goes inside")
    rejects(ex.check_rms_norm, lambda x, w, eps: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps), capsys,
            "learned gain")
    rejects(ex.check_rms_norm, lambda x, w, eps: x / (x.pow(2).mean(-1, keepdim=True) + eps) * w, capsys,
            "square ROOT")
    rejects(ex.check_rms_norm, lambda x, w, eps: x.pow(2).mean(-1, keepdim=True).sqrt(), capsys, "not the root mean")


def test_swiglu(capsys):
    accepts(ex.check_swiglu, lambda x, g, u, d: (F.silu(x @ g.T) * (x @ u.T)) @ d.T, capsys)
    accepts(ex.check_swiglu, lambda x, g, u, d: F.linear(F.silu(F.linear(x, g)) * F.linear(x, u), d), capsys)
    rejects(ex.check_swiglu, lambda x, g, u, d: (F.silu(x @ u.T) * (x @ g.T)) @ d.T, capsys, "GATE branch")
    rejects(ex.check_swiglu, lambda x, g, u, d: (torch.sigmoid(x @ g.T) * (x @ u.T)) @ d.T, capsys, "sigmoid")
    rejects(ex.check_swiglu, lambda x, g, u, d: (F.gelu(x @ g.T) * (x @ u.T)) @ d.T, capsys, "not GELU")
    rejects(ex.check_swiglu, lambda x, g, u, d: F.silu(x @ g.T) * (x @ u.T), capsys, "w_down")


def test_repeat_kv(capsys):
    accepts(ex.check_repeat_kv, lambda x, n: x.repeat_interleave(n, dim=1), capsys)
    accepts(ex.check_repeat_kv, lambda x, n: x[:, :, None].expand(-1, -1, n, -1, -1).flatten(1, 2), capsys)
    rejects(ex.check_repeat_kv, lambda x, n: x.repeat(1, n, 1, 1), capsys, "repeat_interleave")
    rejects(ex.check_repeat_kv, lambda x, n: x.repeat_interleave(n, dim=2), capsys, "not the time axis")
    rejects(ex.check_repeat_kv, lambda x, n: x.repeat_interleave(n, dim=0), capsys, "not the batch axis")
