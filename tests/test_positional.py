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
    learned = LearnedPositionalEmbedding(20, 16)
    assert sum(p.numel() for p in learned.parameters()) == 20 * 16


def test_positional_modules_add_position_vectors_with_offset():
    x = torch.zeros(2, 5, 16)
    fixed = SinusoidalPositionalEncoding(16, max_len=20)
    torch.testing.assert_close(fixed(x)[0], sinusoidal_table(20, 16)[:5])
    torch.testing.assert_close(fixed(x[:, :2], offset=3)[1], sinusoidal_table(20, 16)[3:5])
    learned = LearnedPositionalEmbedding(20, 16)
    torch.testing.assert_close(learned(x, offset=4)[1], learned.embedding.weight[4:9])


def test_scaled_embedding_multiplies_by_sqrt_d_model():
    emb = ScaledEmbedding(10, 16)
    tokens = torch.tensor([[1, 2, 3]])
    torch.testing.assert_close(emb(tokens), emb.embedding(tokens) * 4.0)
    with pytest.raises(TypeError, match="integer ids"):
        emb(torch.ones(1, 3))


@pytest.mark.parametrize("module", [SinusoidalPositionalEncoding(8, max_len=6), LearnedPositionalEmbedding(6, 8)])
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
