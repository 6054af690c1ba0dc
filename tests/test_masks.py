import pytest
import torch

from shared.masks import causal_mask, check_mask, combine_masks, decoder_mask, padding_mask
from shared.transformer import Transformer, TransformerConfig


def test_padding_mask_marks_real_keys():
    tokens = torch.tensor([[5, 6, 0, 0], [7, 8, 9, 1]])
    mask = padding_mask(tokens, pad_id=0)
    assert mask.shape == (2, 1, 1, 4) and mask.dtype == torch.bool
    assert mask[:, 0, 0].tolist() == [[True, True, False, False], [True, True, True, True]]


def test_padding_mask_uses_the_given_pad_id():
    """With pad_id 2, id 0 is an ordinary token: only the 2s are hidden, in padding_mask, decoder_mask and the
    Transformer's source mask."""
    tokens = torch.tensor([[0, 5, 2, 2], [7, 0, 0, 2]])
    expected = [[True, True, False, False], [True, True, True, False]]
    assert padding_mask(tokens, pad_id=2)[:, 0, 0].tolist() == expected
    assert decoder_mask(tokens, pad_id=2)[:, 0, -1].tolist() == expected  # the last query sees every real key
    model = Transformer(TransformerConfig(8, 8, d_model=8, n_heads=2, n_encoder_layers=1, n_decoder_layers=1,
                                          d_ff=8, pad_id=2))
    assert model.src_mask(tokens)[:, 0, 0].tolist() == expected


def test_causal_mask_is_lower_triangular_and_aligns_last_query_with_last_key():
    mask = causal_mask(4)
    assert mask.shape == (1, 1, 4, 4)
    assert torch.equal(mask[0, 0], torch.tril(torch.ones(4, 4, dtype=torch.bool)))
    cached = causal_mask(2, n_keys=5)[0, 0]  # two new queries at positions 3 and 4
    assert cached.tolist() == [[True, True, True, True, False], [True, True, True, True, True]]


def test_combined_decoder_mask():
    tgt = torch.tensor([[1, 4, 5, 0]])
    mask = decoder_mask(tgt, pad_id=0)
    assert mask.shape == (1, 1, 4, 4)
    expected = torch.tril(torch.ones(4, 4, dtype=torch.bool))
    expected[:, 3] = False  # nobody attends to the padding key
    assert torch.equal(mask[0, 0], expected)
    assert combine_masks(None, None) is None
    assert torch.equal(combine_masks(None, causal_mask(3)), causal_mask(3))


def test_bad_masks_and_inputs():
    with pytest.raises(TypeError, match="dtype torch.bool"):
        check_mask(torch.ones(1, 1, 2, 2))
    with pytest.raises(ValueError, match="cannot broadcast"):
        check_mask(torch.ones(3, 1, 1, 2, dtype=torch.bool), (2, 4, 2, 2))
    with pytest.raises(ValueError, match="at most 4 dims"):
        check_mask(torch.ones(1, 1, 1, 2, 2, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"tokens must be a \(B, T\) integer tensor"):
        padding_mask(torch.tensor([1, 2, 0]), 0)
    with pytest.raises(ValueError, match="integer tensor of token ids"):
        padding_mask(torch.ones(2, 3), 0)
    with pytest.raises(ValueError, match="integer tensor of token ids"):
        padding_mask(torch.zeros(1, 2, dtype=torch.complex64), 0)
    with pytest.raises(ValueError, match="size must be a positive int"):
        causal_mask(0)
    with pytest.raises(ValueError, match="n_keys must be an int >= 4 \\(size=4"):
        causal_mask(4, n_keys=2)
