"""The addition task of the capstone (notebook 12): `a+b=` -> the sum, with the carries that make it hard.

Digits 0-9 are tokens 3-12, `+` is 13 and `=` is 14; PAD=0, BOS=1, EOS=2 as in `shared.reversal`. A problem
is a pair of ints (a, b) of 1 to MAX_DIGITS digits each. Two choices of format, taken by every function here:
`width` writes both operands with leading zeros to that many digits (None: as they are), and `reverse_answer`
writes the sum least-significant digit first (the order in which carries are computed). The answer ends with EOS.
Training batches are made on the fly from `(seed, step)` and never contain a held-out problem (in either order).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence

from .reversal import IGNORE_INDEX, LMBatch, Seq2SeqBatch, collate
from .reversal import loss_for as _reversal_loss_for
from .validation import check_bool, check_choice, check_int, check_positive_int

PAD, BOS, EOS = 0, 1, 2
DIGIT_OFFSET = 3  # digit d is token d + 3
PLUS, EQUALS = 13, 14
VOCAB_SIZE = 15
MAX_DIGITS = 5  # operands of 1 to 5 digits in training and in the held-out test set
ARCHS = ("encoder_decoder", "decoder_only")
# the carry categories of the held-out set, by the longest run of consecutive columns that carry
CATEGORIES = ("no carry", "single carries", "chain of 2-3", "chain of 4+")
Problem = tuple[int, int]


def digits_of(n: int) -> list[int]:
    """A non-negative int -> its decimal digits, most significant first: 407 -> [4, 0, 7]."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ValueError(f"n must be a non-negative int, got {n!r}")
    return [int(ch) for ch in str(n)]


def carries(a: int, b: int) -> list[int]:
    """The carry out of each column of a + b, least-significant column first: carries(95, 7) -> [1, 1]."""
    out, carry = [], 0
    da, db = digits_of(a)[::-1], digits_of(b)[::-1]
    for i in range(max(len(da), len(db))):
        total = (da[i] if i < len(da) else 0) + (db[i] if i < len(db) else 0) + carry
        carry = int(total >= 10)
        out.append(carry)
    return out


def carry_chain(a: int, b: int) -> int:
    """The longest run of consecutive columns that carry: 0 (no carry) to the number of columns (99999 + 1 -> 5)."""
    longest = run = 0
    for c in carries(a, b):
        run = run + 1 if c else 0
        longest = max(longest, run)
    return longest


def category(a: int, b: int) -> str:
    """The problem's carry category, one of CATEGORIES."""
    chain = carry_chain(a, b)
    return CATEGORIES[0 if chain == 0 else 1 if chain == 1 else 2 if chain <= 3 else 3]


def n_digits(problem: Problem) -> int:
    """The length category of a problem: digits of its longer operand."""
    return max(len(str(problem[0])), len(str(problem[1])))


def operand_tokens(n: int, width: int | None = None) -> list[int]:
    """One operand as digit tokens, with leading zeros up to `width` digits (None: no padding)."""
    digits = digits_of(n)
    if width is not None:
        check_positive_int("width", width)
        if len(digits) > width:
            raise ValueError(f"{n} has {len(digits)} digits, more than width={width}")
        digits = [0] * (width - len(digits)) + digits
    return [d + DIGIT_OFFSET for d in digits]


def problem_tokens(a: int, b: int, width: int | None = None) -> list[int]:
    """`a+b` as tokens: digits of a, PLUS, digits of b (no BOS, no `=`); width pads both operands with zeros."""
    return operand_tokens(a, width) + [PLUS] + operand_tokens(b, width)


def answer_tokens(a: int, b: int, reverse_answer: bool = False) -> list[int]:
    """The sum's digits as tokens (least-significant first with reverse_answer), without EOS."""
    digits_of(a), digits_of(b)  # each operand a non-negative int
    digits = digits_of(a + b)
    return [d + DIGIT_OFFSET for d in (digits[::-1] if reverse_answer else digits)]


