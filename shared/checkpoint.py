"""Checkpoints: weights + config (+ optimizer, history, RNG, extras) in one file, written atomically.

Loading uses `torch.load(weights_only=True)`, so a checkpoint can hold tensors and plain Python values
only — never pickled code; saving checks that first and names any entry that loading would refuse.
A file that cannot be loaded raises FileNotFoundError (no file), CorruptCheckpointError (truncated or
damaged) or RefusedCheckpointError (it asks to run code). Damage is found by checksums: the sha256 of each
tensor's bytes, saved with the checkpoint, and the zip's CRC-32 of the pickled values. Checkpoints saved
before the checksums existed load with the CRC-32 check alone.
"""

from __future__ import annotations

import copy
import hashlib
import os
import pickle
import random
import sys
import warnings
import zipfile
from dataclasses import asdict, fields, is_dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from .files import atomic_write
from .history import History
from .validation import check_instance, check_map_location, check_model_config, check_weights_only, describe

FORMAT = 1


class CorruptCheckpointError(ValueError):
    """The file is not a readable checkpoint: truncated, damaged, or not written by torch.save."""


class RefusedCheckpointError(ValueError):
    """torch.load(weights_only=True) refused the file: it names classes or functions to run when loaded."""


def save_checkpoint(
    path: str | os.PathLike,
    model: nn.Module,
    config: Any,
    *,
    optimizer: torch.optim.Optimizer | None = None,
    history: History | None = None,
    extra: dict | None = None,
) -> Path:
    """Write the checkpoint to a temporary file beside `path`, flush it to disk, then rename it over `path`.

    Besides weights and config it stores the random state (torch CPU, every CUDA device, Python's
    `random`), so a resumed run draws the same dropout masks and samples as the uninterrupted one; a
    history from train() holds the state at the end of training, which restore_training prefers.
    A DDP or torch.compile wrapper is saved as the model inside it. Anything that
    torch.load(weights_only=True) would refuse, or a config other than the model's own (`model.config`),
    raises naming the entry, and nothing is written. A full disk raises OSError "no space left".
    """
    if not is_dataclass(config) or isinstance(config, type):  # the class itself is a dataclass too
        raise TypeError(f"config must be a dataclass instance, got {type(config).__name__}")
    if extra is not None and not isinstance(extra, dict):
        raise TypeError(f"extra must be a dict of plain values, got {type(extra).__name__}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {
        "format": FORMAT,
        "config_class": type(config).__name__,
        "config": asdict(config),
        "model": unwrap(model).state_dict(),  # keys without 'module.' (DDP) or '_orig_mod.' (torch.compile)
        "optimizer": None if optimizer is None else optimizer.state_dict(),
        "history": None if history is None else asdict(history),
        "rng": rng_state(),
        "extra": extra or {},
    }
    for key, value in state.items():
        check_weights_only(key, value)  # e.g. "extra['path'] is a pathlib.PosixPath, which ..."
    check_model_config(unwrap(model), config)  # else restore_model could not rebuild from the file
    # load_checkpoint recomputes them, so a damaged byte is refused (torch swaps bytes for the other byte order)
    state["checksums"] = {"byteorder": sys.byteorder, "sha256": _checksums(state)}
    with atomic_write(path) as tmp, open(tmp, "wb") as file:  # readers see the old file or the new one
        torch.save(state, file)  # through a Python file, so that a full disk raises OSError(ENOSPC)
    return path


def _checksums(state: dict) -> dict[str, str]:
    """The sha256 of each tensor's bytes in `state`, by where it sits, e.g. "model['tok_emb.weight']"."""
    return {name: hashlib.sha256(t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy()).hexdigest()
            for name, t in _tensors(state, "")}


def _tensors(value, name: str):
    """(name, tensor) for each tensor in nested dicts, lists and tuples, in their order."""
    if isinstance(value, torch.Tensor):
        yield name, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _tensors(item, f"{name}[{key!r}]" if name else str(key))
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _tensors(item, f"{name}[{i}]")


def unwrap(model: nn.Module) -> nn.Module:
    """The plain model inside DDP and torch.compile wrappers (no 'module.' or '_orig_mod.' in its state_dict keys)."""
    while True:
        if isinstance(model, DDP):
            model = model.module
        elif isinstance(getattr(model, "_orig_mod", None), nn.Module):  # what torch.compile(model) returns
            model = model._orig_mod
        else:
            return model


