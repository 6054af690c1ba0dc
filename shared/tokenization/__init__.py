"""Tokenization (notebook 13): byte-level BPE trained from scratch, and real vocabularies (GPT-2, SmolLM2) read
into the same encoder, id for id equal to the reference tokenizers."""

from .encoder import BPETokenizer
from .merge import merge, pair_counts
from .pretokenize import GPT2_PATTERN, gpt2_words, smollm2_words, split_special
from .vocabularies import bytes_to_unicode, gpt2_tokenizer, read_gguf_tokenizer, read_gpt2, smollm2_tokenizer

__all__ = ["BPETokenizer", "GPT2_PATTERN", "bytes_to_unicode", "gpt2_tokenizer", "gpt2_words", "merge",
           "pair_counts", "read_gguf_tokenizer", "read_gpt2", "smollm2_tokenizer", "smollm2_words", "split_special"]