def read_answer(tokens: Sequence[int], reverse_answer: bool = False) -> int | None:
    """Generated tokens -> the number they spell up to EOS; None without EOS, or with a non-digit before it."""
    tokens = list(tokens)
    if EOS not in tokens:
        return None
    digits = tokens[: tokens.index(EOS)]
    if not digits or any(not DIGIT_OFFSET <= t < DIGIT_OFFSET + 10 for t in digits):
        return None
    digits = [t - DIGIT_OFFSET for t in digits]
    return int("".join(map(str, digits[::-1] if reverse_answer else digits)))


def seq2seq_sample(a: int, b: int, reverse_answer: bool = False,
                   width: int | None = None) -> tuple[list[int], list[int], list[int]]:
    """(src = `a+b`, tgt_in = BOS + answer, tgt_out = answer + EOS) as token lists."""
    answer = answer_tokens(a, b, reverse_answer)
    return problem_tokens(a, b, width), [BOS] + answer, answer + [EOS]


def prompt_tokens(a: int, b: int, width: int | None = None) -> list[int]:
    """What a decoder-only model reads before it answers: BOS a + b =."""
    return [BOS] + problem_tokens(a, b, width) + [EQUALS]


def decoder_only_sample(a: int, b: int, reverse_answer: bool = False,
                        width: int | None = None) -> tuple[list[int], list[int]]:
    """Inputs and labels of `BOS a + b = answer EOS` shifted by one; labels of the prompt are IGNORE_INDEX."""
    prompt = prompt_tokens(a, b, width)
    sequence = prompt + answer_tokens(a, b, reverse_answer) + [EOS]
    labels = sequence[1:]
    labels[: len(prompt) - 1] = [IGNORE_INDEX] * (len(prompt) - 1)  # the model is not asked to predict the problem
    return sequence[:-1], labels


def sequence_length(max_digits: int = MAX_DIGITS) -> int:
    """Longest decoder-only input, in tokens, for operands of up to `max_digits` digits (or padded to that width).

    BOS, a, +, b, = and a sum of up to max_digits + 1 digits; the final EOS is a label only, never an input.
    """
    check_positive_int("max_digits", max_digits)
    return 3 + 2 * max_digits + max_digits + 1


def random_number(rng: random.Random, n: int) -> int:
    """A number of exactly `n` digits (0-9 for n = 1; no leading zero otherwise)."""
    return rng.randrange(10) if n == 1 else rng.randrange(10 ** (n - 1), 10**n)


def random_problem(rng: random.Random, min_digits: int = 1, max_digits: int = MAX_DIGITS) -> Problem:
    """Each operand's length uniform in min_digits..max_digits (independently), then its digits."""
    _check_digits(min_digits, max_digits)
    return (random_number(rng, rng.randint(min_digits, max_digits)),
            random_number(rng, rng.randint(min_digits, max_digits)))


def make_test_set(n_per_category: int = 250, seed: int = 1234, min_digits: int = 1,
                  max_digits: int = MAX_DIGITS) -> list[Problem]:
    """Held-out problems, `n_per_category` of each carry category (CATEGORIES order), distinct in either order.

    Problems are drawn as in training and kept until every category is full, so the rare hard ones (long carry
    chains) weigh as much as the easy ones. A category that needs more columns than max_digits allows raises.
    """
    check_positive_int("n_per_category", n_per_category)
    _check_digits(min_digits, max_digits)
    if max_digits < 4:
        raise ValueError(f"max_digits must be at least 4 for the category {CATEGORIES[3]!r}, got {max_digits}")
    rng, seen = random.Random(seed), set()
    buckets: dict[str, list[Problem]] = {name: [] for name in CATEGORIES}
    for _ in range(1000 * n_per_category):
        a, b = random_problem(rng, min_digits, max_digits)
        bucket = buckets[category(a, b)]
        if (a, b) in seen or len(bucket) >= n_per_category:
            continue
        seen |= {(a, b), (b, a)}
        bucket.append((a, b))
        if all(len(v) >= n_per_category for v in buckets.values()):
            return [p for name in CATEGORIES for p in buckets[name]]
    raise ValueError(f"could not find {n_per_category} distinct problems of every category with "
                     f"{min_digits}-{max_digits} digits")


