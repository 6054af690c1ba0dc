"""Attention masks. One convention everywhere: bool, True = may attend, broadcastable to (B, H, T_q, T_k).

Broadcasting aligns shapes from the right, so a 2-D mask is read as (T_q, T_k). A (B, T_k) padding mask is the
classic mistake: when B == T_q it passes as a (T_q, T_k) mask and hides the wrong keys, and no check can tell it
from a real (T_q, T_k) mask (when B != T_q it is refused). Pass padding as (B, 1, 1, T_k): `padding_mask` builds it.
`check_mask` (from `shared.validation`) checks a mask against the scores' shape.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .validation import check_int, check_mask, check_positive_int, check_tokens


def padding_mask(tokens: Tensor, pad_id: int) -> Tensor:
    """(B, T) token ids -> (B, 1, 1, T) bool mask, False where the *key* is padding."""
    check_tokens("tokens", tokens)
    check_int("pad_id", pad_id, minimum=0)  # a float or None would compare silently (0.5 marks every key real)
    return (tokens != pad_id)[:, None, None, :]  # (B, 1, 1, T_k)


def causal_mask(size: int, device: torch.device | str | None = None, n_keys: int | None = None) -> Tensor:
    """(1, 1, T_q, T_k) bool mask: a query may attend to keys at its own position or earlier.

    With `n_keys` > `size` (decoding with a KV cache) the last query lines up with the last key.
    """
    n_keys = size if n_keys is None else n_keys
    check_positive_int("size", size)
    check_int("n_keys", n_keys, minimum=size, meaning=f" (size={size}; n_keys is the number of keys T_k, size the "
              "number of queries T_q: the last query lines up with the last key, so T_k >= T_q)")
    ones = torch.ones(size, n_keys, dtype=torch.bool, device=device)
    return ones.tril(diagonal=n_keys - size)[None, None]  # (1, 1, T_q, T_k)


def combine_masks(*masks: Tensor | None) -> Tensor | None:
    """Logical AND of masks (None means 'no restriction'); shapes broadcast."""
    result = None
    for mask in masks:
        if mask is None:
            continue
        check_mask(mask)
        result = mask if result is None else result & mask
    return result


def decoder_mask(tgt: Tensor, pad_id: int) -> Tensor:
    """Decoder self-attention mask: causal AND target padding, shape (B, 1, T, T)."""
    check_tokens("tgt", tgt)  # (B, T >= 1) ids
    return padding_mask(tgt, pad_id) & causal_mask(tgt.size(1), tgt.device)
