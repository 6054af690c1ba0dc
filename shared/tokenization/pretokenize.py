r"""Pre-tokenizers: cut text into words before BPE, so that merges never cross a word boundary.

GPT-2's rule is one regular expression (letters, numbers, other symbols, each with at most one leading space;
runs of white space). SmolLM2 first cuts every digit out alone, then applies GPT-2's rule to the rest.
Special tokens (such as "<|endoftext|>") are cut out before either rule, so they are never split.

One known difference from the reference tokenizers: the `regex` package counts the unassigned code points of
plane 3 (such as U+3EFEB) as letters (\p{L}) and the Rust engines of tiktoken and `tokenizers` do not, so text
holding them can split, and so encode, differently; on assigned characters the ids are equal.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import regex  # the standard `re` has no \p{L} (any letter) or \p{N} (any number)

# GPT-2's pattern (Radford et al. 2019): English contractions; letters; numbers; other symbols; white space, where
# the last space before a word is left to that word (\s+(?!\S)).
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
_GPT2 = regex.compile(GPT2_PATTERN)
_DIGIT = regex.compile(r"\p{N}")  # one numeric character: 0-9, but also ½, ², ①, ٣ ...


def gpt2_words(text: str) -> list[str]:
    """GPT-2's pre-tokenizer: text -> words (their concatenation is the text)."""
    return _GPT2.findall(text)


def smollm2_words(text: str) -> list[str]:
    """SmolLM2's pre-tokenizer: every numeric character alone, then GPT-2's rule on the text between them."""
    words, start = [], 0
    for digit in _DIGIT.finditer(text):
        words += _GPT2.findall(text[start:digit.start()])
        words.append(digit.group())
        start = digit.end()
    return words + _GPT2.findall(text[start:])


def no_words(text: str) -> list[str]:
    """No pre-tokenizer: the whole text is one word (merges may then cross spaces and punctuation)."""
    return [text] if text else []


PRETOKENIZERS: dict[str, Callable[[str], list[str]]] = {"gpt2": gpt2_words, "smollm2": smollm2_words,
                                                        "none": no_words}


def split_special(text: str, special: Iterable[str]) -> list[tuple[str, bool]]:
    """Cut `text` at every special token: [(piece, is_special), ...], the longest special token first."""
    special = sorted(set(special), key=len, reverse=True)
    if not special:
        return [(text, False)] if text else []
    pattern = regex.compile("|".join(regex.escape(s) for s in special))
    pieces, start = [], 0
    for match in pattern.finditer(text):
        if match.start() > start:
            pieces.append((text[start:match.start()], False))
        pieces.append((match.group(), True))
        start = match.end()
    if start < len(text):
        pieces.append((text[start:], False))
    return pieces
