"""Normalisation layers: LayerNorm (torch's) and RMSNorm (Zhang & Sennrich 2019, Llama), chosen by name.

The model classes build theirs with `make_norm("layernorm" | "rmsnorm", d_model)`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .validation import (
    check_bool,
    check_choice,
    check_features,
    check_optional_positive_number,
    check_positive_int,
    check_positive_number,
)

NORMS = ("layernorm", "rmsnorm")


class RMSNorm(nn.Module):
    """y = x / sqrt(mean(x^2) + eps) * g over the last dim: (..., d_model) -> same. No mean, no bias.

    Computed by `torch.nn.functional.rms_norm` (one fused kernel), so equal to `torch.nn.RMSNorm(d_model, eps)`
    in value and dtype; eps=None uses the input dtype's machine epsilon. Notebook 10 builds it by hand.
    """

    def __init__(self, d_model: int, eps: float | None = 1e-5) -> None:
        super().__init__()
        self.d_model = check_positive_int("d_model", d_model)
        self.eps = check_optional_positive_number("eps", eps)  # inf would zero every output, nan make it nan
        self.weight = nn.Parameter(torch.ones(d_model))  # the gain g, one per channel

    def forward(self, x: Tensor) -> Tensor:
        check_features("x", x, self.d_model)  # floating-point (..., d_model)
        return F.rms_norm(x, (self.d_model,), self.weight, self.eps)  # (..., d_model), in x's dtype

    def extra_repr(self) -> str:
        return f"{self.d_model}, eps={self.eps}"


def make_norm(kind: str, d_model: int, bias: bool = True, eps: float = 1e-5) -> nn.Module:
    """'layernorm' -> nn.LayerNorm (with or without its bias) or 'rmsnorm' -> RMSNorm: (..., d_model) -> same.

    eps: the small number added under the square root (1e-5, both layers' default; a trained model names its own).
    """
    check_choice("norm", kind, NORMS)
    check_bool("bias", bias)  # rmsnorm has no bias, but a "no" must not pass silently there either
    check_positive_number("eps", eps)
    if kind == "rmsnorm":
        return RMSNorm(d_model, eps)  # which checks d_model
    return nn.LayerNorm(check_positive_int("d_model", d_model), eps=eps, bias=bias)
