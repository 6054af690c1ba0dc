"""The addition task (shared.addition) and the capstone's checker: each planted learner mistake gets its own feedback.

The "models" here are tiny stubs that compute their answers in Python (no training), so every test runs in seconds.
"""

import random

import pytest
import torch
from torch import nn

from shared import addition as add
from shared.exercises import check_addition_model, greedy_answers
from shared.gpt import GPT, GPTConfig
from shared.transformer import Transformer, TransformerConfig

from .helpers import accepts, rejects

PROBLEMS = add.make_test_set(40)  # 160 held-out problems, 40 of each carry category


# ---------------------------------------------------------------- the task


def test_carries_and_categories_by_hand():
    assert add.carries(95, 7) == [1, 1] and add.carries(12, 34) == [0, 0]
    assert [add.carry_chain(a, b) for a, b in ((12, 34), (19, 1), (95, 7), (99999, 1), (505, 505))] == [0, 1, 2, 5, 1]
    assert [add.category(a, b) for a, b in ((12, 34), (19, 1), (995, 5), (99999, 1))] == list(add.CATEGORIES)


def test_samples_line_up_for_both_architectures():
    src, tgt_in, tgt_out = add.seq2seq_sample(95, 7)
    assert src == [12, 8, add.PLUS, 10] and tgt_in == [add.BOS, 4, 3, 5] and tgt_out == [4, 3, 5, add.EOS]
    assert add.seq2seq_sample(95, 7, reverse_answer=True)[2] == [5, 3, 4, add.EOS]  # 102 written 2, 0, 1
    tokens, labels = add.decoder_only_sample(95, 7)
    assert tokens == [add.BOS, 12, 8, add.PLUS, 10, add.EQUALS, 4, 3, 5]
    assert labels == [-100] * 5 + [4, 3, 5, add.EOS]  # the prediction made at `=` is the first answer digit
    longest = add.decoder_only_sample(99999, 99999)[0]
    assert len(longest) == add.sequence_length() == 19


def test_fixed_width_puts_every_digit_at_a_fixed_place():
    assert add.operand_tokens(7, 3) == [3, 3, 10] and add.operand_tokens(407) == [7, 3, 10]
    assert add.problem_tokens(95, 7, width=3) == [3, 12, 8, add.PLUS, 3, 3, 10]
    tokens, labels = add.decoder_only_sample(95, 7, reverse_answer=True, width=5)
    assert len(tokens) == 1 + 5 + 1 + 5 + 1 + 3 and labels[-4:] == [5, 3, 4, add.EOS]
    with pytest.raises(ValueError, match="more than width=2"):
        add.operand_tokens(123, 2)
    with pytest.raises(ValueError, match="width must be at least max_digits"):
        add.AdditionBatches("decoder_only", 8, width=4)
    batch = add.AdditionBatches("decoder_only", 16, width=5)(0)
    assert (batch.tokens[:, 6] == add.PLUS).all() and (batch.tokens[:, 12] == add.EQUALS).all()


def test_read_answer():
    assert add.read_answer([4, 3, 5, add.EOS]) == 102
    assert add.read_answer([5, 3, 4, add.EOS], reverse_answer=True) == 102
    assert add.read_answer([4, 3, 5]) is None  # never stopped
    assert add.read_answer([add.EOS]) is None and add.read_answer([4, add.PLUS, add.EOS]) is None


def test_test_set_is_stratified_distinct_and_seeded():
    test = add.make_test_set(50)
    assert len(test) == 200 and len({frozenset(p) if p[0] != p[1] else p for p in test}) == 200
    assert [add.category(*p) for p in test] == [c for c in add.CATEGORIES for _ in range(50)]
    assert max(add.n_digits(p) for p in test) == add.MAX_DIGITS and test == add.make_test_set(50)
    with pytest.raises(ValueError, match="max_digits"):
        add.make_test_set(5, max_digits=3)


