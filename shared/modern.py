"""Pieces of a modern LLM block (Llama-style): RMSNorm, the SwiGLU width rule, repeated KV heads, KV-cache bytes.

They arrive in the course's model as options: `PreLNBlock(norm="rmsnorm", activation="swiglu")`,
`MultiHeadAttention(n_kv_heads=..., fused_qkv=True, bias=False)` and the matching `GPTConfig` fields.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor, nn

NORMS = ("layernorm", "rmsnorm")


class RMSNorm(nn.Module):
    """y = x / sqrt(mean(x^2) + eps) * g over the last dim: (..., d_model) -> same. No mean, no bias.

    Equal to `torch.nn.RMSNorm(d_model, eps)`; eps=None uses the input dtype's machine epsilon, as torch does.
    """

    def __init__(self, d_model: int, eps: float | None = 1e-5) -> None:
        super().__init__()
        if not isinstance(d_model, int) or isinstance(d_model, bool) or d_model < 1:
            raise ValueError(f"d_model must be a positive int, got {d_model!r}")
        if eps is not None and not (isinstance(eps, (int, float)) and eps >= 0):
            raise ValueError(f"eps must be a number >= 0 or None, got {eps!r}")
        self.d_model, self.eps = d_model, eps
        self.weight = nn.Parameter(torch.ones(d_model))  # the gain g, one per channel

    def forward(self, x: Tensor) -> Tensor:
        if not isinstance(x, Tensor) or x.size(-1) != self.d_model:
            raise ValueError(f"x must have shape (..., d_model={self.d_model}), got {_describe(x)}")
        eps = torch.finfo(x.dtype).eps if self.eps is None else self.eps
        mean_square = x.float().pow(2).mean(dim=-1, keepdim=True)  # (..., 1), in fp32 even for half inputs
        return (x.float() * torch.rsqrt(mean_square + eps)).to(x.dtype) * self.weight

    def extra_repr(self) -> str:
        return f"{self.d_model}, eps={self.eps}"


def make_norm(kind: str, d_model: int, bias: bool = True) -> nn.Module:
    """'layernorm' -> nn.LayerNorm (with or without its bias), 'rmsnorm' -> RMSNorm; (..., d_model) -> same."""
    if kind == "layernorm":
        return nn.LayerNorm(d_model, bias=bias)
    if kind == "rmsnorm":
        return RMSNorm(d_model)
    raise ValueError(f"norm must be one of {NORMS}, got {kind!r}")


def swiglu_hidden_size(d_model: int, d_ff: int) -> int:
    """Hidden width of a SwiGLU FFN with the weight count of a 2-matrix MLP of width d_ff: round(2 d_ff / 3).

    A GELU MLP has 2 * d_model * d_ff weights; SwiGLU has three matrices (gate, up, down), 3 * d_model * h.
    """
    for name, value in (("d_model", d_model), ("d_ff", d_ff)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    return max(1, round(2 * d_ff / 3))


def repeat_kv(x: Tensor, n_rep: int) -> Tensor:
    """(B, H_kv, T, d_k) -> (B, H_kv * n_rep, T, d_k): query head h reads key/value head h // n_rep."""
    if not isinstance(x, Tensor) or x.dim() != 4:
        raise ValueError(f"x must have shape (B, H_kv, T, d_k), got {_describe(x)}")
    if not isinstance(n_rep, int) or isinstance(n_rep, bool) or n_rep < 1:
        raise ValueError(f"n_rep must be a positive int, got {n_rep!r}")
    if n_rep == 1:
        return x
    B, H_kv, T, d_k = x.shape
    return x[:, :, None].expand(B, H_kv, n_rep, T, d_k).reshape(B, H_kv * n_rep, T, d_k)  # (B, H, T, d_k)


def kv_cache_bytes(caches: Iterable) -> int:
    """Bytes held by the keys and values of KV caches (one per layer), measured from their tensors."""
    total = 0
    for cache in caches:
        for t in (cache.k, cache.v):
            if t is not None:
                total += t.numel() * t.element_size()
    return total


def _describe(x) -> str:
    return f"shape {tuple(x.shape)} dtype {x.dtype}" if isinstance(x, Tensor) else type(x).__name__
