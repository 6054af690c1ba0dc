"""Attention without the (T_q, T_k) score matrix: the online softmax, tiled attention with a recomputing backward
(FlashAttention's algorithm, in plain PyTorch), and split-KV decoding over a KV cache (flash-decoding).

Shapes: B batch, H heads, T_q / T_k query / key lengths, d_k head width. Masks are bool, True = may attend,
broadcastable to (B, H, T_q, T_k), as everywhere in the course (`shared.masks`).
"""

from .decoding import merge_partials, split_kv_attention
from .online_softmax import online_softmax, online_softmax_update
from .tiled import TileCounts, block_counts, tiled_attention, tiled_attention_backward, tiled_attention_forward

__all__ = [
    "TileCounts", "block_counts", "merge_partials", "online_softmax", "online_softmax_update", "split_kv_attention",
    "tiled_attention", "tiled_attention_backward", "tiled_attention_forward",
]