def rng_state() -> dict:
    """Every random state a training run draws from: torch CPU, each CUDA device (if any), Python `random`."""
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
        "python": random.getstate(),
    }


def set_rng_state(state: dict | torch.Tensor) -> None:
    """Restore what `rng_state()` returned (a bare tensor, from older checkpoints, is the torch CPU state).

    Each state may sit on any device (a checkpoint loaded with map_location="cuda" puts it on the GPU): the
    setters take a CPU uint8 tensor, so it is copied there first. A state that is not a uint8 tensor raises.
    """
    if isinstance(state, torch.Tensor):
        torch.set_rng_state(_byte_state("the random state", state))
        return
    check_instance("state (what rng_state() returned)", state, dict)
    torch.set_rng_state(_byte_state("rng['torch']", state.get("torch")))
    if state.get("cuda") is not None and torch.cuda.is_available():
        # device i gets device i's state; a machine with fewer (or more) GPUs restores those both have
        for i, cuda_state in enumerate(state["cuda"][: torch.cuda.device_count()]):
            torch.cuda.set_rng_state(_byte_state(f"rng['cuda'][{i}]", cuda_state), device=i)
    if state.get("python") is not None:
        if not isinstance(state["python"], (tuple, list)) or len(state["python"]) != 3:
            raise TypeError(f"rng['python'] must be what random.getstate() returns, got {describe(state['python'])}")
        version, internal, gauss = state["python"]
        random.setstate((version, tuple(internal), gauss))


def _byte_state(name: str, state) -> torch.Tensor:
    """`state` as the CPU uint8 tensor that torch's random-state setters take; TypeError naming `name` otherwise."""
    if not isinstance(state, torch.Tensor) or state.dtype != torch.uint8:
        raise TypeError(f"{name} must be a uint8 tensor, as torch.get_rng_state() returns, got {describe(state)}")
    return state.cpu()  # a copy when it was on the GPU (map_location="cuda"); the tensor itself when on the CPU


