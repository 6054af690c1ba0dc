"""Checkers of notebook 06 tested against solutions written independently of their references.

The checkers compare a learner's answer with the package's own code (`seq2seq_sample`, argmax, ==); these
tests make sure an answer written from the task's definition alone passes, and that plausible mistakes
which the reference-based cases might miss are caught.
"""

import torch

from shared import exercises as ex

from .test_exercises import accepts, rejects

# ---------------------------------------------------------------- decoder inputs


def decoder_inputs_by_hand(digits):
    """BOS = 1, EOS = 2, digit d is token d + 3 (the task's definition), with a plain loop."""
    backwards = []
    for i in range(len(digits) - 1, -1, -1):
        backwards.append(digits[i] + 3)
    return [1] + backwards, backwards + [2]


def test_decoder_inputs_independent_solution(capsys):
    assert decoder_inputs_by_hand([0, 9, 5]) == ([1, 8, 12, 3], [8, 12, 3, 2])  # worked out on paper
    accepts(ex.check_decoder_inputs, decoder_inputs_by_hand, capsys)
    accepts(ex.check_decoder_inputs, lambda d: tuple(map(torch.tensor, decoder_inputs_by_hand(d))), capsys)


def test_decoder_inputs_mistakes_outside_the_hint_table(capsys):
    def offset_two(digits):  # digit d as d + 2 (overlaps EOS for d = 0)
        tgt = [d + 2 for d in reversed(digits)]
        return [1] + tgt, tgt + [2]

    def eos_and_bos_swapped(digits):
        tgt = [d + 3 for d in reversed(digits)]
        return [2] + tgt, tgt + [1]

    def drops_last_digit(digits):
        tgt = [d + 3 for d in reversed(digits[:-1])]
        return [1] + tgt, tgt + [2]

    for wrong in (offset_two, eos_and_bos_swapped, drops_last_digit):
        rejects(ex.check_decoder_inputs, wrong, capsys)


# ---------------------------------------------------------------- greedy step


def greedy_step_by_hand(seq, logits):
    """Row by row: the index of the largest logit at the last position, appended with Python lists."""
    rows = []
    for b in range(seq.size(0)):
        last = logits[b, -1].tolist()
        rows.append(seq[b].tolist() + [max(range(len(last)), key=last.__getitem__)])
    return torch.tensor(rows)


def test_greedy_step_independent_solution(capsys):
    seq = torch.tensor([[1, 4], [1, 7]])
    logits = torch.tensor([[[0.0, 9.0, 0.0], [0.1, 0.2, 3.0]], [[5.0, 0.0, 0.0], [2.0, 1.0, 0.0]]])
    assert greedy_step_by_hand(seq, logits).tolist() == [[1, 4, 2], [1, 7, 0]]  # worked out on paper
    accepts(ex.check_greedy_step, greedy_step_by_hand, capsys)


def test_greedy_step_mistakes(capsys):
    rejects(ex.check_greedy_step, lambda s, lg: torch.cat([s, lg[:, -1].argmin(-1, keepdim=True)], 1), capsys)
    rejects(ex.check_greedy_step,  # every row gets the first row's token
            lambda s, lg: torch.cat([s, lg[:1, -1].argmax(-1, keepdim=True).expand(s.size(0), 1)], 1), capsys)
    rejects(ex.check_greedy_step,  # the most likely token over all positions, not the last one
            lambda s, lg: torch.cat([s, (lg.argmax(-1).flatten(1)[:, :1] * 0 + lg.amax(1).argmax(-1)[:, None])], 1),
            capsys)


# ---------------------------------------------------------------- exact match


def exact_match_by_hand(predictions, targets):
    """Count whole-sequence matches with an explicit length check and a position-by-position loop."""
    hits = 0
    for p, t in zip(predictions, targets):
        if len(p) == len(t) and all(p[i] == t[i] for i in range(len(t))):
            hits += 1
    return hits / len(targets)


def test_exact_match_independent_solution(capsys):
    assert exact_match_by_hand([[5, 4], [3], [7, 7]], [[5, 4], [3, 3], [7, 6]]) == 1 / 3  # worked out on paper
    accepts(ex.check_exact_match, exact_match_by_hand, capsys)
    accepts(ex.check_exact_match, lambda p, t: torch.tensor(exact_match_by_hand(p, t)), capsys)


def test_exact_match_mistakes(capsys):
    rejects(ex.check_exact_match, lambda p, t: 100 * exact_match_by_hand(p, t), capsys)  # a percentage
    rejects(ex.check_exact_match, lambda p, t: sum(sorted(a) == sorted(b) for a, b in zip(p, t)) / len(t),
            capsys, "the order matters")  # order ignored: the unreversed source would count as correct
    rejects(ex.check_exact_match, lambda p, t: sum(set(a) == set(b) for a, b in zip(p, t)) / len(t), capsys,
            "extra or missing tokens")  # a set also forgets repeated tokens: caught by the extra-token case first
