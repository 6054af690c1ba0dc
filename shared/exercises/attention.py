"""Exercise checkers for notebooks 01 (scaled dot-product attention) and 02 (multi-head attention).

Import them from `shared.exercises`; see `shared.exercises.feedback` for how a checker reports.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ..attention import scaled_dot_product_attention
from ..masks import causal_mask
from .feedback import Checker, exercise, random_tensor

# ---------------------------------------------------------------- 01 scaled dot-product attention


def _variant(q, k, v, mask=None, scale=None, dim=-1, softmax=True, fill="min", invert=False, zero_after=True):
    """Attention computed with one deliberate change, to recognise a learner's mistake."""
    d_k = q.size(-1)
    scores = q @ k.transpose(-2, -1) / (math.sqrt(d_k) if scale is None else scale)  # (..., T_q, T_k)
    if mask is not None:
        blocked = mask if invert else ~mask
        value = {"min": torch.finfo(scores.dtype).min, "-inf": float("-inf"), "zero": 0.0}[fill]
        scores = scores.masked_fill(blocked, value)
    weights = scores.softmax(dim=dim) if softmax else scores
    if mask is not None and zero_after:
        weights = weights.masked_fill(blocked, 0.0)
    return weights @ v, weights


def _attention_mistakes(q, k, v, mask):
    d_k = q.size(-1)
    variants = [
        (_variant(q, k, v, mask, scale=1.0), "looks like you forgot to divide the scores by √d_k."),
        (_variant(q, k, v, mask, scale=d_k), "you divided by d_k; the scale is 1/√d_k (math.sqrt(d_k))."),
        (_variant(q, k, v, mask, dim=-2), "the softmax runs over the wrong axis: each query's weights over the "
         "keys must sum to 1, so use dim=-1."),
        (_variant(q, k, v, mask, softmax=False), "did you forget the softmax?"),
    ]
    if mask is not None:
        variants += [
            (_variant(q, k, v, mask, invert=True), "inverted mask: True means 'may attend', so fill where ~mask."),
            (_variant(q, k, v, mask, fill="zero", zero_after=False), "masked scores were set to 0, which still "
             "gets weight after the softmax; fill them with a very negative number (torch.finfo(dtype).min)."),
            (_variant(q, k, v, mask, fill="-inf", zero_after=False), "a row whose keys are all masked becomes NaN "
             "with -inf: fill with torch.finfo(scores.dtype).min and set the masked weights to 0 after the softmax."),
            (_variant(q, k, v, mask, zero_after=False), "after the softmax, set the weights of masked keys to 0: a "
             "row with every key masked otherwise gets uniform weights."),
        ]
    return [((out, w), hint) for (out, w), hint in variants]


@exercise("scaled scores q·kᵀ/√d_k")
def check_scaled_scores(c: Checker) -> None:
    """fn(q (..., T_q, d_k), k (..., T_k, d_k)) -> scores (..., T_q, T_k) = q kᵀ / √d_k."""
    cases = {"2 tokens, d_k=2": ((2, 2, 2), (2, 2, 2)), "B=2, H=3, T_q=4, T_k=6, d_k=8": ((2, 3, 4, 8), (2, 3, 6, 8)),
             "T=1, d_k=16": ((1, 1, 16), (1, 1, 16)), "T_q=T_k=5, d_k=4": ((5, 4), (5, 4))}
    for seed, (case, (q_shape, k_shape)) in enumerate(cases.items()):
        q, k = random_tensor(*q_shape, seed=seed), random_tensor(*k_shape, seed=seed + 100)
        raw = q @ k.transpose(-2, -1)  # (..., T_q, T_k)
        d_k = q.size(-1)
        c.close(c.call(case, q.clone(), k.clone()), raw / math.sqrt(d_k), case, "scores", "(..., T_q, T_k)",
                variants=[(raw, "looks like you forgot to divide by √d_k."),
                          (raw / d_k, "you divided by d_k; the scale is 1/√d_k."),
                          (k @ q.transpose(-2, -1) / math.sqrt(d_k), "rows must be queries and columns keys: "
                           "compute q @ k.transpose(-2, -1).")],
                shape_hints={(*raw.shape[:-2], k.size(-2), q.size(-2)): "rows must be queries and columns keys: "
                             "compute q @ k.transpose(-2, -1)."})
        c.passed()


