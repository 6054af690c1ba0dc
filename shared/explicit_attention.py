"""Multi-head attention as the paper draws it: H separate heads, concatenated, then W^O (notebook 02).

`copy_explicit_to_fused` / `copy_fused_to_explicit` move weights between this form and the fused
`shared.attention.MultiHeadAttention`, so a test (and notebook 02) can prove the two compute the same thing.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .attention import MultiHeadAttention, _check_heads, _check_inputs, scaled_dot_product_attention
from .masks import causal_mask, check_mask, combine_masks


class AttentionHead(nn.Module):
    """One head with its own W^Q, W^K, W^V of shape (d_model -> d_k)."""

    def __init__(self, d_model: int, d_k: int, bias: bool = True) -> None:
        super().__init__()
        self.w_q = nn.Linear(d_model, d_k, bias=bias)
        self.w_k = nn.Linear(d_model, d_k, bias=bias)
        self.w_v = nn.Linear(d_model, d_k, bias=bias)

    def forward(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None, dropout_p: float = 0.0):
        """(B, T_q, d_model), (B, T_k, d_model) -> (output (B, T_q, d_k), weights (B, T_q, T_k))."""
        q = self.w_q(query)[:, None]  # (B, 1, T_q, d_k): a head axis of size 1 so 4-D masks broadcast
        k = self.w_k(key)[:, None]
        v = self.w_v(value)[:, None]
        out, weights = scaled_dot_product_attention(q, k, v, mask, dropout_p)
        return out[:, 0], weights[:, 0]


class ExplicitMultiHeadAttention(nn.Module):
    """Multi-head attention as the paper draws it: H separate heads, concatenated, then W^O.

    The interface and parameter count of `MultiHeadAttention` (without its KV cache and modern options);
    slower, but every head is visible.
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True) -> None:
        super().__init__()
        _check_heads(d_model, n_heads, dropout, bias)
        self.d_model, self.n_heads, self.d_k = d_model, n_heads, d_model // n_heads
        self.dropout = dropout
        self.heads = nn.ModuleList(AttentionHead(d_model, self.d_k, bias) for _ in range(n_heads))
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, query: Tensor, key: Tensor | None = None, value: Tensor | None = None, mask: Tensor | None = None,
                *, causal: bool = False, need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        """query (B, T_q, d_model), key/value (B, T_k, d_model) -> (output (B, T_q, d_model), weights or None).

        `mask` broadcasts to (B, H, T_q, T_k), e.g. (B, 1, 1, T_k), (1, 1, T_q, T_k) or (H, T_q, T_k).
        """
        key = query if key is None else key
        value = key if value is None else value
        _check_inputs(query, key, value, self.d_model, causal, need_weights)
        T_q, T_k = query.size(1), key.size(1)
        if mask is not None:
            check_mask(mask, (query.size(0), self.n_heads, T_q, T_k))
            mask = mask.reshape((1,) * (4 - mask.dim()) + tuple(mask.shape))  # 4-D: (B | 1, H | 1, T_q | 1, T_k)
        if causal:
            mask = combine_masks(mask, causal_mask(T_q, query.device, n_keys=T_k))
        dropout_p = self.dropout if self.training else 0.0
        outs, weights = [], []
        for h, head in enumerate(self.heads):
            head_mask = mask[:, h : h + 1] if mask is not None and mask.size(1) > 1 else mask  # (B | 1, 1, ...)
            out, w = head(query, key, value, head_mask, dropout_p)  # (B, T_q, d_k), (B, T_q, T_k)
            outs.append(out)
            weights.append(w)
        out = self.w_o(torch.cat(outs, dim=-1))  # concat heads: (B, T_q, H * d_k) -> (B, T_q, d_model)
        return out, (torch.stack(weights, dim=1) if need_weights else None)  # (B, H, T_q, T_k)


@torch.no_grad()
def copy_explicit_to_fused(explicit: ExplicitMultiHeadAttention, fused: MultiHeadAttention) -> None:
    """Stack the per-head W^Q, W^K, W^V row blocks into the fused projections (head h = rows h*d_k..)."""
    _check_pair(explicit, fused)
    for name in ("w_q", "w_k", "w_v"):
        target = getattr(fused, name)
        target.weight.copy_(torch.cat([getattr(h, name).weight for h in explicit.heads], dim=0))
        if target.bias is not None:
            target.bias.copy_(torch.cat([getattr(h, name).bias for h in explicit.heads], dim=0))
    fused.w_o.load_state_dict(explicit.w_o.state_dict())


@torch.no_grad()
def copy_fused_to_explicit(fused: MultiHeadAttention, explicit: ExplicitMultiHeadAttention) -> None:
    """Split the fused projections into H row blocks of d_k rows, one per explicit head."""
    _check_pair(explicit, fused)
    for name in ("w_q", "w_k", "w_v"):
        source = getattr(fused, name)
        for h, head in enumerate(explicit.heads):
            rows = slice(h * fused.d_k, (h + 1) * fused.d_k)
            getattr(head, name).weight.copy_(source.weight[rows])
            if source.bias is not None:
                getattr(head, name).bias.copy_(source.bias[rows])
    explicit.w_o.load_state_dict(fused.w_o.state_dict())


def _check_pair(explicit, fused) -> None:
    if (explicit.d_model, explicit.n_heads) != (fused.d_model, fused.n_heads):
        raise ValueError(
            f"explicit (d_model={explicit.d_model}, n_heads={explicit.n_heads}) and fused "
            f"(d_model={fused.d_model}, n_heads={fused.n_heads}) attention must have the same sizes"
        )
    if fused.fused_qkv or fused.n_kv_heads != fused.n_heads:
        raise ValueError("copying needs plain multi-head attention: fused_qkv=False and n_kv_heads=None (= n_heads), "
                         f"got fused_qkv={fused.fused_qkv}, n_kv_heads={fused.n_kv_heads}")