def test_batches_are_seeded_and_never_hold_a_test_problem_in_either_order():
    test = add.make_test_set(50)
    batches = add.AdditionBatches("decoder_only", 256, seed=3, exclude=test)
    held_out = set(test) | {(b, a) for a, b in test}
    seen = [p for step in range(40) for p in batches.problems(step)]
    assert not held_out & set(seen) and batches.redrawn > 0
    assert batches.problems(7) == add.AdditionBatches("decoder_only", 256, seed=3, exclude=test).problems(7)
    batch = add.AdditionBatches("encoder_decoder", 8, reverse_answer=True)(0)
    assert batch.src.shape[0] == 8 and (batch.tgt_in[:, 0] == add.BOS).all()
    with pytest.raises(ValueError, match="arch"):
        add.AdditionBatches("rnn", 8)
    every_one_digit_sum = [(a, b) for a in range(10) for b in range(10)]
    with pytest.raises(ValueError, match="every problem of 1-1 digits"):  # an exclusion that leaves nothing to draw
        add.AdditionBatches("decoder_only", 2, exclude=every_one_digit_sum, max_digits=1).problems(0)


# ---------------------------------------------------------------- stub models that know the answer


def spell(a, b, reverse_answer=False):
    return add.answer_tokens(a, b, reverse_answer)


class Adder(nn.Module):
    """A decoder-only "model" that reads `BOS a + b =` and writes answer_fn(a, b) + [EOS]; logits are one-hot.

    leak: predict the token that follows (a model without a causal mask); unshifted: predict the token it reads.
    """

    def __init__(self, answer_fn=spell, leak=False, unshifted=False):
        super().__init__()
        self.answer_fn, self.leak, self.unshifted = answer_fn, leak, unshifted
        self.scale = nn.Parameter(torch.ones(()))  # so that the model has a device and an eval mode

    def forward(self, tokens):
        B, T = tokens.shape
        logits = torch.zeros(B, T, add.VOCAB_SIZE)
        for row, seq in enumerate(tokens.tolist()):
            if self.leak or self.unshifted:  # copy the token it reads, or the one after it (EOS if none follows)
                for t in range(T):
                    after = seq[t + 1] if t + 1 < T and seq[t + 1] != add.PAD else add.EOS
                    logits[row, t, seq[t] if self.unshifted else after] = 10.0
                continue
            if add.EQUALS not in seq:
                continue
            e = seq.index(add.EQUALS)
            text = "".join("+" if tok == add.PLUS else str(tok - 3) for tok in seq[1:e])
            a, b = map(int, text.split("+"))
            answer = self.answer_fn(a, b) + [add.EOS]
            for k in range(min(len(answer), T - e)):
                logits[row, e + k, answer[k]] = 10.0
        return logits * self.scale


