"""Checkpoints: weights + config (+ optimizer, history, RNG, extras) in one file, written atomically.

Loading uses `torch.load(weights_only=True)`, so a checkpoint can hold tensors and plain Python values
only — never pickled code.
"""

from __future__ import annotations

import os
import pickle
import tempfile
import zipfile
from dataclasses import asdict, fields, is_dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .training import History

FORMAT = 1


def save_checkpoint(
    path: str | os.PathLike,
    model: nn.Module,
    config: Any,
    *,
    optimizer: torch.optim.Optimizer | None = None,
    history: History | None = None,
    extra: dict | None = None,
) -> Path:
    """Write the checkpoint to a temporary file beside `path`, then rename it over `path`."""
    if not is_dataclass(config):
        raise TypeError(f"config must be a dataclass instance, got {type(config).__name__}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {
        "format": FORMAT,
        "config_class": type(config).__name__,
        "config": asdict(config),
        "model": model.state_dict(),
        "optimizer": None if optimizer is None else optimizer.state_dict(),
        "history": None if history is None else asdict(history),
        "rng": torch.get_rng_state(),
        "extra": extra or {},
    }
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        torch.save(state, tmp)
        os.replace(tmp, path)  # atomic: readers see the old file or the new one, never half of one
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return path


def load_checkpoint(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> dict:
    """Read a checkpoint with weights_only=True; a missing or damaged file raises a clear error."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except (OSError, RuntimeError, EOFError, pickle.UnpicklingError, zipfile.BadZipFile, ValueError) as err:
        raise ValueError(f"{path} is not a readable checkpoint (truncated or corrupt?): {err}") from err
    if not isinstance(state, dict) or state.get("format") != FORMAT or "model" not in state:
        raise ValueError(f"{path} is not a checkpoint written by shared.checkpoint (format {FORMAT})")
    return state


def config_from_checkpoint(state: dict, config_cls: type) -> Any:
    """Rebuild the config dataclass stored in a loaded checkpoint."""
    if state["config_class"] != config_cls.__name__:
        raise ValueError(f"checkpoint holds a {state['config_class']}, not a {config_cls.__name__}")
    known = {f.name for f in fields(config_cls)}
    return config_cls(**{k: v for k, v in state["config"].items() if k in known})


def restore_model(state: dict, model: nn.Module, config: Any) -> nn.Module:
    """Load the checkpoint's weights into `model`; a model of another config raises ValueError."""
    if state["config_class"] != type(config).__name__ or state["config"] != asdict(config):
        diff = {k: (v, asdict(config).get(k)) for k, v in state["config"].items() if asdict(config).get(k) != v}
        raise ValueError(f"checkpoint was saved with another config; (saved, given) differ at {diff}")
    model.load_state_dict(state["model"])
    return model


def restore_training(state: dict, optimizer: torch.optim.Optimizer) -> History:
    """Restore optimizer and RNG state and return the history, to resume training where it stopped."""
    if state["optimizer"] is None or state["history"] is None:
        raise ValueError("checkpoint has no optimizer/history state: it was not saved during training")
    optimizer.load_state_dict(state["optimizer"])
    torch.set_rng_state(state["rng"])
    return History(**state["history"])
