"""A per-stage printer for multi-head attention: every intermediate tensor with its shape, then a check.

Point it at any module with `w_q`, `w_k`, `w_v` (or one fused `w_qkv`), `w_o` projections and an `n_heads`
attribute (the course's `MultiHeadAttention`, or your own): it recomputes attention stage by stage from the
module's own weights, prints each stage, and says whether the module's forward pass gives the same output.
It follows the course module's options as the module applies them: grouped-query attention (fewer key/value
heads than query heads), RoPE (`module.rope` rotates q and k) and ALiBi (`module.alibi_slopes`).

    from shared.debug import trace_attention
    stages = trace_attention(my_mha, x)           # x (B, T, d_model)
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..masks import causal_mask, check_mask, combine_masks
from ..positions import alibi_bias
from ..runtime import eval_mode
from ..validation import check_int

# In order; the ones in OPTIONAL_STAGES appear only when the module (or the call) uses them.
STAGES = ("q", "k", "v", "q_heads", "k_heads", "v_heads", "q_rotated", "k_rotated", "k_repeated", "v_repeated",
          "scores", "scaled_scores", "alibi_bias", "biased_scores", "masked_scores", "weights", "weighted_values",
          "merged", "output")
OPTIONAL_STAGES = ("q_rotated", "k_rotated", "k_repeated", "v_repeated", "alibi_bias", "biased_scores",
                   "masked_scores")
_TITLES = {
    "q": "q = x W^Q (every head side by side)", "k": "k = x W^K", "v": "v = x W^V",
    "q_heads": "q split into heads", "k_heads": "k split into heads", "v_heads": "v split into heads",
    "q_rotated": "q rotated by RoPE (channel pair i at position m turned by m * theta_i)",
    "k_rotated": "k rotated by RoPE",
    "k_repeated": "k heads repeated: query head h reads key/value head h // (H / H_kv) (grouped-query attention)",
    "v_repeated": "v heads repeated",
    "scores": "scores = q k^T", "scaled_scores": "scaled scores = q k^T / sqrt(d_k)",
    "alibi_bias": "ALiBi bias = -slope_h * |i - j| (query position i, key position j)",
    "biased_scores": "scaled scores + ALiBi bias",
    "masked_scores": "masked scores (blocked keys -> finfo.min, printed as -inf)",
    "weights": "weights = softmax(scaled scores)",
    "weighted_values": "weighted values = weights v", "merged": "heads merged (concatenated)",
    "output": "output = merged W^O",
}
_SHAPES = {"q": "(B, T_q, d_model)", "k": "(B, T_k, d_model)", "v": "(B, T_k, d_model)",
           "q_heads": "(B, H, T_q, d_k)", "k_heads": "(B, H, T_k, d_k)", "v_heads": "(B, H, T_k, d_k)",
           "q_rotated": "(B, H, T_q, d_k)", "k_rotated": "(B, H, T_k, d_k)", "k_repeated": "(B, H, T_k, d_k)",
           "v_repeated": "(B, H, T_k, d_k)", "scores": "(B, H, T_q, T_k)", "scaled_scores": "(B, H, T_q, T_k)",
           "alibi_bias": "(H, T_q, T_k) or (B, H, T_q, T_k)", "biased_scores": "(B, H, T_q, T_k)",
           "masked_scores": "(B, H, T_q, T_k)", "weights": "(B, H, T_q, T_k)", "weighted_values": "(B, H, T_q, d_k)",
           "merged": "(B, T_q, d_model)", "output": "(B, T_q, d_model)"}
_GQA_SHAPES = {"k": "(B, T_k, H_kv * d_k)", "v": "(B, T_k, H_kv * d_k)", "k_heads": "(B, H_kv, T_k, d_k)",
               "v_heads": "(B, H_kv, T_k, d_k)", "k_rotated": "(B, H_kv, T_k, d_k)"}  # H_kv key/value heads < H


@torch.no_grad()
def attention_stages(module: nn.Module, query: Tensor, key: Tensor | None = None, value: Tensor | None = None,
                     mask: Tensor | None = None, causal: bool = False,
                     positions: Tensor | None = None) -> dict[str, Tensor]:
    """Every stage of multi-head attention computed from `module`'s weights: {stage name: tensor} (see STAGES).

    positions: (T,) or (B, T) ids for a module with RoPE or ALiBi, as its forward takes them (default 0..T-1).
    """
    fused = hasattr(module, "w_qkv") and not hasattr(module, "w_q")
    for name in ("w_o", "n_heads") + (() if fused else ("w_q", "w_k", "w_v")):
        if not hasattr(module, name):
            raise TypeError(f"module must have w_q, w_k, w_v (or one w_qkv), w_o projections and n_heads; "
                            f"it has no {name!r}")
    rope, slopes = getattr(module, "rope", None), getattr(module, "alibi_slopes", None)
    rope = rope if isinstance(rope, nn.Module) else None  # the course's RotaryEmbedding
    slopes = slopes if isinstance(slopes, Tensor) else None  # ALiBi: (H,) slopes
    if (rope is not None or slopes is not None) and key is not None and key is not query:
        raise ValueError("RoPE and ALiBi apply to self-attention only: call with key=None (or key=query)")
    if positions is not None and rope is None and slopes is None:
        raise ValueError("positions is only used by a module with RoPE (module.rope) or ALiBi (module.alibi_slopes)")
    key = query if key is None else key
    value = key if value is None else value
    for name, x in (("query", query), ("key", key), ("value", value)):
        if not isinstance(x, Tensor) or x.dim() != 3 or not x.is_floating_point():
            raise ValueError(f"{name} must be a float tensor of shape (B, T, d_model), got "
                             f"{tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__}")
    H = module.n_heads
    s: dict[str, Tensor] = _project(module, query, key, value, fused)
    d_model = s["q"].size(-1)
    if d_model % H:
        raise ValueError(f"the projections' width {d_model} must be divisible by n_heads={H}")
    d_k = d_model // H
    H_kv = s["k"].size(-1) // d_k  # fewer key/value heads than query heads: grouped-query attention
    if s["k"].size(-1) % d_k or H_kv == 0 or H % H_kv:
        raise ValueError(f"the key width {s['k'].size(-1)} must be a number of d_k={d_k} heads that divides H={H}")
    for name in ("q", "k", "v"):
        B, T, _ = s[name].shape
        s[f"{name}_heads"] = s[name].view(B, T, -1, d_k).transpose(1, 2)  # (B, T, heads, d_k) -> (B, heads, T, d_k)
    q, k, v = s["q_heads"], s["k_heads"], s["v_heads"]
    T_q, T_k = q.size(2), k.size(2)
    if rope is not None:  # rotate q and k before the scores, as the module does
        ids = torch.arange(T_q, device=q.device) if positions is None else positions  # (T,) or (B, T)
        q, k = s["q_rotated"], s["k_rotated"] = rope(q, ids), rope(k, ids)
    if H_kv < H:  # each key/value head serves H / H_kv query heads
        k, v = s["k_repeated"], s["v_repeated"] = k.repeat_interleave(H // H_kv, 1), v.repeat_interleave(H // H_kv, 1)
    s["scores"] = q @ k.transpose(-2, -1)  # (B, H, T_q, T_k)
    scores = s["scaled_scores"] = s["scores"] / math.sqrt(d_k)
    if slopes is not None:
        ids = torch.arange(T_k, device=q.device) if positions is None else positions  # self-attention: T_q = T_k
        s["alibi_bias"] = alibi_bias(slopes, ids, ids).to(scores.dtype)  # (H, T_q, T_k) or (B, H, T_q, T_k)
        scores = s["biased_scores"] = scores + s["alibi_bias"]
    if causal:
        mask = combine_masks(mask, causal_mask(T_q, query.device, n_keys=T_k))
    if mask is not None:
        check_mask(mask, tuple(scores.shape))
        scores = s["masked_scores"] = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    s["weights"] = scores.softmax(dim=-1)
    if mask is not None:
        s["weights"] = s["weights"].masked_fill(~mask, 0.0)  # fully masked rows give zeros, as in the course
    s["weighted_values"] = s["weights"] @ v  # (B, H, T_q, d_k)
    B = s["weighted_values"].size(0)
    s["merged"] = s["weighted_values"].transpose(1, 2).reshape(B, T_q, d_model)  # (B, T_q, H, d_k) -> (B, T_q, d_model)
    s["output"] = module.w_o(s["merged"])
    return {name: s[name] for name in STAGES if name in s}


def _project(module: nn.Module, query: Tensor, key: Tensor, value: Tensor, fused: bool) -> dict[str, Tensor]:
    """{"q", "k", "v"}: the projections, from w_q, w_k, w_v or from the row blocks [W^Q; W^K; W^V] of w_qkv."""
    if not fused:
        return {"q": module.w_q(query), "k": module.w_k(key), "v": module.w_v(value)}
    w, b = module.w_qkv.weight, module.w_qkv.bias
    d_q = query.size(-1)  # W^Q maps d_model -> d_model; W^K and W^V share the remaining rows equally
    sizes = [d_q, (w.size(0) - d_q) // 2, (w.size(0) - d_q) // 2]
    biases = b.split(sizes) if b is not None else (None,) * 3
    return {name: F.linear(x, wi, bi) for name, x, wi, bi in zip("qkv", (query, key, value), w.split(sizes), biases)}


def trace_attention(module: nn.Module, query: Tensor, key: Tensor | None = None, value: Tensor | None = None,
                    mask: Tensor | None = None, causal: bool = False, decimals: int = 3, max_values: int = 48,
                    check: bool = True, positions: Tensor | None = None) -> dict[str, Tensor]:
    """Print every stage of `module`'s attention with its shape; with check=True, compare with module(...).

    Tensors with at most `max_values` entries are printed in full (rounded to `decimals`); larger ones as
    mean/std/min/max. Returns the stages (see `attention_stages`), plus "module_output" when checked.
    The check runs the module in eval mode (no dropout, as in the stages), then gives it back its own mode.
    """
    check_int("decimals", decimals, minimum=0)
    check_int("max_values", max_values, minimum=0)
    key = query if key is None else key
    value = key if value is None else value
    stages = attention_stages(module, query, key, value, mask, causal, positions)
    shapes = _SHAPES | (_GQA_SHAPES if "k_repeated" in stages else {})
    titles = _TITLES | ({"weights": "weights = softmax(scores + ALiBi bias)"} if "alibi_bias" in stages else {})
    for i, (name, t) in enumerate(stages.items(), 1):
        print(f"[{i:>2}] {titles[name]}  shape {tuple(t.shape)} {shapes[name]}")
        print(_indent(_show(t, decimals, max_values)))
    if check:  # causal and positions are passed only when used, so a learner's forward need not take them
        options = {"mask": mask} | ({"causal": True} if causal else {}) | \
            ({"positions": positions} if positions is not None else {})
        with torch.no_grad(), eval_mode(module):  # in training mode, dropout would change the output at random
            result = module(query, key, value, **options)
        got = result[0] if isinstance(result, (tuple, list)) else result
        stages["module_output"] = got
        if not isinstance(got, Tensor) or got.shape != stages["output"].shape:
            shape = tuple(got.shape) if isinstance(got, Tensor) else type(got).__name__
            print(f"module(...) returned {shape}, expected a tensor of shape {tuple(stages['output'].shape)}")
        else:
            diff = (got.float() - stages["output"].float()).abs().max().item()
            verdict = "matches" if diff <= 1e-4 * max(1.0, stages["output"].abs().max().item()) else "DIFFERS FROM"
            print(f"module(...) output {verdict} the stage-by-stage output (max abs diff {diff:.2e})")
    return stages


def _show(t: Tensor, decimals: int, max_values: int) -> str:
    t = t.detach().float().cpu()
    if t.numel() > max_values:
        return (f"mean {t.mean().item():.{decimals}f}  std {t.std().item() if t.numel() > 1 else 0.0:.{decimals}f}  "
                f"min {t.min().item():.{decimals}f}  max {t.max().item():.{decimals}f}")
    finite_min = torch.finfo(torch.float32).min
    shown = t.round(decimals=decimals).masked_fill(t <= finite_min, float("-inf"))  # finfo.min prints as -inf
    return np.array2string(shown.numpy(), precision=decimals, suppress_small=True, floatmode="fixed")


def _indent(text: str) -> str:
    return "\n".join("     " + line for line in text.splitlines())