@exercise("softmax with temperature")
def check_softmax_temperature(c: Checker) -> None:
    """fn(scores (..., T_k), temperature > 0) -> probabilities softmax(scores / temperature) over the last axis."""
    cases = {"[1, 2, 3], temperature 1": (torch.tensor([1.0, 2.0, 3.0]), 1.0),
             "4×6 random, temperature 0.5": (random_tensor(4, 6, seed=1), 0.5),
             "4×6 random, temperature 10": (random_tensor(4, 6, seed=2), 10.0),
             "ties [2, 2, 2], temperature 0.1": (torch.tensor([2.0, 2.0, 2.0]), 0.1),
             "large scores [1000, 999, 0], temperature 1": (torch.tensor([1000.0, 999.0, 0.0]), 1.0)}
    for case, (scores, t) in cases.items():
        expected = (scores / t).softmax(dim=-1)
        exp = (scores / t).exp()
        variants = [((scores * t).softmax(-1), "you multiplied by the temperature; divide the scores by it."),
                    (scores.softmax(-1), "the temperature is ignored: compute softmax(scores / temperature)."),
                    (exp / exp.sum(-1, keepdim=True), "exp() of large numbers overflows to inf: subtract each "
                     "row's max first (the softmax does not change) or use torch.softmax.")]
        if scores.dim() > 1:
            variants.append(((scores / t).softmax(0), "softmax over the wrong axis: use dim=-1."))
        c.close(c.call(case, scores.clone(), t), expected, case, "probabilities", variants=variants)
        c.passed()


_CASTS = {torch.float64: ".double(), ", torch.float16: ".half(), ", torch.bfloat16: ".bfloat16(), ",
          torch.float32: ".float(), "}  # the tensor methods that cast to each dtype


def _dtype_hint(found: torch.dtype, wanted: torch.dtype) -> str:
    """The hint for an answer in dtype `found` where the inputs' `wanted` was expected, naming `found`'s casts."""
    numpy = ", or torch.from_numpy of a float64 array" if found == torch.float64 else ""
    return (f"keep the dtype of q, k and v ({wanted} here): a model calls attention in its own dtype (float32, "
            f"bfloat16, float16). Remove the cast to {found} ({_CASTS.get(found, '')}.to({found})) or the {found} "
            f"tensor made along the way (torch.tensor(..., dtype={found}){numpy}).")


def check_attention(fn, masks: bool = True, fully_masked_rows: bool = False) -> bool:
    """fn(q, k, v, mask=None) -> (out (..., T_q, d_v), weights (..., T_q, T_k)); masks: bool, True = may attend.

    masks=False tests inputs without a mask only (notebook 01); fully_masked_rows=True adds a row with
    every key masked, which must give zero weights and a zero output (notebook 03).
    """
    return _check_attention(masks, fully_masked_rows)(fn)


