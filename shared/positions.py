"""Where a token is: added vectors (sinusoidal, learned), rotated q and k (RoPE), a distance penalty (ALiBi).

Sections: token embedding and the sinusoidal / learned tables (notebook 04); randomized position ids
(Ruoss et al. 2023); RoPE and ALiBi (notebooks 09-10). The model classes choose one scheme by name
(`POSITION_SCHEMES`); "none" (NoPE) leaves positions to the causal mask alone.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from .validation import (
    check_batch_size,
    check_float_tensor,
    check_ids,
    check_position_ids,
    check_positive_int,
    check_table_input,
    check_vector,
    describe,
)


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
        check_positive_int("d_model", d_model)
        self.embedding = nn.Embedding(check_positive_int("vocab_size", vocab_size), d_model)
        self.scale = math.sqrt(d_model) if scale else 1.0
        if scale:  # std 1/sqrt(d_model): after the x sqrt(d_model) scale, std 1 (sinusoidal positions: RMS 1/sqrt(2))
            nn.init.normal_(self.embedding.weight, std=d_model**-0.5)

    def forward(self, tokens: Tensor) -> Tensor:
        """(B, T) ids -> (B, T, d_model). Checking that every id is below vocab_size costs a min/max reduction."""
        check_ids("tokens", tokens, self.embedding.num_embeddings)
        return self.embedding(tokens) * self.scale


class SinusoidalPositionalEncoding(nn.Module):
    """Adds the fixed sinusoidal table (a buffer, not a parameter) to (B, T, d_model) inputs."""

    def __init__(self, d_model: int, max_len: int = 512) -> None:
        super().__init__()
        self.d_model, self.max_len = d_model, max_len
        self.register_buffer("table", sinusoidal_table(max_len, d_model), persistent=False)

    def forward(self, x: Tensor, offset: int = 0, positions: Tensor | None = None) -> Tensor:
        """(B, T, d_model) floats -> same; `positions` (T,) or (B, T) ints replace offset..offset+T-1."""
        check_table_input(x, offset, positions, self.max_len, self.d_model)
        table = self.table[offset : offset + x.size(1)] if positions is None else self.table[positions]
        return (x + table).to(x.dtype)  # table (T, d_model) or (B, T, d_model); the sum rounded once to x's dtype


class LearnedPositionalEmbedding(nn.Module):
    """Adds a trained vector per position (GPT style) to (B, T, d_model) inputs.

    Sizes in the sinusoidal sibling's order, (d_model, max_len); the table is nn.Embedding(max_len, d_model).
    """

    def __init__(self, d_model: int, max_len: int) -> None:
        super().__init__()
        self.d_model, self.max_len = d_model, max_len
        self.embedding = nn.Embedding(check_positive_int("max_len", max_len), check_positive_int("d_model", d_model))

    def forward(self, x: Tensor, offset: int = 0, positions: Tensor | None = None) -> Tensor:
        """(B, T, d_model) floats -> same; `positions` (T,) or (B, T) ints replace offset..offset+T-1."""
        check_table_input(x, offset, positions, self.max_len, self.d_model)
        if positions is None:
            positions = torch.arange(offset, offset + x.size(1), device=x.device)  # (T,)
        return (x + self.embedding(positions)).to(x.dtype)  # the sum rounded once to x's dtype (fp16 stays fp16)


# How a model learns where a token is: added vectors (sinusoidal, learned), rotated q/k (rope, below),
# a distance penalty on the scores (alibi, below), or nothing but the causal mask (none, "NoPE").
POSITION_SCHEMES = ("learned", "sinusoidal", "rope", "alibi", "none")


def position_embedding(kind: str, n_positions: int, d_model: int) -> nn.Module | None:
    """The module that adds positions to the embedded tokens for scheme `kind`; None when nothing is added."""
    if kind == "learned":
        return LearnedPositionalEmbedding(d_model, n_positions)
    if kind == "sinusoidal":
        return SinusoidalPositionalEncoding(d_model, n_positions)
    if kind in POSITION_SCHEMES:
        return None  # rope and alibi act inside attention; none (NoPE) leaves positions to the causal mask
    raise ValueError(f"kind must be one of {POSITION_SCHEMES}, got {kind!r}")


def randomized_positions(batch: int, length: int, max_position: int, device=None, generator=None) -> Tensor:
    """(batch, length) position ids: per row a sorted random subset of 0..max_position-1 (Ruoss et al. 2023).

    Trained this way, a model meets every id up to max_position, and only their order carries meaning.
    """
    for name, value in (("batch", batch), ("length", length), ("max_position", max_position)):
        check_positive_int(name, value)
    if length > max_position:
        raise ValueError(f"length ({length}) must be at most max_position ({max_position})")
    scores = torch.rand(batch, max_position, generator=generator)  # a random permutation per row ...
    chosen = scores.topk(length, dim=1).indices  # ... of which the first `length` ids are kept
    return chosen.sort(dim=1).values.to(device)  # (batch, length), increasing


# RoPE, rotary position embedding (Su et al. 2021): rotate q and k by angles proportional to position.
# Pairs of channels (2i, 2i+1) of a query or key at position m are read as one complex number and multiplied
# by exp(i * m * theta_i), theta_i = base^(-2i / d_k). A rotation keeps lengths, and the dot product of a
# query rotated by m with a key rotated by n depends only on m - n: attention sees *relative* positions.


def rope_frequencies(d_k: int, base: float = 10000.0) -> Tensor:
    """(d_k / 2,) angular frequencies theta_i = base^(-2i / d_k), fastest first."""
    if check_positive_int("d_k", d_k) % 2:
        raise ValueError(f"d_k must be a positive even int, got {d_k!r}")
    if not isinstance(base, (int, float)) or isinstance(base, bool) or not math.isfinite(base) or base <= 1:
        raise ValueError(f"base must be a finite number > 1, got {base!r}")
    return base ** (-torch.arange(0, d_k, 2, dtype=torch.float32) / d_k)


def apply_rope(x: Tensor, positions: Tensor, inv_freq: Tensor) -> Tensor:
    """Rotate channel pairs (2i, 2i+1) of x (..., T, d_k) by positions * inv_freq[i]; same shape and dtype.

    positions: integer (T,) or (B, T) absolute positions; with x (B, H, T, d_k) a (B, T) tensor gives
    every sequence its own positions.
    """
    check_float_tensor("x", x, min_dim=2)  # (..., T, d_k)
    check_position_ids("positions", positions)
    check_vector("inv_freq", inv_freq, "(d_k / 2,)")
    T, d_k = x.shape[-2:]
    if positions.size(-1) != T or d_k != 2 * inv_freq.numel():
        raise ValueError(f"positions {tuple(positions.shape)} and inv_freq ({inv_freq.numel()},) must match "
                         f"x (..., T={T}, d_k={d_k}) with T positions and d_k / 2 frequencies")
    angles = positions.to(torch.float32)[..., None] * inv_freq.to(x.device)  # (T, d_k/2) or (B, T, d_k/2)
    if positions.dim() == 2:
        if x.dim() != 4:
            raise ValueError(f"(B, T) positions need x of shape (B, H, T, d_k), got {tuple(x.shape)}")
        check_batch_size("positions", positions, x.size(0), of="x")
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
            raise ValueError(f"x must have shape (B, H, T, d_k={self.d_k}), got {describe(x)}")
        return apply_rope(x, positions, self.inv_freq)

    def extra_repr(self) -> str:
        return f"d_k={self.d_k}, base={self.base}"


# ALiBi (Press et al. 2022): no position vectors; each head adds -slope * distance to its attention scores.
# Head h of H gets the slope 2^(-8 (h+1) / H) (a geometric sequence from 2^(-8/H) down to 2^-8); when H is
# not a power of two, the paper takes the slopes of the next smaller power of two and fills in every other
# slope of the next larger one. A steep head looks at its neighbours, a shallow head far back.


def alibi_slopes(n_heads: int) -> Tensor:
    """(n_heads,) slopes in the paper's order: 1/2, 1/4, ... 1/256 for 8 heads (descending for a power of two).

    Otherwise not sorted: the power of two below's slopes, then every other slope of the one above
    (6 heads: 1/4, 1/16, 1/64, 1/256, 1/2, 1/8).
    """
    check_positive_int("n_heads", n_heads)

    def power_of_two(n: int) -> list[float]:
        return [2.0 ** (-8.0 * (h + 1) / n) for h in range(n)]

    below = 2 ** math.floor(math.log2(n_heads))
    slopes = power_of_two(below) + power_of_two(2 * below)[0::2][: n_heads - below]
    return torch.tensor(slopes, dtype=torch.float32)


def alibi_bias(slopes: Tensor, q_positions: Tensor, k_positions: Tensor) -> Tensor:
    """Additive scores -slope_h * |i - j|: (H, T_q, T_k), or (B, H, T_q, T_k) for (B, T) positions.

    For a causal decoder i >= j, so this is the paper's -slope * (i - j).
    """
    check_vector("slopes", slopes, "(H,)")
    check_position_ids("q_positions", q_positions)
    check_position_ids("k_positions", k_positions)
    distance = (q_positions[..., :, None] - k_positions[..., None, :]).abs()  # (T_q, T_k) or (B, T_q, T_k)
    return -slopes.to(distance.device)[:, None, None] * distance[..., None, :, :].float()  # (..., H, T_q, T_k)
