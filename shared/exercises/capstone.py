"""Checker of notebook 12's capstone: score a trained addition model on held-out problems and explain its failures.

`check_addition_model(model)` decodes every held-out problem greedily, scores exact match, prints the breakdown by
carry category and by length, and names the mistake that the failures look like: answers written backwards, a
model that reads the future (no causal mask), labels not shifted, answers that never end, a lost carry digit, or
errors concentrated on carry chains or on the longest operands. Import it from `shared.exercises`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from contextlib import nullcontext

import torch
from torch import Tensor, nn

from ..addition import (
    ARCHS,
    BOS,
    CATEGORIES,
    DIGIT_OFFSET,
    EOS,
    EQUALS,
    IGNORE_INDEX,
    PAD,
    PLUS,
    VOCAB_SIZE,
    answer_tokens,
    category,
    decoder_only_sample,
    make_test_set,
    n_digits,
    problem_tokens,
    prompt_tokens,
    seq2seq_sample,
)
from ..generation.seq2seq import greedy_loop
from ..reversal import collate, pad_to
from ..runtime import eval_mode
from ..validation import check_bool, check_finite, check_optional_positive_int
from .feedback import Checker, NotSolved, Wrong

TITLE = "addition model"


def model_arch(model) -> str:
    """'encoder_decoder' for a model with `encode` and `decode` (model(src, tgt) -> logits), else 'decoder_only'."""
    return "encoder_decoder" if hasattr(model, "encode") and hasattr(model, "decode") else "decoder_only"


def greedy_answers(model, problems: Sequence[tuple[int, int]], width: int | None = None, arch: str | None = None,
                   max_new: int | None = None) -> list[list[int]]:
    """Greedy decoding: each problem -> the tokens the model writes after `=` (or BOS), EOS included if written.

    A decoder-only model is called as model(tokens (B, T)), an encoder-decoder as model(src, tgt); both return
    logits (B, T, V). `width` pads the operands as in training. Rows stop at EOS, after `max_new` tokens (default:
    the longest answer + 2), or where the model's positions end (`config.block_size` or `config.max_len`).
    """
    return _greedy(model, problems, width, arch, max_new, model)


@torch.no_grad()
def _greedy(model, problems, width, arch, max_new, call) -> list[list[int]]:
    """greedy_answers, calling the model through `call` (the checker's call turns errors into feedback)."""
    arch = model_arch(model) if arch is None else arch
    if arch not in ARCHS:
        raise ValueError(f"arch must be one of {ARCHS} or None, got {arch!r}")
    if len(problems) == 0:
        raise ValueError("problems must be a non-empty list of (a, b) pairs")
    check_optional_positive_int("max_new", max_new)
    max_new = max(len(answer_tokens(a, b)) for a, b in problems) + 2 if max_new is None else max_new
    config = getattr(model, "config", None)
    device = _device(model)
    out: list[list[int]] = [[] for _ in problems]
    with _eval(model):
        if arch == "encoder_decoder":
            src = pad_to([problem_tokens(a, b, width) for a, b in problems], PAD).to(device)  # (B, T_src)
            start = torch.full((len(problems), 1), BOS, dtype=torch.long, device=device)
            limit = min(max_new, getattr(config, "max_len", max_new))  # the decoder reads at most max_len tokens
            new = greedy_loop(lambda seq: call(src, seq)[:, -1], start, limit)  # (B, t)
            rows = zip(range(len(problems)), new.tolist())
        else:  # prompts of one length share a batch, so no row needs padding in front
            by_length = defaultdict(list)
            for i, (a, b) in enumerate(problems):
                by_length[len(prompt_tokens(a, b, width))].append(i)
            rows = []
            for length, index in by_length.items():
                start = torch.tensor([prompt_tokens(*problems[i], width) for i in index], device=device)  # (b, T)
                limit = max(1, min(max_new, getattr(config, "block_size", length + max_new) - length + 1))
                new = greedy_loop(lambda seq: call(seq)[:, -1], start, limit)  # (b, t)
                rows += zip(index, new.tolist())
        for i, row in rows:
            out[i] = row[: row.index(EOS) + 1] if EOS in row else [t for t in row if t != PAD]
    return out


def check_addition_model(model, *, reverse_answer: bool = False, width: int | None = None, arch: str | None = None,
                         problems: Sequence[tuple[int, int]] | None = None, threshold: float = 0.99) -> bool:
    """Score `model` on the held-out problems (default `make_test_set()`, 1,000 of them) by greedy exact match.

    reverse_answer and width: the format the model was trained on (see shared.addition). arch: None to tell
    from the model (encode and decode: encoder-decoder). Prints the score, the breakdown by carry category and
    by length, and what the failures point to; returns score >= threshold.
    """
    if model is None:
        print(f"… {TITLE}: not solved yet. Build and train your model, assign it to `my_model` and run the cell "
              "again.")
        return False
    if not callable(model):
        print(f"✗ {TITLE}: pass your function itself — your trained model, e.g. check_addition_model(my_model) — "
              f"not a {type(model).__name__}.")
        return False
    check_bool("reverse_answer", reverse_answer)
    check_optional_positive_int("width", width)
    check_finite("threshold", threshold, 0.0)
    problems = make_test_set() if problems is None else [tuple(p) for p in problems]
    arch = model_arch(model) if arch is None else arch
    c = Checker(model)
    try:
        report = _Report(c, model, problems, reverse_answer, width, arch)
    except NotSolved:
        print(f"… {TITLE}: not solved yet. Replace `raise NotImplementedError` with your code and run the cell again.")
        return False
    except Wrong as wrong:
        print(f"✗ {TITLE}: {wrong}")
        return False
    passed = report.score >= threshold
    mark = "✓" if passed else "✗"
    print(f"{mark} {TITLE}: exact match {report.score:.3f} on {len(problems):,} held-out problems "
          f"(needs >= {threshold:.2f}); answers read {'least' if reverse_answer else 'most'}-significant digit first.")
    if not passed:
        for hint in report.diagnoses():
            print(f"  Hint: {hint}")
    print(report.table())
    return passed


class _Report:
    """Everything the checker measures about one model: greedy answers, teacher-forced predictions, causality."""

    def __init__(self, c: Checker, model, problems, reverse_answer: bool, width: int | None, arch: str) -> None:
        self.problems, self.reverse_answer, self.width, self.arch = problems, reverse_answer, width, arch
        self.expected = [answer_tokens(a, b, reverse_answer) + [EOS] for a, b in problems]
        self.outputs = _greedy(model, problems, width, arch, None, lambda *args: _logits(c, model, args))
        self.correct = [o == e for o, e in zip(self.outputs, self.expected)]
        self.score = sum(self.correct) / len(problems)
        self.tf_accuracy, self.copy_rate = _teacher_forced(c, model, problems[:: max(1, len(problems) // 200)],
                                                           reverse_answer, width, arch)
        self.leaks = _reads_the_future(c, model, width, arch)

    def rate(self, keep) -> tuple[float, int]:
        """Exact match over the problems where keep(i) is True, and how many there are."""
        picked = [ok for i, ok in enumerate(self.correct) if keep(i)]
        return (sum(picked) / len(picked) if picked else float("nan")), len(picked)

    def diagnoses(self) -> list[str]:
        """What the failures look like, most fundamental first."""
        if self.leaks:
            return [f"your model reads the future: changing later tokens of the answer changed its predictions at "
                    f"earlier positions. Fed the true answer (teacher forcing) it predicts {self.tf_accuracy:.0%} of "
                    f"the answer tokens, yet greedy decoding gets {self.score:.0%} of the problems: in training it "
                    "copied the next token instead of computing it. Give self-attention a causal mask (notebook 03; "
                    "notebook 06, 'training converges but inference is wrong')."]
        if self.copy_rate >= 0.8:
            return [f"at {self.copy_rate:.0%} of the answer positions your model predicts the token it is reading, "
                    "not the next one: the labels were not shifted by one. Labels are the inputs shifted left "
                    "(answer + EOS against BOS + answer; notebook 06, bug 2)."]
        hints = self._order_hint() + self._eos_hint() + self._length_off_by_one_hint()
        if not hints:  # a named mistake explains the pattern better than where the errors fall
            hints += self._concentration_hints()
        if not hints and self.tf_accuracy >= 0.95 and self.score < 0.5:
            hints.append(f"teacher-forced, your model predicts {self.tf_accuracy:.0%} of the answer tokens, but greedy "
                         f"decoding solves only {self.score:.0%}: its own early mistakes derail it (exposure bias, "
                         "notebook 07) — train longer, or check that your decoding feeds each token back.")
        if not hints:
            hints.append("the errors are spread over every category and length: the model has not learned the task "
                         "yet. Train longer, or check the schedule (warm-up, peak learning rate) and the model's size."
                         + self._format_advice())
        return hints

    def _format_advice(self) -> str:
        """What the format asks of the model, if it is one of the hard ones."""
        advice = ""
        if not self.reverse_answer:
            advice += (" Written most-significant digit first, even the first digit of the answer depends on every "
                       "carry below it (and decides how long the sum is); reverse_answer=True lets the model write "
                       "the digits in the order the carries are computed.")
        if self.width is None:
            advice += (" Operands as written put the digits of one column at different places in every problem; "
                       "width=5 (leading zeros) puts them at the same places every time.")
        return advice

    def _order_hint(self) -> list[str]:
        flipped = [i for i, e in enumerate(self.expected) if e[:-1] != e[-2::-1]]  # answers that read differently
        backwards = [i for i in flipped if self.outputs[i] == self.expected[i][-2::-1] + [EOS]]
        if not flipped or len(backwards) < 0.5 * len(flipped):
            return []
        a, b = self.problems[backwards[0]]
        wrote = _spell(self.outputs[backwards[0]])
        share = f"{len(backwards)} of the {len(flipped)} answers that are not palindromes"
        if self.reverse_answer:
            return [f"{share} are written most-significant digit first (e.g. {a}+{b}={a + b}: your model wrote "
                    f"{wrote}, which read least-significant digit first, as you told the checker, is {wrote[::-1]}). "
                    "If your model writes the sum in the usual order, call check_addition_model(model) without "
                    "reverse_answer=True."]
        return [f"{share} are the sum written backwards (e.g. {a}+{b}={a + b}: your model wrote {wrote}). If you "
                "trained it to write the least-significant digit first, say so: check_addition_model(model, "
                "reverse_answer=True); if not, your targets are reversed."]

    def _eos_hint(self) -> list[str]:
        wrong = [i for i, ok in enumerate(self.correct) if not ok]
        endless = [i for i in wrong if EOS not in self.outputs[i]]
        if not wrong or len(endless) < 0.5 * len(wrong):
            return []
        i = endless[0]
        right_then_more = sum(self.outputs[j][: len(self.expected[j]) - 1] == self.expected[j][:-1] for j in endless)
        return [f"{len(endless)} of {len(wrong)} wrong answers never end: no EOS within {len(self.outputs[i])} tokens "
                f"({right_then_more} of them start with the right digits). The model must learn to stop: end every "
                "target with EOS (answer + [EOS]) and do not let the loss ignore that position."]

    def _length_off_by_one_hint(self) -> list[str]:
        longer = [i for i, (a, b) in enumerate(self.problems) if len(str(a + b)) > len(str(max(a, b)))]
        if not longer:
            return []

        def without_top_digit(i):
            e = self.expected[i][:-1]
            return (e[:-1] if self.reverse_answer else e[1:]) + [EOS]

        dropped = [i for i in longer if not self.correct[i] and self.outputs[i] == without_top_digit(i)]
        too_long = [i for i, ok in enumerate(self.correct) if not ok and len(self.outputs[i]) == len(self.expected[i])
                    + 1 and EOS in self.outputs[i]]
        hints = []
        if len(dropped) >= 0.5 * len(longer):
            a, b = self.problems[dropped[0]]
            hints.append(f"{len(dropped)} of the {len(longer)} sums that are one digit longer than the longer operand "
                         f"lose that digit (e.g. {a}+{b}={a + b}: the model wrote {_spell(self.outputs[dropped[0]])}): "
                         "the answer's length is off by one. The final carry makes a new leading digit; an answer "
                         "holds up to max(len(a), len(b)) + 1 digits.")
        wrong = len(self.correct) - sum(self.correct)
        if wrong and len(too_long) >= 0.5 * wrong:
            hints.append(f"{len(too_long)} of {wrong} wrong answers have exactly one token too many before EOS: an "
                         "off-by-one in the answer length (a stray leading 0, or EOS one step late).")
        return hints

    def _concentration_hints(self) -> list[str]:
        """One hint if the errors pile up in one carry category or one length (the stronger pile-up of the two)."""
        error = 1 - self.score
        piles = []  # (how many times the overall error rate, hint)
        by_cat = {name: self.rate(lambda i, n=name: category(*self.problems[i]) == n) for name in CATEGORIES}
        rates = {k: r for k, (r, n) in by_cat.items() if n >= 10}
        if len(rates) > 1:
            worst, best = min(rates, key=rates.get), max(rates, key=rates.get)
            why = ("Written most-significant digit first, the first digit already depends on every carry below it: "
                   "the model must see through the whole chain before it writes anything. Carries are computed "
                   "least-significant digit first; let the model write the answer in that order (reverse_answer=True)."
                   if not self.reverse_answer else
                   "Long chains are about 2 % of random problems: train longer, or draw more of them.")
            piles.append(((1 - rates[worst]) / error, rates[best] - rates[worst],
                          f"your errors concentrate on carries: exact match {rates[worst]:.0%} on '{worst}' against "
                          f"{rates[best]:.0%} on '{best}'. {why}"))
        by_len = {n: self.rate(lambda i, n=n: n_digits(self.problems[i]) == n) for n in range(1, 11)}
        rates = {k: r for k, (r, n) in by_len.items() if n >= 10}
        if len(rates) > 1:
            worst, best = min(rates, key=rates.get), max(rates, key=rates.get)
            piles.append(((1 - rates[worst]) / error, rates[best] - rates[worst],
                          f"your errors concentrate on the longest problems: exact match {rates[worst]:.0%} when the "
                          f"longer operand has {worst} digits, against {rates[best]:.0%} with {best}. Their positions "
                          "are the least trained: check that your positional table covers the longest sequence "
                          "(sequence_length()), and train longer."))
        piles = [p for p in piles if p[0] >= 1.5 and p[1] >= 0.1]
        return [max(piles)[2]] if piles else []

    def table(self) -> str:
        """Exact match by carry category and by the longer operand's number of digits."""
        lines = ["  by carry category: " + ", ".join(
            f"{name} {r:.3f} ({n})" for name in CATEGORIES
            for r, n in [self.rate(lambda i, name=name: category(*self.problems[i]) == name)] if n)]
        lengths = sorted({n_digits(p) for p in self.problems})
        lines.append("  by longer operand: " + ", ".join(
            f"{L} digit{'s' if L > 1 else ''} {r:.3f} ({n})" for L in lengths
            for r, n in [self.rate(lambda i, L=L: n_digits(self.problems[i]) == L)]))
        return "\n".join(lines)


def _teacher_forced(c: Checker, model, problems, reverse_answer: bool, width: int | None,
                    arch: str) -> tuple[float, float]:
    """(token accuracy fed the true answer, fraction of answer positions that predict their own input token)."""
    device = _device(model)
    if arch == "encoder_decoder":
        batch = collate([seq2seq_sample(a, b, reverse_answer, width) for a, b in problems], arch).to(device)
        inputs, labels, args = batch.tgt_in, batch.tgt_out, (batch.src, batch.tgt_in)
    else:
        batch = collate([decoder_only_sample(a, b, reverse_answer, width) for a, b in problems], arch).to(device)
        inputs, labels, args = batch.tokens, batch.labels, (batch.tokens,)
    with torch.no_grad(), _eval(model):
        predicted = _logits(c, model, args).argmax(-1)  # (B, T)
    keep = labels != IGNORE_INDEX
    return float((predicted == labels)[keep].float().mean()), float((predicted == inputs)[keep].float().mean())


def _reads_the_future(c: Checker, model, width: int | None, arch: str) -> bool:
    """True if changing answer tokens changes the logits at positions before them (a missing causal mask)."""
    device = _device(model)
    problems = [(12345, 98765), (99999, 10001), (50505, 49595), (31415, 92653)]  # one shape: 5 + 5 -> 6 digits
    if arch == "encoder_decoder":
        src = pad_to([problem_tokens(a, b, width) for a, b in problems], PAD).to(device)
        tgt = collate([seq2seq_sample(a, b) for a, b in problems], arch).tgt_in.to(device)
        first = 2  # BOS and the first answer token are kept; the rest changes
        call = lambda t: _logits(c, model, (src, t))  # noqa: E731
    else:
        tgt = torch.tensor([decoder_only_sample(a, b, width=width)[0] for a, b in problems], device=device)
        first = (tgt[0] == EQUALS).nonzero()[0, 0].item() + 2  # the prompt and one answer token are kept
        call = lambda t: _logits(c, model, (t,))  # noqa: E731
    changed = tgt.clone()
    changed[:, first:] = (changed[:, first:] - 3 + 5) % 10 + 3  # every later answer digit (and EOS) replaced
    with torch.no_grad(), _eval(model):
        before, after = call(tgt)[:, :first], call(changed)[:, :first]
    return not torch.allclose(before, after, atol=1e-4, rtol=1e-4)


def _logits(c: Checker, model, args: tuple) -> Tensor:
    """model(*args), with a crash or a wrong output turned into feedback."""
    try:
        out = c.run("calling your model", model, *args)
    except Wrong as wrong:
        if "index out of range" not in str(wrong) and "must hold ids in" not in str(wrong):
            raise
        raise Wrong(f"{wrong}\n  Hint: the addition tokens go up to {VOCAB_SIZE - 1} ('=' is {EQUALS}): build the "
                    f"model with a vocabulary of VOCAB_SIZE = {VOCAB_SIZE} (shared.addition), and positions for "
                    "sequence_length() tokens.") from None
    expect = (args[-1].size(0), args[-1].size(1))
    names = "src (B, T_src) and tgt (B, T)" if len(args) == 2 else "tokens (B, T)"
    if not isinstance(out, Tensor) or out.dim() != 3 or tuple(out.shape[:2]) != expect or out.size(-1) < VOCAB_SIZE:
        got = f"shape {tuple(out.shape)}" if isinstance(out, Tensor) else type(out).__name__
        raise Wrong(f'case "calling your model": given {names} with B={expect[0]}, T={expect[1]}, it returned {got}; '
                    f"expected logits of shape (B, T, V) = ({expect[0]}, {expect[1]}, {VOCAB_SIZE}).\n  Hint: the "
                    f"model must return one row of {VOCAB_SIZE} token scores per input position (vocab_size="
                    "VOCAB_SIZE from shared.addition).")
    if not bool(torch.isfinite(out.float().amax(-1)).all()):  # a NaN or +inf anywhere, or a row that is all -inf
        raise Wrong('case "calling your model": its logits contain NaN or inf, so no answer can be read from them.\n'
                    "  Hint: training diverged: lower the learning rate, keep gradient clipping on, and check the "
                    "loss for NaN as notebook 07 does.")
    return out.float()


def _spell(tokens: Sequence[int]) -> str:
    """Generated tokens as text: digits, '+', '=', <bos>, <pad>; EOS ends the text and is not shown."""
    names = {PAD: "<pad>", BOS: "<bos>", EOS: "", PLUS: "+", EQUALS: "="}
    names.update({DIGIT_OFFSET + d: str(d) for d in range(10)})
    return "".join(names.get(t, f"<{t}>") for t in tokens)


def _device(model) -> torch.device:
    params = list(model.parameters()) if isinstance(model, nn.Module) else []
    return params[0].device if params else torch.device("cpu")


def _eval(model):
    return eval_mode(model) if isinstance(model, nn.Module) else nullcontext()
