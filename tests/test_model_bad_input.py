"""Bad input to the model files gets a clear error that names the argument (issue 17, sections 5.7 and 8).

Each case here used to fail deep inside torch ("cannot reshape tensor of 0 elements", a kernel message, an
IndexError), or worse, to give a silent wrong answer.
"""

import pytest
import torch

from shared.attention import MultiHeadAttention, scaled_dot_product_attention
from shared.explicit_attention import ExplicitMultiHeadAttention
from shared.gpt import GPT, GPTConfig
from shared.kv_cache import KVCache
from shared.layers import FeedForward, PreLNBlock
from shared.masks import causal_mask, decoder_mask, padding_mask
from shared.norms import RMSNorm, make_norm
from shared.positions import (
    LearnedPositionalEmbedding,
    ScaledEmbedding,
    SinusoidalPositionalEncoding,
    position_embedding,
    rope_frequencies,
)
from shared.transformer import Transformer, TransformerConfig


@pytest.fixture(autouse=True)
def seed():
    torch.manual_seed(0)


def tiny_gpt(**options):
    return GPT(GPTConfig(vocab_size=10, block_size=8, n_layers=2, n_heads=2, d_model=8, **options)).eval()


def ids(B, T):
    return torch.randint(1, 10, (B, T))


# ---------------------------------------------------------------- section 5, item 7


@pytest.mark.parametrize("options", [{}, {"causal": True}, {"need_weights": True}])
def test_attention_rejects_an_empty_sequence(options):
    with pytest.raises(ValueError, match=r"query must have shape \(B >= 1, T >= 1"):
        MultiHeadAttention(8, 2)(torch.randn(2, 0, 8), **options)
    with pytest.raises(ValueError, match=r"key must have shape \(B >= 1, T >= 1"):
        MultiHeadAttention(8, 2)(torch.randn(2, 3, 8), torch.randn(2, 0, 8))
    with pytest.raises(ValueError, match=r"query must have shape \(B >= 1, T >= 1"):
        ExplicitMultiHeadAttention(8, 2)(torch.randn(2, 0, 8))


def test_gpt_and_transformer_reject_an_empty_sequence():
    with pytest.raises(ValueError, match=r"tokens must be a \(B, T\) integer tensor .*T >= 1"):
        tiny_gpt()(ids(2, 0))
    model = Transformer(TransformerConfig(10, 10, d_model=8, n_heads=2, n_encoder_layers=1, n_decoder_layers=1,
                                          d_ff=8)).eval()
    with pytest.raises(ValueError, match=r"src must be a \(B, T\) integer tensor .*T >= 1"):
        model(ids(2, 0), ids(2, 3))
    with pytest.raises(ValueError, match=r"tgt must be a \(B, T\) integer tensor .*T >= 1"):
        model(ids(2, 3), ids(2, 0))


@pytest.mark.parametrize("dropout", [-0.1, 1.0, 1.5, float("nan"), True])
def test_attention_rejects_a_dropout_that_is_not_a_probability(dropout):
    with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\)"):
        MultiHeadAttention(8, 2, dropout=dropout)
    with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\)"):
        ExplicitMultiHeadAttention(8, 2, dropout=dropout)


def test_a_kv_cache_refuses_another_batch_size():
    attn, cache = MultiHeadAttention(8, 2), KVCache()
    attn(torch.randn(2, 3, 8), cache=cache)
    with pytest.raises(ValueError, match=r"input has batch size 1, but the KV cache has batch size 2"):
        attn(torch.randn(1, 1, 8), cache=cache)
    model = tiny_gpt()
    caches = model.new_caches()
    model(ids(2, 3), caches=caches)
    with pytest.raises(ValueError, match=r"input has batch size 3, but the KV cache has batch size 2"):
        model(ids(3, 1), caches=caches)


