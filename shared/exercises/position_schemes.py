"""Exercise checkers for notebook 09 (length generalisation): RoPE for one head, ALiBi slopes, randomized positions.

Import them from `shared.exercises`; see `shared.exercises.feedback` for how a checker reports.
"""

from __future__ import annotations

import torch

from ..positions import alibi_slopes, apply_rope, rope_frequencies
from .feedback import Checker, exercise, random_tensor


def _rope_half_split(x, positions, base):
    d = x.size(-1)
    angles = positions.double()[:, None] * rope_frequencies(d, base).double()  # (T, d/2)
    first, second = x[..., : d // 2].double(), x[..., d // 2 :].double()
    return torch.cat([first * angles.cos() - second * angles.sin(), first * angles.sin() + second * angles.cos()], -1)


@exercise("RoPE for one head")
def check_rope_one_head(c: Checker) -> None:
    """fn(x (T, d), positions (T,) ints, base) -> x, each pair (x[2i], x[2i+1]) rotated by positions * base^(-2i/d)."""
    cases = {"T=4, d=8, positions 0..3": (random_tensor(4, 8, seed=1), torch.arange(4), 10000.0),
             "T=3, d=4, positions 5, 9, 40, base 100": (random_tensor(3, 4, seed=2), torch.tensor([5, 9, 40]), 100.0),
             "T=1, d=2, position 0 (no rotation)": (random_tensor(1, 2, seed=3), torch.tensor([0]), 10000.0)}
    for case, (x, positions, base) in cases.items():
        inv_freq = rope_frequencies(x.size(-1), base)
        expected = apply_rope(x, positions, inv_freq)
        d = x.size(-1)
        variants = [
            (apply_rope(x, -positions, inv_freq), "rotate by +angle: (a, b) -> (a cos - b sin, a sin + b cos)."),
            (_rope_half_split(x, positions, base), "pair channel 2i with 2i+1 (neighbours), not i with i + d/2."),
            (apply_rope(x, positions, base ** (-torch.arange(d // 2).float() / d)),
             "the frequency of pair i is base^(-2i/d): the exponent counts in steps of 2/d."),
            (apply_rope(x, positions, base ** (-torch.arange(d // 2).float() * 2 / d).flip(0)),
             "pair 0 turns fastest (frequency 1), the last pair slowest."),
        ]
        c.close(c.call(case, x.clone(), positions.clone(), base), expected, case, "output", "(T, d)",
                variants=variants, atol=1e-5)
        c.passed()


@exercise("ALiBi slopes")
def check_alibi_slopes(c: Checker) -> None:
    """fn(n_heads) -> (n_heads,) tensor of head slopes in the paper's order (Press et al. 2022).

    For a power of two the slopes fall geometrically (largest first); otherwise the power-of-two part comes
    first and the interleaved extra slopes follow (6 heads: 1/4, 1/16, 1/64, 1/256, 1/2, 1/8).
    """
    for n_heads in (8, 4, 1, 16, 6, 12):
        case = f"n_heads={n_heads}"
        got = c.call(case, n_heads)
        if isinstance(got, (list, tuple)):
            got = torch.tensor(got, dtype=torch.float32)
        expected = alibi_slopes(n_heads)
        start = 2.0 ** (-8.0 / n_heads)
        variants = [
            (torch.tensor([start ** (h + 1) for h in range(n_heads)]),
             "for n_heads that is not a power of two, take the slopes of the power of two just below, then every "
             "other slope of the power of two just above."),
            (torch.tensor([start**h for h in range(n_heads)]), "the first slope is 2^(-8/n), not 1: start at h + 1."),
            (expected.flip(0), "reversed: head 0 gets 2^(-8/n), so a power of two has the largest slope first; the "
             "filled-in slopes of other counts come last."),
            (torch.tensor([2.0 ** -(h + 1) for h in range(n_heads)]),
             "the ratio between slopes depends on the number of heads: 2^(-8/n), which is 1/2 only for 8 heads."),
        ]
        c.close(got, expected, case, "slopes", "(n_heads,)", variants=variants, atol=1e-6)
        c.passed()


@exercise("randomized positions")
def check_randomized_positions(c: Checker) -> None:
    """fn(batch, length, max_position) -> (batch, length) ints: per row a sorted random subset of 0..max_position-1."""
    for batch, length, max_position in ((256, 6, 40), (64, 12, 12), (500, 1, 5)):
        case = f"batch={batch}, length={length}, max_position={max_position}"
        with torch.random.fork_rng():  # seeded for repeatable feedback, without touching the learner's random state
            torch.manual_seed(0)
            got = c.shape(c.call(case, batch, length, max_position), (batch, length), case, "positions")
        if got.is_floating_point():
            c.fail(case, f"positions have dtype {got.dtype}, expected an integer dtype.",
                   "position ids index a table: use torch.randperm / topk indices, or call .long().")
        if got.min() < 0 or got.max() >= max_position:
            c.fail(case, f"ids range over {got.min().item()}..{got.max().item()}, expected 0..{max_position - 1}.")
        if length > 1 and not torch.all(got[:, 1:] > got[:, :-1]):
            row = int((got[:, 1:] <= got[:, :-1]).any(dim=1).nonzero()[0])
            c.fail(case, f"row {row} is {got[row].tolist()}: ids must be strictly increasing.",
                   "draw distinct ids (a subset, no repeats) and sort each row: the order of tokens must survive.")
        used = got.unique().numel()
        if used < min(max_position, batch * length) * 0.9:
            c.fail(case, f"only {used} of the {max_position} ids ever appear.",
                   "each row needs its own random subset of the whole range 0..max_position-1.")
        if length < max_position and torch.all(got == got[:1]):
            c.fail(case, "every row got the same ids.", "draw a new subset for each row of the batch.")
        c.passed()
