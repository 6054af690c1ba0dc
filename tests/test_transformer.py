"""The encoder-decoder Transformer's initialisation: embeddings at std 1/sqrt(d_model), Xavier elsewhere."""

import math

import pytest
import torch

from shared.transformer import Transformer, TransformerConfig


@pytest.mark.parametrize("vocab_size", [13, 2000])
def test_embeddings_start_at_unit_scale_after_the_sqrt_d_model_factor(vocab_size):
    torch.manual_seed(0)
    d_model = 256  # Xavier would give std sqrt(2 / (V + d_model)): 0.086 for V = 13, 0.030 for V = 2000
    model = Transformer(TransformerConfig(vocab_size, vocab_size, d_model=d_model, n_heads=4, n_encoder_layers=1,
                                          n_decoder_layers=1, d_ff=64, max_len=8))
    for embed in (model.src_embed, model.tgt_embed):
        assert embed.embedding.weight.std().item() == pytest.approx(d_model**-0.5, rel=0.05)
        with torch.no_grad():
            scaled = embed(torch.arange(vocab_size)[None])  # (1, V, d_model): every token once
        assert scaled.std().item() == pytest.approx(1.0, rel=0.05)  # the same scale as the positional table


def test_other_matrices_are_xavier_uniform():
    torch.manual_seed(0)
    d_model, d_ff, vocab = 64, 256, 13
    model = Transformer(TransformerConfig(vocab, vocab, d_model=d_model, n_heads=4, n_encoder_layers=1,
                                          n_decoder_layers=1, d_ff=d_ff, max_len=8))
    for weight in (model.encoder[0].self_attn.w_q.weight, model.decoder[0].ff.linear1.weight, model.generator.weight):
        fan_out, fan_in = weight.shape
        bound = math.sqrt(6 / (fan_in + fan_out))
        assert weight.abs().max().item() <= bound
        assert weight.std().item() == pytest.approx(bound / math.sqrt(3), rel=0.1)  # uniform(-b, b): std b / sqrt(3)
