"""Notebook 13's exercise checkers accept right answers and reject the usual mistakes with the right hint."""

import pytest

from shared import exercises as ex
from shared.exercises.tokenization import encode_by_rank
from shared.tokenization import gpt2_words, merge

from .helpers import accepts, rejects, verdict

ALL = ex.CHECKERS["13"]


@pytest.mark.parametrize("check", ALL, ids=lambda c: c.__name__)
def test_stub_wrong_type_and_crash_are_feedback(check, capsys):
    def stub(*args):
        raise NotImplementedError

    result, out = verdict(check, stub, capsys)
    assert result is False and "not solved yet" in out
    result, out = verdict(check, lambda *a: "9 3 9", capsys)
    assert result is False and "expected a list of int ids, got str" in out
    result, out = verdict(check, lambda *a: None, capsys)
    assert result is False and "returned None" in out
    result, out = verdict(check, lambda *a: 1 / 0, capsys)
    assert result is False and "ZeroDivisionError" in out and "Traceback" not in out


def merge_with(mistake=None):
    """A learner's merge step; `mistake` plants one of the usual ones."""
    def fn(ids, pair, new_id):
        if mistake == "in place":
            ids[:] = merge(ids, pair, new_id)
            return ids
        out, i = [], 0
        stop = len(ids) - 1 if mistake == "drops last" else len(ids)
        while i < stop:
            if i + 1 < len(ids) and (ids[i], ids[i + 1]) == tuple(pair) and mistake != "never":
                out.append(new_id)
                i += 1 if mistake == "overlapping" else 2
            else:
                out.append(ids[i])
                i += 1
        return out
    return fn


def test_merge(capsys):
    accepts(ex.check_merge, merge_with(), capsys)
    accepts(ex.check_merge, lambda ids, pair, new_id: tuple(merge(ids, pair, new_id)), capsys)  # a tuple is fine
    rejects(ex.check_merge, merge_with("overlapping"), capsys, "the pairs overlap", "skip BOTH ids")
    rejects(ex.check_merge, merge_with("drops last"), capsys, "the last id got lost")
    rejects(ex.check_merge, merge_with("in place"), capsys, "changed its input")
    rejects(ex.check_merge, merge_with("never"), capsys, "nothing was replaced")


def encode_with(mistake=None):
    """A learner's encoder; `mistake` plants one of the usual ones."""
    def fn(text, merges):
        words = ([text] if text else []) if mistake == "no pre-tokenizer" else gpt2_words(text)
        out = []
        for word in words:
            ids = list(word.encode("utf-8"))
            if mistake == "training order":  # every merge once, in the order listed
                for pair, new_id in merges.items():
                    ids = merge(ids, pair, new_id)
                out += ids
                continue
            while len(ids) >= 2:
                present = [p for p in zip(ids, ids[1:]) if p in merges]
                if not present:
                    break
                pair = present[0] if mistake == "leftmost" else min(present, key=merges.get)
                ids = merge(ids, pair, merges[pair])
            out += ids
        return out
    return fn


def test_bpe_encode(capsys):
    accepts(ex.check_bpe_encode, encode_with(), capsys)
    accepts(ex.check_bpe_encode, encode_by_rank, capsys)
    rejects(ex.check_bpe_encode, encode_with("no pre-tokenizer"), capsys, "crossed word boundaries", "gpt2_words")
    rejects(ex.check_bpe_encode, encode_with("training order"), capsys, "in the dict's order")
    rejects(ex.check_bpe_encode, encode_with("leftmost"), capsys, "leftmost mergeable pair", "LOWEST RANK")
    rejects(ex.check_bpe_encode, lambda text, merges: list(text.encode()), capsys, "no merge was applied")
