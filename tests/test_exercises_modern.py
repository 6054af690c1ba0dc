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


def _newton_schulz(G, steps, coefficients, eps, normalise=True, transpose_back=True, batched_T=False):
    """A learner-style answer, written independently of the checker's reference, with switches for mistakes."""
    a, b, c = coefficients
    X = G / G.flatten(-2).norm(dim=-1)[..., None, None].clamp(min=eps) if normalise else G
    tall = G.shape[-2] > G.shape[-1]
    swap = {False: lambda t: t.transpose(-2, -1), True: lambda t: t.T,  # "permute": what .T does, with no warning
            "permute": lambda t: t.permute(*reversed(range(t.dim())))}[batched_T]
    if tall:
        X = swap(X)
    for _ in range(steps):
        A = X @ X.transpose(-2, -1)
        B = b * A + c * A @ A
        X = a * X + B @ X
    if tall and transpose_back:
        X = swap(X)
    return X


def test_newton_schulz_accepts_right_answers(capsys):
    accepts(ex.check_newton_schulz, _newton_schulz, capsys)

    def without_transpose(G, steps, coefficients, eps):  # X^T X on the right: the same polynomial, a bigger Gram
        a, b, c = coefficients
        X = G / torch.linalg.matrix_norm(G, keepdim=True).clamp(min=eps)
        for _ in range(steps):
            A = X.mT @ X
            X = a * X + X @ (b * A + c * A @ A)
        return X

    accepts(ex.check_newton_schulz, without_transpose, capsys)


def test_newton_schulz_reference_is_what_torch_muon_computes():
    """One torch.optim.Muon step with no momentum, decay or lr scaling moves a wide matrix by exactly NS(grad)."""
    from shared.exercises.modern import MUON_COEFFICIENTS, _reference_newton_schulz
    from shared.muon import newton_schulz

    torch.manual_seed(0)
    weight = torch.nn.Parameter(torch.randn(8, 16))
    weight.grad = torch.randn(8, 16)
    before = weight.detach().clone()
    torch.optim.Muon([weight], lr=1.0, momentum=0.0, nesterov=False, weight_decay=0.0, adjust_lr_fn="original").step()
    update = before - weight.detach()
    ours = _reference_newton_schulz(weight.grad, 5, MUON_COEFFICIENTS, 1e-7)
    # with no mistake chosen, the mistakes' model computes the answer the checker expects: the course Muon's own
    assert torch.allclose(ours, newton_schulz(weight.grad, 5, MUON_COEFFICIENTS, 1e-7), atol=1e-6)
    assert (update - ours).abs().max() < 0.05  # torch iterates in bfloat16: about 3 significant digits
    u, s, vh = torch.linalg.svd(weight.grad, full_matrices=False)
    singular = torch.linalg.svdvals(ours)
    assert singular.min() > 0.5 and singular.max() < 1.3  # near 1 everywhere, not exactly U V^T
    assert (ours - u @ vh).abs().max() < 0.5


@pytest.mark.parametrize("mistake, words", [
    (lambda G, s, k, e: _newton_schulz(G, s, k, e, normalise=False), "divide each matrix by its norm"),
    (lambda G, s, k, e: _newton_schulz(G / G.norm(), s, k, e, normalise=False), "its OWN norm"),
    (lambda G, s, k, e: _newton_schulz(G, s, (3.4445, -4.7750, 2.0315), e), "not Muon's fixed"),
    (lambda G, s, k, e: _newton_schulz(G, s, k[::-1], e), "in the order (a, b, c)"),
    (lambda G, s, k, e: _newton_schulz(G, 5, k, e), "not a fixed 5"),
    (lambda G, s, k, e: _newton_schulz(G, s, k, e, transpose_back=False), "transpose the result back"),
    (lambda G, s, k, e: _newton_schulz(G, s, k, e, batched_T=True), "reverses every axis"),
    (lambda G, s, k, e: _newton_schulz(G, s, k, 0.0), "0 / 0 is NaN"),  # eps ignored: the zero matrix
    (lambda G, s, k, e: _newton_schulz(G.bfloat16(), s, k, e), "iterates in bfloat16"),
    (lambda G, s, k, e: torch.full_like(G, float("nan")), "the iteration blew up"),  # not a variant's hint
    (lambda G, s, k, e: _newton_schulz(G, s, k, e) if G.dim() == 2 and G.shape[0] < G.shape[1] else  # right on the
     torch.full_like(G, float("nan")), "the iteration blew up"),  # first case, NaN on the next: no blown-up variant
    (lambda G, s, k, e: torch.full_like(G, float("inf")), "the iteration blew up"),
    (lambda G, s, k, e: _newton_schulz(G.double(), s, k, e), "X.to(G.dtype)"),
    (lambda G, s, k, e: _newton_schulz(G.bfloat16(), s, k, e).float(), "to about 2 digits"),
    (lambda G, s, k, e: _newton_schulz(G, s, k, e, batched_T="permute"), "with .mT"),  # .T, without its warning
])
def test_newton_schulz_names_the_mistake(mistake, words, capsys):
    rejects(ex.check_newton_schulz, mistake, capsys, words)


def test_newton_schulz_gram_on_the_wrong_side(capsys):
    def wrong_side(G, steps, coefficients, eps):
        a, b, c = coefficients
        X = G / torch.linalg.matrix_norm(G, keepdim=True)
        tall = G.shape[-2] > G.shape[-1]
        X = X.mT if tall else X
        for _ in range(steps):
            A = X.mT @ X if X.shape[-2] == X.shape[-1] else X @ X.mT
            X = a * X + (b * A + c * A @ A) @ X
        return X.mT if tall else X

    rejects(ex.check_newton_schulz, wrong_side, capsys, "multiplied from the LEFT")


def test_a_zero_matrix_is_told_from_a_zero_row():
    from shared.exercises.modern import _has_zero_matrix

    zero_row = torch.ones(4, 6)
    zero_row[2] = 0
    assert not _has_zero_matrix(zero_row) and not _has_zero_matrix(torch.stack([zero_row, torch.ones(4, 6)]))
    assert _has_zero_matrix(torch.zeros(3, 4)) and _has_zero_matrix(torch.stack([torch.ones(3, 4), torch.zeros(3, 4)]))
