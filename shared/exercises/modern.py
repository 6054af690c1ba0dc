"""Exercise checkers for notebook 10 (a modern LLM block): RMSNorm, the SwiGLU feed-forward, repeating KV heads,
and Muon's Newton-Schulz orthogonalisation.

Import them from `shared.exercises`; see `shared.exercises.feedback` for how a checker reports.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..attention import repeat_kv
from ..muon import MUON_COEFFICIENTS, newton_schulz
from .feedback import Checker, exercise, random_tensor


def _reference_rms_norm(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def _reference_newton_schulz(G, steps, coefficients, eps, normalise="each", back=True, gram="left", swap="mT"):
    """The usual mistakes in Newton-Schulz on every matrix of G (..., m, n), in G's dtype, made by the keyword
    arguments (swap="all": the transposes reverse every dimension, as `.T` does). The right answer is
    shared.muon.newton_schulz, which the course's Muon runs; with no keyword this computes the same."""
    a, b, c = coefficients
    if normalise == "each":
        X = G / G.norm(dim=(-2, -1), keepdim=True).clamp(min=eps)  # every singular value <= 1
    elif normalise == "batch":
        X = G / G.norm().clamp(min=eps)
    else:
        X = G
    tall = G.shape[-2] > G.shape[-1]
    transpose = (lambda t: t.mT) if swap == "mT" else (lambda t: t.permute(*reversed(range(t.dim()))))
    if tall:
        X = transpose(X)  # (..., n, m): the Gram matrix below is the smaller (n, n) one
    for _ in range(steps):
        if gram == "left":
            A = X @ X.mT  # (..., m, m)
            X = a * X + (b * A + c * A @ A) @ X
        else:  # X^T X multiplied from the left: only defined for square matrices, and not the same polynomial
            A = X.mT @ X
            X = a * X + (b * A + c * A @ A) @ X
    return transpose(X) if tall and back else X


def _has_zero_matrix(G: torch.Tensor) -> bool:
    """Whether any matrix of G (..., m, n) is all zeros (a zero row inside a matrix does not count)."""
    return bool((G.flatten(-2).abs().sum(-1) == 0).any())


