"""The list-reversal task: vocabulary, samples for both architectures, padding collate, seeded batches.

Digits 0-9 are tokens 3-12; PAD=0, BOS=1, EOS=2. A source holds 3-12 digits; the target is the source
reversed. Training batches are made on the fly from `(seed, step)`, and can exclude a held-out test set.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Sequence
from numbers import Integral
from typing import NamedTuple

import torch
from torch import Tensor, nn

from .gpt import GPT, GPTConfig
from .training import lm_loss
from .transformer import Transformer, TransformerConfig
from .validation import check_choice, check_int, check_positive_int

PAD, BOS, EOS = 0, 1, 2
DIGIT_OFFSET = 3  # digit d is token d + 3
VOCAB_SIZE = 13
MIN_DIGITS, MAX_DIGITS = 3, 12  # shortest and longest source (in digits) the task draws
IGNORE_INDEX = -100  # label value that lm_loss skips
ARCHS = ("encoder_decoder", "decoder_only")


def vocabulary() -> dict:
    """The facts a checkpoint needs to read and write this task's tokens."""
    return {"pad": PAD, "bos": BOS, "eos": EOS, "digit_offset": DIGIT_OFFSET, "vocab_size": VOCAB_SIZE,
            "min_len": MIN_DIGITS, "max_len": MAX_DIGITS}  # key names kept: older checkpoints store them


def encode_digits(digits: Iterable[int]) -> list[int]:
    """Digits 0-9 -> token ids 3-12; anything else (-1 would become EOS, 10 an id past the vocabulary) raises."""
    return [d + DIGIT_OFFSET for d in _check_digit_values("digits", digits)]


def _check_digit_values(name: str, digits: Iterable[int]) -> list[int]:
    """`digits` as a list if every item is an int 0-9 (not a bool); else TypeError/ValueError naming `name`."""
    digits = list(digits)  # read once: an iterator or generator would be used up by the check
    for d in digits:
        if not isinstance(d, Integral) or isinstance(d, bool):
            raise TypeError(f"{name} must hold ints 0-9, got {d!r} ({type(d).__name__})")
        if not 0 <= d <= 9:
            raise ValueError(f"{name} must hold ints 0-9, got {d!r}")
    return digits


def decode_tokens(tokens: Sequence[int]) -> list[int]:
    """Token ids 3-12 -> digits 0-9 (a special token raises ValueError)."""
    if any(not DIGIT_OFFSET <= t < VOCAB_SIZE for t in tokens):
        raise ValueError(f"tokens must all be digit tokens {DIGIT_OFFSET}..{VOCAB_SIZE - 1}, got {list(tokens)}")
    return [t - DIGIT_OFFSET for t in tokens]


class Seq2SeqBatch(NamedTuple):
    """Encoder-decoder batch: src (B, T_src), tgt_in (B, T_tgt) = BOS + reversed, tgt_out (B, T_tgt)."""

    src: Tensor
    tgt_in: Tensor
    tgt_out: Tensor  # reversed + EOS, padding = IGNORE_INDEX

    def to(self, device) -> Seq2SeqBatch:
        """The same batch on `device`."""
        return Seq2SeqBatch(*(t.to(device) for t in self))


class LMBatch(NamedTuple):
    """Decoder-only batch: tokens (B, T) = BOS src EOS tgt, labels (B, T) next tokens, prompt = IGNORE_INDEX."""

    tokens: Tensor
    labels: Tensor

    def to(self, device) -> LMBatch:
        """The same batch on `device`."""
        return LMBatch(*(t.to(device) for t in self))


def seq2seq_sample(digits: Sequence[int]) -> tuple[list[int], list[int], list[int]]:
    """(src, BOS + reversed, reversed + EOS) as token lists; the last two line up position by position."""
    src = encode_digits(digits)
    tgt = src[::-1]
    return src, [BOS] + tgt, tgt + [EOS]


def decoder_only_sample(digits: Sequence[int]) -> tuple[list[int], list[int]]:
    """Inputs and labels of `BOS src EOS tgt EOS` shifted by one; labels of the prompt are IGNORE_INDEX."""
    src = encode_digits(digits)
    sequence = [BOS] + src + [EOS] + src[::-1] + [EOS]  # 2n + 3 tokens
    labels = sequence[1:]
    labels[: len(src) + 1] = [IGNORE_INDEX] * (len(src) + 1)  # predicting the source itself is not the task
    return sequence[:-1], labels


def pad_to(rows: Sequence[Sequence[int]], value: int) -> Tensor:
    """List of token lists -> (B, T_max) long tensor, padded on the right with `value`."""
    if not rows:
        raise ValueError("rows must be a non-empty list of token lists: a batch of no rows has no width")
    width = max(len(r) for r in rows)
    return torch.tensor([list(r) + [value] * (width - len(r)) for r in rows], dtype=torch.long)


