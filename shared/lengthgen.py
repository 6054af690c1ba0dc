"""Length generalisation on list reversal: position schemes, held-out test sets per length, training, scoring.

Models train on sources of TRAIN_LENGTHS (1-12 digits) and are scored by exact match on each length of
TEST_LENGTHS (1-32). Lengths 1 and 2 have only 10 and 100 possible lists: their test sets are all of them,
so they are also seen in training; from length 3 on, test lists are distinct and excluded from training.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence

import torch
from torch import Tensor, nn

from .gpt import GPT
from .history import History
from .reversal import ARCHS, BOS, EOS, ReversalBatches, check_sources, encode_digits, loss_for, make_model
from .runtime import eval_mode, seed_everything
from .training import train, warmup_cosine
from .transformer import Transformer
from .validation import check_int, check_positive_int, check_tokens

TRAIN_LENGTHS = (1, 12)
TEST_LENGTHS = tuple(range(1, 33))
MAX_SOURCE = 32  # every model's positions cover 32 digits, so long inputs fail by generalisation, not by error


def coupled_positions(tokens: Tensor, max_position: int | None = None) -> Tensor:
    """(B, T) `BOS src EOS tgt ...` -> (B, T) position ids that couple each answer step to its source digit.

    Position coupling (Cho et al. 2024): source digit i of n gets id n - i; the token that predicts answer
    step j (EOS for j = 0, else answer token j - 1) gets id j + 1 = the id of the digit it must copy. BOS is 0.
    With max_position, every row's ids (BOS excepted) are shifted by a random offset that keeps them below it.
    """
    check_tokens("tokens", tokens)
    B, T = tokens.shape
    is_eos = tokens == EOS
    first_eos = torch.where(is_eos.any(dim=1), is_eos.int().argmax(dim=1), T)[:, None]  # (B, 1): n + 1
    t = torch.arange(T, device=tokens.device)[None]  # (1, T)
    ids = torch.where(t < first_eos, first_eos - t, t - first_eos + 1)  # (B, T)
    ids[:, 0] = 0  # BOS
    if max_position is not None:
        check_positive_int("max_position", max_position)
        if ids.max() >= max_position:
            raise ValueError(f"max_position={max_position} is too small: these tokens need ids up to "
                             f"{int(ids.max())}, so max_position must be at least {int(ids.max()) + 1}")
        room = (max_position - ids.max(dim=1, keepdim=True).values).clamp(min=1)  # (B, 1) offsets allowed
        offset = (torch.rand(B, 1, device=tokens.device) * room).long()  # (B, 1) in 0..room-1
        ids[:, 1:] += offset
    return ids


class CoupledGPT(GPT):
    """A GPT that computes its position ids with `coupled_positions` (random offsets in training)."""

    def forward(self, tokens: Tensor, caches=None, need_weights: bool = False, positions: Tensor | None = None):
        """(B, T) ids -> (B, T, vocab_size) logits; the whole sequence each call (no KV cache)."""
        if caches:
            raise ValueError("CoupledGPT recomputes positions from the whole sequence: call it without caches")
        if positions is None:
            positions = coupled_positions(tokens, self.config.n_positions if self.training else None)
        return super().forward(tokens, need_weights=need_weights, positions=positions)


# scheme name -> (make_model keywords, architectures it applies to)
SCHEMES = {
    "sinusoidal": (dict(position="sinusoidal"), ARCHS),
    "learned": (dict(position="learned"), ARCHS),
    "rope": (dict(position="rope"), ARCHS),
    "alibi": (dict(position="alibi"), ("decoder_only",)),  # the encoder-decoder's cross-attention has no distance
    "nope": (dict(position="none"), ("decoder_only",)),  # only a causal mask can tell positions apart
    "random_sinusoidal": (dict(position="sinusoidal", randomized_positions=True), ARCHS),
    "random_learned": (dict(position="learned", randomized_positions=True), ARCHS),
    "random_rope": (dict(position="rope", randomized_positions=True), ARCHS),
    "coupled": (dict(gpt_class=CoupledGPT), ("decoder_only",)),  # position coupling, Cho et al. 2024
}
RECIPE = dict(d_model=64, n_heads=4, n_layers=2, batch_size=64, lr=3e-3, warmup=100)


def check_scheme(scheme: str, arch: str) -> None:
    """ValueError unless `scheme` is known and applies to `arch`."""
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {sorted(SCHEMES)}, got {scheme!r}")
    if arch not in SCHEMES[scheme][1]:
        raise ValueError(f"scheme {scheme!r} applies to {SCHEMES[scheme][1]}, not arch={arch!r}")


def make_scheme_model(scheme: str, arch: str, d_model: int = 64, n_heads: int = 4, n_layers: int = 2):
    """A reversal model of `arch` with position scheme `scheme`, positions covering MAX_SOURCE digits."""
    check_scheme(scheme, arch)
    return make_model(arch, d_model, n_heads, n_layers, max_source=MAX_SOURCE, train_lengths=TRAIN_LENGTHS,
                      **SCHEMES[scheme][0])


def length_test_sets(lengths: Iterable[int] = TEST_LENGTHS, n: int = 200, seed: int = 4321) -> dict:
    """{length: list of distinct digit tuples}: `n` random lists per length, or every list when 10^length <= n."""
    check_positive_int("n", n)  # 0 or a float would give empty or odd-sized sets, and accuracies of nothing
    rng, out = random.Random(seed), {}
    for length in lengths:
        check_positive_int("lengths (each)", length)
        if 10**length <= n:  # few enough to take them all
            out[length] = [tuple(int(c) for c in f"{i:0{length}d}") for i in range(10**length)]
            continue
        seen: set = set()
        while len(seen) < n:
            seen.add(tuple(rng.randrange(10) for _ in range(length)))
        out[length] = sorted(seen)
    return out


def held_out(test_sets: dict, min_len: int = 3) -> set:
    """The test lists training must skip: all of them from `min_len` on (shorter ones cannot be spared)."""
    return {s for length, sources in test_sets.items() if length >= min_len for s in sources}


def train_scheme(scheme: str, arch: str, *, seed: int = 0, max_steps: int, max_seconds: float | None = None,
                 exclude=(), device="cpu", recipe: dict | None = None, progress: bool = False,
                 desc: str = "train") -> tuple[nn.Module, History]:
    """Train a `scheme` model on TRAIN_LENGTHS for `max_steps` (or `max_seconds`); -> (model in eval mode, history)."""
    r = {**RECIPE, **(recipe or {})}
    seed_everything(seed)
    model = make_scheme_model(scheme, arch, r["d_model"], r["n_heads"], r["n_layers"]).to(device)
    batches = ReversalBatches(arch, r["batch_size"], seed=seed, exclude=exclude, device=device,
                              min_len=TRAIN_LENGTHS[0], max_len=TRAIN_LENGTHS[1])
    optimizer = torch.optim.AdamW(model.parameters(), lr=r["lr"], betas=(0.9, 0.98), weight_decay=0.0)
    history = train(model, optimizer, batches, loss_for(arch), max_steps=max_steps, max_seconds=max_seconds,
                    schedule=warmup_cosine(r["warmup"], min_ratio=0.0), grad_clip=1.0, log_every=10,
                    progress=progress, desc=desc)
    return model.eval(), history


@torch.no_grad()
def teacher_forced_match(model: nn.Module, sources: Sequence[Sequence[int]], targets=None) -> torch.Tensor:
    """(N,) bool: does greedy decoding produce `targets` (default: each source reversed) followed by EOS?

    One teacher-forced pass instead of a decoding loop: greedy output equals the target exactly when the
    argmax at every answer position (EOS included) is the target token, since then each step is fed the
    token greedy decoding would have chosen. Sources of one length share a batch (no padding).
    `model` is a course Transformer or GPT, run in eval mode (it gets its own mode back); `sources` a
    non-empty list of digit lists, each short enough for the model's positions (see `check_sources`).
    """
    sources = check_sources(sources, model)
    targets = [s[::-1] for s in sources] if targets is None else check_sources(targets, model, "targets")
    if len(targets) != len(sources) or any(len(t) != len(s) for s, t in zip(sources, targets)):
        raise ValueError("targets must give one digit list per source, of the same length")
    device = next(model.parameters()).device
    out = torch.zeros(len(sources), dtype=torch.bool)
    with eval_mode(model):
        for length in sorted({len(s) for s in sources}):
            rows = [i for i, s in enumerate(sources) if len(s) == length]
            src = torch.tensor([encode_digits(sources[i]) for i in rows], device=device)  # (b, n)
            tgt = torch.tensor([encode_digits(targets[i]) for i in rows], device=device)  # (b, n)
            eos = torch.full((len(rows), 1), EOS, device=device)
            bos = torch.full((len(rows), 1), BOS, device=device)
            answer = torch.cat([tgt, eos], dim=1)  # (b, n + 1): what greedy decoding must produce
            if isinstance(model, Transformer):
                logits = model(src, torch.cat([bos, tgt], dim=1))  # (b, n + 1, V)
            else:
                logits = model(torch.cat([bos, src, eos, tgt], dim=1))[:, length + 1 :]  # (b, n + 1, V)
            out[rows] = (logits.argmax(dim=-1) == answer).all(dim=1).cpu()
    return out


def accuracy_by_length(model: nn.Module, test_sets: dict) -> dict:
    """{length: exact match of greedy decoding on that length's lists} (computed by `teacher_forced_match`).

    test_sets: {length: non-empty list of digit lists of that length}, as `length_test_sets` returns.
    """
    if not isinstance(test_sets, dict) or not test_sets:
        raise ValueError(f"test_sets must be a non-empty dict {{length: digit lists}}, got {test_sets!r:.80}")
    for length, sources in test_sets.items():
        check_positive_int("test_sets: each length", length)
        wrong = [s for s in check_sources(sources, model, f"test_sets[{length}]") if len(s) != length]
        if wrong:
            raise ValueError(f"test_sets[{length}] must hold lists of {length} digits, got {wrong[0]}")
    return {length: teacher_forced_match(model, list(sources)).sum().item() / len(sources)
            for length, sources in test_sets.items()}


def mean_over(accuracy: dict, lengths: Sequence[int]) -> float:
    """Mean exact match over `lengths` (each length weighted equally)."""
    if not lengths:
        raise ValueError("lengths must name at least one length, got none")
    missing = [n for n in lengths if n not in accuracy]
    if missing:
        raise ValueError(f"no accuracy measured for lengths {missing}")
    return sum(accuracy[n] for n in lengths) / len(lengths)


def structured_sets(length: int, n: int = 50, seed: int = 99) -> dict:
    """{category: digit tuples} of inputs random lists rarely produce, all of one `length`: up to `n` per category,
    fewer where fewer such lists exist (at length 2 there are only 10 lists of one repeated digit)."""
    check_int("length", length, minimum=2)
    check_positive_int("n", n)
    rng = random.Random(seed)

    def distinct(make) -> list:
        found: set = set()
        for _ in range(50 * n):
            found.add(tuple(make()))
            if len(found) == n:
                break
        return sorted(found)

    half = (length + 1) // 2
    return {
        "all same digit": [(d,) * length for d in range(10)],
        "palindrome": distinct(lambda: (h := [rng.randrange(10) for _ in range(half)]) + h[: length - half][::-1]),
        "sorted": distinct(lambda: sorted(rng.randrange(10) for _ in range(length))),
        "two digits alternating": [((a, b) * length)[:length] for a in range(10) for b in range(10) if a != b],
        "one digit changed": distinct(lambda: _one_changed(rng, length)),
    }


def _one_changed(rng: random.Random, length: int) -> list[int]:
    digits = [rng.randrange(10)] * length
    digits[rng.randrange(length)] = (digits[0] + rng.randrange(1, 10)) % 10
    return digits