class EncoderDecoderAdder(nn.Module):
    """The same, called as model(src, tgt) like shared.transformer.Transformer (it has encode and decode)."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(()))

    encode = decode = None  # the checker recognises an encoder-decoder by these names

    def forward(self, src, tgt):
        logits = torch.zeros(*tgt.shape, add.VOCAB_SIZE)
        for row, seq in enumerate(src.tolist()):
            text = "".join("+" if tok == add.PLUS else str(tok - 3) for tok in seq if tok != add.PAD)
            answer = spell(*map(int, text.split("+"))) + [add.EOS]
            for k in range(min(len(answer), tgt.size(1))):
                logits[row, k, answer[k]] = 10.0
        return logits * self.scale


def test_a_correct_model_passes_with_the_breakdown(capsys):
    assert check_addition_model(Adder(), problems=PROBLEMS) is True
    text = capsys.readouterr().out
    assert text.startswith("✓") and "exact match 1.000 on 160" in text and "Hint" not in text
    assert "chain of 4+ 1.000 (40)" in text and "5 digits 1.000" in text


def test_both_architectures_and_both_digit_orders_pass(capsys):
    accepts(lambda m: check_addition_model(m, problems=PROBLEMS), EncoderDecoderAdder(), capsys)
    backwards = Adder(lambda a, b: spell(a, b, reverse_answer=True))
    accepts(lambda m: check_addition_model(m, reverse_answer=True, problems=PROBLEMS), backwards, capsys)


def test_the_format_is_passed_through(capsys):
    """A model trained on zero-padded operands is asked in that format (width), and answers right."""
    accepts(lambda m: check_addition_model(m, width=5, problems=PROBLEMS), Adder(), capsys)
    assert greedy_answers(Adder(), [(95, 7)], width=5) == [[4, 3, 5, add.EOS]]


def test_greedy_answers_stop_at_eos_and_at_the_last_position():
    outputs = greedy_answers(Adder(), [(95, 7), (1, 2)])
    assert outputs == [[4, 3, 5, add.EOS], [6, add.EOS]]
    gpt = GPT(GPTConfig(add.VOCAB_SIZE, block_size=add.sequence_length(6), n_layers=1, n_heads=2, d_model=16))
    outputs = greedy_answers(gpt, [(999999, 999999)], width=6)  # 15 prompt tokens; room for 7 more in 22
    assert len(outputs[0]) <= 8
    with pytest.raises(ZeroDivisionError):  # called directly, a model's own error is not turned into feedback
        greedy_answers(lambda tokens: 1 / 0, [(1, 2)])


# ---------------------------------------------------------------- planted mistakes


def test_reversed_digits_are_named(capsys):
    """(a) The model writes the sum backwards, and the checker was not told."""
    backwards = Adder(lambda a, b: spell(a, b, reverse_answer=True))
    rejects(lambda m: check_addition_model(m, problems=PROBLEMS), backwards, capsys,
            "the sum written backwards", "reverse_answer=True")
    forwards = Adder()
    rejects(lambda m: check_addition_model(m, reverse_answer=True, problems=PROBLEMS), forwards, capsys,
            "most-significant digit first", "without reverse_answer=True")


def test_a_model_that_reads_the_future_is_named(capsys):
    """(b) No causal mask: perfect with teacher forcing, useless when it must write its own answer."""
    rejects(lambda m: check_addition_model(m, problems=PROBLEMS), Adder(leak=True), capsys,
            "reads the future", "teacher forcing", "predicts 100% of the answer tokens", "causal mask")


class LeakyGPT(GPT):
    """A real GPT whose blocks attend both ways: the missing causal mask, planted in the course's own model."""

    def forward(self, tokens):
        x = self.pos_emb(self.tok_emb(tokens))
        for block in self.blocks:
            x = block(x, causal=False)
        return self.lm_head(self.norm(x))


def test_a_real_model_without_a_causal_mask_is_caught_and_causal_ones_are_not(capsys):
    torch.manual_seed(0)
    config = GPTConfig(add.VOCAB_SIZE, block_size=add.sequence_length(), n_layers=1, n_heads=2, d_model=16)
    rejects(lambda m: check_addition_model(m, problems=PROBLEMS[::8]), LeakyGPT(config), capsys, "reads the future")
    for model in (GPT(config), Transformer(TransformerConfig(add.VOCAB_SIZE, add.VOCAB_SIZE, 16, 2, 1, 1, 32, 0.0,
                                                             max_len=16))):
        out = rejects(lambda m: check_addition_model(m, problems=PROBLEMS[::8]), model, capsys)
        assert "reads the future" not in out


def test_labels_not_shifted_are_named(capsys):
    rejects(lambda m: check_addition_model(m, problems=PROBLEMS), Adder(unshifted=True), capsys,
            "predicts the token it is reading", "not shifted")


def no_long_carries(a, b):
    """Right, except that a carry chain of 4 or more columns is dropped: column-wise sums without carries."""
    if add.carry_chain(a, b) < 4:
        return spell(a, b)
    da, db = str(a)[::-1], str(b)[::-1]
    n = max(len(da), len(db))
    digits = [(int(da[i]) if i < len(da) else 0) + (int(db[i]) if i < len(db) else 0) for i in range(n)]
    return [d % 10 + 3 for d in digits[::-1]]


def test_errors_on_carry_chains_are_reported_by_category(capsys):
    """(c) Failures concentrated on long carry chains: the breakdown says where, and why the digit order matters."""
    out = rejects(lambda m: check_addition_model(m, problems=PROBLEMS), Adder(no_long_carries), capsys,
                  "concentrate on carries", "0% on 'chain of 4+'", "reverse_answer=True",
                  "chain of 4+ 0.000 (40)", "no carry 1.000 (40)")
    assert "exact match 0.750" in out and "longest problems" not in out


def test_errors_on_the_longest_operands_are_reported_by_length(capsys):
    wrong_at_five = lambda a, b: spell(a, b) if add.n_digits((a, b)) < 5 else spell(a + 1, b)  # noqa: E731
    out = rejects(lambda m: check_addition_model(m, problems=PROBLEMS), Adder(wrong_at_five), capsys,
                  "concentrate on the longest problems", "has 5 digits", "positional table")
    assert "concentrate on carries" not in out


