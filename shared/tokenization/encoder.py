"""A byte-level BPE tokenizer: text -> words (pre-tokenizer) -> bytes -> merges applied by rank -> token ids."""

from __future__ import annotations

import codecs
from collections.abc import Iterable, Sequence

from .merge import merge
from .pretokenize import PRETOKENIZERS, split_special


class BPETokenizer:
    """Byte-level BPE with a vocabulary `vocab` {id: bytes}, `merges` [(id_a, id_b), ...] in rank order (rank 0 first),
    a pre-tokenizer ("gpt2", "smollm2" or "none") and `special_tokens` {text: id} that are never split or merged.

    encode(text) -> ids (n,); decode(ids) -> text. A byte value with no token of its own in `vocab` is dropped by
    encode (listed in `missing_bytes`), as the reference tokenizers do; then decode(encode(s)) != s.
    """

    def __init__(self, vocab: dict[int, bytes], merges: Sequence[tuple[int, int]], pretokenizer: str = "gpt2",
                 special_tokens: dict[str, int] | None = None) -> None:
        if not isinstance(vocab, dict) or not all(isinstance(i, int) and isinstance(b, bytes) and b
                                                  for i, b in vocab.items()):
            raise TypeError("vocab must be a dict {id (int): token (non-empty bytes)}")
        if pretokenizer not in PRETOKENIZERS:
            raise ValueError(f"pretokenizer must be one of {sorted(PRETOKENIZERS)}, got {pretokenizer!r}")
        special_tokens = dict(special_tokens or {})
        for text, i in special_tokens.items():
            if not isinstance(text, str) or not text or not isinstance(i, int):
                raise TypeError(f"special_tokens must map non-empty str to int ids, got {text!r}: {i!r}")
            if i in vocab:
                raise ValueError(f"special_tokens: id {i} of {text!r} is already the id of {vocab[i]!r} in vocab")
        if len(set(special_tokens.values())) < len(special_tokens):
            raise ValueError(f"special_tokens must give each token its own id, got {special_tokens!r}")
        self.vocab, self.pretokenizer, self.special_tokens = dict(vocab), pretokenizer, special_tokens
        self._split = PRETOKENIZERS[pretokenizer]
        ids_of = {token: i for i, token in vocab.items()}
        self.byte_ids = [ids_of.get(bytes([b])) for b in range(256)]  # byte value -> its token id, or None
        self.missing_bytes = [b for b in range(256) if self.byte_ids[b] is None]
        self.ranks: dict[tuple[int, int], int] = {}  # (id_a, id_b) -> rank: lower merges first
        self.merged: dict[tuple[int, int], int] = {}  # (id_a, id_b) -> the id of their concatenation
        for rank, pair in enumerate(merges):
            if not isinstance(pair, tuple | list) or len(pair) != 2:
                raise ValueError(f"merges[{rank}] = {pair!r}: expected a pair of ids (id_a, id_b)")
            a, b = pair
            if a not in vocab or b not in vocab or vocab[a] + vocab[b] not in ids_of:
                raise ValueError(f"merges[{rank}] = {(a, b)!r}: both ids and their concatenation must be in vocab")
            self.ranks.setdefault((a, b), rank)
            self.merged[(a, b)] = ids_of[vocab[a] + vocab[b]]
        self._special_text = {i: t for t, i in special_tokens.items()}
        self._cache: dict[str, list[int]] = {}

    @property
    def vocab_size(self) -> int:
        """The number of ids: tokens plus special tokens."""
        return len(self.vocab) + len(self.special_tokens)

    def encode_word(self, word: str) -> list[int]:
        """One pre-tokenized word -> ids: start from its bytes, then merge the lowest-ranked adjacent pair until
        no adjacent pair has a rank."""
        if word in self._cache:
            return self._cache[word]
        ids = [self.byte_ids[b] for b in word.encode("utf-8") if self.byte_ids[b] is not None]
        while len(ids) >= 2:
            pair = min(zip(ids, ids[1:]), key=lambda p: self.ranks.get(p, len(self.ranks)))
            if pair not in self.ranks:
                break
            ids = merge(ids, pair, self.merged[pair])
        if len(self._cache) < 200_000:
            self._cache[word] = ids
        return ids

    def words(self, text: str) -> list[str]:
        """The pre-tokenizer's words of `text`, special tokens kept whole."""
        return [w for piece, special in split_special(text, self.special_tokens)
                for w in ([piece] if special else self._split(piece))]

    def encode(self, text: str) -> list[int]:
        """text -> ids (n,): special tokens written in the text become their single ids."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        ids: list[int] = []
        for piece, special in split_special(text, self.special_tokens):
            if special:
                ids.append(self.special_tokens[piece])
            else:
                for word in self._split(piece):
                    ids += self.encode_word(word)
        return ids

    def pieces(self, text: str) -> list[str]:
        """The token boundaries of `text`: per token, the characters it completes ("" for a token that ends
        inside a character's UTF-8 bytes, whose rest is in the next token; '\ufffd' for bytes that can never
        become a character, such as the rest of one whose first byte had no token)."""
        utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")  # keeps an unfinished character's bytes
        return [utf8.decode(self.decode_bytes([i])) for i in self.encode(text)]

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """ids (n,) (a list, or a 1-D tensor) -> the bytes they stand for (special tokens as their UTF-8 text)."""
        if hasattr(ids, "tolist"):
            if ids.ndim != 1:
                raise ValueError(f"ids must be 1-D (n,), got shape {tuple(ids.shape)}")
            ids = ids.tolist()
        out = []
        for position, i in enumerate(ids):
            if not isinstance(i, int) or isinstance(i, bool):
                raise TypeError(f"ids[{position}] = {i!r}: expected an int token id, got {type(i).__name__}")
            if i in self.vocab:
                out.append(self.vocab[i])
            elif i in self._special_text:
                out.append(self._special_text[i].encode("utf-8"))
            else:
                raise ValueError(f"ids[{position}] = {i!r} is not an id of this tokenizer "
                                 f"(vocab_size={self.vocab_size})")
        return b"".join(out)

    def decode(self, ids: Iterable[int]) -> str:
        """ids (n,) -> text; bytes that do not form valid UTF-8 (a token cut inside a character) become '\ufffd'."""
        return self.decode_bytes(ids).decode("utf-8", errors="replace")
