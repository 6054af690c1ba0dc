"""Gradient clipping in train(): the update really is clipped, after fp16's GradScaler has unscaled the gradients."""

import math

import pytest
import torch
from torch import nn

from shared.distributed import Precision
from shared.training import train

CLIP, LR = 0.5, 0.1


def loss_fn(model, batch):
    return model(batch).float().pow(2).mean(), 16  # the loss in fp32, as lm_loss's cross-entropy is


def one_step(grad_clip, precision="fp32"):
    """One SGD step on a Linear layer: (how far the weights moved / lr, the logged norm, the fp32 gradient norm)."""
    torch.manual_seed(0)
    model, batch = nn.Linear(32, 4), torch.randn(16, 32)
    loss_fn(model, batch)[0].backward()
    true_norm = torch.cat([p.grad.flatten() for p in model.parameters()]).norm().item()  # about 0.88
    model.zero_grad()
    before = [p.detach().clone() for p in model.parameters()]
    history = train(model, torch.optim.SGD(model.parameters(), LR), lambda step: batch, loss_fn, max_steps=1,
                    grad_clip=grad_clip, precision=precision, progress=False)
    moved = torch.cat([(p.detach() - b).flatten() for p, b in zip(model.parameters(), before)]).norm().item()
    return moved / LR, history.grad_norm[0], true_norm


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_the_update_is_clipped_to_grad_clip(precision):
    step, logged, true_norm = one_step(CLIP, precision)
    assert true_norm > 1.5 * CLIP  # clipping has something to do
    assert step == pytest.approx(CLIP, rel=1e-4)  # SGD moved by lr * the clipped gradient
    assert logged == pytest.approx(true_norm, rel=1e-3)  # the norm before clipping, unscaled
    step, logged, _ = one_step(None, precision)  # None: measure, do not clip
    assert step == pytest.approx(true_norm, rel=1e-3) and logged == pytest.approx(true_norm, rel=1e-3)


def test_fp16_unscales_before_clipping_and_stepping():
    precision = Precision("fp16", "cpu")
    assert precision.scaler is not None and precision.scaler.get_scale() == 2.0**16
    step, logged, true_norm = one_step(CLIP, precision)
    assert precision.scaler.get_scale() == 2.0**16  # no step was skipped for inf/NaN
    assert logged == pytest.approx(true_norm, rel=1e-3)  # the scaled norm would be 65536x larger
    assert step == pytest.approx(CLIP, rel=1e-4)  # clipping scaled gradients would move 65536x less


@pytest.mark.parametrize("bad", [-1.0, 0, 0.0, math.nan, math.inf, True, "1"])
def test_a_grad_clip_that_is_not_a_positive_number_is_refused(bad):
    model, drawn = nn.Linear(32, 4), []
    with pytest.raises(ValueError, match="grad_clip"):
        train(model, torch.optim.SGD(model.parameters(), LR), lambda step: drawn.append(step) or torch.randn(16, 32),
              loss_fn, max_steps=2, grad_clip=bad, progress=False)
    assert drawn == []  # refused before the first step
    with pytest.raises(ValueError, match="grad_clip"):
        Precision("fp32").step(torch.optim.SGD(model.parameters(), LR), bad)