def collate(samples: Sequence[tuple], arch: str = "encoder_decoder") -> Seq2SeqBatch | LMBatch:
    """Pad a list of samples into one batch: inputs with PAD, labels with IGNORE_INDEX.

    The samples must be of `arch`'s kind: (src, tgt_in, tgt_out) triples from `seq2seq_sample` for
    "encoder_decoder", (inputs, labels) pairs from `decoder_only_sample` for "decoder_only"; else ValueError.
    """
    check_choice("arch", arch, ARCHS)
    if not samples:
        raise ValueError("samples must be a non-empty list")
    _check_sample_kind(samples, arch)
    columns = list(zip(*samples))
    if arch == "encoder_decoder":
        return Seq2SeqBatch(pad_to(columns[0], PAD), pad_to(columns[1], PAD), pad_to(columns[2], IGNORE_INDEX))
    return LMBatch(pad_to(columns[0], PAD), pad_to(columns[1], IGNORE_INDEX))


_SAMPLE_KINDS = {"encoder_decoder": (3, "(src, tgt_in, tgt_out) triples (seq2seq_sample)"),
                 "decoder_only": (2, "(inputs, labels) pairs (decoder_only_sample)")}


def _check_sample_kind(samples: Sequence[tuple], arch: str) -> None:
    """Each sample must hold the 3 (encoder_decoder) or 2 (decoder_only) token lists of `arch`'s samples."""
    (n, kind), other = _SAMPLE_KINDS[arch], ARCHS[1 - ARCHS.index(arch)]
    for i, sample in enumerate(samples):
        if not isinstance(sample, (tuple, list)) or len(sample) != n:
            got = f"has {len(sample)} items" if isinstance(sample, (tuple, list)) else f"is a {type(sample).__name__}"
            raise ValueError(f"samples[{i}] {got}, but arch={arch!r} takes {kind}; "
                             f"{_SAMPLE_KINDS[other][1]} are samples of arch={other!r}")
        if not all(isinstance(part, (tuple, list)) for part in sample) or len(sample[-1]) != len(sample[-2]):
            raise ValueError(f"samples[{i}] must hold {kind}, the last two of equal length (inputs and their "
                             f"labels), got {sample!r}")


def random_digits(rng: random.Random, min_len: int = MIN_DIGITS, max_len: int = MAX_DIGITS) -> tuple[int, ...]:
    """One source: a length drawn uniformly from min_len..max_len, then that many digits."""
    return tuple(rng.randrange(10) for _ in range(rng.randint(min_len, max_len)))


def make_test_set(n: int = 1000, seed: int = 1234) -> list[tuple[int, ...]]:
    """`n` distinct sources, lengths cycling through MIN_DIGITS..MAX_DIGITS (100 of each for n=1000).

    Only 10**L distinct sources of length L exist, so n is at most 10,000 (the 3-digit lists run out first).
    """
    check_positive_int("n", n)
    n_lengths = MAX_DIGITS - MIN_DIGITS + 1
    lengths = [MIN_DIGITS + i % n_lengths for i in range(n)]
    for length, count in Counter(lengths).items():
        if count > 10**length:
            largest = min(10 ** (MIN_DIGITS + j) * n_lengths + j for j in range(n_lengths))
            raise ValueError(f"n must be at most {largest:,}: n={n:,} asks for {count:,} distinct sources of "
                             f"{length} digits, and only {10**length:,} exist")
    rng, seen = random.Random(seed), set()
    out = []
    for length in lengths:
        while (digits := tuple(rng.randrange(10) for _ in range(length))) in seen:
            pass
        seen.add(digits)
        out.append(digits)
    return out


class ReversalBatches:
    """batch_fn(step) for `train()`: batch number `step` is made from (seed, step), never from a held-out set.

    Sources found in `exclude` are drawn again, so the test set never appears in training data.
    """

    def __init__(self, arch: str, batch_size: int, seed: int = 0, exclude=(), device="cpu",
                 min_len: int = MIN_DIGITS, max_len: int = MAX_DIGITS) -> None:
        check_choice("arch", arch, ARCHS)
        check_positive_int("batch_size", batch_size)
        check_int("seed", seed, minimum=0)
        _check_lengths(min_len, max_len)
        self.arch, self.batch_size, self.seed, self.device = arch, batch_size, seed, device
        self.min_len, self.max_len = min_len, max_len  # source lengths drawn uniformly from this range
        self.exclude = set(map(tuple, exclude))
        self.redrawn = 0  # how many drawn sources were in `exclude` and replaced

    def sources(self, step: int) -> list[tuple[int, ...]]:
        """The digit sequences of batch number `step` (the same every time it is asked for)."""
        rng = random.Random(self.seed * 1_000_003 + step)
        out, misses = [], 0
        while len(out) < self.batch_size:
            digits = random_digits(rng, self.min_len, self.max_len)
            if digits in self.exclude:
                self.redrawn += 1
                misses += 1
                if misses > 1000 * self.batch_size:  # (almost) every source is excluded: never hang
                    raise ValueError(f"exclude holds (almost) every source of {self.min_len}-{self.max_len} digits: "
                                     f"{misses:,} draws in a row were excluded; shrink it or widen the lengths")
                continue
            out.append(digits)
        return out

    def __call__(self, step: int) -> Seq2SeqBatch | LMBatch:
        """Batch number `step`, padded, on the device."""
        make = seq2seq_sample if self.arch == "encoder_decoder" else decoder_only_sample
        return collate([make(d) for d in self.sources(step)], self.arch).to(self.device)


