"""A per-stage printer for multi-head attention: every intermediate tensor with its shape, then a check.

Point it at any module with `w_q`, `w_k`, `w_v`, `w_o` projections and an `n_heads` attribute (the course's
`MultiHeadAttention`, or your own): it recomputes attention stage by stage from the module's own weights,
prints each stage, and says whether the module's forward pass gives the same output.

    from shared.debug import trace_attention
    stages = trace_attention(my_mha, x)           # x (B, T, d_model)
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor, nn

from ..masks import causal_mask, check_mask, combine_masks

STAGES = ("q", "k", "v", "q_heads", "k_heads", "v_heads", "scores", "scaled_scores", "masked_scores", "weights",
          "weighted_values", "merged", "output")
_TITLES = {
    "q": "q = x W^Q (every head side by side)", "k": "k = x W^K", "v": "v = x W^V",
    "q_heads": "q split into heads", "k_heads": "k split into heads", "v_heads": "v split into heads",
    "scores": "scores = q k^T", "scaled_scores": "scaled scores = q k^T / sqrt(d_k)",
    "masked_scores": "masked scores (blocked keys -> finfo.min, printed as -inf)",
    "weights": "weights = softmax(scaled scores)",
    "weighted_values": "weighted values = weights v", "merged": "heads merged (concatenated)",
    "output": "output = merged W^O",
}
_SHAPES = {"q": "(B, T_q, d_model)", "k": "(B, T_k, d_model)", "v": "(B, T_k, d_model)", "q_heads": "(B, H, T_q, d_k)",
           "k_heads": "(B, H, T_k, d_k)", "v_heads": "(B, H, T_k, d_k)", "scores": "(B, H, T_q, T_k)",
           "scaled_scores": "(B, H, T_q, T_k)", "masked_scores": "(B, H, T_q, T_k)", "weights": "(B, H, T_q, T_k)",
           "weighted_values": "(B, H, T_q, d_k)", "merged": "(B, T_q, d_model)", "output": "(B, T_q, d_model)"}


@torch.no_grad()
def attention_stages(module: nn.Module, query: Tensor, key: Tensor | None = None, value: Tensor | None = None,
                     mask: Tensor | None = None, causal: bool = False) -> dict[str, Tensor]:
    """Every stage of multi-head attention computed from `module`'s weights: {stage name: tensor} (see STAGES)."""
    for name in ("w_q", "w_k", "w_v", "w_o", "n_heads"):
        if not hasattr(module, name):
            raise TypeError(f"module must have w_q, w_k, w_v, w_o projections and n_heads; it has no {name!r}")
    key = query if key is None else key
    value = key if value is None else value
    for name, x in (("query", query), ("key", key), ("value", value)):
        if not isinstance(x, Tensor) or x.dim() != 3 or not x.is_floating_point():
            raise ValueError(f"{name} must be a float tensor of shape (B, T, d_model), got "
                             f"{tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__}")
    H = module.n_heads
    s: dict[str, Tensor] = {"q": module.w_q(query), "k": module.w_k(key), "v": module.w_v(value)}
    d_model = s["q"].size(-1)
    if d_model % H:
        raise ValueError(f"the projections' width {d_model} must be divisible by n_heads={H}")
    d_k = d_model // H
    for name in ("q", "k", "v"):
        B, T, _ = s[name].shape
        s[f"{name}_heads"] = s[name].view(B, T, H, d_k).transpose(1, 2)  # (B, T, H, d_k) -> (B, H, T, d_k)
    s["scores"] = s["q_heads"] @ s["k_heads"].transpose(-2, -1)  # (B, H, T_q, T_k)
    s["scaled_scores"] = s["scores"] / math.sqrt(d_k)
    T_q, T_k = s["scores"].shape[-2:]
    if causal:
        mask = combine_masks(mask, causal_mask(T_q, query.device, n_keys=T_k))
    scores = s["scaled_scores"]
    if mask is not None:
        check_mask(mask, tuple(scores.shape))
        scores = s["masked_scores"] = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    s["weights"] = scores.softmax(dim=-1)
    if mask is not None:
        s["weights"] = s["weights"].masked_fill(~mask, 0.0)  # fully masked rows give zeros, as in the course
    s["weighted_values"] = s["weights"] @ s["v_heads"]  # (B, H, T_q, d_k)
    B = s["weighted_values"].size(0)
    s["merged"] = s["weighted_values"].transpose(1, 2).reshape(B, T_q, d_model)  # (B, T_q, H, d_k) -> (B, T_q, d_model)
    s["output"] = module.w_o(s["merged"])
    return s


def trace_attention(module: nn.Module, query: Tensor, key: Tensor | None = None, value: Tensor | None = None,
                    mask: Tensor | None = None, causal: bool = False, decimals: int = 3, max_values: int = 48,
                    check: bool = True) -> dict[str, Tensor]:
    """Print every stage of `module`'s attention with its shape; with check=True, compare with module(...).

    Tensors with at most `max_values` entries are printed in full (rounded to `decimals`); larger ones as
    mean/std/min/max. Returns the stages (see `attention_stages`), plus "module_output" when checked.
    """
    if not isinstance(decimals, int) or decimals < 0:
        raise ValueError(f"decimals must be an int >= 0, got {decimals!r}")
    if not isinstance(max_values, int) or max_values < 0:
        raise ValueError(f"max_values must be an int >= 0, got {max_values!r}")
    key = query if key is None else key
    value = key if value is None else value
    stages = attention_stages(module, query, key, value, mask, causal)
    for i, (name, t) in enumerate(stages.items(), 1):
        print(f"[{i:>2}] {_TITLES[name]}  shape {tuple(t.shape)} {_SHAPES[name]}")
        print(_indent(_show(t, decimals, max_values)))
    if check:
        with torch.no_grad():
            result = module(query, key, value, mask=mask, causal=causal) if causal else \
                module(query, key, value, mask=mask)
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
