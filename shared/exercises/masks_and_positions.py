"""Exercise checkers for notebooks 03 (masks) and 04 (positional encoding).

Import them from `shared.exercises`; see `shared.exercises.feedback` for how a checker reports.
"""

from __future__ import annotations

import torch
from torch import nn

from ..masks import causal_mask, padding_mask
from ..positions import sinusoidal_table
from .feedback import Checker, exercise, random_tensor

# ---------------------------------------------------------------- 03 masks


@exercise("causal mask")
def check_causal_mask(c: Checker) -> None:
    """fn(T) -> (T, T) bool, True where query i may attend to key j (j <= i)."""
    for T in (4, 6, 1):  # T=1 last: there several mistakes look alike
        case = f"T={T}"
        ones = torch.ones(T, T, dtype=torch.bool)
        c.close(c.call(case, T), causal_mask(T)[0, 0], case, "mask", "(T, T)",
                variants=[(ones.tril(1), "off by one: your mask lets position i see i+1 (use diagonal=0)."),
                          (ones.tril(-1), "position i must also see itself: keep the diagonal (diagonal=0)."),
                          (ones.triu(1), "inverted polarity: True means 'may attend', so the lower triangle and the "
                           "diagonal are True."),
                          (ones.triu(), "this is the upper triangle: it lets each position see the future; use "
                           "torch.tril.")],
                shape_hints={(1, 1, T, T): "return the (T, T) matrix itself, without the leading (1, 1) axes."})
        c.passed()


@exercise("padding mask")
def check_padding_mask(c: Checker) -> None:
    """fn(tokens (B, T), pad_id) -> (B, 1, 1, T) bool, False where the key is padding."""
    cases = {"pad_id=0, padding at the end": (torch.tensor([[5, 6, 7, 0, 0], [3, 4, 0, 0, 0]]), 0),
             "pad_id=5 (token 0 is a real token)": (torch.tensor([[0, 1, 2, 5], [0, 5, 5, 5]]), 5),
             "a row that is all padding": (torch.tensor([[1, 2, 3], [0, 0, 0]]), 0),
             "no padding, T=1": (torch.tensor([[4], [9]]), 0)}
    for case, (tokens, pad_id) in cases.items():
        B, T = tokens.shape
        expected = padding_mask(tokens, pad_id)
        c.close(c.call(case, tokens.clone(), pad_id), expected, case, "mask", "(B, 1, 1, T)",
                variants=[(~expected, "inverted polarity: True means 'may attend', so use tokens != pad_id."),
                          (padding_mask(tokens, 0), "use the pad_id argument, not a hard-coded 0.")],
                shape_hints={(B, T): "add the head and query axes: mask[:, None, None, :] gives (B, 1, 1, T).",
                             (B, 1, T, 1): "the mask hides *keys*, so T belongs on the last axis: (B, 1, 1, T).",
                             (B, 1, T): "add one more axis: (B, 1, 1, T) broadcasts over heads and queries."})
        c.passed()


# ---------------------------------------------------------------- 04 positional encoding


