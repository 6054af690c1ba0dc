"""Mask shapes both attention modules accept, and fully masked rows on the fused fast path."""

import pytest
import torch

from shared.attention import MultiHeadAttention
from shared.explicit_attention import ExplicitMultiHeadAttention, copy_explicit_to_fused

B, T, D, H = 2, 5, 16, 4


@pytest.fixture(autouse=True)
def seed():
    torch.manual_seed(0)


def pair():
    explicit, fused = ExplicitMultiHeadAttention(D, H), MultiHeadAttention(D, H)
    copy_explicit_to_fused(explicit, fused)
    return explicit, fused


@pytest.mark.parametrize("shape", [(H, T, T), (1, H, T, T), (B, H, T, T), (T, T), (B, 1, 1, T), (1, T)])
def test_explicit_accepts_every_mask_the_fused_module_accepts(shape):
    explicit, fused = pair()
    x = torch.randn(B, T, D)
    mask = (torch.rand(shape) > 0.4) | torch.ones(shape, dtype=torch.bool).tril()[..., : shape[-1]]
    a, wa = explicit(x, mask=mask, need_weights=True)
    b, wb = fused(x, mask=mask, need_weights=True)
    torch.testing.assert_close(a, b, atol=1e-6, rtol=0)
    torch.testing.assert_close(wa, wb, atol=1e-6, rtol=0)
    assert (wa.masked_select(~mask.expand(B, H, T, T)) == 0).all()  # each head got its own mask


def test_explicit_per_head_mask_differs_between_heads():
    explicit, _ = pair()
    x = torch.randn(B, T, D)
    mask = torch.ones(H, T, T, dtype=torch.bool)
    mask[0] = torch.eye(T, dtype=torch.bool)  # head 0: each query sees only itself
    _, weights = explicit(x, mask=mask, need_weights=True)
    assert torch.equal(weights[:, 0], torch.eye(T).expand(B, T, T))
    assert (weights[:, 1:] > 0).all()


def test_fast_path_gives_zero_attention_for_fully_masked_rows():
    _, fused = pair()
    x = torch.randn(B, T, D)
    mask = torch.ones(B, 1, T, T, dtype=torch.bool)
    mask[0, 0, 2] = False  # query 2 of batch 0 may attend to nothing
    mask[1] = False  # every query of batch 1
    fast, _ = fused(x, mask=mask)  # F.scaled_dot_product_attention (torch >= 2.5: zeros, earlier: NaN)
    slow, weights = fused(x, mask=mask, need_weights=True)
    torch.testing.assert_close(fast, slow, atol=1e-6, rtol=1e-5)
    bias_only = fused.w_o.bias.expand(T, D)  # attention output 0 -> W^O 0 + b
    torch.testing.assert_close(fast[1], bias_only)
    torch.testing.assert_close(fast[0, 2], fused.w_o.bias)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_alibi_gives_zeros_for_fully_masked_rows_with_and_without_weights(dtype):
    """A left-padded causal batch: the first queries of row 0 may attend to nothing (issue 17, section 5.4).

    The fused kernel took ALiBi's float mask (finfo.min where masked), whose softmax is uniform on such a row:
    it returned the mean of v where the step-by-step path returns zeros.
    """
    attn = MultiHeadAttention(D, H, alibi=True).eval().to(dtype)
    x = torch.randn(B, T, D, dtype=dtype)
    pad = torch.tensor([[False, False, True, True, True], [True] * T])[:, None, None, :]  # (B, 1, 1, T): 2 pads
    with torch.no_grad():
        fast, _ = attn(x, mask=pad, causal=True)
        slow, weights = attn(x, mask=pad, causal=True, need_weights=True)
    assert (weights[0, :, :2] == 0).all()  # queries 0 and 1 of row 0 see only padding
    torch.testing.assert_close(fast[0, :2], attn.w_o.bias.expand(2, D), atol=0, rtol=0)  # zero heads -> W^O 0 + b
    tolerance = {"atol": 1e-6, "rtol": 1e-5} if dtype == torch.float32 else {"atol": 2e-3, "rtol": 2e-3}
    torch.testing.assert_close(fast, slow, **tolerance)
