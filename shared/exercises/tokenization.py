"""Exercise checkers for notebook 13 (tokenization): one BPE merge step, and the encoder that applies merges by
rank inside each pre-tokenized word.

Import them from `shared.exercises`; see `shared.exercises.feedback` for how a checker reports.
"""

from __future__ import annotations

from ..tokenization import gpt2_words, merge
from .feedback import Checker, exercise


def _ids(c: Checker, got, case: str) -> list[int]:
    """The learner's answer as a list of ints, or feedback saying what came back instead."""
    if got is None:
        c.fail(case, "your function returned None.", "end it with `return out` (a new list of ids).")
    if not isinstance(got, (list, tuple)) or not all(isinstance(i, int) and not isinstance(i, bool) for i in got):
        c.fail(case, f"expected a list of int ids, got {type(got).__name__}"
                     f"{' of ' + type(got[0]).__name__ if isinstance(got, (list, tuple)) and got else ''}.",
               "return a plain Python list of ints (call .tolist() on a tensor).")
    return list(got)


def _merge_overlapping(ids, pair, new_id):
    """The usual mistake: after a match, step one id instead of two, so one id serves two pairs (5 5 5 -> 9 9 5)."""
    return [new_id if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair else x for i, x in enumerate(ids)]


def _merge_drops_last(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids) - 1:
        if (ids[i], ids[i + 1]) == pair:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


@exercise("one BPE merge step")
def check_merge(c: Checker) -> None:
    """fn(ids: list[int], pair: (a, b), new_id) -> list[int]: every occurrence of a followed by b, scanned left to
    right and never overlapping, replaced by new_id; `ids` itself is left unchanged."""
    cases = {
        "two separate pairs": ([1, 2, 3, 1, 2], (1, 2), 9),
        "three equal ids in a row, pair (5, 5)": ([5, 5, 5], (5, 5), 9),
        "four equal ids in a row": ([7, 5, 5, 5, 5], (5, 5), 9),
        "the pair in the wrong order is not a match": ([2, 1, 2, 1], (1, 2), 9),
        "the pair at the very end": ([4, 4, 1, 2], (1, 2), 9),
        "a last id that is not part of a pair": ([1, 2, 3], (1, 2), 9),
        "no occurrence": ([3, 4, 5], (1, 2), 9),
        "one id": ([1], (1, 2), 9),
        "empty": ([], (1, 2), 9),
    }
    for case, (ids, pair, new_id) in cases.items():
        given = list(ids)
        got = _ids(c, c.call(case, given, pair, new_id), case)
        if given != ids:
            c.fail(case, f"your function changed its input to {given}.", "build a new list; leave `ids` as it is.")
        expected = merge(ids, pair, new_id)
        if got == expected:
            c.passed()
            continue
        hint = ""
        if got == _merge_overlapping(ids, pair, new_id):
            hint = ("the pairs overlap: after a match, skip BOTH ids (i += 2) and append new_id once; in 5 5 5 the "
                    "middle 5 belongs to the first pair only, so the answer is [9, 5].")
        elif got == _merge_drops_last(ids, pair, new_id):
            hint = "the last id got lost: when the loop stops short of a pair, append the id that is left over."
        elif got == ids:
            hint = "nothing was replaced: compare (ids[i], ids[i + 1]) with the pair."
        c.fail(case, f"merge({ids}, {pair}, {new_id}) returned {got}, expected {expected}.", hint)


def encode_by_rank(text: str, merges: dict[tuple[int, int], int], words=gpt2_words) -> list[int]:
    """The reference: each word's UTF-8 bytes, then repeatedly the pair whose new id is smallest (the earliest
    learned merge), until no pair of the word has a merge."""
    out = []
    for word in words(text):
        ids = list(word.encode("utf-8"))
        while len(ids) >= 2:
            pair = min(zip(ids, ids[1:]), key=lambda p: merges.get(p, float("inf")))
            if pair not in merges:
                break
            ids = merge(ids, pair, merges[pair])
        out += ids
    return out


def _in_dict_order(text, merges, words=gpt2_words):
    """The mistake: every merge once, in the order the dict lists them, as if that were the order to apply them."""
    out = []
    for word in words(text):
        ids = list(word.encode("utf-8"))
        for pair, new_id in merges.items():
            ids = merge(ids, pair, new_id)
        out += ids
    return out


def _leftmost_first(text, merges):
    out = []
    for word in gpt2_words(text):
        ids = list(word.encode("utf-8"))
        while True:
            pair = next((p for p in zip(ids, ids[1:]) if p in merges), None)
            if pair is None:
                break
            ids = merge(ids, pair, merges[pair])
        out += ids
    return out


def _merges(*pairs: bytes) -> dict[tuple[int, int], int]:
    """Merges written as byte strings, in rank order: b"t", b"h" -> ((116, 104), 256) and so on."""
    vocab, merges = {bytes([b]): b for b in range(256)}, {}
    for a, b in zip(pairs[::2], pairs[1::2]):
        merges[(vocab[a], vocab[b])] = len(vocab)
        vocab[a + b] = len(vocab)
    return merges


@exercise("the BPE encoder, merges by rank")
def check_bpe_encode(c: Checker) -> None:
    """fn(text, merges) -> list[int]: the text cut into words by gpt2_words, each word's UTF-8 bytes as ids 0..255,
    then in each word the pair with the SMALLEST new id in `merges` {(a, b): new_id} merged, again and again,
    until no adjacent pair of the word is in `merges`."""
    english = _merges(b"t", b"h", b"th", b"e", b"e", b" ", b" ", b"th", b"a", b"t", b"at", b" ", b"c", b"at")
    ranked = _merges(b"b", b"c", b"a", b"b", b"a", b"bc")  # "abc": b+c has the lower rank, then a+bc
    late_first = dict(reversed(list(_merges(b"c", b"a", b"t", b"h", b"h", b"e", b"t", b"he").items())))
    cases = {
        "english, merges that cross spaces if nothing stops them": ("the cat sat the hat", english),
        "a word where two merges compete: a b c": ("abc cab", ranked),
        "merges listed in a dict whose order is not their rank (the new id is the rank)": ("the theta", late_first),
        "numbers, punctuation, non-ASCII": ("that 2 cats! café thé", english),
        "empty text": ("", english),
        "no merge applies": ("xyz", english),
    }
    for case, (text, merges) in cases.items():
        got, expected = _ids(c, c.call(case, text, dict(merges)), case), encode_by_rank(text, merges)
        if got == expected:
            c.passed()
            continue
        hint = ""
        if got == encode_by_rank(text, merges, words=lambda t: [t] if t else []):
            hint = ("merges crossed word boundaries: cut the text with gpt2_words(text) first and encode each word "
                    "alone (a token never holds the end of one word and the start of the next).")
        elif got == _in_dict_order(text, merges):
            hint = ("merges were applied in the dict's order, each once. Within each word, apply the pair whose new "
                    "id (its rank) is smallest, then look again: a merge can make a pair that an earlier-listed "
                    "merge needs.")
        elif got == _leftmost_first(text, merges):
            hint = ("the leftmost mergeable pair was merged first; merge the pair of LOWEST RANK (smallest new id) "
                    "in the word, wherever it is.")
        elif len(got) == len(text.encode("utf-8")):
            hint = "no merge was applied: look up each adjacent pair in `merges`."
        c.fail(case, f"for {text!r} you returned {got}, expected {expected}.", hint)