def load_checkpoint(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> dict:
    """Read a checkpoint with weights_only=True; a missing, damaged or refused file raises its own error.

    A device this machine lacks (map_location) raises ValueError, and an error that is not damage (no
    permission to read, out of memory) passes unchanged: only a damaged file is called corrupt.
    """
    map_location = check_map_location("map_location", map_location)
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as err:
        _verify_crc(path)  # a damaged byte can read as a refused global: damage is named first
        if "Unsupported global" in str(err):  # a well-formed file that names code to run
            raise RefusedCheckpointError(
                f"{path} was refused by torch.load(weights_only=True): it holds Python objects that would run code "
                f"when loaded, which checkpoints of this course never do. Load it with weights_only=False only if "
                f"you trust where it came from.\n{err}"
            ) from err
        raise CorruptCheckpointError(f"{path} is not a readable checkpoint (truncated or corrupt): {err}") from err
    except (PermissionError, MemoryError, torch.OutOfMemoryError):
        raise  # the file may be fine
    except Exception as err:  # zip, pickle and I/O errors of a damaged file come in many types
        raise CorruptCheckpointError(f"{path} is not a readable checkpoint (truncated or corrupt): {err}") from err
    if not isinstance(state, dict) or state.get("format") != FORMAT or "model" not in state:
        _verify_crc(path)
        raise ValueError(f"{path} is not a checkpoint written by shared.checkpoint (format {FORMAT})")
    if map_location.type != "meta":  # meta tensors have no bytes to check
        _verify(path, state)
    return state


def _verify_crc(path: Path) -> None:
    """Raise CorruptCheckpointError if the pickled values fail their CRC-32 (torch.load does not check it)."""
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                if info.filename.endswith("/data.pkl") and info.CRC:  # CRC 0: torch was told to write none
                    archive.read(info)  # checks the CRC-32
    except zipfile.BadZipFile as err:
        raise CorruptCheckpointError(f"{path} is damaged: {err}") from err


def _verify(path: Path, state: dict) -> None:
    """Raise CorruptCheckpointError if the pickled values fail their CRC-32 or a tensor its saved sha256."""
    _verify_crc(path)
    checks = state.get("checksums")
    if not isinstance(checks, dict) or checks.get("byteorder") != sys.byteorder:
        return  # saved before checksums existed, or on a machine of the other byte order
    saved, found = checks.get("sha256", {}), _checksums(state)
    damaged = [name for name in saved.keys() | found.keys() if saved.get(name) != found.get(name)]
    if damaged:
        raise CorruptCheckpointError(f"{path} is damaged: the bytes of {', '.join(sorted(damaged)[:5])} differ from "
                                     f"the sha256 saved with them (changed on disk or in transit)")


def config_from_checkpoint(state: dict, config_cls: type) -> Any:
    """Rebuild the config dataclass stored in a loaded checkpoint.

    A field the checkpoint lacks (added to the class after it was saved) takes its default; a key the
    class does not know raises ValueError, since dropping it could silently build a different model.
    """
    if state["config_class"] != config_cls.__name__:
        raise ValueError(f"checkpoint holds a {state['config_class']}, not a {config_cls.__name__}")
    unknown = sorted(set(state["config"]) - {f.name for f in fields(config_cls)})
    if unknown:
        raise ValueError(f"checkpoint's {config_cls.__name__} has fields this version does not know: {unknown}")
    return config_cls(**state["config"])


def restore_model(state: dict, model: nn.Module, config: Any) -> nn.Module:
    """Load the checkpoint's weights into `model` (or the model inside its DDP/compile wrapper).

    A model of another config raises ValueError.
    """
    saved, given = asdict(config_from_checkpoint(state, type(config))), asdict(config)
    if saved != given:
        diff = {k: (v, given[k]) for k, v in saved.items() if given[k] != v}
        raise ValueError(f"checkpoint was saved with another config; (saved, given) differ at {diff}")
    unwrap(model).load_state_dict(state["model"])
    return model


def restore_training(state: dict, optimizer: torch.optim.Optimizer) -> History:
    """Restore optimizer and RNG state and return a copy of the history, to resume training where it stopped.

    Call it on every rank: each gets back its own random state, which train() recorded for all ranks. Resumed
    with another number of ranks, every rank gets rank 0's (with a warning): the run goes on, but not exactly
    as the uninterrupted one would have. Pass the history to train(): it restores fp16's loss scale from it.
    The history is a copy: the resumed run appends to it without changing `state` (which can be resumed again).
    """
    if state["optimizer"] is None or state["history"] is None:
        raise ValueError("checkpoint has no optimizer/history state: it was not saved during training")
    saved, wants = _optimizer_kind(state["optimizer"]), _optimizer_kind(optimizer.state_dict())
    if saved != wants:  # torch would fail with a bare KeyError deep inside load_state_dict
        raise ValueError(f"the checkpoint holds {saved}'s state but `optimizer` is {wants}: build the optimizer "
                         "the run was saved with (make_muon or make_adamw) and pass that")
    optimizer.load_state_dict(state["optimizer"])
    history = History(**copy.deepcopy(state["history"]))  # older checkpoints: the newer fields take defaults
    set_rng_state(_rng_of_this_rank(state, history.rng_per_rank))
    return history


def _optimizer_kind(optimizer_state: dict) -> str:
    """'MuonWithAdamW' for its {'muon', 'adamw'} state, 'a single torch optimizer' for one with param_groups."""
    return "MuonWithAdamW" if set(optimizer_state) == {"muon", "adamw"} else "a single torch optimizer"


def _rng_of_this_rank(state: dict, per_rank: list | None) -> dict:
    """This rank's saved random state; rank 0's (the one save_checkpoint stored) when none fits this group."""
    in_group = dist.is_available() and dist.is_initialized()
    rank, world_size = (dist.get_rank(), dist.get_world_size()) if in_group else (0, 1)
    if per_rank and len(per_rank) == world_size:
        return per_rank[rank]
    if per_rank:
        warnings.warn(f"the checkpoint holds the random states of {len(per_rank)} ranks, but this run has "
                      f"{world_size}: every rank continues from rank 0's, so dropout and sampling will not "
                      f"repeat the uninterrupted run", stacklevel=3)
    return state["rng"]
