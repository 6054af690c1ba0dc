"""Decoding limits of shared.generation.seq2seq, checked with oracle models that reverse perfectly.

An oracle's weights play no part: it always predicts the right next token (the next reversed digit,
then EOS; or, with eos=False, digit 0 where EOS belongs), so every wrong answer below is the decoder's.
"""

import pytest
import torch

from shared.generation.seq2seq import beam_search, exact_match, greedy_decode, max_source_len
from shared.gpt import GPT, GPTConfig
from shared.lengthgen import teacher_forced_match
from shared.reversal import DIGIT_OFFSET, EOS, PAD, VOCAB_SIZE, make_model
from shared.transformer import Transformer


def oracle_next(src: list, answer: list, eos: bool) -> int:
    """The token after `answer` (tokens so far) when reversing `src` (tokens): a digit, then EOS."""
    k = len(answer)
    if k < len(src):
        return src[len(src) - 1 - k]
    return EOS if eos else DIGIT_OFFSET  # the digit 0 where EOS belongs, forever


def one_hot(rows: list) -> torch.Tensor:
    return torch.nn.functional.one_hot(torch.tensor(rows), VOCAB_SIZE).float()  # (B, T, V)


class OracleTransformer(Transformer):
    eos = True

    def encode(self, src, src_mask=None, need_weights=False):
        return src.float()[..., None]  # (B, T_src, 1): the memory is the source itself

    def decode(self, tgt, memory, src_mask=None, need_weights=False):
        out = []
        for src, row in zip(memory[..., 0].long().tolist(), tgt.tolist()):
            src = [t for t in src if t != PAD]
            out.append([oracle_next(src, row[1 : t + 1], self.eos) for t in range(len(row))])
        return one_hot(out)

    def forward(self, src, tgt, need_weights=False):
        return self.decode(tgt, self.encode(src))


class OracleGPT(GPT):
    eos = True

    def forward(self, tokens, caches=None, need_weights=False, positions=None):
        if tokens.size(1) > self.config.block_size:  # as the real GPT does
            raise ValueError(f"sequence length {tokens.size(1)} exceeds block_size={self.config.block_size}")
        out = []
        for row in tokens.tolist():  # BOS src EOS answer...
            e = row.index(EOS) if EOS in row else len(row)
            out.append([oracle_next(row[1:e], row[e + 1 : t + 1], self.eos) if t >= e else PAD
                        for t in range(len(row))])
        return one_hot(out)


def oracle(kind: str, eos: bool = True):
    """(model, the longest source its positions allow, worked out by hand)."""
    if kind == "encoder_decoder":  # max_len 13: BOS + 12 answer tokens as decoder input
        model, limit = OracleTransformer(make_model("encoder_decoder", 8, 1, 1, max_source=12).config), 12
    else:  # BOS src EOS answer needs 2n + 2 positions: 12 digits fit in 26 and in 27, 13 in neither
        block_size = {"gpt_even": 26, "gpt_odd": 27}[kind]
        model, limit = OracleGPT(GPTConfig(VOCAB_SIZE, block_size, n_layers=1, n_heads=1, d_model=8)), 12
    model.eos = eos
    return model.eval(), limit


KINDS = ["encoder_decoder", "gpt_even", "gpt_odd"]


@pytest.mark.parametrize("kind", KINDS)
def test_oracle_decodes_every_length_up_to_the_limit(kind):
    model, limit = oracle(kind)
    assert max_source_len(model) == limit
    sources = [[(3 * i + n) % 10 for i in range(n)] for n in range(1, limit + 1)]  # one list per length
    answers = [s[::-1] for s in sources]
    tokens = [[d + DIGIT_OFFSET for d in a] for a in answers]
    assert greedy_decode(model, sources) == tokens
    assert greedy_decode(model, sources, keep_eos=True) == [t + [EOS] for t in tokens]  # room left for the EOS
    assert beam_search(model, sources[-1], beam_size=2, keep_eos=True) == tokens[-1] + [EOS]
    assert exact_match(model, sources) == 1.0
    assert teacher_forced_match(model, sources).all()


