"""Resuming from a checkpoint restores what the run had built up: the fp16 loss scale as well as the weights."""

import itertools
from dataclasses import dataclass

import pytest
import torch
from torch import nn

import shared.training
from shared.checkpoint import load_checkpoint, restore_model, restore_training, save_checkpoint
from shared.training import train

STEPS, CHECKPOINT_AT, CRASH_AT = 12, 4, 6


@dataclass
class LinearConfig:
    d_in: int = 8
    d_out: int = 2


def loss_fn(model, batch):
    return model(batch).float().pow(2).mean(), batch.size(0)


def fp16_run(model, optimizer, history=None, checkpoint=None, crash_at=None):
    """Train under fp16 autocast; the first steps overflow, so the GradScaler lowers its scale from 65536."""
    batch = torch.randn(32, 8, generator=torch.Generator().manual_seed(1)) * 8  # gradients up to ~24

    def batch_fn(step):
        if step == crash_at:
            raise KeyboardInterrupt("crashed")
        return batch

    def checkpoint_fn(history):
        save_checkpoint(checkpoint, model, LinearConfig(), optimizer=optimizer, history=history)

    return train(model, optimizer, batch_fn, loss_fn, max_steps=STEPS, log_every=2, history=history,
                 precision="fp16", checkpoint_fn=checkpoint_fn if checkpoint else None,
                 checkpoint_every=CHECKPOINT_AT, progress=False)


def new_run():
    torch.manual_seed(0)
    model = nn.Linear(8, 2)
    return model, torch.optim.SGD(model.parameters(), lr=1e-3)


@pytest.fixture
def steady_clock(monkeypatch):
    """time.perf_counter advancing 0.5 s per call: each step of train() (two calls) takes exactly 0.5 s."""
    ticks = itertools.count()
    monkeypatch.setattr(shared.training.time, "perf_counter", lambda: 0.5 * next(ticks))


def test_resumed_fp16_run_continues_at_the_saved_loss_scale(tmp_path, steady_clock):
    model, optimizer = new_run()
    full = fp16_run(model, optimizer)
    assert full.grad_scaler["scale"] < 2.0**16  # steps were skipped and the scale came down

    crashed, crashed_optimizer = new_run()
    with pytest.raises(KeyboardInterrupt):
        fp16_run(crashed, crashed_optimizer, checkpoint=tmp_path / "run.pt", crash_at=CRASH_AT)
    state = load_checkpoint(tmp_path / "run.pt")  # weights_only=True
    assert state["history"]["next_step"] == CHECKPOINT_AT and state["history"]["grad_scaler"]["scale"] < 2.0**16
    resumed = restore_model(state, nn.Linear(8, 2), LinearConfig())
    resumed_optimizer = torch.optim.SGD(resumed.parameters(), lr=1e-3)
    history = fp16_run(resumed, resumed_optimizer, history=restore_training(state, resumed_optimizer))

    assert history.loss == full.loss  # a fresh scale of 65536 would skip more steps, and lose their updates
    assert all(torch.equal(a, b) for a, b in zip(resumed.parameters(), model.parameters()))
    assert history.grad_scaler == full.grad_scaler
    # the counters go on from the checkpoint's: tokens seen and training seconds, not from 0
    assert history.tokens == full.tokens == [64 * (i + 1) for i in range(STEPS // 2)]
    assert history.seconds == full.seconds == [1.0 * (i + 1) for i in range(STEPS // 2)]
