"""Training byte-level BPE (Sennrich et al. 2016): start from the 256 bytes, merge the most frequent adjacent pair,
repeat. Two trainers that learn the same merges: the naive one recounts every pair after each merge; the
incremental one updates only the counts of the words a merge touches and keeps the counts in a heap.

Both count pairs inside pre-tokenized words only (a word seen n times counts n times) and break a tie between
equally frequent pairs by the smaller pair of ids: byte b has id b unless `byte_ids` numbers the bytes otherwise.
A merge whose bytes are already a token reuses that token's id; a new token takes the next id.
"""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict

from ..validation import check_int
from .encoder import BPETokenizer
from .merge import merge, pair_counts
from .pretokenize import PRETOKENIZERS, split_special
from .vocabularies import bytes_to_unicode


def word_counts(text: str, pretokenizer: str = "gpt2", special_tokens=()) -> Counter:
    """text -> {word: how often it occurs}, special tokens cut out first (they are never part of a word)."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if pretokenizer not in PRETOKENIZERS:
        raise ValueError(f"pretokenizer must be one of {sorted(PRETOKENIZERS)}, got {pretokenizer!r}")
    split = PRETOKENIZERS[pretokenizer]
    return Counter(w for piece, special in split_special(text, special_tokens) if not special for w in split(piece))


def check_special_tokens(special_tokens) -> list[str]:
    """`special_tokens` as a list of distinct non-empty str; a lone str is refused (it would be read letter by
    letter)."""
    if isinstance(special_tokens, str | bytes) or not all(isinstance(s, str) and s for s in special_tokens):
        raise TypeError(f"special_tokens must be a list of non-empty str, got {special_tokens!r}")
    special_tokens = list(special_tokens)
    if len(set(special_tokens)) < len(special_tokens):
        raise ValueError(f"special_tokens must be distinct, got {special_tokens!r}")
    return special_tokens


def _start(words: Counter, vocab_size: int, special_tokens, byte_ids) -> tuple[list[list[int]], list[int], dict, int]:
    """Words as byte ids with their counts, the 256-byte vocabulary, and how many tokens make `vocab_size`."""
    if not isinstance(words, dict):
        raise TypeError(f"words must be a Counter {{word (str): count (int)}}, got {type(words).__name__}")
    for word, count in words.items():
        if not isinstance(word, str) or not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise ValueError(f"words must map str to counts >= 1, got {word!r}: {count!r}")
    special_tokens = check_special_tokens(special_tokens)
    check_int("vocab_size", vocab_size, 256 + len(special_tokens),
              " (256 bytes plus the special tokens, plus one per merge)")
    byte_ids = list(range(256)) if byte_ids is None else list(byte_ids)
    if sorted(byte_ids) != list(range(256)):
        raise ValueError("byte_ids must number the 256 byte values 0..255, each once (a permutation)")
    ids = [[byte_ids[b] for b in w.encode("utf-8")] for w in words]
    vocab = {byte_ids[b]: bytes([b]) for b in range(256)}
    return ids, list(words.values()), vocab, vocab_size - len(special_tokens)


def _add_token(vocab: dict[int, bytes], ids_of: dict[bytes, int], token: bytes) -> int:
    """The id of `token`: its existing id, else a new one."""
    if token not in ids_of:
        ids_of[token] = len(vocab)
        vocab[len(vocab)] = token
    return ids_of[token]


def printable_byte_ids() -> list[int]:
    """The bytes numbered in the order of GPT-2's printable characters for them (bytes_to_unicode), as `tokenizers`'
    trainer numbers its alphabet: byte b gets id printable_byte_ids()[b]."""
    chars = bytes_to_unicode()
    order = sorted(range(256), key=lambda b: chars[b])
    return [order.index(b) for b in range(256)]


def train_bpe_naive(words: Counter, vocab_size: int, special_tokens=(), byte_ids=None) -> tuple[dict[int, bytes], list]:
    """{word: count} -> (vocab {id: bytes}, merges [(id_a, id_b)] in order): recount all pairs for every merge."""
    ids, counts, vocab, size = _start(words, vocab_size, special_tokens, byte_ids)
    ids_of, merges = {b: i for i, b in vocab.items()}, []
    while len(vocab) < size:
        pairs = Counter()
        for word, count in zip(ids, counts):
            pair_counts(word, pairs, count)
        if not pairs:
            break  # every word is a single token
        best = min(pairs, key=lambda p: (-pairs[p], p))  # the most frequent; on a tie the smallest ids
        new_id = _add_token(vocab, ids_of, vocab[best[0]] + vocab[best[1]])
        merges.append(best)
        ids = [merge(word, best, new_id) for word in ids]
    return vocab, merges


def train_bpe(words: Counter, vocab_size: int, special_tokens=(), byte_ids=None) -> tuple[dict[int, bytes], list]:
    """{word: count} -> (vocab {id: bytes}, merges [(id_a, id_b)] in order), the same as train_bpe_naive, fast:
    after a merge only the words that contain the pair are re-counted, and a heap finds the next pair."""
    ids, counts, vocab, size = _start(words, vocab_size, special_tokens, byte_ids)
    ids_of, merges = {b: i for i, b in vocab.items()}, []
    pairs: Counter = Counter()
    where: dict[tuple[int, int], set[int]] = defaultdict(set)  # pair -> the words that contain it
    for w, (word, count) in enumerate(zip(ids, counts)):
        for pair in zip(word, word[1:]):
            pairs[pair] += count
            where[pair].add(w)
    heap = [(-n, pair) for pair, n in pairs.items()]  # min-heap: the most frequent, then the smallest ids
    heapq.heapify(heap)
    while len(vocab) < size and heap:
        neg, best = heapq.heappop(heap)
        if pairs.get(best, 0) != -neg or neg == 0:
            continue  # a stale entry: this pair's count changed after it was pushed
        new_id = _add_token(vocab, ids_of, vocab[best[0]] + vocab[best[1]])
        merges.append(best)
        changed = set()
        for w in where.pop(best):
            old, count = ids[w], counts[w]
            new = merge(old, best, new_id)
            for pair in zip(old, old[1:]):  # take the word's old pairs out ...
                pairs[pair] -= count
                changed.add(pair)
            for pair in zip(new, new[1:]):  # ... and put its new pairs in
                pairs[pair] += count
                where[pair].add(w)
                changed.add(pair)
            ids[w] = new
        for pair in changed:
            if pairs[pair] > 0:
                heapq.heappush(heap, (-pairs[pair], pair))
            else:
                del pairs[pair]
    return vocab, merges


def train_tokenizer(text: str, vocab_size: int, special_tokens=(), pretokenizer: str = "gpt2",
                    naive: bool = False) -> BPETokenizer:
    """Train byte-level BPE on `text` -> a BPETokenizer of `vocab_size` ids; special tokens take the last ids."""
    special_tokens = check_special_tokens(special_tokens)
    words = word_counts(text, pretokenizer, special_tokens)
    vocab, merges = (train_bpe_naive if naive else train_bpe)(words, vocab_size, special_tokens)
    special = {s: len(vocab) + n for n, s in enumerate(special_tokens)}
    return BPETokenizer(vocab, merges, pretokenizer, special)