@pytest.mark.parametrize("kind", KINDS)
def test_exact_match_needs_the_eos(kind):
    model, limit = oracle(kind, eos=False)  # right digits, never EOS
    sources = [[7] * n for n in range(1, limit + 1)]
    assert exact_match(model, sources) == 0.0
    assert not teacher_forced_match(model, sources).any()  # the two measures agree
    assert greedy_decode(model, [sources[-1]], keep_eos=True) == [[7 + DIGIT_OFFSET] * limit + [DIGIT_OFFSET]]


@pytest.mark.parametrize("kind", KINDS)
def test_sources_longer_than_the_positions_are_rejected(kind):
    model, limit = oracle(kind, eos=False)
    for n in (limit + 1, 30):  # one too many; far too many (a GPT used to return [[]])
        too_long = [5] * n
        with pytest.raises(ValueError, match=rf"sources\[1\] may hold at most {limit} digits"):
            greedy_decode(model, [[1, 2], too_long])
        with pytest.raises(ValueError, match=f"at most {limit} digits"):
            exact_match(model, [too_long])  # used to score 1.0 without any EOS
        with pytest.raises(ValueError, match=f"source may hold at most {limit} digits"):
            beam_search(model, too_long)


@pytest.mark.parametrize("kind", ["encoder_decoder", "gpt_even"])
def test_max_new_is_none_or_a_positive_int(kind):
    model, _ = oracle(kind)
    for bad in (0, -1, 2.0, True):  # 0 used to mean "the default", decoding 4 tokens
        with pytest.raises(ValueError, match="max_new"):
            greedy_decode(model, [[1, 2, 3]], max_new=bad)
        with pytest.raises(ValueError, match="max_new"):
            beam_search(model, [1, 2, 3], max_new=bad)
    assert greedy_decode(model, [[1, 2, 3]], max_new=2) == [[3 + DIGIT_OFFSET, 2 + DIGIT_OFFSET]]
    assert greedy_decode(model, [[1, 2, 3]], max_new=1, keep_eos=True) == [[3 + DIGIT_OFFSET]]
    assert beam_search(model, [1, 2, 3], max_new=1) == [3 + DIGIT_OFFSET]


@pytest.mark.parametrize("kind", ["encoder_decoder", "gpt_even"])
def test_sources_must_be_lists_of_digits(kind):
    model, _ = oracle(kind)
    for bad, error, message in [
        ([[1, -1, 2]], ValueError, "0-9"),  # token -1 + 3 = 2 would have been read as EOS
        ([[1, 10]], ValueError, "0-9"),
        ([[1, 2], []], ValueError, "empty"),
        ([[1, 2.0]], TypeError, "ints 0-9"),
        ([[1, True]], TypeError, "ints 0-9"),
        (["12"], TypeError, "list"),
        ([], ValueError, "non-empty"),
        (torch.tensor([[1, 2]]), TypeError, "list"),
    ]:
        with pytest.raises(error, match=message):
            greedy_decode(model, bad)
        if isinstance(bad, list) and bad:
            with pytest.raises(error, match=message):
                exact_match(model, bad)
            with pytest.raises(error, match=message):
                beam_search(model, bad[-1])
    assert greedy_decode(model, [(1, 2), [3]]) == [[2 + DIGIT_OFFSET, 1 + DIGIT_OFFSET], [3 + DIGIT_OFFSET]]
    with pytest.raises(TypeError, match="sources must be a list of digit lists, got generator"):
        exact_match(model, ([1, 2] for _ in range(2)))


@pytest.mark.parametrize("kind", KINDS)
def test_a_large_max_new_decodes_up_to_the_last_position_and_no_further(kind):
    model, limit = oracle(kind, eos=False)  # never stops: only the positions end the answer
    for n in (1, limit):
        # the decoder-only model reads BOS src EOS and all but the last new token: (n + 2) + (new - 1) <= block_size
        cap = model.config.max_len if kind == "encoder_decoder" else model.config.block_size - (n + 2) + 1
        assert len(greedy_decode(model, [[7] * n], max_new=100)[0]) == cap
        assert len(beam_search(model, [7] * n, beam_size=2, max_new=100)) == cap
