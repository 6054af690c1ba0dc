"""The record of a training run: what `shared.training.train` logs and `shared.checkpoint` saves and restores.

It lives on its own so that `shared.checkpoint` can read it without depending on the training loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class History:
    """What a run did: training loss (token-weighted mean per log interval), lr, validation loss; and where it
    stopped (next_step, loss scale, random states), so that it can be resumed."""

    step: list[int] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)  # tokens seen so far, at each logged step
    seconds: list[float] = field(default_factory=list)  # training time so far, at each logged step
    val_step: list[int] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)
    grad_norm: list[float] = field(default_factory=list)  # mean gradient norm before clipping, per log interval
    next_step: int = 0
    # what a resumed run needs at next_step besides weights and optimizer (recorded by train(), in checkpoints):
    grad_scaler: dict | None = None  # fp16's GradScaler state (its loss scale); None for fp32 and bf16
    rng_per_rank: list | None = field(default=None, repr=False)  # each rank's random state (one: a single process)
