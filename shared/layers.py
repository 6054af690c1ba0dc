"""Transformer layers: position-wise feed-forward, Post-LN encoder/decoder layers, Pre-LN block.

Every layer keeps the attention weights of its last forward pass when called with need_weights=True
(`self_attn_weights`, `cross_attn_weights`, each (B, H, T_q, T_k)), so notebooks can draw heatmaps;
`stack_attention_weights` collects them from a stack of layers.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor, nn

from .attention import MultiHeadAttention
from .kv_cache import KVCache
from .norms import make_norm
from .validation import check_bool, check_choice, check_dropout, check_nonempty, check_positive_int

ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU, "swiglu": nn.SiLU}  # swiglu: a SiLU-gated linear unit


def swiglu_hidden_size(d_model: int, d_ff: int) -> int:
    """Hidden width of a SwiGLU FFN with the weight count of a 2-matrix MLP of width d_ff: round(2 d_ff / 3).

    A GELU MLP has 2 * d_model * d_ff weights; SwiGLU has three matrices (gate, up, down), 3 * d_model * h.
    """
    check_positive_int("d_model", d_model)
    check_positive_int("d_ff", d_ff)
    return max(1, round(2 * d_ff / 3))


class FeedForward(nn.Module):
    """FFN(x) = W_2 act(W_1 x + b_1) + b_2, applied to every position alone: (B, T, d_model) -> same.

    activation="swiglu" (Shazeer 2020, Llama): FFN(x) = W_2 (SiLU(W_gate x) * W_1 x), three matrices of d_ff.
    """

    def __init__(
        self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str = "relu", bias: bool = True
    ) -> None:
        super().__init__()
        check_choice("activation", activation, tuple(ACTIVATIONS))
        self.linear1 = nn.Linear(check_positive_int("d_model", d_model), check_positive_int("d_ff", d_ff),
                                 bias=check_bool("bias", bias))  # d_ff=0 would build empty matrices silently
        self.gate = nn.Linear(d_model, d_ff, bias=bias) if activation == "swiglu" else None
        self.activation = ACTIVATIONS[activation]()
        self.dropout = nn.Dropout(check_dropout("dropout", dropout))
        self.linear2 = nn.Linear(d_ff, d_model, bias=bias)

    def forward(self, x: Tensor) -> Tensor:
        h = self.activation(self.linear1(x)) if self.gate is None else self.activation(self.gate(x)) * self.linear1(x)
        return self.linear2(self.dropout(h))  # h: (B, T, d_ff)


class EncoderLayer(nn.Module):
    """Post-LN encoder layer (the 2017 paper): x = LN(x + SelfAttn(x)); x = LN(x + FFN(x)). rope: RoPE in SelfAttn."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1, activation: str = "relu",
                 rope: bool = False):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout, rope=rope)
        self.ff = FeedForward(d_model, d_ff, dropout, activation)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.self_attn_weights = None

    def forward(self, x: Tensor, src_mask: Tensor | None = None, need_weights: bool = False,
                positions: Tensor | None = None) -> Tensor:
        """(B, T_src, d_model) -> same; src_mask (B, 1, 1, T_src) hides padding; positions for RoPE."""
        attn, self.self_attn_weights = self.self_attn(x, x, x, src_mask, need_weights=need_weights, positions=positions)
        x = self.norm1(x + self.dropout(attn))
        return self.norm2(x + self.dropout(self.ff(x)))


class DecoderLayer(nn.Module):
    """Post-LN decoder layer: masked self-attention, cross-attention over `memory`, FFN; each + LN.

    rope=True rotates q and k of the self-attention (cross-attention has no positions to compare).
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1, activation: str = "relu",
                 rope: bool = False):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout, rope=rope)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout, activation)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.self_attn_weights = self.cross_attn_weights = None

    def forward(self, x: Tensor, memory: Tensor, tgt_mask: Tensor | None = None, memory_mask: Tensor | None = None,
                need_weights: bool = False, positions: Tensor | None = None) -> Tensor:
        """x (B, T_tgt, d_model), memory (B, T_src, d_model) -> (B, T_tgt, d_model).

        tgt_mask (B, 1, T_tgt, T_tgt) is causal AND target padding; memory_mask (B, 1, 1, T_src) is the
        *source* padding mask — never the target mask.
        """
        attn, self.self_attn_weights = self.self_attn(x, x, x, tgt_mask, need_weights=need_weights, positions=positions)
        x = self.norm1(x + self.dropout(attn))
        attn, self.cross_attn_weights = self.cross_attn(x, memory, memory, memory_mask, need_weights=need_weights)
        x = self.norm2(x + self.dropout(attn))
        return self.norm3(x + self.dropout(self.ff(x)))


class PreLNBlock(nn.Module):
    """Pre-LN block (GPT-2): x = x + Attn(LN(x)); x = x + FFN(LN(x)). Trains without warm-up tricks.

    Options for a Llama-style block: norm="rmsnorm", activation="swiglu", bias=False, norm_eps, and any
    `MultiHeadAttention` option (n_kv_heads, fused_qkv, rope, rope_base) as a keyword.
    """

    def __init__(
        self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.0, activation: str = "gelu", *,
        norm: str = "layernorm", bias: bool = True, norm_eps: float = 1e-5, **attention_options,
    ):
        super().__init__()
        self.norm1 = make_norm(norm, d_model, bias, norm_eps)
        self.attn = MultiHeadAttention(d_model, n_heads, dropout, bias=bias, **attention_options)
        self.norm2 = make_norm(norm, d_model, bias, norm_eps)
        self.ff = FeedForward(d_model, d_ff, dropout, activation, bias=bias)
        self.dropout = nn.Dropout(dropout)
        self.self_attn_weights = None

    def forward(self, x: Tensor, mask: Tensor | None = None, causal: bool = False, need_weights: bool = False,
                cache: KVCache | None = None, positions: Tensor | None = None) -> Tensor:
        """(B, T, d_model) -> same. `causal=True` hides later positions; `cache` holds past keys/values."""
        h = self.norm1(x)
        attn, self.self_attn_weights = self.attn(h, h, h, mask, causal=causal, need_weights=need_weights, cache=cache,
                                                 positions=positions)
        x = x + self.dropout(attn)
        return x + self.dropout(self.ff(self.norm2(x)))


def stack_attention_weights(layers: Iterable[nn.Module], name: str = "self_attn_weights") -> Tensor:
    """(n_layers, B, H, T_q, T_k): the weights `name` each layer kept from its last pass with need_weights=True."""
    maps = check_nonempty("layers", [getattr(layer, name) for layer in layers], "one layer")
    if any(m is None for m in maps):
        raise RuntimeError("no attention weights stored: call the model with need_weights=True first")
    return torch.stack(maps)


def num_parameters(model: nn.Module) -> int:
    """Parameters of `model`, a tied (shared) tensor counted once."""
    return sum(p.numel() for p in model.parameters())