def _check_attention(masks: bool, fully_masked_rows: bool):
    @exercise("scaled dot-product attention")
    def body(c: Checker) -> None:
        shapes = {"hand example: 2 heads, 2 tokens, d_k=2": ((2, 2, 2), (2, 2, 2), (2, 2, 2)),
                  "B=2, H=3, T=5, d_k=8, d_v=6": ((2, 3, 5, 8), (2, 3, 5, 8), (2, 3, 5, 6)),
                  "T_q=3 queries, T_k=7 keys": ((2, 3, 4), (2, 7, 4), (2, 7, 4)),
                  "a single token (T=1)": ((1, 1, 1, 4), (1, 1, 1, 4), (1, 1, 1, 4))}
        cases = [(case, shape, None) for case, shape in shapes.items()]
        if masks:
            pad = torch.ones(2, 1, 1, 5, dtype=torch.bool)  # (B, 1, 1, T_k)
            pad[1, ..., 3:] = False
            cases += [("padding mask: last 2 keys of batch row 1", shapes["B=2, H=3, T=5, d_k=8, d_v=6"], pad),
                      ("causal mask, T=5", shapes["B=2, H=3, T=5, d_k=8, d_v=6"], causal_mask(5))]
        if fully_masked_rows:
            full = causal_mask(5).clone()
            full[..., 2, :] = False
            cases.append(("query 2 has every key masked", shapes["B=2, H=3, T=5, d_k=8, d_v=6"], full))
        for seed, (case, (q_shape, k_shape, v_shape), mask) in enumerate(cases):
            q, k, v = (random_tensor(*s, seed=10 * seed + i) for i, s in enumerate((q_shape, k_shape, v_shape)))
            if case.startswith("hand"):
                q, k, v = torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[2.0, 0.0], [0.0, 2.0]]]), torch.tensor(
                    [[[1.0, 0.0], [1.0, 1.0]], [[1.0, 1.0], [0.0, 1.0]]]), torch.tensor(
                    [[[1.0, 2.0], [3.0, 4.0]], [[0.0, 1.0], [1.0, 0.0]]])
            args = (q.clone(), k.clone(), v.clone()) + ((mask.clone(),) if mask is not None else ())
            out, weights = c.unpack(c.call(case, *args), case, ("out", "weights"))
            for name, got in (("weights", weights), ("out", out)):
                c.dtype(got, q.dtype, case, name, _dtype_hint(got.dtype, q.dtype) if torch.is_tensor(got) else "")
            exp_out, exp_weights = scaled_dot_product_attention(q, k, v, mask)
            mistakes = _attention_mistakes(q, k, v, mask)
            swap = "did you return (weights, out)? The order is (out, weights)."
            c.close(weights, exp_weights, case, "weights", "(..., T_q, T_k)",
                    variants=[(exp_out, swap)] + [(w, hint) for (_, w), hint in mistakes],
                    shape_hints={tuple(exp_out.shape): swap})
            c.close(out, exp_out, case, "out", "(..., T_q, d_v)", variants=[(o, hint) for (o, _), hint in mistakes],
                    shape_hints={tuple(exp_weights.shape): swap})
            c.passed()

    return body


# ---------------------------------------------------------------- 02 multi-head attention


@exercise("split_heads")
def check_split_heads(c: Checker) -> None:
    """fn(x (B, T, d_model), n_heads) -> (B, H, T, d_k); head h holds columns h*d_k .. (h+1)*d_k - 1."""
    for case, (B, T, d_model, H) in {"B=2, T=5, d_model=12, H=3": (2, 5, 12, 3), "T=1, d_model=8, H=2": (1, 1, 8, 2),
                                     "B=2, T=4, d_model=6, H=6 (d_k=1)": (2, 4, 6, 6)}.items():
        x = random_tensor(B, T, d_model, seed=T)
        d_k = d_model // H
        expected = x.view(B, T, H, d_k).transpose(1, 2)  # (B, H, T, d_k)
        c.close(c.call(case, x.clone(), H), expected, case, meaning="(B, H, T, d_k)",
                variants=[(x.view(B, H, T, d_k), "view without transpose: the memory of x is laid out position "
                           "by position, so first view as (B, T, H, d_k), then .transpose(1, 2)."),
                          (x.view(B, T, d_k, H).permute(0, 3, 1, 2), "head h must be the block of columns "
                           "h*d_k .. (h+1)*d_k - 1: view as (B, T, H, d_k), not (B, T, d_k, H).")],
                shape_hints={(B, T, H, d_k): "you have (B, T, H, d_k); now swap T and H with .transpose(1, 2)."})
        c.passed()


