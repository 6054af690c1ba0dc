"""The one step of byte-pair encoding: replace every occurrence of a pair of ids by a new id (Sennrich et al. 2016)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence


def merge(ids: Sequence[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """ids (n,) -> ids (<= n,): every non-overlapping `pair`, scanned left to right, becomes `new_id`.

    [5, 5, 5] with pair (5, 5) gives [new_id, 5]: the middle 5 is used once, by the leftmost pair.
    """
    out, i, n = [], 0, len(ids)
    a, b = pair
    while i < n:
        if i + 1 < n and ids[i] == a and ids[i + 1] == b:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def pair_counts(ids: Sequence[int], counts: Counter | None = None, weight: int = 1) -> Counter:
    """How often each adjacent pair occurs in `ids` (times `weight`), added to `counts` if given."""
    counts = Counter() if counts is None else counts
    for pair in zip(ids, ids[1:]):
        counts[pair] += weight
    return counts