def test_answers_without_eos_are_named(capsys):
    """(d) The model never learned to stop."""
    rejects(lambda m: check_addition_model(m, problems=PROBLEMS), Adder(lambda a, b: spell(a, b) + [3] * 9), capsys,
            "never end", "start with the right digits", "EOS")


def test_a_lost_final_carry_digit_is_named(capsys):
    """(d) The answer is given max(len(a), len(b)) digits: the leading 1 of a final carry is lost."""
    def cut(a, b):
        return spell(a, b)[-max(len(str(a)), len(str(b))):]

    rejects(lambda m: check_addition_model(m, problems=PROBLEMS), Adder(cut), capsys,
            "one digit longer than the longer operand", "off by one")


def test_untrained_course_models_get_feedback_not_errors(capsys):
    torch.manual_seed(0)
    gpt = GPT(GPTConfig(add.VOCAB_SIZE, block_size=24, n_layers=1, n_heads=2, d_model=16))
    rejects(lambda m: check_addition_model(m, problems=PROBLEMS[::8]), gpt, capsys, "exact match 0.000")
    transformer = Transformer(TransformerConfig(add.VOCAB_SIZE, add.VOCAB_SIZE, 16, 2, 1, 1, 32, 0.0, max_len=16))
    rejects(lambda m: check_addition_model(m, problems=PROBLEMS[::8]), transformer, capsys, "exact match")
    small = GPT(GPTConfig(add.VOCAB_SIZE - 2, block_size=24, n_layers=1, n_heads=2, d_model=16))
    rejects(lambda m: check_addition_model(m, problems=PROBLEMS[::8]), small, capsys,
            "ids in 0..12", "vocabulary of VOCAB_SIZE = 15")
    rejects(lambda m: check_addition_model(m, problems=PROBLEMS[::8]), lambda tokens: tokens.float(), capsys,
            "expected logits of shape (B, T, V)")


def test_a_diverged_model_gets_feedback_not_a_traceback(capsys):
    torch.manual_seed(0)
    gpt = GPT(GPTConfig(add.VOCAB_SIZE, block_size=24, n_layers=1, n_heads=2, d_model=16))
    with torch.no_grad():
        gpt.tok_emb.weight.fill_(float("nan"))  # what a run that diverged leaves behind
    rejects(lambda m: check_addition_model(m, problems=PROBLEMS[::8]), gpt, capsys, "NaN or inf", "diverged")
    for value in (float("inf"), float("-inf")):  # +inf anywhere, or rows with no finite logit
        rejects(lambda m: check_addition_model(m, problems=PROBLEMS[::8]),
                lambda tokens, v=value: torch.full((*tokens.shape, add.VOCAB_SIZE), v), capsys, "NaN or inf")


def test_bad_arguments_are_refused_by_name():
    with pytest.raises(ValueError, match="problems must be a non-empty"):
        greedy_answers(Adder(), [])
    with pytest.raises(ValueError, match="reverse_answer"):
        check_addition_model(Adder(), reverse_answer="yes")
    with pytest.raises(ValueError, match="width"):
        check_addition_model(Adder(), width=0)
    with pytest.raises(ValueError, match="threshold"):
        check_addition_model(Adder(), threshold=float("nan"))
    with pytest.raises(ValueError, match="arch"):
        check_addition_model(Adder(), arch="rnn", problems=PROBLEMS[:4])
    with pytest.raises(ValueError, match="min_digits"):
        add.random_problem(random.Random(0), 0, 5)
    with pytest.raises(ValueError, match="non-negative int"):
        add.answer_tokens(-1, 5)


def test_not_solved_and_not_a_model(capsys):
    check_addition_model(None)
    assert "not solved yet" in capsys.readouterr().out
    assert check_addition_model("my_model") is False
    assert "pass your function itself" in capsys.readouterr().out


def test_the_checker_leaves_the_random_state_alone():
    torch.manual_seed(5)
    random.seed(5)
    expected = torch.rand(2), random.random()
    torch.manual_seed(5)
    random.seed(5)
    check_addition_model(Adder(), problems=PROBLEMS[:8])
    assert torch.equal(torch.rand(2), expected[0]) and random.random() == expected[1]
