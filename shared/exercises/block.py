"""Exercise checkers for notebook 05 (the Transformer block): LayerNorm, the sublayer connection, counting.

Import them from `shared.exercises`; see `shared.exercises.feedback` for how a checker reports.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..layers import EncoderLayer
from .feedback import Checker, exercise, random_tensor


def _norm(x, gamma, beta, eps, unbiased=False, eps_outside=False, dim=-1):
    """LayerNorm written out, with switches for the usual mistakes."""
    mean = x.mean(dim, keepdim=True)
    var = x.var(dim, keepdim=True, unbiased=unbiased)
    scale = var.sqrt() + eps if eps_outside else (var + eps).sqrt()
    return (x - mean) / scale * gamma + beta


@exercise("layer normalisation")
def check_layer_norm(c: Checker) -> None:
    """fn(x (..., d), gamma (d,), beta (d,), eps) -> (..., d), normalised over the last axis, then gamma * . + beta."""
    cases = {"x (2, 3, 8), eps=1e-5": ((2, 3, 8), 1e-5, 0.0), "x (4, 6), eps=1e-5": ((4, 6), 1e-5, 0.0),
             "x (5, 16) + 100 (a large offset)": ((5, 16), 1e-5, 100.0), "x (3, 4), eps=0.5": ((3, 4), 0.5, 0.0),
             "one feature (d=1): x - mean is 0": ((3, 1), 1e-5, 0.0)}
    for seed, (case, (shape, eps, offset)) in enumerate(cases.items()):
        x = random_tensor(*shape, seed=seed) * 3.0 + offset
        d = shape[-1]
        gamma, beta = random_tensor(d, seed=seed + 10) + 1.0, random_tensor(d, seed=seed + 20)
        expected = F.layer_norm(x, (d,), gamma, beta, eps)
        variants = [(_norm(x, beta, gamma, eps), "gamma and beta are swapped: multiply by gamma, then add beta."),
                    (_norm(x, 1.0, 0.0, eps), "after normalising, scale by gamma and shift by beta."),
                    (_norm(x, gamma, beta, eps, eps_outside=True), "eps goes inside the square root: "
                     "sqrt(var + eps), not sqrt(var) + eps."),
                    (_norm(x, gamma, beta, 0.0), "add eps to the variance before the square root."),
                    (_norm(x, 1.0, 0.0, eps) * gamma, "add beta after scaling by gamma.")]
        if d > 1:
            variants.insert(0, (_norm(x, gamma, beta, eps, unbiased=True), "LayerNorm uses the biased variance "
                                "(divide by d, not d - 1): x.var(-1, unbiased=False), or ((x - mean)**2).mean(-1)."))
        if x.dim() > 1 and shape[0] > 1:
            variants.append((_norm(x, gamma, beta, eps, dim=0), "normalise over the last axis (the features of one "
                             "token), dim=-1, not over the first axis."))
        c.close(c.call(case, x.clone(), gamma.clone(), beta.clone(), eps), expected, case, "output",
                "(same shape as x)", variants=variants, atol=1e-4)
        c.passed()


def _block(d: int, seed: int) -> tuple:
    """A seeded sublayer (Linear), a LayerNorm with non-trivial gamma/beta, and an input x (2, 5, d)."""
    torch.manual_seed(seed)  # the checker's own modules; the learner's state is not involved
    sublayer, norm = nn.Linear(d, d), nn.LayerNorm(d)
    with torch.no_grad():
        norm.weight.copy_(random_tensor(d, seed=seed) + 1.0)
        norm.bias.copy_(random_tensor(d, seed=seed + 1))
    return sublayer, norm, random_tensor(2, 5, d, seed=seed + 2) * 2.0 + 0.5


@exercise("sublayer connection")
def check_sublayer_connection(c: Checker) -> None:
    """fn(x (B, T, d), sublayer, norm, pre_ln) -> Post-LN norm(x + sublayer(x)), or Pre-LN x + sublayer(norm(x))."""
    state = torch.random.get_rng_state()
    try:
        for seed, d in enumerate((8, 16)):
            sublayer, norm, x = _block(d, seed)
            with torch.no_grad():
                post, pre = norm(x + sublayer(x)), x + sublayer(norm(x))
                swapped_hint = "this is the other order. Post-LN (pre_ln=False) normalises after the residual sum; "
                for pre_ln, expected in ((False, post), (True, pre)):
                    case = f"d={d}, pre_ln={pre_ln}"
                    with torch.no_grad():
                        got = c.call(case, x.clone(), sublayer, norm, pre_ln)
                    variants = [((pre if not pre_ln else post), swapped_hint + "Pre-LN (pre_ln=True) normalises the "
                                 "sublayer's input and adds the raw x."),
                                (norm(sublayer(x)) if not pre_ln else sublayer(norm(x)), "the residual is missing: "
                                 "add x back."),
                                (norm(x) + sublayer(norm(x)), "the residual must carry x itself, not norm(x)."),
                                (x + norm(sublayer(x)), "norm is applied to the sublayer's output; in Pre-LN it is "
                                 "applied to the sublayer's input: x + sublayer(norm(x))."),
                                (sublayer(x) + norm(x), "add x and sublayer(x) first, then normalise the sum.")]
                    c.close(got, expected, case, "output", "(B, T, d)", variants=variants)
                    c.passed()
    finally:
        torch.random.set_rng_state(state)


def reference_encoder_layer_params(d_model: int, n_heads: int, d_ff: int) -> int:
    """Parameters of one Post-LN encoder layer, counted from the module itself."""
    return sum(p.numel() for p in EncoderLayer(d_model, n_heads, d_ff).parameters())


@exercise("parameters of an encoder layer")
def check_encoder_layer_params(c: Checker) -> None:
    """fn(d_model, n_heads, d_ff) -> int: the parameter count of `shared.layers.EncoderLayer`."""
    for d, h, ff in ((512, 8, 2048), (64, 4, 256), (8, 2, 16), (6, 3, 10)):
        case = f"d_model={d}, n_heads={h}, d_ff={ff}"
        expected = reference_encoder_layer_params(d, h, ff)
        got = c.call(case, d, h, ff)
        if isinstance(got, torch.Tensor) and got.numel() == 1:
            got = got.item()
        if isinstance(got, float) and got.is_integer():
            got = int(got)
        if not isinstance(got, int) or isinstance(got, bool):
            c.fail(case, f"expected an int, got {type(got).__name__}.", "return the count as a Python int.")
        hints = {expected - 4 * d - d - ff: "biases count too: every nn.Linear has one bias per output.",
                 expected - 4 * d: "each of the two LayerNorms has gamma and beta, d_model each: 4 * d_model.",
                 expected - 2 * d: "there are two LayerNorms (one per sublayer), each with 2 * d_model parameters.",
                 expected - d * d - d: "count W^O too: attention has four (d_model x d_model) projections.",
                 expected - 3 * (d * d + d) + 3 * (d * (d // h) + d // h): "W^Q, W^K, W^V hold all heads at once: "
                 "each is (d_model x d_model), whatever n_heads is.",
                 expected - d * ff - ff: "the FFN has two linear layers: d_model -> d_ff and d_ff -> d_model."}
        c.equal(got, expected, case, "your count", hints.get(got, ""))
        c.passed()
