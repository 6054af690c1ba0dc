"""Argument checks shared by the package: each raises a ValueError that names the argument and what it expects."""

from __future__ import annotations

import math


def check_int(name: str, value, minimum: int = 1) -> int:
    """Return `value` if it is an int (not a bool) >= `minimum`; else raise ValueError naming `name`."""
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        expected = "a positive int" if minimum == 1 else f"an int >= {minimum}"
        raise ValueError(f"{name} must be {expected}, got {value!r}")
    return value


def check_positive_int(name: str, value) -> int:
    """Return `value` if it is an int >= 1 (not a bool); else raise ValueError naming `name`."""
    return check_int(name, value, 1)


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
