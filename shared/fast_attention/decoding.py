"""Split-KV decoding (flash-decoding): attend to each block of a KV cache separately, then merge the partial
outputs with the online softmax's rule, weighting each by exp(lse_block - lse_all).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ..attention import repeat_kv
from ..kv_cache import KVCache
from ..masks import causal_mask
from ..validation import check_float_tensor, check_instance, check_positive_int, describe
from .tiled import tiled_attention_forward


def merge_partials(outs: Tensor, lses: Tensor) -> tuple[Tensor, Tensor]:
    """Partial results over disjoint key blocks, outs (S, ..., T_q, d_v) and lses (S, ..., T_q) -> (out, lse).

    Each block's output is normalised over its own keys; rescaled by exp(lse_s - lse) it counts as its share.
    """
    check_float_tensor("outs", outs, min_dim=3)
    check_float_tensor("lses", lses, min_dim=2)
    if outs.shape[:-1] != lses.shape:
        raise ValueError(f"lses must have the shape of outs without its last dim (S, ..., T_q), got outs "
                         f"{describe(outs)} and lses {describe(lses)}")
    if lses.dtype != outs.dtype:
        raise TypeError(f"outs and lses must have the same dtype, got {outs.dtype} and {lses.dtype}")
    if (lses.isnan() | torch.isposinf(lses)).any():
        raise ValueError("lses must be finite or -inf (a block whose keys were all masked), got NaN or +inf")
    lse = torch.logsumexp(lses, dim=0)  # (..., T_q): -inf where every block was fully masked
    weights = torch.exp(lses - torch.where(torch.isneginf(lse), 0.0, lse))  # (S, ..., T_q), summing to 1 per row
    return (weights[..., None] * outs).sum(dim=0), lse


def split_kv_attention(q: Tensor, cache: KVCache, n_splits: int) -> Tensor:
    """The new tokens' queries q (B, H, T_q, d_k) against a filled KV cache, in n_splits key blocks -> (B, H, T_q, d_v).

    The T_q queries are the cache's last T_q positions (causal among themselves, as `MultiHeadAttention` does).
    """
    check_instance("cache", cache, KVCache)
    if len(cache) == 0:
        raise ValueError("cache is empty: run the prompt through the model with the cache first")
    check_float_tensor("q", q)
    check_positive_int("n_splits", n_splits)
    if q.dtype != cache.k.dtype:
        raise TypeError(f"q has dtype {q.dtype} but the cache holds {cache.k.dtype}: convert q (or the model) so "
                        "they match")
    B, H_kv, T, _ = cache.k.shape
    if q.dim() != 4 or q.size(0) != B or q.size(1) % H_kv or q.size(-1) != cache.k.size(-1) or q.size(2) > T:
        raise ValueError(f"q must have shape (B={B}, H (a multiple of {H_kv}), T_q <= {T}, "
                         f"d_k={cache.k.size(-1)}) to match the cache, got {describe(q)}")
    k, v = repeat_kv(cache.k, q.size(1) // H_kv), repeat_kv(cache.v, q.size(1) // H_kv)  # (B, H, T, d_k)
    mask = causal_mask(q.size(2), q.device, n_keys=T) if q.size(2) > 1 else None  # (1, 1, T_q, T): small
    size = math.ceil(T / n_splits)
    partials = [tiled_attention_forward(q, k[:, :, j:j + size], v[:, :, j:j + size],
                                        None if mask is None else mask[..., j:j + size], block_q=q.size(2),
                                        block_k=size) for j in range(0, T, size)]
    out, _ = merge_partials(torch.stack([o for o, _ in partials]), torch.stack([s for _, s in partials]))
    return out
