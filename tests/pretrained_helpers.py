"""Small Llama-style GGUF files that the tests write themselves with gguf.GGUFWriter (seeded, a few KB)."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import torch

from shared.pretrained import gguf_to_gpt_names

TINY = dict(vocab=64, d_model=64, n_heads=4, n_kv_heads=2, d_ff=96, n_layers=2, context=32, rope_base=5000.0,
            eps=1e-6)
Q = gguf.GGMLQuantizationType


def tiny_tensors(seed: int = 0, **sizes) -> dict[str, np.ndarray]:
    """{GGUF name: float32 array in PyTorch's (rows, columns) order} of a tiny random Llama model."""
    s = {**TINY, **sizes}
    rng = np.random.default_rng(seed)
    d, h, kv, f = s["d_model"], s["n_heads"], s["n_kv_heads"], s["d_ff"]
    d_kv = d // h * kv
    shapes = {"attn_norm": (d,), "attn_q": (d, d), "attn_k": (d_kv, d), "attn_v": (d_kv, d), "attn_output": (d, d),
              "ffn_norm": (d,), "ffn_gate": (f, d), "ffn_up": (f, d), "ffn_down": (d, f)}
    out = {"token_embd.weight": rng.normal(0, 0.5, (s["vocab"], d)), "output_norm.weight": 1 + rng.normal(0, .1, d)}
    for i in range(s["n_layers"]):
        for name, shape in shapes.items():
            scale = 0.1 if len(shape) == 1 else shape[1] ** -0.5
            out[f"blk.{i}.{name}.weight"] = (1 if len(shape) == 1 else 0) + rng.normal(0, scale, shape)
    assert set(out) == set(gguf_to_gpt_names(s["n_layers"]))
    return {k: v.astype(np.float32) for k, v in out.items()}


def write_gguf(path: Path, tensors: dict[str, np.ndarray], *, arch: str = "llama", quantize: bool = True,
               kinds: dict | None = None, vocab_size: bool = True, **sizes) -> Path:
    """Write `tensors` as a GGUF file: matrices Q4_1 (the embedding Q8_0) when quantize, vectors F32.

    kinds: {name: gguf.GGMLQuantizationType} for tensors stored otherwise; vocab_size=False leaves that key out.
    """
    s = {**TINY, **sizes}
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(s["n_layers"])
    w.add_context_length(s["context"])
    w.add_embedding_length(s["d_model"])
    w.add_feed_forward_length(s["d_ff"])
    w.add_head_count(s["n_heads"])
    w.add_head_count_kv(s["n_kv_heads"])
    w.add_rope_freq_base(s["rope_base"])
    w.add_layer_norm_rms_eps(s["eps"])
    if vocab_size:
        w.add_vocab_size(s["vocab"])
    w.add_rope_dimension_count(s["d_model"] // s["n_heads"])
    for name, array in tensors.items():
        if name in (kinds or {}):
            kind = kinds[name]
            w.add_tensor(name, gguf.quants.quantize(array, kind), raw_dtype=kind)
        elif quantize and array.ndim == 2 and array.shape[1] % 32 == 0:
            kind = Q.Q8_0 if name == "token_embd.weight" else Q.Q4_1
            w.add_tensor(name, gguf.quants.quantize(array, kind), raw_dtype=kind)
        else:
            w.add_tensor(name, array)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def half_split_rope(x: torch.Tensor, positions: torch.Tensor, base: float) -> torch.Tensor:
    """transformers' rotation (rotate_half): channel i pairs with channel i + d_k/2. x (..., T, d_k) -> same."""
    d_k = x.size(-1)
    inv_freq = base ** (-torch.arange(0, d_k, 2, dtype=torch.float32) / d_k)
    angles = positions.float()[:, None] * inv_freq  # (T, d_k/2)
    cos, sin = torch.cat([angles.cos()] * 2, -1), torch.cat([angles.sin()] * 2, -1)  # (T, d_k)
    x1, x2 = x[..., : d_k // 2], x[..., d_k // 2 :]
    return x * cos + torch.cat([-x2, x1], -1) * sin
