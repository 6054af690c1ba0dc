"""Checkers of notebook 07: accept the reference, reject plausible mistakes with the right hint."""

import pytest
import torch

from shared.exercises.training import check_clip_global_norm, check_noam_lr, check_smoothed_targets, reference_noam_lr
from shared.training import noam_schedule

from .helpers import verdict


@pytest.mark.parametrize("check", [check_noam_lr, check_clip_global_norm, check_smoothed_targets])
def test_stub_crash_and_non_function(check, capsys):
    def stub(*args):
        raise NotImplementedError

    result, out = verdict(check, stub, capsys)
    assert result is False and "not solved yet" in out
    result, out = verdict(check, lambda *a: 1 / 0, capsys)
    assert result is False and "ZeroDivisionError" in out
    result, out = verdict(check, "noam", capsys)
    assert result is False and "pass your function itself" in out


def test_noam_lr(capsys):
    assert reference_noam_lr(10, 64, 10) == pytest.approx(noam_schedule(64, 10)(9, 0.0))  # step 1 = index 0
    result, out = verdict(check_noam_lr, reference_noam_lr, capsys)
    assert result and out.startswith("✓")
    mistakes = {
        "use min": lambda s, d, w: d**-0.5 * max(s**-0.5, s * w**-1.5),
        "d_model ** -0.5": lambda s, d, w: min(s**-0.5, s * w**-1.5),
        "not step + 1": lambda s, d, w: reference_noam_lr(s + 1, d, w),
        "warmup ** -1.5": lambda s, d, w: d**-0.5 * min(s**-0.5, s * w**-0.5),
        "a Python number": lambda s, d, w: [reference_noam_lr(s, d, w)],
    }
    for hint, fn in mistakes.items():
        result, out = verdict(check_noam_lr, fn, capsys)
        assert result is False and hint in out, out


def reference_clip(grads, max_norm):
    total = torch.cat([g.flatten() for g in grads]).norm().item()
    return [g * min(1.0, max_norm / total) for g in grads], total


def test_clip_global_norm(capsys):
    result, out = verdict(check_clip_global_norm, reference_clip, capsys)
    assert result and out.startswith("✓")

    def per_tensor(grads, max_norm):
        return [g * min(1.0, max_norm / g.norm().item()) for g in grads], reference_clip(grads, max_norm)[1]

    def always_scale(grads, max_norm):
        total = reference_clip(grads, max_norm)[1]
        return [g * max_norm / total for g in grads], total

    def sum_of_norms(grads, max_norm):
        return reference_clip(grads, max_norm)[0], sum(g.norm().item() for g in grads)

    def in_place(grads, max_norm):
        total = reference_clip(grads, max_norm)[1]
        return [g.mul_(min(1.0, max_norm / total)) for g in grads], total

    for fn, hint in ((per_tensor, "not each tensor by its own norm"), (always_scale, "leave the gradients unchanged"),
                     (sum_of_norms, "not the sum of the per-tensor norms"), (in_place, "changed the input tensors")):
        result, out = verdict(check_clip_global_norm, fn, capsys)
        assert result is False and hint in out, out


def test_smoothed_targets(capsys):
    def reference(targets, V, eps):
        out = torch.full((len(targets), V), eps / V)
        out[torch.arange(len(targets)), targets] += 1 - eps
        return out

    result, out = verdict(check_smoothed_targets, reference, capsys)
    assert result and out.startswith("✓")

    def over_others(targets, V, eps):
        out = torch.full((len(targets), V), eps / (V - 1))
        out[torch.arange(len(targets)), targets] = 1 - eps
        return out

    def no_share(targets, V, eps):
        out = torch.full((len(targets), V), eps / V)
        out[torch.arange(len(targets)), targets] = 1 - eps
        return out

    for fn, hint in ((over_others, "V - 1 other classes"), (no_share, "also gets its share"),
                     (lambda t, V, e: reference(t, V, e).T, "rows are examples")):
        result, out = verdict(check_smoothed_targets, fn, capsys)
        assert result is False and hint in out, out