@pytest.mark.parametrize("n", [0, 1, 3])
def test_gpt_wants_one_cache_per_block(n):
    model = tiny_gpt()  # 2 blocks
    with pytest.raises(ValueError, match=rf"caches must hold one KVCache per block \(2\), got {n}"):
        model(ids(2, 1), caches=[KVCache() for _ in range(n)])


@pytest.mark.parametrize("base", [float("nan"), float("inf"), -float("inf")])
def test_rope_base_must_be_finite(base):
    with pytest.raises(ValueError, match="base must be a finite number > 1"):
        rope_frequencies(8, base)


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool])
def test_rmsnorm_rejects_integer_input(dtype):
    with pytest.raises(TypeError, match="x must be a floating-point tensor"):
        RMSNorm(4)(torch.ones(2, 4, dtype=dtype))


def test_gpt_without_positions_refuses_position_ids():
    """MultiHeadAttention raises for positions it cannot use; GPT(position="none") used to drop them silently."""
    with pytest.raises(ValueError, match=r"positions.*position='none'"):
        tiny_gpt(position="none")(ids(1, 3), positions=torch.arange(3))


# ---------------------------------------------------------------- section 8, bugs 2, 5 and 6


@pytest.mark.parametrize("module", [SinusoidalPositionalEncoding(8, max_len=16), LearnedPositionalEmbedding(8, 16)])
def test_positional_modules_reject_a_negative_offset(module):
    """offset -1 gave an empty slice (sinusoidal) or an IndexError; -3 with T=3 wrapped round silently."""
    for offset in (-1, -3, True, 1.0):
        with pytest.raises(ValueError, match="offset must be an int >= 0"):
            module(torch.zeros(1, 3, 8), offset=offset)


@pytest.mark.parametrize("module", [SinusoidalPositionalEncoding(8, max_len=16), LearnedPositionalEmbedding(8, 16)])
def test_positional_modules_reject_positions_of_another_batch_size(module):
    """(B, T) positions of batch 2 against x of batch 1 used to broadcast into a batch of 2."""
    with pytest.raises(ValueError, match=r"positions has batch size 2, but x has batch size 1"):
        module(torch.zeros(1, 3, 8), positions=torch.zeros(2, 3, dtype=torch.long))
    assert module(torch.zeros(2, 3, 8), positions=torch.zeros(2, 3, dtype=torch.long)).shape == (2, 3, 8)


def test_positional_tables_need_positive_sizes():
    with pytest.raises(ValueError, match="max_len must be a positive int"):
        LearnedPositionalEmbedding(8, max_len=0)
    with pytest.raises(ValueError, match="d_model must be a positive int"):
        LearnedPositionalEmbedding(0, max_len=8)
    with pytest.raises(ValueError, match="d_model must be a positive int"):
        ScaledEmbedding(10, 0)  # was ZeroDivisionError
    with pytest.raises(ValueError, match="vocab_size must be a positive int"):
        ScaledEmbedding(0, 8)


def test_mask_builders_reject_bad_arguments():
    tokens = torch.tensor([[1, 2, 0]])
    with pytest.raises(ValueError, match="size must be a positive int, got True"):
        causal_mask(True)
    for pad_id in (0.5, None, True, "0"):  # 0.5 marked every key as real, None raised a raw TypeError
        with pytest.raises(ValueError, match="pad_id must be an int"):
            padding_mask(tokens, pad_id)
    with pytest.raises(ValueError, match=r"tgt must be a \(B, T\) integer tensor .*T >= 1"):
        decoder_mask(torch.zeros(2, 0, dtype=torch.long), 0)
    with pytest.raises(ValueError, match=r"tgt must be a \(B, T\) integer tensor"):
        decoder_mask(torch.ones(2, 3), 0)


