"""Argument checks shared by the package: each raises a ValueError that names the argument and what it expects."""

from __future__ import annotations

import math
from collections import OrderedDict

import torch
from torch import Tensor, nn


def describe(x) -> str:
    """How an argument looks in an error message: a tensor's shape and dtype, else its type's name."""
    return f"shape {tuple(x.shape)} dtype {x.dtype}" if isinstance(x, Tensor) else type(x).__name__


def check_int(name: str, value, minimum: int = 1, meaning: str = "") -> int:
    """Return `value` if it is an int (not a bool) >= `minimum`; else raise ValueError naming `name`."""
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        expected = "a positive int" if minimum == 1 else f"an int >= {minimum}"
        raise ValueError(f"{name} must be {expected}{meaning}, got {value!r}")
    return value


def check_positive_int(name: str, value) -> int:
    """Return `value` if it is an int >= 1 (not a bool); else raise ValueError naming `name`."""
    return check_int(name, value, 1)


def check_optional_positive_int(name: str, value) -> int | None:
    """Return `value` if it is None or a positive int; else raise ValueError naming `name`."""
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise ValueError(f"{name} must be None or a positive int, got {value!r}")  # check_int's test, with None
    return value


def is_integer_tensor(x) -> bool:
    """True if `x` is a tensor of integers: not floating-point, complex or bool."""
    return isinstance(x, Tensor) and not (x.is_floating_point() or x.is_complex() or x.dtype == torch.bool)


def check_tokens(name: str, tokens, vocab_size: int | None = None) -> Tensor:
    """Return `tokens` if it is a (B, T) integer tensor of ids with T, B >= 1; else raise ValueError naming `name`.

    With `vocab_size`, every id must also lie in 0..vocab_size-1 (else nn.Embedding raises a bare IndexError). That
    check costs a min/max reduction that waits for the device: the models run it at their entry points only.
    """
    if not is_integer_tensor(tokens) or tokens.dim() != 2 or tokens.size(1) < 1 or tokens.size(0) < 1:
        raise ValueError(f"{name} must be a (B, T) integer tensor of token ids with T >= 1 and B >= 1, "
                         f"got {describe(tokens)}")
    if vocab_size is not None:
        low, high = torch.aminmax(tokens)
        if bool((low < 0) | (high >= vocab_size)):  # one wait for the device, not two
            raise ValueError(f"{name} must hold ids in 0..{vocab_size - 1} (vocab_size={vocab_size}), "
                             f"got ids from {low.item()} to {high.item()}")
    return tokens


def check_sequence(name: str, x, d_model: int) -> Tensor:
    """Return `x` if it is a floating-point (B, T, d_model) tensor with B, T >= 1; else raise naming `name`."""
    if check_float_tensor(name, x).dim() != 3 or x.size(0) < 1 or x.size(1) < 1 or x.size(-1) != d_model:
        raise ValueError(f"{name} must have shape (B >= 1, T >= 1, d_model={d_model}), got {tuple(x.shape)}")
    return x


def check_batch_size(name: str, x: Tensor, batch: int, of: str = "the input", hint: str = "") -> Tensor:
    """Return `x` if its first dim is `batch`, the batch size `of` something else; else raise naming `name`."""
    if x.size(0) != batch:
        raise ValueError(f"{name} has batch size {x.size(0)}, but {of} has batch size {batch}{hint}")
    return x


def check_table_positions(x, offset, positions, max_len: int) -> None:
    """Check the input of a positional table of `max_len` rows: x (B, T, d_model), and either `positions`,
    (T,) or (B, T) integer ids in 0..max_len-1, or (positions None) an int offset >= 0 with offset + T <= max_len.
    """
    if not isinstance(x, Tensor) or x.dim() != 3:
        raise ValueError(f"x must have shape (B, T, d_model), got {describe(x)}")
    T = x.size(1)
    if positions is None:
        if check_int("offset", offset, minimum=0) + T > max_len:
            raise ValueError(f"sequence of length {T} at offset {offset} is longer than the positional table "
                             f"(max_len={max_len})")
        return
    check_position_ids("positions", positions, T, x.size(0), of="x")
    if positions.numel() and (positions.min() < 0 or positions.max() >= max_len):
        raise ValueError(f"positions must lie in 0..{max_len - 1} (the positional table, max_len={max_len}), "
                         f"got {positions.min().item()}..{positions.max().item()}")


def check_bool(name: str, value) -> bool:
    """Return `value` if it is True or False; else raise ValueError naming `name`."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be a bool, got {value!r}")
    return value


def check_choice(name: str, value, allowed: tuple) -> object:
    """Return `value` if it is one of `allowed`; else raise ValueError naming `name` and the choices."""
    if value not in allowed:
        raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
    return value


def check_float_tensor(name: str, x, min_dim: int = 1) -> Tensor:
    """Return `x` if it is a floating-point tensor of at least `min_dim` dims; else raise naming `name`."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")
    if x.dim() < min_dim:
        raise ValueError(f"{name} must have at least {min_dim} dims, got shape {tuple(x.shape)}")
    return x


