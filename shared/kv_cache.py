"""The KV cache: keys and values of the positions seen so far, so each decoding step computes only the new one."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor

from .validation import check_cache_step


class KVCache:
    """One attention layer's past keys and values, each (B, H_kv, T_past, d_k); grows by `update` each step."""

    def __init__(self) -> None:
        self.k: Tensor | None = None  # (B, H_kv, T_past, d_k)
        self.v: Tensor | None = None

    def __len__(self) -> int:
        return 0 if self.k is None else self.k.size(2)

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Append this step's (B, H, T_new, d_k) keys and values, of the cached batch size and dtype; return all."""
        check_cache_step(k, v, self.k)  # torch.cat would promote an fp16 step to an fp32 cache silently
        self.k = k if self.k is None else torch.cat([self.k, k], dim=2)
        self.v = v if self.v is None else torch.cat([self.v, v], dim=2)
        return self.k, self.v


def kv_cache_bytes(caches: Iterable[KVCache]) -> int:
    """Bytes held by the keys and values of KV caches (one per layer), measured from their tensors."""
    if not isinstance(caches, Iterable):
        raise TypeError(f"caches must be an iterable of KVCache (one per layer), got {caches!r}")
    total = 0
    for cache in caches:
        if not isinstance(cache, KVCache):
            raise TypeError(f"caches must hold KVCache objects (one per layer), got a {type(cache).__name__}")
        for t in (cache.k, cache.v):
            if t is not None:
                total += t.numel() * t.element_size()
    return total