@exercise("Newton-Schulz orthogonalisation (Muon)")
def check_newton_schulz(c: Checker) -> None:
    """fn(G (..., m, n), steps, coefficients (a, b, c), eps) -> (..., m, n): each matrix normalised by its own
    norm (at least eps), then `steps` times X <- a X + (b A + c A^2) X with A = X X^T; a tall matrix is handled
    transposed."""
    zero_first = torch.stack([torch.zeros(3, 4), random_tensor(3, 4, seed=5)])
    cases = {  # the first is small enough that forgetting to normalise stays finite (and is named)
        "one wide matrix (4, 6) of norm about 0.5, Muon's coefficients":
            (random_tensor(4, 6, seed=1) / 10, 5, MUON_COEFFICIENTS),
        "one tall matrix (6, 3)": (random_tensor(6, 3, seed=2) * 5, 5, MUON_COEFFICIENTS),
        "a batch of 3 square (4, 4) matrices of very different sizes, the classic cubic (1.5, -0.5, 0), 3 steps":
            (random_tensor(3, 4, 4, seed=3) * torch.tensor([0.01, 1.0, 100.0])[:, None, None], 3, (1.5, -0.5, 0.0)),
        "a batch of 3 tall (5, 2) matrices, the classic cubic (1.5, -0.5, 0), 3 steps":
            (random_tensor(3, 5, 2, seed=4), 3, (1.5, -0.5, 0.0)),
        "a batch of 2 (3, 4) matrices, the first all zeros": (zero_first, 5, MUON_COEFFICIENTS),
    }
    eps = 1e-7
    dot_t = (".T reverses EVERY dimension of a batch, mixing its matrices; transpose the last two with .mT (or "
             ".transpose(-2, -1)).")
    for case, (G, steps, coefficients) in cases.items():
        expected = newton_schulz(G, steps, coefficients, eps)
        variants = [
            (_reference_newton_schulz(G, steps, coefficients, eps, normalise="none"),
             "divide each matrix by its norm first (G / G.norm(dim=(-2, -1), keepdim=True)): the iteration is "
             "safe only for singular values up to about 1 (Muon's diverges from about 1.27), and the Frobenius norm "
             "is at least the largest of them."),
            (_reference_newton_schulz(G, steps, coefficients, eps, normalise="batch"),
             "normalise each matrix by its OWN norm, G.norm(dim=(-2, -1), keepdim=True), not the whole batch by "
             "one number: a small matrix next to a large one would stay far below 1 and barely move."),
            (_reference_newton_schulz(G, steps, (1.5, -0.5, 0.0), eps),
             "use the `coefficients` you are given (a, b, c): this is the classic cubic (1.5, -0.5, 0)."),
            (_reference_newton_schulz(G, steps, MUON_COEFFICIENTS, eps),
             "use the `coefficients` you are given (a, b, c), not Muon's fixed (3.4445, -4.7750, 2.0315)."),
            (_reference_newton_schulz(G, steps, coefficients[::-1], eps),
             "the coefficients are in the order (a, b, c): a X + b A X + c A² X."),
            (_reference_newton_schulz(G, 5, coefficients, eps),
             "run `steps` iterations, not a fixed 5."),
        ]
        if G.shape[-2] == G.shape[-1]:
            variants.append((_reference_newton_schulz(G, steps, coefficients, eps, gram="right"),
                             "the Gram matrix is A = X @ X.mT, multiplied from the LEFT: (b A + c A @ A) @ X."))
        if G.dim() == 3 and G.shape[-2] > G.shape[-1]:
            variants.append((_reference_newton_schulz(G, steps, coefficients, eps, swap="all"), dot_t))
        # a variant that blew up to inf/NaN would "match" any answer that did: it explains nothing
        variants = [(wrong, hint) for wrong, hint in variants if torch.isfinite(wrong).all()]
        shape_hints = {}
        if G.shape[-2] > G.shape[-1]:
            shape_hints[(*G.shape[:-2], G.shape[-1], G.shape[-2])] = (
                "a tall matrix is worked on transposed; transpose the result back at the end.")
        got = c.call(case, G.clone(), steps, coefficients, eps)
        low = (torch.bfloat16, torch.float16)
        if isinstance(got, torch.Tensor) and got.dtype != G.dtype:
            c.fail(case, f"output has dtype {got.dtype}, expected {G.dtype} (G's own).",
                   "compute in G's dtype (Muon iterates in bfloat16 where the hardware has it, but this check compares "
                   "to 4 digits)." if got.dtype in low else "return the result in G's dtype: X.to(G.dtype).")
        if (isinstance(got, torch.Tensor) and got.shape == expected.shape and torch.isfinite(got).all()
                and not torch.allclose(got, expected, atol=1e-4, rtol=1e-3)
                and torch.allclose(got, expected, atol=5e-2) and not any(
                    torch.allclose(got, wrong, atol=1e-4, rtol=1e-3) for wrong, _ in variants)):
            c.fail(case, "output agrees with the expected values to about 2 digits only.",
                   "did you compute in bfloat16 or float16 and cast back? Compute in G's dtype.")
        nan_hint = ("a zero matrix has norm 0, and 0 / 0 is NaN: keep the norm at least eps "
                    "(G.norm(dim=(-2, -1), keepdim=True).clamp(min=eps)).") if _has_zero_matrix(G) else (
                    "NaN or inf here means the iteration blew up: divide each matrix by its own norm first, so that "
                    "every singular value is at most 1.")
        c.close(got, expected, case, "output", "(same shape as G)", variants=variants, shape_hints=shape_hints,
                atol=1e-4, rtol=1e-3, nan_hint=nan_hint)
        c.passed()


