"""A GGUF file: a header of metadata (key -> value), a tokenizer, and a table of named, typed, shaped tensors.

The course reads it with the `gguf` package (`gguf.GGUFReader`, which maps the file into memory and reads a
tensor's bytes only when asked) and builds the model's config from the metadata, never by hand.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..gpt import GPTConfig

LONG_LIST = 16  # metadata lists longer than this (the vocabulary, the merges) are summarised, not returned


def read_gguf(path: str | os.PathLike):
    """Open the GGUF file at `path` -> gguf.GGUFReader (memory-mapped: tensors are read when used)."""
    import gguf  # imported here: only Part II needs the package

    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike naming a .gguf file, got {type(path).__name__}")
    if not Path(path).is_file():
        raise FileNotFoundError(f"path {str(path)!r} is not a file: fetch the model with "
                                "shared.files.fetch_registry_file('SmolLM2-135M-Instruct.Q4_1.gguf')")
    try:
        return gguf.GGUFReader(path)
    except (ValueError, KeyError, IndexError, TypeError, EOFError) as e:  # truncated, damaged or not GGUF at all
        raise ValueError(f"path {str(path)!r} is not a readable GGUF file (truncated or damaged? {e})") from e


def metadata(reader) -> dict:
    """The file's metadata as {key: value}; a list longer than LONG_LIST becomes the string '<list of N>'."""
    out = {}
    for key, field in reader.fields.items():
        if key.startswith("GGUF."):  # the header's own bookkeeping (version, counts)
            continue
        if len(field.data) > LONG_LIST:
            out[key] = f"<list of {len(field.data)}>"
        else:
            out[key] = field.contents()
    return out


def _field(reader, key: str):
    field = reader.fields.get(key)
    if field is None:
        raise ValueError(f"the GGUF file has no metadata key {key!r}: it is not a complete Llama-style model file")
    return field.contents()


def config_from_gguf(reader, block_size: int | None = None) -> GPTConfig:
    """GPTConfig of a Llama-architecture GGUF: RMSNorm, SwiGLU, RoPE, grouped-query heads, no biases, tied head.

    block_size: the longest context to allow (default: the file's context_length).
    """
    arch = _field(reader, "general.architecture")
    if arch != "llama":
        raise ValueError(f"general.architecture is {arch!r}: the course's GPT reads 'llama' files only")
    get = lambda name: _field(reader, f"llama.{name}")  # noqa: E731
    d_model, n_heads = int(get("embedding_length")), int(get("attention.head_count"))
    head_dim = int(get("rope.dimension_count")) if "llama.rope.dimension_count" in reader.fields else d_model // n_heads
    if head_dim * n_heads != d_model:
        raise ValueError(f"llama.rope.dimension_count={head_dim} is not d_model / n_heads = {d_model} / {n_heads}: "
                         "the course's attention has d_k = d_model / n_heads")
    if "llama.vocab_size" in reader.fields:
        vocab = int(get("vocab_size"))
    elif "tokenizer.ggml.tokens" in reader.fields:
        vocab = len(reader.fields["tokenizer.ggml.tokens"].data)
    else:
        raise ValueError("the GGUF file has neither llama.vocab_size nor tokenizer.ggml.tokens: the vocabulary's "
                         "size is unknown")
    return GPTConfig(
        vocab_size=vocab, block_size=int(get("context_length")) if block_size is None else block_size,
        n_layers=int(get("block_count")), n_heads=n_heads, d_model=d_model, d_ff=int(get("feed_forward_length")),
        n_kv_heads=int(get("attention.head_count_kv")), norm="rmsnorm", activation="swiglu", bias=False,
        position="rope", rope_base=float(get("rope.freq_base")),
        norm_eps=float(get("attention.layer_norm_rms_epsilon")),
    )
