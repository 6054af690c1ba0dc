"""Token embeddings and positional encodings: sinusoidal (fixed buffer) and learned (parameters)."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from .validation import check_positive_int


def sinusoidal_table(max_len: int, d_model: int) -> Tensor:
    """(max_len, d_model) table: PE[pos, 2i] = sin(pos / 10000^(2i/d_model)), PE[pos, 2i+1] = cos(...)."""
    check_positive_int("max_len", max_len)
    check_positive_int("d_model", d_model)
    if d_model % 2:
        raise ValueError(f"d_model must be even for sin/cos pairs, got {d_model}")
    position = torch.arange(max_len, dtype=torch.float32)[:, None]  # (max_len, 1)
    inv_freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    angles = position * inv_freq  # (max_len, d_model / 2)
    table = torch.zeros(max_len, d_model)
    table[:, 0::2] = torch.sin(angles)
    table[:, 1::2] = torch.cos(angles)
    return table


class ScaledEmbedding(nn.Module):
    """Token embedding multiplied by sqrt(d_model), as in "Attention Is All You Need" (section 3.4)."""

    def __init__(self, vocab_size: int, d_model: int, scale: bool = True) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.scale = math.sqrt(d_model) if scale else 1.0
        if scale:  # std 1/sqrt(d_model): after the x sqrt(d_model) scale, entries have std 1, like the positions
            nn.init.normal_(self.embedding.weight, std=d_model**-0.5)

    def forward(self, tokens: Tensor) -> Tensor:
        """(B, T) ids -> (B, T, d_model)."""
        if tokens.is_floating_point():
            raise TypeError(f"tokens must hold integer ids, got dtype {tokens.dtype}")
        return self.embedding(tokens) * self.scale


class SinusoidalPositionalEncoding(nn.Module):
    """Adds the fixed sinusoidal table (a buffer, not a parameter) to (B, T, d_model) inputs."""

    def __init__(self, d_model: int, max_len: int = 512) -> None:
        super().__init__()
        self.max_len = max_len
        self.register_buffer("table", sinusoidal_table(max_len, d_model), persistent=False)

    def forward(self, x: Tensor, offset: int = 0, positions: Tensor | None = None) -> Tensor:
        """(B, T, d_model) -> same; `positions` (T,) or (B, T) ints replace offset..offset+T-1."""
        if positions is not None:
            return x + self.table[_check_positions(x, positions, self.max_len)].to(x.dtype)
        _check_length(x, offset, self.max_len)
        return x + self.table[offset : offset + x.size(1)].to(x.dtype)  # (T, d_model) broadcasts over B


class LearnedPositionalEmbedding(nn.Module):
    """Adds a trained vector per position (GPT style) to (B, T, d_model) inputs."""

    def __init__(self, max_len: int, d_model: int) -> None:
        super().__init__()
        self.max_len = max_len
        self.embedding = nn.Embedding(max_len, d_model)

    def forward(self, x: Tensor, offset: int = 0, positions: Tensor | None = None) -> Tensor:
        """(B, T, d_model) -> same; `positions` (T,) or (B, T) ints replace offset..offset+T-1."""
        if positions is not None:
            return x + self.embedding(_check_positions(x, positions, self.max_len))
        _check_length(x, offset, self.max_len)
        positions = torch.arange(offset, offset + x.size(1), device=x.device)  # (T,)
        return x + self.embedding(positions)


# How a model learns where a token is: added vectors (sinusoidal, learned), rotated q/k (rope, shared/rope.py),
# a distance penalty on the scores (alibi, shared/alibi.py), or nothing but the causal mask (none, "NoPE").
POSITION_SCHEMES = ("learned", "sinusoidal", "rope", "alibi", "none")


def randomized_positions(batch: int, length: int, max_position: int, device=None, generator=None) -> Tensor:
    """(batch, length) position ids: per row a sorted random subset of 0..max_position-1 (Ruoss et al. 2023).

    Trained this way, a model meets every id up to max_position, and only their order carries meaning.
    """
    for name, value in (("batch", batch), ("length", length), ("max_position", max_position)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if length > max_position:
        raise ValueError(f"length ({length}) must be at most max_position ({max_position})")
    scores = torch.rand(batch, max_position, generator=generator)  # a random permutation per row ...
    chosen = scores.topk(length, dim=1).indices  # ... of which the first `length` ids are kept
    return chosen.sort(dim=1).values.to(device)  # (batch, length), increasing


def _check_positions(x: Tensor, positions: Tensor, max_len: int) -> Tensor:
    if x.dim() != 3:
        raise ValueError(f"x must have shape (B, T, d_model), got {tuple(x.shape)}")
    if not isinstance(positions, Tensor) or positions.is_floating_point() or positions.dim() not in (1, 2) \
            or positions.size(-1) != x.size(1):
        raise ValueError(f"positions must be an integer tensor (T={x.size(1)},) or (B, T), got {positions!r}")
    if positions.numel() and (positions.min() < 0 or positions.max() >= max_len):
        raise ValueError(f"positions must lie in 0..{max_len - 1} (the positional table, max_len={max_len}), "
                         f"got {positions.min().item()}..{positions.max().item()}")
    return positions


def _check_length(x: Tensor, offset: int, max_len: int) -> None:
    if x.dim() != 3:
        raise ValueError(f"x must have shape (B, T, d_model), got {tuple(x.shape)}")
    if offset + x.size(1) > max_len:
        raise ValueError(
            f"sequence of length {x.size(1)} at offset {offset} is longer than the positional table "
            f"(max_len={max_len})"
        )