@exercise("RMSNorm")
def check_rms_norm(c: Checker) -> None:
    """fn(x (..., d), weight (d,), eps) -> x / sqrt(mean(x^2 over the last dim) + eps) * weight."""
    cases = {"x (2, 3, 8), random gain": (random_tensor(2, 3, 8, seed=1) * 3 + 1, random_tensor(8, seed=2), 1e-5),
             "x (4, 6), gain of ones": (random_tensor(4, 6, seed=3) + 2, torch.ones(6), 1e-5),
             "small x with a row of zeros, eps=0.1": (torch.cat([random_tensor(2, 5, seed=4) * 0.3, torch.zeros(1, 5)]),
                                                      random_tensor(5, seed=5), 0.1)}
    for case, (x, weight, eps) in cases.items():
        expected = _reference_rms_norm(x, weight, eps)
        ms = x.pow(2).mean(-1, keepdim=True)
        centred = x - x.mean(-1, keepdim=True)
        variants = [
            (F.layer_norm(x, x.shape[-1:], weight, None, eps),
             "this is LayerNorm: RMSNorm does not subtract the mean."),
            (centred * torch.rsqrt(ms + eps) * weight, "do not subtract the mean: RMSNorm only rescales."),
            (x / (ms + eps) * weight, "divide by the square ROOT of the mean square: torch.rsqrt or .sqrt()."),
            (x / (ms.sqrt() + eps) * weight, "eps goes inside the square root: sqrt(mean(x²) + eps)."),
            (x * torch.rsqrt(ms + eps), "multiply by the learned gain `weight` at the end."),
            (x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True) + eps) * weight, "use the mean of x², not the sum."),
        ]
        if x.dim() == 3:
            variants.append((x * torch.rsqrt(x.pow(2).mean(0, keepdim=True) + eps) * weight,
                             "average over the LAST dimension (the features), not the batch: dim=-1."))
        c.close(c.call(case, x.clone(), weight.clone(), eps), expected, case, "output", "(same shape as x)",
                variants=variants, shape_hints={tuple(x.shape[:-1]) + (1,): "return the normalised x, not the "
                                                "root mean square itself (keep every feature)."})
        c.passed()


@exercise("SwiGLU feed-forward")
def check_swiglu(c: Checker) -> None:
    """fn(x (B, T, d), w_gate (h, d), w_up (h, d), w_down (d, h)) -> (SiLU(x W_gate^T) * x W_up^T) W_down^T."""
    for case, (B, T, d, h) in {"B=2, T=3, d=8, h=12": (2, 3, 8, 12), "T=1, d=4, h=6": (1, 1, 4, 6)}.items():
        x = random_tensor(B, T, d, seed=1)
        w_gate, w_up, w_down = random_tensor(h, d, seed=2), random_tensor(h, d, seed=3), random_tensor(d, h, seed=4)
        gate, up = x @ w_gate.T, x @ w_up.T  # (B, T, h) each
        expected = (F.silu(gate) * up) @ w_down.T
        variants = [
            ((F.silu(up) * gate) @ w_down.T, "SiLU belongs on the GATE branch: F.silu(x @ w_gate.T) * (x @ w_up.T)."),
            ((torch.sigmoid(gate) * up) @ w_down.T, "SiLU(z) is z * sigmoid(z), not sigmoid(z) alone."),
            ((F.gelu(gate) * up) @ w_down.T, "SwiGLU uses SiLU (swish), not GELU, on the gate."),
            (F.silu(gate) @ w_down.T, "multiply the gated branch by the second (up) projection."),
            (F.silu(gate * up) @ w_down.T, "apply SiLU to the gate alone, then multiply by the up branch."),
        ]
        c.close(c.call(case, x.clone(), w_gate.clone(), w_up.clone(), w_down.clone()), expected, case, "output",
                "(B, T, d)", variants=variants, atol=1e-4,
                shape_hints={(B, T, h): "project back down to d with w_down at the end."})
        c.passed()


@exercise("repeat KV heads (grouped-query attention)")
def check_repeat_kv(c: Checker) -> None:
    """fn(x (B, H_kv, T, d_k), n_rep) -> (B, H_kv * n_rep, T, d_k); query head h reads KV head h // n_rep."""
    for case, (B, H_kv, T, d_k, n_rep) in {"H_kv=2, n_rep=3": (2, 2, 4, 3, 3), "H_kv=1 (multi-query), n_rep=4":
                                           (1, 1, 3, 2, 4), "n_rep=1 (ordinary multi-head)": (2, 3, 2, 2, 1)}.items():
        x = random_tensor(B, H_kv, T, d_k, seed=5)
        expected = repeat_kv(x, n_rep)
        variants = [(x.repeat(1, n_rep, 1, 1), "the KV heads come out tiled (0, 1, 0, 1, ...): each KV head must "
                     "serve n_rep NEIGHBOURING query heads (0, 0, 1, 1, ...): use repeat_interleave(n_rep, dim=1).")]
        c.close(c.call(case, x.clone(), n_rep), expected, case, "output", "(B, H_kv * n_rep, T, d_k)",
                variants=variants,
                shape_hints={(B, H_kv, T * n_rep, d_k): "repeat along the head axis (dim=1), not the time axis.",
                             (B, H_kv, T, d_k * n_rep): "repeat along the head axis (dim=1), not the feature axis.",
                             (B * n_rep, H_kv, T, d_k): "repeat along the head axis (dim=1), not the batch axis."})
        c.passed()

