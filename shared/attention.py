"""Scaled dot-product attention and fused multi-head attention (one projection for every head).

The explicit per-head form of notebook 02 is in `shared.explicit_attention`; the KV cache in `shared.kv_cache`.

Shapes: B batch, H heads, T_q / T_k query / key lengths, d_model model width, d_k = d_model // H.
Masks are bool, True = may attend, broadcastable to (B, H, T_q, T_k) (see `shared.masks`).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .kv_cache import KVCache
from .masks import causal_mask, check_mask, combine_masks
from .positions import RotaryEmbedding, alibi_bias, alibi_slopes
from .validation import (
    check_attention_inputs,
    check_bool,
    check_bools,
    check_divisible,
    check_dropout,
    check_instance,
    check_position_ids,
    check_positive_int,
    check_sequence,
    describe,
)


def scaled_dot_product_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, dropout_p: float = 0.0, bias: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """softmax(q k^T / sqrt(d_k) + bias) v, returning (output (..., T_q, d_v), weights (..., T_q, T_k)).

    bias: an optional float tensor broadcastable to the scores (ALiBi's distance penalty), added before masking;
    -inf hides a key, as False in `mask` does (torch's float-mask convention); +inf and NaN are refused.
    dropout_p: the probability in [0, 1) of dropping each weight (training only: the caller passes 0 in eval).

    Masked positions get exactly zero weight; a fully masked row gives zero weights and a zero output
    (finite in fp32, fp16 and bf16). What `torch.nn.functional.scaled_dot_product_attention` returns for such a
    row depends on its backend and version, so `MultiHeadAttention`'s fast path sets that row to zero as well.
    """
    check_attention_inputs(q, k, v, mask, dropout_p, bias)  # shapes, one dtype, d_k >= 1, bias finite or -inf
    d_k = q.size(-1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # (..., T_q, T_k)
    if bias is not None:
        scores = scores + bias
        mask = combine_masks(mask, bias != -math.inf)  # a -inf in the bias is a masked key
    if mask is not None:
        # finfo.min, not -inf: a row with every key masked would otherwise become NaN.
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)  # fully masked rows: uniform -> zero
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    return weights @ v, weights


def repeat_kv(x: Tensor, n_rep: int) -> Tensor:
    """(B, H_kv, T, d_k) -> (B, H_kv * n_rep, T, d_k): query head h reads key/value head h // n_rep."""
    if not isinstance(x, Tensor) or x.dim() != 4:
        raise ValueError(f"x must have shape (B, H_kv, T, d_k), got {describe(x)}")
    check_positive_int("n_rep", n_rep)
    if n_rep == 1:
        return x
    B, H_kv, T, d_k = x.shape
    return x[:, :, None].expand(B, H_kv, n_rep, T, d_k).reshape(B, H_kv * n_rep, T, d_k)  # (B, H, T, d_k)


class MultiHeadAttention(nn.Module):
    """Fused multi-head attention: one d_model-wide projection each for q, k and v computes every head at once.

    forward(query (B, T_q, d_model), key/value (B, T_k, d_model)) -> (output (B, T_q, d_model),
    weights (B, H, T_q, T_k) when need_weights else None). Without weights it takes PyTorch's fused
    kernel; with them it computes attention step by step with `scaled_dot_product_attention`.
    Options: n_kv_heads < n_heads is grouped-query attention (1: multi-query), H / n_kv_heads query heads
    share each key/value head; fused_qkv computes q, k and v with one matrix `w_qkv` (as GPT-2's `c_attn` does; the
    same maths as three, an implementation choice); bias=False drops biases; rope_base is RoPE's base (10,000
    in the RoPE paper; a trained model names its own).
    """

    def __init__(
        self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True, rope: bool = False,
        n_kv_heads: int | None = None, fused_qkv: bool = False, alibi: bool = False, rope_base: float = 10000.0,
    ) -> None:
        super().__init__()
        _check_heads(d_model, n_heads, dropout, bias)
        check_bools(rope=rope, fused_qkv=fused_qkv, alibi=alibi)
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        if not isinstance(n_kv_heads, int) or isinstance(n_kv_heads, bool) or n_kv_heads < 1 or n_heads % n_kv_heads:
            raise ValueError(f"n_kv_heads must be a positive int that divides n_heads={n_heads}, got {n_kv_heads!r}")
        self.d_model, self.n_heads, self.d_k = d_model, n_heads, d_model // n_heads
        self.n_kv_heads, self.fused_qkv = n_kv_heads, fused_qkv
        self.dropout = dropout
        self.rope = RotaryEmbedding(self.d_k, rope_base) if rope else None  # rotates q and k of self-attention
        if rope and alibi:
            raise ValueError("choose one position scheme: rope=True or alibi=True, not both")
        # ALiBi: one distance penalty per head (a non-persistent buffer: checkpoints do not change)
        self.register_buffer("alibi_slopes", alibi_slopes(n_heads) if alibi else None, persistent=False)
        d_kv = n_kv_heads * self.d_k  # width of all key (or value) heads together
        if fused_qkv:
            self.w_qkv = nn.Linear(d_model, d_model + 2 * d_kv, bias=bias)  # rows: [W^Q; W^K; W^V]
        else:
            self.w_q = nn.Linear(d_model, d_model, bias=bias)  # all heads' W^Q side by side
            self.w_k = nn.Linear(d_model, d_kv, bias=bias)
            self.w_v = nn.Linear(d_model, d_kv, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def split_heads(self, x: Tensor) -> Tensor:
        """(B, T, heads * d_k) -> (B, heads, T, d_k)."""
        B, T, _ = x.shape
        return x.view(B, T, -1, self.d_k).transpose(1, 2)  # (B, T, H, d_k) -> (B, H, T, d_k)

    def project_qkv(self, query: Tensor, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """-> q (B, H, T_q, d_k), k and v (B, n_kv_heads, T_k, d_k)."""
        if not self.fused_qkv:
            return self.split_heads(self.w_q(query)), self.split_heads(self.w_k(key)), self.split_heads(self.w_v(value))
        sizes = [self.d_model, self.n_kv_heads * self.d_k, self.n_kv_heads * self.d_k]
        if key is query and value is query:  # self-attention: one matrix product for q, k and v
            q, k, v = self.w_qkv(query).split(sizes, dim=-1)
        else:  # cross-attention: the same weights, applied to different inputs
            biases = self.w_qkv.bias.split(sizes) if self.w_qkv.bias is not None else (None,) * 3
            weights = self.w_qkv.weight.split(sizes)  # [W^Q, W^K, W^V]
            q, k, v = (F.linear(x, w, b) for x, w, b in zip((query, key, value), weights, biases))
        return self.split_heads(q), self.split_heads(k), self.split_heads(v)

    def merge_heads(self, x: Tensor) -> Tensor:
        """(B, H, T, d_k) -> (B, T, d_model)."""
        B, H, T, d_k = x.shape
        return x.transpose(1, 2).contiguous().view(B, T, H * d_k)  # (B, T, H, d_k) -> (B, T, d_model)

    def forward(self, query: Tensor, key: Tensor | None = None, value: Tensor | None = None, mask: Tensor | None = None,
                *, causal: bool = False, need_weights: bool = False, cache: KVCache | None = None,
                positions: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """positions: (T,) or (B, T) ints, the new tokens' positions for RoPE/ALiBi (default: after the cache)."""
        cross = key is not None and key is not query
        if cross and (self.rope is not None or self.alibi_slopes is not None or cache is not None):
            raise ValueError("rope=True, alibi=True and cache apply to self-attention only (a cache appends the new "
                             "tokens' keys; cross-attention's memory is not new tokens): call with key=None")
        key = query if key is None else key
        value = key if value is None else value
        _check_inputs(query, key, value, self.d_model, causal, need_weights)
        check_instance("cache", cache, KVCache, optional=True)
        q, k, v = self.project_qkv(query, key, value)  # (B, H, T_q, d_k), k and v (B, H_kv, T_k, d_k)
        if self.rope is not None:  # rotate the NEW tokens' q and k before the cache stores k
            if positions is None:
                past = len(cache) if cache is not None else 0
                positions = torch.arange(past, past + q.size(2), device=q.device)  # (T_q,)
            q, k = self.rope(q, positions), self.rope(k, positions)
        elif positions is not None and self.alibi_slopes is None:
            raise ValueError("positions is only used with rope=True or alibi=True")
        if positions is not None and self.alibi_slopes is not None:
            if cache is not None:
                raise ValueError("alibi=True with a cache takes the default positions: pass positions=None")
            check_position_ids("positions", positions, q.size(2), q.size(0), of="the input")  # (T,) or (B, T)
        if cache is not None:
            k, v = cache.update(k, v)  # (B, H_kv, T_past + T_k, d_k): the cache stores only the KV heads
        n_rep = self.n_heads // self.n_kv_heads
        T_q, T_k = q.size(2), k.size(2)
        fused_kernel = self.alibi_slopes is None and not need_weights and causal and mask is None and T_q == T_k
        if not fused_kernel:  # torch documents enable_gqa for CUDA only (experimental): with a mask, copy KV heads
            k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)  # (B, H, T_k, d_k): each KV head serves n_rep queries
        dropout_p = self.dropout if self.training else 0.0
        if mask is not None:
            check_mask(mask, (q.size(0), self.n_heads, T_q, T_k))
            mask = mask.reshape((1,) * (4 - mask.dim()) + tuple(mask.shape))  # 4-D: (B | 1, H | 1, T_q | 1, T_k)
        bias = None
        if self.alibi_slopes is not None:  # keys sit at 0..T_k-1, the new queries at the last T_q of them
            k_pos = positions if positions is not None else torch.arange(T_k, device=q.device)  # (T_k,) or (B, T_k)
            q_pos = positions if positions is not None else k_pos[T_k - T_q :]
            bias = alibi_bias(self.alibi_slopes, q_pos, k_pos).to(q.dtype)  # (H, T_q, T_k) or (B, H, T_q, T_k)
        if fused_kernel:
            out = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True, enable_gqa=n_rep > 1)
            return self.w_o(self.merge_heads(out)), None
        if causal and T_q > 1:
            mask = combine_masks(mask, causal_mask(T_q, q.device, n_keys=T_k))
        if need_weights:
            out, weights = scaled_dot_product_attention(q, k, v, mask, dropout_p, bias=bias)
        else:
            attn_mask = mask
            if bias is not None:  # the fused kernel takes a float mask: the bias, and finfo.min where masked
                attn_mask = bias if mask is None else torch.where(mask, bias, torch.finfo(q.dtype).min)
            out, weights = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p), None
            if mask is not None:  # a row with every key masked: the kernel's answer depends on its backend (with
                out = out.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)  # ALiBi, the mean of v); zero it
        return self.w_o(self.merge_heads(out)), weights  # (B, T_q, d_model)


def _check_heads(d_model: int, n_heads: int, dropout: float, bias: bool) -> None:
    check_positive_int("d_model", d_model)
    check_positive_int("n_heads", n_heads)
    check_divisible(d_model, n_heads)
    check_dropout("dropout", dropout)
    check_bool("bias", bias)


def _check_inputs(query, key, value, d_model: int, causal: bool, need_weights: bool) -> None:
    check_bools(causal=causal, need_weights=need_weights)  # "no" is truthy: it would mean True
    for name, x in (("query", query), ("key", key), ("value", value)):
        check_sequence(name, x, d_model)  # (B, T >= 1, d_model)
    if key.shape[:2] != value.shape[:2] or key.size(0) != query.size(0):
        raise ValueError(
            f"query, key and value must share the batch size and key/value their length, got shapes "
            f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}"
        )
