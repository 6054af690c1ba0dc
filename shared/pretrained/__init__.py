"""Pretrained models in the course's own GPT: read a GGUF file, dequantize its tensors, map them into `gpt.GPT`.

Notebook 14 loads SmolLM2-135M-Instruct this way. Modules: `gguf_file` (metadata -> GPTConfig),
`quantization` (Q4_1 / Q8_0 blocks -> float32, by hand), `loading` (names, shapes, the q/k row permutation),
`chat` (the ChatML prompt and a reply).
"""

from .chat import chatml_prompt, reply
from .gguf_file import config_from_gguf, metadata, read_gguf
from .loading import (
    check_gguf_tensors,
    empty_gpt,
    gguf_to_gpt_names,
    load_gguf_weights,
    load_gpt,
    permute_qk,
    unpermute_qk,
)
from .quantization import dequantize, dequantize_q4_1, dequantize_q8_0

__all__ = [
    "chatml_prompt", "check_gguf_tensors", "config_from_gguf", "dequantize", "dequantize_q4_1", "dequantize_q8_0",
    "empty_gpt", "gguf_to_gpt_names", "load_gguf_weights", "load_gpt", "metadata", "permute_qk", "read_gguf", "reply",
    "unpermute_qk",
]
