"""Device, seeding and run-size helpers shared by every notebook.

Two environment variables, each with one job:
- COURSE_SIZE = fast | cpu | gpu: the size every notebook runs at (`choose` picks by it). Unset, the device
  decides: GPU size on CUDA, CPU size elsewhere. `pytest` sets fast (conftest.py); a teacher can preview the GPU
  size on a laptop with COURSE_SIZE=gpu, and a script can run any size on any device.
- COURSE_DEVICE = cpu | cuda | mps: the device. Unset: CUDA when present, else the CPU, also on a Mac with
  Apple's MPS. MPS is one variable away (COURSE_DEVICE=mps) but never the default: learners of other courses
  report silently wrong losses and runs that do not repeat on it, and this course has not been tested there.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

SIZE_ENV = "COURSE_SIZE"
SIZES = ("fast", "cpu", "gpu")
DEVICE_ENV = "COURSE_DEVICE"
DEVICES = ("cpu", "cuda", "mps")
RETIRED_ENV = "COURSE_FAST"  # fast mode was COURSE_FAST=1; one variable now says the size


def _env(name: str, allowed: tuple[str, ...], meaning: str) -> str | None:
    """The value of environment variable `name` in lower case, None when unset or empty; anything else is refused."""
    value = os.environ.get(name, "").strip().lower()
    if not value:
        return None
    if value not in allowed:
        raise ValueError(f"the environment variable {name} must be one of {', '.join(allowed)} ({meaning}), "
                         f"got {os.environ[name]!r}")
    return value


def size_setting() -> str | None:
    """COURSE_SIZE ('fast', 'cpu' or 'gpu'), or None when it is unset and the device decides."""
    if os.environ.get(RETIRED_ENV, "").strip():
        raise ValueError(f"the environment variable {RETIRED_ENV} is no longer read: set {SIZE_ENV}=fast for fast "
                         f"mode ({SIZE_ENV}=cpu or gpu for the other sizes) and unset {RETIRED_ENV}")
    return _env(SIZE_ENV, SIZES, "fast: tests; cpu: the stored outputs; gpu: the GPU size; unset: by device")


def run_size(device: str | torch.device | None = None) -> str:
    """'fast', 'cpu' or 'gpu': COURSE_SIZE when set, else 'gpu' on a CUDA device and 'cpu' on any other."""
    size = size_setting()
    if size is not None:
        return size
    device = get_device() if device is None else torch.device(device)
    return "gpu" if device.type == "cuda" else "cpu"


def fast_mode() -> bool:
    """True when COURSE_SIZE=fast (pytest sets it in conftest.py)."""
    return size_setting() == "fast"


def mps_available() -> bool:
    """True on a Mac whose PyTorch can use Apple's MPS (Metal) GPU."""
    mps = getattr(torch.backends, "mps", None)
    return mps is not None and mps.is_available()


def get_device(device: str | torch.device = "auto") -> torch.device:
    """The device asked for, or ('auto') COURSE_DEVICE when set, else CUDA when present, else the CPU (never MPS)."""
    if device != "auto":
        return torch.device(device)
    wanted = _env(DEVICE_ENV, DEVICES, "unset: CUDA when present, else the CPU")
    if wanted == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"{DEVICE_ENV}=cuda, but PyTorch finds no CUDA device here: unset {DEVICE_ENV} to use the CPU")
    if wanted == "mps" and not mps_available():
        raise ValueError(f"{DEVICE_ENV}=mps, but this PyTorch cannot use Apple's MPS here: unset {DEVICE_ENV} to "
                         "use the CPU")
    if wanted is not None:
        return torch.device(wanted)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def seed_everything(seed: int = 0) -> None:
    """Seed Python's and PyTorch's random generators (CPU and every GPU)."""
    if not isinstance(seed, int) or isinstance(seed, bool):  # any int (negative too), so not check_int
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device


def choose(*, fast, cpu, cuda, device: str | torch.device | None = None):
    """Pick a setting by run size (run_size): `fast`, `cpu`, or `cuda` for the GPU size."""
    return {"fast": fast, "cpu": cpu, "gpu": cuda}[run_size(device)]


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
    """Seed everything, pick the device and print one line saying what this run uses (and a note about MPS)."""
    seed_everything(seed)
    device = get_device()
    size = run_size(device)
    mode = "on (small sizes, for tests)" if size == "fast" else f"off ({size.upper()} size)"
    print(f"device: {device.type} | fast mode: {mode} | torch {torch.__version__}")
    if device.type == "mps":
        print(f"note: Apple MPS chosen by {DEVICE_ENV}=mps. The course has not been tested on MPS; if a loss looks "
              f"wrong or a run does not repeat, unset {DEVICE_ENV} and compare with the CPU.")
    elif device.type == "cpu" and mps_available():
        print(f"note: Apple MPS is available but not used: the course runs on the CPU by default. {DEVICE_ENV}=mps "
              "uses it (untested by the course).")
    return device
