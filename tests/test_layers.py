import pytest
import torch
from torch import nn

from shared.kv_cache import KVCache
from shared.layers import DecoderLayer, EncoderLayer, FeedForward, PreLNBlock
from shared.masks import causal_mask, decoder_mask, padding_mask

from .helpers import copy_layer_to_torch

D, H, FF = 32, 4, 64


@pytest.fixture(autouse=True)
def seed():
    torch.manual_seed(0)


def test_encoder_layer_matches_torch():
    ours = EncoderLayer(D, H, FF, dropout=0.1).eval()
    theirs = nn.TransformerEncoderLayer(D, H, FF, dropout=0.1, activation="relu", batch_first=True, norm_first=False)
    copy_layer_to_torch(ours, theirs.eval())
    src = torch.tensor([[4, 5, 6, 7, 8], [4, 5, 6, 0, 0]])
    x = torch.randn(2, 5, D)
    expected = theirs(x, src_key_padding_mask=(src == 0))  # torch: True = padding
    got = ours(x, padding_mask(src, 0))
    assert (got[src != 0] - expected[src != 0]).abs().max() <= 1e-5


def test_decoder_layer_matches_torch():
    ours = DecoderLayer(D, H, FF, dropout=0.1).eval()
    theirs = nn.TransformerDecoderLayer(D, H, FF, dropout=0.1, activation="relu", batch_first=True, norm_first=False)
    copy_layer_to_torch(ours, theirs.eval())
    src = torch.tensor([[4, 5, 6, 7], [4, 5, 0, 0]])
    tgt = torch.tensor([[1, 9, 8, 7, 6], [1, 9, 8, 0, 0]])
    x, memory = torch.randn(2, 5, D), torch.randn(2, 4, D)
    expected = theirs(
        x, memory, tgt_mask=~causal_mask(5)[0, 0], tgt_key_padding_mask=(tgt == 0), memory_key_padding_mask=(src == 0)
    )
    got = ours(x, memory, decoder_mask(tgt, 0), padding_mask(src, 0), need_weights=True)
    assert (got[tgt != 0] - expected[tgt != 0]).abs().max() <= 1e-5
    assert ours.self_attn_weights.shape == (2, H, 5, 5) and ours.cross_attn_weights.shape == (2, H, 5, 4)
    assert (ours.cross_attn_weights[1, :, :, 2:] == 0).all()  # source padding never attended


def test_pre_ln_block_is_causal_and_caches():
    block = PreLNBlock(D, H, 4 * D).eval()
    x = torch.randn(2, 6, D)
    full = block(x, causal=True)
    changed = x.clone()
    changed[:, 4:] += 1.0
    torch.testing.assert_close(block(changed, causal=True)[:, :4], full[:, :4])
    cache = KVCache()
    steps = [block(x[:, t : t + 1], causal=True, cache=cache) for t in range(6)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)


def test_feed_forward_is_position_wise():
    ff = FeedForward(D, FF, activation="gelu")
    x = torch.randn(2, 5, D)
    torch.testing.assert_close(ff(x)[:, 2], ff(x[:, 2:3])[:, 0])
    with pytest.raises(ValueError, match="activation must be one of"):
        FeedForward(D, FF, activation="tanh")


def test_layers_store_weights_only_when_asked():
    layer = EncoderLayer(D, H, FF).eval()
    x = torch.randn(1, 3, D)
    layer(x)
    assert layer.self_attn_weights is None
    layer(x, need_weights=True)
    torch.testing.assert_close(layer.self_attn_weights.sum(-1), torch.ones(1, H, 3))


@pytest.mark.parametrize("sublayer", ["attn", "ff"])
def test_pre_ln_block_drops_out_each_sublayer_output_before_the_residual_add(sublayer):
    """x + Dropout(sublayer(LN(x))): with the sublayer's output fixed at 1, each entry adds 0 or 1 / (1 - p)."""
    torch.manual_seed(0)
    block = PreLNBlock(d_model=8, n_heads=2, d_ff=16, dropout=0.5).train()
    ones = torch.ones(2, 5, 8)
    if sublayer == "attn":
        block.attn.forward = lambda *args, **kwargs: (ones, None)
        block.ff.forward = lambda h: torch.zeros_like(h)
    else:
        block.attn.forward = lambda *args, **kwargs: (torch.zeros_like(ones), None)
        block.ff.forward = lambda h: ones
    x = torch.randint(-4, 5, (2, 5, 8)).float()  # small integers: x + 0 and x + 2 are exact in fp32
    added = block(x) - x  # (2, 5, 8): what the residual branch added
    assert set(added.unique().tolist()) == {0.0, 2.0}  # some entries dropped, the rest scaled by 1 / (1 - 0.5)
    assert torch.equal(block.eval()(x) - x, ones)  # eval mode: no dropout
