"""Real vocabularies read into BPETokenizer: GPT-2's encoder.json + vocab.bpe, and SmolLM2's from its GGUF file.

Both files write each token's bytes as printable characters (GPT-2's byte-to-character table below), so that a
vocabulary is a text file; reading them means mapping those characters back to bytes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..files import fetch_registry_file
from .encoder import BPETokenizer

GPT2_END_OF_TEXT = "<|endoftext|>"


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's table {byte value: printable character}: printable Latin-1 bytes stand for themselves, the other
    68 (control codes, space, ...) for the characters 256, 257, ... in order, so space (32) is 'Ġ' (288)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


UNICODE_TO_BYTE = {c: b for b, c in bytes_to_unicode().items()}


def token_bytes(token: str) -> bytes:
    """A token as written in a byte-level vocabulary ('Ġthe') -> its bytes (b' the')."""
    try:
        return bytes(UNICODE_TO_BYTE[c] for c in token)
    except KeyError as err:
        raise ValueError(f"token {token!r} has the character {err.args[0]!r}, which stands for no byte") from None


def from_token_strings(tokens: dict[str, int], merges: list[tuple[str, str]], pretokenizer: str,
                       special_tokens: dict[str, int]) -> BPETokenizer:
    """A tokenizer from a byte-level vocabulary {token string: id} and merges [(left, right) strings], rank order."""
    vocab = {i: token_bytes(t) for t, i in tokens.items() if t not in special_tokens}
    unknown = next(((n, m) for n, m in enumerate(merges) if m[0] not in tokens or m[1] not in tokens), None)
    if unknown:
        raise ValueError(f"merges[{unknown[0]}] = {unknown[1]!r} names a token that is not in tokens")
    return BPETokenizer(vocab, [(tokens[a], tokens[b]) for a, b in merges], pretokenizer, special_tokens)


def read_gpt2(encoder_json: str | os.PathLike, vocab_bpe: str | os.PathLike) -> tuple[dict[str, int],
                                                                                       list[tuple[str, str]]]:
    """GPT-2's files -> ({token string: id} for 50,257 tokens, [(left, right)] for 50,000 merges in rank order)."""
    expected = "GPT-2's encoder.json, a JSON object {token: id} with " + GPT2_END_OF_TEXT
    try:
        tokens = json.loads(Path(encoder_json).read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"encoder_json: {encoder_json} is not {expected} ({err})") from None
    if (not isinstance(tokens, dict) or GPT2_END_OF_TEXT not in tokens
            or not all(isinstance(i, int) and not isinstance(i, bool) for i in tokens.values())):
        raise ValueError(f"encoder_json: {encoder_json} is not {expected}")
    lines = Path(vocab_bpe).read_text(encoding="utf-8").split("\n")
    merges = [tuple(line.split(" ")) for line in lines[1:] if line]  # line 0 is "#version: 0.2"
    if any(len(m) != 2 for m in merges):
        raise ValueError(f"vocab_bpe: {vocab_bpe} is not a merges file (one 'left right' pair per line)")
    return tokens, merges


def gpt2_tokenizer(encoder_json: str | os.PathLike | None = None,
                   vocab_bpe: str | os.PathLike | None = None) -> BPETokenizer:
    """GPT-2's tokenizer (50,257 ids, "<|endoftext|>" = 50256), from the course's data folder by default."""
    tokens, merges = read_gpt2(encoder_json or fetch_registry_file("gpt2_encoder.json"),
                               vocab_bpe or fetch_registry_file("gpt2_vocab.bpe"))
    return from_token_strings(tokens, merges, "gpt2", {GPT2_END_OF_TEXT: tokens[GPT2_END_OF_TEXT]})


def read_gguf_tokenizer(path: str | os.PathLike) -> tuple[dict[str, int], list[tuple[str, str]], dict[str, int]]:
    """A GGUF file's tokenizer -> ({token string: id}, [(left, right)] merges in rank order, {control token: id})."""
    from gguf import GGUFReader  # reads the file's header; the weights stay on disk (memory-mapped)

    try:
        reader = GGUFReader(path)
    except (ValueError, IndexError, KeyError, TypeError) as err:  # a truncated or foreign file
        raise ValueError(f"path: {path} is not a whole GGUF file ({err})") from None

    def strings(key: str) -> list[str]:
        field = reader.fields[key]
        return [bytes(field.parts[i]).decode("utf-8") for i in field.data]

    if "tokenizer.ggml.tokens" not in reader.fields:
        raise ValueError(f"path: {path} has no tokenizer (tokenizer.ggml.tokens)")
    model = bytes(reader.fields["tokenizer.ggml.model"].parts[-1]).decode()
    if model != "gpt2":
        raise ValueError(f"path: {path} holds a {model!r} tokenizer, expected byte-level BPE ('gpt2')")
    tokens = strings("tokenizer.ggml.tokens")
    types = reader.fields["tokenizer.ggml.token_type"]
    control = {tokens[n]: n for n, i in enumerate(types.data) if int(types.parts[i][0]) == 3}  # 3: CONTROL
    merges = [tuple(m.split(" ")) for m in strings("tokenizer.ggml.merges")]
    return {t: n for n, t in enumerate(tokens)}, merges, control


def smollm2_tokenizer(path: str | os.PathLike | None = None) -> BPETokenizer:
    """SmolLM2's tokenizer (49,152 ids, 17 control tokens such as "<|im_start|>"), read from its GGUF file."""
    tokens, merges, control = read_gguf_tokenizer(path or fetch_registry_file("SmolLM2-135M-Instruct.Q4_1.gguf"))
    return from_token_strings(tokens, merges, "smollm2", control)