@exercise("sinusoidal positional table")
def check_sinusoidal_table(c: Checker) -> None:
    """fn(max_len, d_model) -> (max_len, d_model): PE[pos, 2i] = sin(pos/10000^(2i/d)), PE[pos, 2i+1] = cos(...)."""
    for max_len, d_model in ((1, 2), (6, 8), (50, 16)):
        case = f"max_len={max_len}, d_model={d_model}"
        expected = sinusoidal_table(max_len, d_model)
        pos = torch.arange(max_len, dtype=torch.float32)[:, None]  # (max_len, 1)
        two_i = torch.arange(0, d_model, 2, dtype=torch.float32)  # (d_model / 2,)
        angles = pos / 10000 ** (two_i / d_model)  # (max_len, d_model / 2)
        swapped, halves, no_two, col = (torch.zeros(max_len, d_model) for _ in range(4))
        swapped[:, 0::2], swapped[:, 1::2] = angles.cos(), angles.sin()
        halves = torch.cat([angles.sin(), angles.cos()], dim=-1)
        no_two[:, 0::2] = (pos / 10000 ** (two_i / 2 / d_model)).sin()
        no_two[:, 1::2] = (pos / 10000 ** (two_i / 2 / d_model)).cos()
        col[:, 0::2], col[:, 1::2] = angles.sin(), (pos / 10000 ** ((two_i + 1) / d_model)).cos()
        c.close(c.call(case, max_len, d_model), expected, case, "table", "(max_len, d_model)", atol=1e-4,
                variants=[(swapped, "sin and cos are swapped: even dimensions 2i get sin, odd 2i+1 get cos."),
                          (halves, "sin and cos are interleaved (columns 0::2 and 1::2), not stacked as two halves."),
                          (no_two, "the exponent is 2i/d_model where 2i is the even column index; you used i/d_model."),
                          (col, "both columns of a pair share the frequency 10000^(2i/d_model); the cos column "
                           "used its own index 2i+1.")],
                shape_hints={(d_model, max_len): "rows are positions and columns are dimensions: (max_len, d_model)."})
        c.passed()


@exercise("learned positional embedding")
def check_learned_positions(c: Checker) -> None:
    """fn(d_model, max_len) -> nn.Module whose forward(x (B, T, d_model)) adds one trainable vector per position.

    The sizes come in `LearnedPositionalEmbedding`'s order, (d_model, max_len); the table is (max_len, d_model).
    """
    d_model, max_len, case = 4, 10, "d_model=4, max_len=10"
    module = c.call(case, d_model, max_len)
    if not isinstance(module, nn.Module):
        c.fail(case, f"expected an nn.Module, got {type(module).__name__}.", "return the module you built.")
    n_trainable = sum(p.numel() for p in module.parameters() if p.requires_grad)
    if n_trainable != max_len * d_model:
        c.fail(case, f"the module has {n_trainable} trainable parameters, expected max_len × d_model = "
               f"{max_len * d_model} (one vector per position).",
               "a fixed table (register_buffer or a plain tensor) is not learned: use nn.Embedding(max_len, d_model)"
               " or nn.Parameter." if n_trainable == 0 else "")
    if any(tuple(p.shape) == (d_model, max_len) for p in module.parameters()):  # T=5 > d_model: swapped sizes fail
        c.error_hint = (f"your table has shape (d_model, max_len) = {(d_model, max_len)}: the sizes come in the "
                        "order (d_model, max_len), like LearnedPositionalEmbedding, and the table is "
                        "nn.Embedding(max_len, d_model), one row per position.")
    c.passed()
    x = random_tensor(2, 5, d_model, seed=3)
    out = c.shape(c.run("forward, x of shape (2, 5, 4)", module, x.clone()), x, "forward, x of shape (2, 5, 4)",
                  meaning="(B, T, d_model): add the positions, do not concatenate")
    added = out - x  # (B, T, d_model)
    if not torch.allclose(added[0], added[1], atol=1e-5):  # (x + pe) - x rounds: compare at float precision
        c.fail("forward, x of shape (2, 5, 4)", "the vector added at a position differs between batch rows.",
               "the positional vector depends on the position only: index the table with torch.arange(T).")
    if torch.allclose(added[0, 0], added[0, 1]):
        c.fail("forward, x of shape (2, 5, 4)", "positions 0 and 1 received the same vector.",
               "initialise the table randomly (nn.Embedding does) so positions start out different.")
    c.passed()
    short = c.run("forward, x of shape (2, 3, 4)", module, x[:, :3].clone())
    c.close(short - x[:, :3], added[:, :3], "forward, x of shape (2, 3, 4)", "added vectors",
            "(the first 3 positions must reuse the vectors of positions 0-2)")
    c.passed()
    module.zero_grad()
    c.run("backward", lambda: module(x).sum().backward())
    if not any(p.grad is not None and p.grad.abs().sum() > 0 for p in module.parameters()):
        c.fail("backward", "no gradient reached the positional vectors.", "do not .detach() the table.")
    c.passed()