def max_source_len(model: nn.Module) -> int:
    """Longest source the model's positions allow: Transformer max_len - 1, GPT (block_size - 2) // 2."""
    if isinstance(model, Transformer):
        return model.config.max_len - 1  # the decoder reads BOS + n digits
    if isinstance(model, GPT):
        return (model.config.block_size - 2) // 2  # BOS src EOS tgt: 2n + 2 tokens
    raise TypeError(f"model must be a shared.transformer.Transformer or shared.gpt.GPT, got {type(model).__name__}")


def _position_limit(model: nn.Module) -> str:
    c = model.config
    if isinstance(model, Transformer):
        return f"max_len={c.max_len} target positions, BOS included"
    return f"block_size={c.block_size} tokens for BOS, digits, EOS and answer"


def check_digits(name: str, digits, model: nn.Module) -> list[int]:
    """`digits` as a list: 1 to max_source_len(model) ints 0-9, else TypeError/ValueError naming `name`."""
    limit = max_source_len(model)
    if not isinstance(digits, (list, tuple)):
        raise TypeError(f"{name} must be a list of ints 0-9, got {type(digits).__name__}")
    if not digits:
        raise ValueError(f"{name} must be a non-empty list of ints 0-9, got an empty list")
    _check_digit_values(name, digits)
    if len(digits) > limit:
        raise ValueError(f"{name} may hold at most {limit} digits for this model, got {len(digits)} "
                         f"(the limit of its positions: {_position_limit(model)})")
    return list(digits)


def check_sources(sources, model: nn.Module, name: str = "sources") -> list[list[int]]:
    """`sources` as a non-empty list of digit lists, each checked by `check_digits`; errors name `name`."""
    if not isinstance(sources, (list, tuple)):
        raise TypeError(f"{name} must be a list of digit lists, got {type(sources).__name__}")
    if len(sources) == 0:
        raise ValueError(f"{name} must be a non-empty list of digit lists")
    return [check_digits(f"{name}[{i}]", s, model) for i, s in enumerate(sources)]


def seq2seq_loss(model, batch: Seq2SeqBatch) -> tuple[Tensor, int]:
    """Teacher forcing: feed BOS + reversed, predict reversed + EOS; (mean loss, n target tokens)."""
    return lm_loss(model(batch.src, batch.tgt_in), batch.tgt_out)


def decoder_only_loss(model, batch: LMBatch) -> tuple[Tensor, int]:
    """Next-token loss on the answer part only (prompt labels are IGNORE_INDEX)."""
    return lm_loss(model(batch.tokens), batch.labels)


def loss_for(arch: str):
    """The loss function `train()` needs for this architecture."""
    check_choice("arch", arch, ARCHS)
    return seq2seq_loss if arch == "encoder_decoder" else decoder_only_loss


def make_model(arch: str, d_model: int = 64, n_heads: int = 4, n_layers: int = 2, d_ff: int | None = None,
               dropout: float = 0.0, *, position: str | None = None, randomized_positions: bool = False,
               max_source: int = MAX_DIGITS, train_lengths: tuple[int, int] = (MIN_DIGITS, MAX_DIGITS),
               gpt_class: type[GPT] = GPT):
    """A Transformer (n_layers encoder + n_layers decoder) or a GPT (2 * n_layers blocks) sized for the task.

    d_ff: the FFN width of either model (None: 4 * d_model).

    position: None (sinusoidal for the encoder-decoder, learned for the GPT) or a scheme of the config;
    gpt_class: the decoder-only model's class (a GPT subclass, such as `shared.lengthgen.CoupledGPT`).
    max_source: the longest source the positions must cover. train_lengths (min, max) is recorded as
    `model.train_lengths`, so `reverse()` can warn outside it.
    """
    check_choice("arch", arch, ARCHS)
    _check_lengths(*train_lengths)
    if arch == "encoder_decoder":
        config = TransformerConfig(VOCAB_SIZE, VOCAB_SIZE, d_model, n_heads, n_layers, n_layers,
                                   d_ff or 4 * d_model, dropout, max_len=max_source + 1, pad_id=PAD,
                                   position=position or "sinusoidal", randomized_positions=randomized_positions)
        model = Transformer(config)
    else:
        if not (isinstance(gpt_class, type) and issubclass(gpt_class, GPT)):
            raise TypeError(f"gpt_class must be GPT or a subclass of it, got {gpt_class!r}")
        config = GPTConfig(VOCAB_SIZE, block_size=2 * max_source + 2, n_layers=2 * n_layers, n_heads=n_heads,
                           d_model=d_model, dropout=dropout, d_ff=d_ff, randomized_positions=randomized_positions,
                           position=position or "learned")
        model = gpt_class(config)
    model.train_lengths = tuple(train_lengths)
    return model


def _check_lengths(min_len: int, max_len: int) -> None:
    check_positive_int("min_len", min_len)
    check_positive_int("max_len", max_len)
    if min_len > max_len:
        raise ValueError(f"min_len ({min_len}) must be at most max_len ({max_len})")