def check_position_ids(name: str, positions, length: int | None = None, batch: int | None = None,
                       of: str = "x") -> Tensor:
    """Return `positions` if it is an integer (not bool or complex) tensor of shape (T,) or (B, T); else raise
    TypeError naming `name`. Given `length`, T must equal it (else ValueError); given `batch`, so must a (B, T)
    tensor's B, the batch size `of` the input the ids belong to.
    """
    if not is_integer_tensor(positions) or positions.dim() not in (1, 2):
        raise TypeError(f"{name} must be an integer tensor of shape (T,) or (B, T), got {describe(positions)}")
    if length is not None and positions.size(-1) != length:
        raise ValueError(f"{name} must have T={length} entries per row, got shape {tuple(positions.shape)}")
    if batch is not None and positions.dim() == 2:
        check_batch_size(name, positions, batch, of=of)
    return positions


def check_broadcasts(name: str, x: Tensor, shape: tuple[int, ...], target: str) -> Tensor:
    """Return `x` if its shape broadcasts to `shape` without enlarging it; else raise ValueError naming `name`.

    target: what `shape` is, for the message, e.g. "the attention scores (B, H, T_q, T_k)".
    """
    try:
        if torch.broadcast_shapes(x.shape, shape) == torch.Size(shape):
            return x
        problem = "would enlarge"
    except RuntimeError:
        problem = "cannot broadcast to"
    raise ValueError(f"{name} of shape {tuple(x.shape)} {problem} {target} = {tuple(shape)}")


def check_positive_ints(owner: object, names: tuple[str, ...]) -> None:
    """Check that each attribute in `names` of `owner` (e.g. a config dataclass) is a positive int."""
    for name in names:
        check_positive_int(f"{type(owner).__name__}.{name}", getattr(owner, name))


def check_divisible(d_model: int, n_heads: int, prefix: str = "") -> None:
    """d_model must split evenly into n_heads heads of d_k = d_model // n_heads."""
    if d_model % n_heads:
        raise ValueError(f"{prefix}d_model ({d_model}) must be divisible by {prefix}n_heads ({n_heads})")


def check_dropout(name: str, value) -> float:
    """Return `value` if it is a probability in [0, 1); else raise ValueError naming `name`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {value!r}")
    return value


def check_finite(name: str, value, minimum: float = -math.inf, meaning: str = "") -> float:
    """Return `value` if it is a finite real number >= `minimum`; else raise ValueError naming `name`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < minimum:
        at_least = "" if minimum == -math.inf else f" >= {minimum}"
        raise ValueError(f"{name} must be a finite number{at_least}{meaning}, got {value!r}")
    return value


def _is_positive_number(value) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def check_positive_number(name: str, value, meaning: str = "") -> float:
    """Return `value` if it is a finite number > 0 (not a bool); else raise ValueError naming `name`."""
    if not _is_positive_number(value):
        raise ValueError(f"{name} must be a finite number > 0{meaning}, got {value!r}")
    return value


def check_optional_positive_number(name: str, value, meaning: str = "") -> float | None:
    """Return `value` if it is None or a finite number > 0 (not a bool); else raise ValueError naming `name`."""
    if value is not None and not _is_positive_number(value):
        raise ValueError(f"{name} must be None or a finite number > 0{meaning}, got {value!r}")
    return value


# what torch.load(weights_only=True) rebuilds; a subclass (NamedTuple, IntEnum, numpy.float64) is pickled by class
_PLAIN_VALUES = (type(None), bool, int, float, complex, str, bytes, bytearray, torch.dtype, torch.device,
                 Tensor, nn.Parameter)
_PLAIN_SEQUENCES = (list, tuple, set, torch.Size)


def check_weights_only(name: str, value) -> None:
    """Raise TypeError naming the entry of `value` (e.g. "extra['p']") that torch.load(weights_only=True) refuses.

    Accepted: tensors, None, bool, int, float, complex, str, bytes, torch.dtype/device/Size, and dicts, lists,
    tuples and sets of these.
    """
    kind = type(value)
    if kind in _PLAIN_VALUES:
        return
    if kind in _PLAIN_SEQUENCES:
        for i, item in enumerate(value):
            check_weights_only(f"{name}[{i}]" if kind is not set else f"an element of {name}", item)
        return
    if kind in (dict, OrderedDict):
        for key, item in value.items():
            check_weights_only(f"a key of {name}", key)
            check_weights_only(f"{name}[{key!r}]", item)
        return
    raise TypeError(f"{name} is a {kind.__module__}.{kind.__qualname__}, which torch.load(weights_only=True) "
                    f"refuses: a checkpoint holds only tensors and plain Python values (None, bool, int, float, str, "
                    f"bytes, and lists, tuples, sets and dicts of them). Convert it first, e.g. str(path) or float(x)")