def test_alibi_positions_are_checked_like_ropes():
    """Position ids of the wrong length would silently drop the distance penalty (a (1,) id broadcasts)."""
    mha = MultiHeadAttention(8, 2, alibi=True).eval()
    x = torch.randn(2, 5, 8)
    for bad in (torch.tensor([0]), torch.zeros(3, 5, dtype=torch.long), torch.arange(5.0)):
        with pytest.raises((ValueError, TypeError), match="positions"):
            mha(x, positions=bad)
    assert torch.allclose(mha(x, positions=torch.arange(5))[0], mha(x)[0])  # the default ids, given explicitly


# ---------------------------------------------------------------- issue 17: review of the model layer


def tiny_transformer(**options):
    return Transformer(TransformerConfig(10, 12, d_model=8, n_heads=2, n_encoder_layers=1, n_decoder_layers=1,
                                         d_ff=8, **options)).eval()


def test_an_empty_batch_is_refused_by_name():
    """B = 0 failed inside a reshape ("cannot reshape tensor of 0 elements"), or gave an empty result."""
    for attn in (MultiHeadAttention(8, 2), ExplicitMultiHeadAttention(8, 2)):
        for options in ({}, {"causal": True}, {"need_weights": True}):
            with pytest.raises(ValueError, match=r"query must have shape \(B >= 1, T >= 1, d_model=8\)"):
                attn(torch.randn(0, 3, 8), **options)
    with pytest.raises(ValueError, match=r"tokens must be a \(B, T\) integer tensor .*B >= 1"):
        tiny_gpt()(ids(0, 3))
    with pytest.raises(ValueError, match=r"src must be a \(B, T\) integer tensor .*B >= 1"):
        tiny_transformer()(ids(0, 3), ids(0, 3))
    with pytest.raises(ValueError, match=r"tgt must be a \(B, T\) integer tensor .*B >= 1"):
        tiny_transformer().decode(ids(0, 3), torch.randn(0, 3, 8))


@pytest.mark.parametrize("bad", [-1, 10])
def test_token_ids_outside_the_vocabulary_are_refused_by_name(bad):
    """An id < 0 or >= vocab_size reached nn.Embedding and raised a bare IndexError."""
    tokens = ids(2, 3)
    tokens[1, 2] = bad
    with pytest.raises(ValueError, match=r"tokens must hold ids in 0..9 \(vocab_size=10\)"):
        tiny_gpt()(tokens)
    model = tiny_transformer()  # source vocabulary 10, target vocabulary 12
    with pytest.raises(ValueError, match=r"src must hold ids in 0..9 \(vocab_size=10\)"):
        model(tokens, ids(2, 3))
    with pytest.raises(ValueError, match=r"tgt must hold ids in 0..11 \(vocab_size=12\)"):
        model(ids(2, 3), tokens + 2 * (bad > 0))  # -1, or 12
    assert tiny_gpt()(torch.tensor([[0, 9]])).shape == (1, 2, 10)  # the edges of the range are ids
    assert model(torch.tensor([[0, 9]]), torch.tensor([[0, 11]])).shape == (1, 2, 12)


@pytest.mark.parametrize("dropout_p", [-1, 1.0, 1.5, float("nan"), True])
def test_sdpa_rejects_a_dropout_p_that_is_not_a_probability(dropout_p):
    q = torch.randn(2, 2, 3, 4)
    with pytest.raises(ValueError, match=r"dropout_p must be in \[0, 1\)"):
        scaled_dot_product_attention(q, q, q, dropout_p=dropout_p)


def test_sdpa_rejects_a_bias_that_does_not_fit_the_scores():
    """bias must broadcast to the scores (..., T_q, T_k) without enlarging them, and be a float tensor."""
    q = torch.randn(2, 2, 3, 4)  # scores (2, 2, 3, 3)
    for bias in (torch.randn(4), torch.randn(2, 3, 3, 3), torch.randn(5, 2, 3, 3)):
        with pytest.raises(ValueError, match=r"bias of shape .* cannot broadcast to the attention scores"):
            scaled_dot_product_attention(q, q, q, bias=bias)
    with pytest.raises(ValueError, match=r"bias of shape \(2, 2, 2, 3, 3\) would enlarge .* = \(2, 2, 3, 3\)"):
        scaled_dot_product_attention(q, q, q, bias=torch.randn(2, 2, 2, 3, 3))
    with pytest.raises(TypeError, match="bias must be a floating-point tensor"):
        scaled_dot_product_attention(q, q, q, bias=torch.ones(3, 3, dtype=torch.bool))
    for bias in (torch.randn(3), torch.randn(3, 3), torch.randn(2, 1, 3, 3)):  # broadcast: accepted
        assert scaled_dot_product_attention(q, q, q, bias=bias)[0].shape == (2, 2, 3, 4)