class AdditionBatches:
    """batch_fn(step) for `train()`: batch number `step` is made from (seed, step), never from a held-out set.

    Problems found in `exclude` (a+b or b+a) are drawn again, so no test problem appears in training data.
    exclude: (a, b) pairs of non-negative ints, as `make_test_set` returns them.
    """

    def __init__(self, arch: str, batch_size: int, seed: int = 0, exclude: Iterable[Problem] = (), device="cpu",
                 min_digits: int = 1, max_digits: int = MAX_DIGITS, reverse_answer: bool = False,
                 width: int | None = None) -> None:
        check_choice("arch", arch, ARCHS)
        check_positive_int("batch_size", batch_size)
        check_int("seed", seed, minimum=0)
        _check_digits(min_digits, max_digits)
        check_bool("reverse_answer", reverse_answer)
        exclude = _check_problems("exclude", exclude)
        if width is not None and (check_positive_int("width", width) < max_digits):
            raise ValueError(f"width must be at least max_digits={max_digits} (or None), got {width}")
        self.arch, self.batch_size, self.seed, self.device = arch, batch_size, seed, device
        self.min_digits, self.max_digits = min_digits, max_digits
        self.reverse_answer, self.width = reverse_answer, width
        self.exclude = {p for a, b in exclude for p in ((a, b), (b, a))}
        self.redrawn = 0  # how many drawn problems were in `exclude` and replaced

    def problems(self, step: int) -> list[Problem]:
        """The problems of batch number `step` (the same every time it is asked for)."""
        rng = random.Random(self.seed * 1_000_003 + step)
        out, misses = [], 0
        while len(out) < self.batch_size:
            problem = random_problem(rng, self.min_digits, self.max_digits)
            if problem in self.exclude:
                self.redrawn += 1
                misses += 1
                if misses > 1000 * self.batch_size:  # (almost) every problem is excluded: never hang
                    raise ValueError(f"exclude holds (almost) every problem of {self.min_digits}-{self.max_digits} "
                                     f"digits: {misses:,} draws were excluded; shrink it or widen the lengths")
                continue
            out.append(problem)
        return out

    def __call__(self, step: int) -> Seq2SeqBatch | LMBatch:
        """Batch number `step`, padded (inputs with PAD, labels with IGNORE_INDEX), on the device."""
        make = seq2seq_sample if self.arch == "encoder_decoder" else decoder_only_sample
        samples = [make(a, b, self.reverse_answer, self.width) for a, b in self.problems(step)]
        return collate(samples, self.arch).to(self.device)


def loss_for(arch: str):
    """The loss `train()` needs for `arch`: cross-entropy on the answer tokens and EOS (teacher forcing)."""
    check_choice("arch", arch, ARCHS)
    return _reversal_loss_for(arch)  # the batches have the layout of shared.reversal's, so its losses apply


def _check_problems(name: str, problems) -> list[Problem]:
    """`problems` as a list of (a, b) tuples of non-negative ints; else ValueError naming `name` and the index."""
    if not isinstance(problems, Iterable) or isinstance(problems, (str, bytes)):
        raise ValueError(f"{name} must be a list of (a, b) problems, got {type(problems).__name__}")
    out = []
    for i, p in enumerate(problems):
        if not (isinstance(p, (tuple, list)) and len(p) == 2
                and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in p)):
            raise ValueError(f"{name} must hold (a, b) problems, pairs of non-negative ints, got {p!r} at index {i}")
        out.append(tuple(p))
    return out


def _check_digits(min_digits: int, max_digits: int) -> None:
    check_positive_int("min_digits", min_digits)
    check_positive_int("max_digits", max_digits)
    if min_digits > max_digits:
        raise ValueError(f"min_digits ({min_digits}) must be at most max_digits ({max_digits})")
