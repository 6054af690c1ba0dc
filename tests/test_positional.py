import math

import pytest
import torch

from shared.positions import LearnedPositionalEmbedding, ScaledEmbedding, SinusoidalPositionalEncoding, sinusoidal_table


def test_sinusoidal_table_matches_the_formula():
    table = sinusoidal_table(50, 16)
    assert table.shape == (50, 16)
    for pos, i in [(0, 0), (7, 3), (49, 7)]:
        angle = pos / 10000 ** (2 * i / 16)
        assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-5)
        assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-5)


def test_sinusoidal_is_a_buffer_and_learned_is_a_parameter():
    fixed = SinusoidalPositionalEncoding(16, max_len=20)
    assert list(fixed.parameters()) == [] and "table" in dict(fixed.named_buffers())
    learned = LearnedPositionalEmbedding(16, max_len=20)
    assert sum(p.numel() for p in learned.parameters()) == 20 * 16


def test_positional_modules_add_position_vectors_with_offset():
    x = torch.zeros(2, 5, 16)
    fixed = SinusoidalPositionalEncoding(16, max_len=20)
    torch.testing.assert_close(fixed(x)[0], sinusoidal_table(20, 16)[:5])
    torch.testing.assert_close(fixed(x[:, :2], offset=3)[1], sinusoidal_table(20, 16)[3:5])
    learned = LearnedPositionalEmbedding(16, max_len=20)
    torch.testing.assert_close(learned(x, offset=4)[1], learned.embedding.weight[4:9])


def test_scaled_embedding_multiplies_by_sqrt_d_model():
    emb = ScaledEmbedding(10, 16)
    tokens = torch.tensor([[1, 2, 3]])
    torch.testing.assert_close(emb(tokens), emb.embedding(tokens) * 4.0)
    with pytest.raises(TypeError, match="integer ids"):
        emb(torch.ones(1, 3))


@pytest.mark.parametrize("module", [SinusoidalPositionalEncoding(8, max_len=6), LearnedPositionalEmbedding(8, 6)])
def test_too_long_sequences_are_rejected(module):
    with pytest.raises(ValueError, match=r"longer than the positional table \(max_len=6\)"):
        module(torch.zeros(1, 7, 8))
    with pytest.raises(ValueError, match="offset 3"):
        module(torch.zeros(1, 4, 8), offset=3)
    with pytest.raises(ValueError, match="x must have shape"):
        module(torch.zeros(7, 8))


def test_bad_table_sizes():
    with pytest.raises(ValueError, match="d_model must be even"):
        sinusoidal_table(10, 7)
    with pytest.raises(ValueError, match="max_len must be a positive int"):
        sinusoidal_table(0, 8)


def test_the_sinusoidal_table_stays_out_of_checkpoints():
    """A fixed table is rebuilt from the formula, so state_dicts (and checkpoints of every model) do not hold it."""
    from shared.gpt import GPT, GPTConfig
    from shared.transformer import Transformer, TransformerConfig

    assert SinusoidalPositionalEncoding(16, max_len=20).state_dict() == {}
    gpt = GPT(GPTConfig(vocab_size=10, block_size=8, n_layers=1, n_heads=2, d_model=8, position="sinusoidal"))
    transformer = Transformer(TransformerConfig(10, 10, d_model=8, n_heads=2, n_encoder_layers=1, n_decoder_layers=1))
    for model in (gpt, transformer):
        assert not [name for name in model.state_dict() if "table" in name]
        model.load_state_dict(type(model)(model.config).state_dict())  # strict: a later model loads it


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize(
    "make", [lambda: SinusoidalPositionalEncoding(8, 16), lambda: LearnedPositionalEmbedding(8, max_len=16)],
    ids=["sinusoidal", "learned"])
def test_positions_keep_the_input_dtype(make, dtype):
    """x + positions is computed in fp32 and rounded once to x's dtype; learned positions used to return fp32."""
    torch.manual_seed(0)
    module, x = make(), torch.randn(2, 3, 8).to(dtype)
    assert module(x).dtype == dtype and module(x, positions=torch.tensor([4, 1, 0])).dtype == dtype
    torch.testing.assert_close(module(x), (x.float() + module(torch.zeros(2, 3, 8))).to(dtype))


def test_scaled_embedding_entries_have_std_1_and_the_sinusoidal_table_rms_1_over_sqrt_2():
    """The numbers behind the comment in ScaledEmbedding: tokens std 1, positions RMS 1/sqrt(2) (sin^2 + cos^2 = 1)."""
    torch.manual_seed(0)
    tokens = ScaledEmbedding(1000, 64)(torch.arange(1000)[None])
    assert abs(tokens.std().item() - 1.0) < 0.02
    assert abs(sinusoidal_table(512, 64).pow(2).mean().sqrt().item() - 2**-0.5) < 1e-6
