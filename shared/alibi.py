"""ALiBi (Press et al. 2022): no position vectors; each head adds -slope * distance to its attention scores.

Head h of H gets the slope 2^(-8 (h+1) / H) (a geometric sequence from 2^(-8/H) down to 2^-8); when H is
not a power of two, the paper takes the slopes of the next smaller power of two and fills in every other
slope of the next larger one. A steep head looks at its neighbours, a shallow head far back.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def alibi_slopes(n_heads: int) -> Tensor:
    """(n_heads,) slopes, largest first: 1/2, 1/4, ... 1/256 for 8 heads."""
    if not isinstance(n_heads, int) or isinstance(n_heads, bool) or n_heads < 1:
        raise ValueError(f"n_heads must be a positive int, got {n_heads!r}")

    def power_of_two(n: int) -> list[float]:
        return [2.0 ** (-8.0 * (h + 1) / n) for h in range(n)]

    below = 2 ** math.floor(math.log2(n_heads))
    slopes = power_of_two(below) + power_of_two(2 * below)[0::2][: n_heads - below]
    return torch.tensor(slopes, dtype=torch.float32)


def alibi_bias(slopes: Tensor, q_positions: Tensor, k_positions: Tensor) -> Tensor:
    """Additive scores -slope_h * |i - j|: (H, T_q, T_k), or (B, H, T_q, T_k) for (B, T) positions.

    For a causal decoder i >= j, so this is the paper's -slope * (i - j).
    """
    if slopes.dim() != 1:
        raise ValueError(f"slopes must have shape (H,), got {tuple(slopes.shape)}")
    for name, p in (("q_positions", q_positions), ("k_positions", k_positions)):
        if not isinstance(p, Tensor) or p.is_floating_point() or p.dim() not in (1, 2):
            raise TypeError(f"{name} must be an integer tensor of shape (T,) or (B, T), got {p!r}")
    distance = (q_positions[..., :, None] - k_positions[..., None, :]).abs()  # (T_q, T_k) or (B, T_q, T_k)
    bias = -slopes.to(distance.device)[:, None, None] * distance[..., None, :, :].float()  # (..., H, T_q, T_k)
    return bias