def test_a_kv_cache_is_refused_in_cross_attention():
    """A cache appends the keys of new tokens; with cross-attention it would append the memory at every step."""
    attn, cache = MultiHeadAttention(8, 2), KVCache()
    with pytest.raises(ValueError, match=r"cache apply to self-attention only"):
        attn(torch.randn(2, 1, 8), torch.randn(2, 5, 8), cache=cache)
    assert len(cache) == 0
    x = torch.randn(2, 1, 8)
    attn(x, x, x, cache=cache)  # key is query: self-attention
    assert len(cache) == 1


def test_feed_forward_and_rmsnorm_refuse_sizes_that_build_nothing():
    with pytest.raises(ValueError, match="d_ff must be a positive int, got 0"):
        FeedForward(8, 0)  # built two empty matrices
    for eps in (float("inf"), float("nan"), 0, -1e-5, True):  # inf zeroed every output
        with pytest.raises(ValueError, match="eps must be None or a finite number > 0"):
            RMSNorm(8, eps=eps)


def test_a_misspelt_position_scheme_names_the_choices():
    with pytest.raises(ValueError, match=r"kind must be one of \('learned', 'sinusoidal', .*\), got 'learnt'"):
        position_embedding("learnt", 8, 8)  # returned None: no positions at all


@pytest.mark.parametrize("pad_id", [True, 1.0, -1, 10])
def test_transformer_pad_id_must_be_an_int_id_of_both_vocabularies(pad_id):
    with pytest.raises(ValueError, match="TransformerConfig.pad_id must be"):  # True passed as the id 1
        TransformerConfig(10, 10, pad_id=pad_id)


@pytest.mark.parametrize("build", [lambda: MultiHeadAttention(8, 2, bias="no"),
                                   lambda: ExplicitMultiHeadAttention(8, 2, bias="no"),
                                   lambda: FeedForward(8, 8, bias="no"), lambda: make_norm("layernorm", 8, bias="no"),
                                   lambda: PreLNBlock(8, 2, 8, bias="no")],
                         ids=["MultiHeadAttention", "ExplicitMultiHeadAttention", "FeedForward", "make_norm",
                              "PreLNBlock"])
def test_bias_must_be_a_bool(build):
    with pytest.raises(ValueError, match="bias must be a bool, got 'no'"):  # "no" is truthy: biases were kept
        build()


def test_the_transformer_has_one_position_table_and_says_so():
    """With learned positions the encoder and the decoder read the same rows (issue 17: documented, unchanged)."""
    names = [n for n, _ in tiny_transformer(position="learned").named_parameters() if "positional" in n]
    assert names == ["positional.embedding.weight"]
    assert "the encoder and the decoder share its rows" in TransformerConfig.__doc__


@pytest.mark.parametrize("dropout", [-0.1, 1.0, 2.0, float("nan"), True])
def test_feed_forward_rejects_a_dropout_that_is_not_a_probability(dropout):
    with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\)"):  # as attention says it
        FeedForward(8, 16, dropout=dropout)


@pytest.mark.parametrize("flag", ["rope", "fused_qkv", "alibi"])
def test_attention_option_flags_must_be_bools(flag):
    with pytest.raises(ValueError, match=f"{flag} must be a bool, got 'no'"):  # "no" is truthy: the option was on
        MultiHeadAttention(8, 2, **{flag: "no"})
