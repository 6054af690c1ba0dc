"""Rotary position embedding (RoPE, Su et al. 2021): rotate q and k by angles proportional to position.

Pairs of channels (2i, 2i+1) of a query or key at position m are read as one complex number and multiplied
by exp(i * m * theta_i), theta_i = base^(-2i / d_k). A rotation keeps lengths, and the dot product of a
query rotated by m with a key rotated by n depends only on m - n: attention sees *relative* positions.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


def rope_frequencies(d_k: int, base: float = 10000.0) -> Tensor:
    """(d_k / 2,) angular frequencies theta_i = base^(-2i / d_k), fastest first."""
    if not isinstance(d_k, int) or isinstance(d_k, bool) or d_k < 2 or d_k % 2:
        raise ValueError(f"d_k must be a positive even int, got {d_k!r}")
    if not isinstance(base, (int, float)) or isinstance(base, bool) or base <= 1:
        raise ValueError(f"base must be a number > 1, got {base!r}")
    return base ** (-torch.arange(0, d_k, 2, dtype=torch.float32) / d_k)


def apply_rope(x: Tensor, positions: Tensor, inv_freq: Tensor) -> Tensor:
    """Rotate channel pairs (2i, 2i+1) of x (..., T, d_k) by positions * inv_freq[i]; same shape and dtype.

    positions: integer (T,) or (B, T) absolute positions; with x (B, H, T, d_k) a (B, T) tensor gives
    every sequence its own positions.
    """
    if not isinstance(x, Tensor) or not x.is_floating_point() or x.dim() < 2:
        raise TypeError(f"x must be a floating-point tensor (..., T, d_k), got {_describe(x)}")
    if not isinstance(positions, Tensor) or positions.is_floating_point() or positions.dim() not in (1, 2):
        raise TypeError(f"positions must be an integer tensor of shape (T,) or (B, T), got {_describe(positions)}")
    T, d_k = x.shape[-2:]
    if positions.size(-1) != T or d_k != 2 * inv_freq.numel():
        raise ValueError(f"positions {tuple(positions.shape)} and inv_freq ({inv_freq.numel()},) must match "
                         f"x (..., T={T}, d_k={d_k}) with T positions and d_k / 2 frequencies")
    angles = positions.to(torch.float32)[..., None] * inv_freq.to(x.device)  # (T, d_k/2) or (B, T, d_k/2)
    if positions.dim() == 2:
        if x.dim() != 4 or x.size(0) != positions.size(0):
            raise ValueError(f"(B, T) positions need x of shape (B, H, T, d_k), got {tuple(x.shape)}")
        angles = angles[:, None]  # (B, 1, T, d_k/2): the same rotation for every head
    rotation = torch.polar(torch.ones_like(angles), angles)  # exp(i * angle), complex
    pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], d_k // 2, 2))  # (..., T, d_k/2): real + i imag
    return torch.view_as_real(pairs * rotation).flatten(-2).to(x.dtype)  # one complex product; (..., T, d_k)


class RotaryEmbedding(nn.Module):
    """forward(x (B, H, T, d_k), positions (T,) or (B, T) ints) -> x rotated, same shape and dtype.

    Holds no parameters (the frequencies are a non-persistent buffer), so checkpoints do not change.
    """

    def __init__(self, d_k: int, base: float = 10000.0) -> None:
        super().__init__()
        self.d_k, self.base = d_k, base
        self.register_buffer("inv_freq", rope_frequencies(d_k, base), persistent=False)

    def forward(self, x: Tensor, positions: Tensor) -> Tensor:
        if x.dim() != 4 or x.size(-1) != self.d_k:
            raise ValueError(f"x must have shape (B, H, T, d_k={self.d_k}), got {_describe(x)}")
        return apply_rope(x, positions, self.inv_freq)

    def extra_repr(self) -> str:
        return f"d_k={self.d_k}, base={self.base}"


def _describe(x) -> str:
    return f"shape {tuple(x.shape)} dtype {x.dtype}" if isinstance(x, Tensor) else type(x).__name__
