"""Argument checks shared by the package: each raises a ValueError that names the argument and what it expects."""

from __future__ import annotations

import math

from torch import Tensor


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
        raise ValueError(f"{name} must be None or a positive int, got {value!r}")
    return value


def check_tokens(name: str, tokens) -> Tensor:
    """Return `tokens` if it is a (B, T) integer tensor of token ids; else raise ValueError naming `name`."""
    if not isinstance(tokens, Tensor) or tokens.dim() != 2 or tokens.is_floating_point() or tokens.is_complex():
        raise ValueError(f"{name} must be a (B, T) integer tensor of token ids, got {describe(tokens)}")
    return tokens


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


def check_position_ids(name: str, positions) -> Tensor:
    """Return `positions` if it is an integer tensor of shape (T,) or (B, T); else raise TypeError naming `name`."""
    if not isinstance(positions, Tensor) or positions.is_floating_point() or positions.dim() not in (1, 2):
        raise TypeError(f"{name} must be an integer tensor of shape (T,) or (B, T), got {describe(positions)}")
    return positions


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
