"""Device, seeding and fast-mode helpers shared by every notebook."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

FAST_ENV = "COURSE_FAST"


def fast_mode() -> bool:
    """True when the environment variable COURSE_FAST is set to 1/true/yes (tests and CI set it)."""
    return os.environ.get(FAST_ENV, "").strip().lower() in {"1", "true", "yes", "on"}


def get_device(device: str | torch.device = "auto") -> torch.device:
    """Return CUDA when present, else Apple MPS, else CPU ('auto'), or the device asked for."""
    if device != "auto":
        return torch.device(device)
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def seed_everything(seed: int = 0) -> None:
    """Seed Python's and PyTorch's random generators (CPU and every GPU)."""
    if not isinstance(seed, int) or isinstance(seed, bool):  # any int (negative too), so not check_int
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device


def choose(*, fast, cpu, cuda, device: torch.device | None = None):
    """Pick a setting by run mode: `fast` in fast mode, else `cuda` on a GPU, else `cpu`."""
    if fast_mode():
        return fast
    device = get_device() if device is None else torch.device(device)
    return cuda if device.type == "cuda" else cpu


@contextmanager
def eval_mode(model: nn.Module) -> Iterator[nn.Module]:
    """Put `model` in eval mode (no dropout) for the `with` block, then back in the mode it had, even on error."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


def setup(seed: int = 0) -> torch.device:
    """Seed everything, pick the device and print one line saying what this run uses."""
    seed_everything(seed)
    device = get_device()
    mode = "on (small sizes, for tests)" if fast_mode() else f"off ({'GPU' if device.type == 'cuda' else 'CPU'} size)"
    print(f"device: {device.type} | fast mode: {mode} | torch {torch.__version__}")
    return device