@exercise("merge_heads")
def check_merge_heads(c: Checker) -> None:
    """fn(x (B, H, T, d_k)) -> (B, T, H * d_k), the inverse of split_heads."""
    for case, (B, H, T, d_k) in {"B=2, H=3, T=5, d_k=4": (2, 3, 5, 4), "T=1, H=2, d_k=4": (1, 2, 1, 4),
                                 "an input that is not contiguous (as after attention)": (2, 4, 3, 2)}.items():
        x = random_tensor(B, H, T, d_k, seed=T)
        if case.startswith("an input"):
            x = random_tensor(B, T, H, d_k, seed=7).transpose(1, 2)  # (B, H, T, d_k), strided
        expected = x.transpose(1, 2).reshape(B, T, H * d_k)  # (B, T, H, d_k) -> (B, T, d_model)
        c.close(c.call(case, x.clone() if x.is_contiguous() else x), expected, case, meaning="(B, T, d_model)",
                variants=[(x.reshape(B, T, H * d_k), "reshape without transpose mixes positions and heads: "
                           "first .transpose(1, 2) to (B, T, H, d_k), then merge the last two axes.")],
                shape_hints={(B, H, T * d_k): "merge H and d_k (after moving T next to B), not T and d_k."})
        c.passed()


def reference_multi_head_attention(x: Tensor, w_q, w_k, w_v, w_o, n_heads: int, mistake: str = "") -> Tensor:
    """x (B, T, d_model) and (d_model, d_model) matrices (Q = x W^Q) -> (B, T, d_model), self-attention.

    `mistake` ("no_transpose", "scale_d_model", "no_w_o") reproduces a common bug, for the checker's hints.
    """
    B, T, d_model = x.shape
    d_k = d_model // n_heads

    def heads(t):
        if mistake == "no_transpose":
            return t.view(B, n_heads, T, d_k)  # (B, H, T, d_k) from the wrong memory layout: a deliberate mistake
        return t.view(B, T, n_heads, d_k).transpose(1, 2)  # (B, T, H, d_k) -> (B, H, T, d_k)

    q, k, v = heads(x @ w_q), heads(x @ w_k), heads(x @ w_v)  # (B, H, T, d_k)
    scale = math.sqrt(d_model) if mistake == "scale_d_model" else math.sqrt(d_k)
    weights = (q @ k.transpose(-2, -1) / scale).softmax(dim=-1)  # (B, H, T, T)
    merged = (weights @ v).transpose(1, 2).reshape(B, T, d_model)  # (B, T, H, d_k) -> (B, T, d_model)
    return merged if mistake == "no_w_o" else merged @ w_o


@exercise("multi-head attention")
def check_multi_head_attention(c: Checker) -> None:
    """fn(x (B, T, d_model), w_q, w_k, w_v, w_o (d_model, d_model), n_heads) -> (B, T, d_model); Q = x @ w_q."""
    for case, (B, T, d_model, H) in {"B=2, T=4, d_model=8, H=2": (2, 4, 8, 2), "T=1, d_model=6, H=3": (1, 1, 6, 3),
                                     "B=2, T=5, d_model=8, H=1 (one head)": (2, 5, 8, 1),
                                     "B=1, T=3, d_model=12, H=4": (1, 3, 12, 4)}.items():
        x = random_tensor(B, T, d_model, seed=T)
        w = [random_tensor(d_model, d_model, seed=T + i) / math.sqrt(d_model) for i in range(1, 5)]
        ref = reference_multi_head_attention
        wt = [m.T for m in w]
        c.close(c.call(case, x.clone(), *(m.clone() for m in w), H), ref(x, *w, H), case, meaning="(B, T, d_model)",
                variants=[(ref(x, *w, H, "no_w_o"), "you forgot the output projection W^O after merging the heads."),
                          (ref(x, *w, H, "scale_d_model"), "scale by √d_k (the per-head size d_model // n_heads), "
                           "not √d_model."),
                          (ref(x, *w, H, "no_transpose"), "split the heads with view(B, T, H, d_k).transpose(1, 2),"
                           " not view(B, H, T, d_k)."),
                          (ref(x, *wt, H), "the weights are used as x @ W (shape (d_model, d_model), as in the "
                           "paper), not x @ W.T.")])
        c.passed()
