"""Load a GGUF file into the course's GPT: map the names, check every shape first, copy one tensor at a time.

Names: llama.cpp's `blk.{i}.attn_q.weight` is the course's `blocks.{i}.attn.w_q.weight`, and so on (GGUF_NAMES).
The head is tied (GPT's lm_head is tok_emb), so a file with its own `output.weight` is refused.

Rows of q and k: Meta's Llama code rotates adjacent channels (2i, 2i + 1) as one pair, the layout the course's
RoPE rotates (`positions.apply_rope`). transformers rotates channel i with channel i + d_k/2 ("half-split"), so its
converter permuted the rows of each q and k head of Meta's weights; llama.cpp's converter, reading those Hugging
Face weights, permutes them back to adjacent pairs. So the file's rows load as they are; `unpermute_qk` gives the
Hugging Face (half-split) order and `permute_qk` the file's back (notebook 14's trap).
"""

from __future__ import annotations

import os

import torch
from torch import Tensor

from ..gpt import GPT, GPTConfig
from ..positions import RotaryEmbedding, rope_frequencies
from ..validation import check_positive_int
from .gguf_file import config_from_gguf, read_gguf
from .quantization import KINDS, dequantize, scales

GLOBAL_NAMES = {"token_embd.weight": "tok_emb.weight", "output_norm.weight": "norm.weight"}
GGUF_NAMES = {  # per block: llama.cpp's name -> the course's name
    "attn_norm": "norm1", "attn_q": "attn.w_q", "attn_k": "attn.w_k", "attn_v": "attn.w_v",
    "attn_output": "attn.w_o", "ffn_norm": "norm2", "ffn_gate": "ff.gate", "ffn_up": "ff.linear1",
    "ffn_down": "ff.linear2",
}


def gguf_to_gpt_names(n_layers: int) -> dict[str, str]:
    """{GGUF tensor name: GPT parameter name} for a Llama-style model of n_layers blocks."""
    check_positive_int("n_layers", n_layers)
    names = dict(GLOBAL_NAMES)
    for i in range(n_layers):
        for theirs, ours in GGUF_NAMES.items():
            names[f"blk.{i}.{theirs}.weight"] = f"blocks.{i}.{ours}.weight"
    return names


def _check_rows(w: Tensor, n_heads: int, name: str = "w") -> tuple[int, int]:
    if not isinstance(w, Tensor) or w.dim() != 2:
        raise ValueError(f"{name} must be a 2-D (rows, d_model) weight, got {type(w).__name__}"
                         f"{tuple(w.shape) if isinstance(w, Tensor) else ''}")
    check_positive_int("n_heads", n_heads)
    rows = w.size(0)
    if rows % n_heads or (rows // n_heads) % 2:
        raise ValueError(f"{name} has {rows} rows: not n_heads={n_heads} heads of an even d_k. For k, n_heads is "
                         "the number of key/value heads (n_kv_heads), not of query heads")
    return rows // n_heads, w.size(1)


def permute_qk(w: Tensor, n_heads: int) -> Tensor:
    """Hugging Face's (half-split) q or k rows (n_heads * d_k, d_model) -> the file's (adjacent pairs) order."""
    d_k, d_in = _check_rows(w, n_heads)
    return w.reshape(n_heads, 2, d_k // 2, d_in).transpose(1, 2).reshape(w.shape)  # (H, 2, d_k/2) -> (H, d_k/2, 2)


def unpermute_qk(w: Tensor, n_heads: int) -> Tensor:
    """The file's q or k rows (n_heads * d_k, d_model) -> Hugging Face's (half-split) order; undoes permute_qk."""
    d_k, d_in = _check_rows(w, n_heads)
    return w.reshape(n_heads, d_k // 2, 2, d_in).transpose(1, 2).reshape(w.shape)  # (H, d_k/2, 2) -> (H, 2, d_k/2)


def check_gguf_tensors(reader, model: GPT) -> dict[str, str]:
    """Check that the file holds exactly the model's tensors, each of its shape, of a type the course reads and
    with finite numbers; -> {file name: model name}.

    Raises ValueError naming the first missing, extra, wrongly shaped, unreadable or non-finite tensor, before
    anything is copied.
    """
    names = gguf_to_gpt_names(len(model.blocks))
    params = dict(model.named_parameters())  # the tied lm_head.weight is tok_emb.weight, listed once
    in_file = {t.name: t for t in reader.tensors}
    extra = [n for n in in_file if n not in names]
    if extra:
        why = (" (the course's GPT ties its output head to the token embedding; this file has its own)"
               if "output.weight" in extra else "")
        raise ValueError(f"the file has tensor {extra[0]!r} that the model has no place for{why}; "
                         f"{len(extra)} unexpected in all")
    missing = [n for n in names if n not in in_file]
    if missing:
        raise ValueError(f"the file has no tensor {missing[0]!r} (for {names[missing[0]]}); {len(missing)} missing")
    for file_name, ours in names.items():
        shape = tuple(int(n) for n in reversed(in_file[file_name].shape.tolist()))  # PyTorch order
        if shape != tuple(params[ours].shape):
            raise ValueError(f"tensor {file_name!r} has shape {shape}, but {ours} needs {tuple(params[ours].shape)}")
        kind = in_file[file_name].tensor_type.name
        if kind not in KINDS:
            raise ValueError(f"tensor {file_name!r} is {kind}: the course reads F32, F16, Q4_1 and Q8_0 "
                             "(gguf.quants.dequantize reads the others)")
        if not torch.isfinite(scales(in_file[file_name])).all():
            raise ValueError(f"tensor {file_name!r} holds non-finite numbers (NaN or inf scales or weights): "
                             "the file is damaged")
    return names


@torch.no_grad()
def load_gguf_weights(model: GPT, reader) -> GPT:
    """Copy every tensor of a GGUF reader into `model`, one at a time (names, shapes, types, scales checked first)."""
    if not isinstance(model, GPT):
        raise TypeError(f"model must be a shared.gpt.GPT, got {type(model).__name__}")
    names = check_gguf_tensors(reader, model)
    params = dict(model.named_parameters())
    for tensor in reader.tensors:
        params[names[tensor.name]].copy_(dequantize(tensor))  # float32, then freed: peak ~ one tensor
    return model


def empty_gpt(config: GPTConfig) -> GPT:
    """A GPT of `config` whose parameters are allocated but not initialised (the file fills every one of them).

    Built on the `meta` device (shapes, no memory, no random initialisation), then given real, empty memory; the
    rotary frequencies, a buffer computed from the config, are computed again.
    """
    with torch.device("meta"):
        model = GPT(config)
    model.to_empty(device="cpu")
    model.lm_head.weight = model.tok_emb.weight  # tied, as GPT ties them
    for name, module in model.named_modules():
        for buffer in dict(module.named_buffers(recurse=False)):
            if not (isinstance(module, RotaryEmbedding) and buffer == "inv_freq"):
                raise ValueError(f"{name}.{buffer}: empty_gpt can only rebuild RoPE's frequencies")
            module.inv_freq = rope_frequencies(module.d_k, module.base)
    return model


def load_gpt(path: str | os.PathLike, block_size: int | None = None) -> GPT:
    """A GPT built from a Llama-architecture GGUF file's metadata and filled with its weights, in eval mode."""
    reader = read_gguf(path)
    model = empty_gpt(config_from_gguf(reader, block_size))
    return load_gguf_weights(model, reader).eval()
