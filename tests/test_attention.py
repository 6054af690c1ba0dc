import pytest
import torch
import torch.nn.functional as F
from torch import nn

from shared.attention import MultiHeadAttention, scaled_dot_product_attention
from shared.explicit_attention import ExplicitMultiHeadAttention, copy_explicit_to_fused, copy_fused_to_explicit
from shared.kv_cache import KVCache
from shared.masks import causal_mask, padding_mask

from .helpers import copy_mha_to_torch

B, T, D, H = 3, 7, 32, 4


@pytest.fixture(autouse=True)
def seed():
    torch.manual_seed(0)


def random_padding_mask():
    lengths = torch.tensor([T, 4, 1])
    tokens = (torch.arange(T)[None] < lengths[:, None]).long()  # 1 = token, 0 = pad
    return padding_mask(tokens, pad_id=0)  # (B, 1, 1, T)


@pytest.mark.parametrize("mask_kind", ["none", "padding", "causal", "both", "per_head"])
def test_sdpa_matches_torch(mask_kind):
    q, k, v = (torch.randn(B, H, T, D // H) for _ in range(3))
    masks = {
        "none": None,
        "padding": random_padding_mask(),
        "causal": causal_mask(T),
        "both": random_padding_mask() & causal_mask(T),
        "per_head": torch.rand(B, H, T, T) > 0.3,
    }
    mask = masks[mask_kind]
    if mask is not None:
        mask = mask | torch.eye(T, dtype=torch.bool)  # keep every row partly open: torch's reference is defined
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(out, expected, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, H, T))
    if mask is not None:
        assert (weights[~mask.expand_as(weights)] == 0).all()


def test_sdpa_weights_are_softmax_of_scaled_scores():
    q, k, v = torch.randn(2, 5, 8), torch.randn(2, 6, 8), torch.randn(2, 6, 3)
    out, weights = scaled_dot_product_attention(q, k, v)
    expected = torch.softmax(q @ k.transpose(-2, -1) / 8**0.5, dim=-1)
    torch.testing.assert_close(weights, expected)
    assert out.shape == (2, 5, 3)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_fully_masked_rows_are_finite(dtype):
    q, k, v = (torch.randn(2, H, 4, 8, dtype=dtype) for _ in range(3))
    mask = torch.ones(2, 1, 4, 4, dtype=torch.bool)
    mask[0, 0, 1] = False  # query 1 of batch 0 may attend to nothing
    mask[1] = False  # every row of batch 1 fully masked
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    assert torch.isfinite(out).all() and torch.isfinite(weights).all()
    assert (out[0, :, 1] == 0).all() and (weights[1] == 0).all()
    mha = MultiHeadAttention(32, H).to(dtype)
    x = torch.randn(2, 4, 32, dtype=dtype)
    for need_weights in (False, True):
        y, _ = mha(x, mask=mask, need_weights=need_weights)
        assert torch.isfinite(y).all()


def test_explicit_and_fused_agree_after_copy_both_ways():
    explicit, fused = ExplicitMultiHeadAttention(D, H), MultiHeadAttention(D, H)
    assert sum(p.numel() for p in explicit.parameters()) == sum(p.numel() for p in fused.parameters())
    x, memory = torch.randn(B, T, D), torch.randn(B, T + 2, D)
    mask = padding_mask(torch.tensor([[1] * (T + 2), [1] * 5 + [0] * 4, [1] * 2 + [0] * 7]), 0)
    copy_explicit_to_fused(explicit, fused)
    for kwargs in ({}, {"causal": True}):
        a, wa = explicit(x, need_weights=True, **kwargs)
        b, wb = fused(x, need_weights=True, **kwargs)
        assert (a - b).abs().max() <= 1e-6 and (wa - wb).abs().max() <= 1e-6
    a, _ = explicit(x, memory, memory, mask)
    b, _ = fused(x, memory, memory, mask)
    assert (a - b).abs().max() <= 1e-6
    other = ExplicitMultiHeadAttention(D, H)
    copy_fused_to_explicit(fused, other)
    for p, q in zip(explicit.parameters(), other.parameters()):
        assert torch.equal(p, q)


def test_explicit_takes_per_head_masks():
    explicit, fused = ExplicitMultiHeadAttention(D, H), MultiHeadAttention(D, H)
    copy_explicit_to_fused(explicit, fused)
    x = torch.randn(B, T, D)
    mask = (torch.rand(B, H, T, T) > 0.5) | torch.eye(T, dtype=torch.bool)
    torch.testing.assert_close(explicit(x, mask=mask)[0], fused(x, mask=mask)[0], atol=1e-6, rtol=0)


@pytest.mark.parametrize("causal", [False, True])
def test_fast_path_equals_weights_path(causal):
    mha = MultiHeadAttention(D, H)
    x = torch.randn(B, T, D)
    mask = random_padding_mask() | torch.eye(T, dtype=torch.bool)
    for m in (None, mask):
        fast, none = mha(x, mask=m, causal=causal)
        slow, weights = mha(x, mask=m, causal=causal, need_weights=True)
        assert none is None and weights.shape == (B, H, T, T)
        torch.testing.assert_close(fast, slow, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("cls", [MultiHeadAttention, ExplicitMultiHeadAttention])
@pytest.mark.parametrize("shape", [(T,), (T, T), (H, T, T)])
def test_masks_of_fewer_dims_broadcast_on_every_path(cls, shape):
    """A (T_k,), (T_q, T_k) or (H, T_q, T_k) mask means the same as its 4-D form, on the fused kernel (no weights)
    and step by step (weights); a (T_k,) mask used to crash the fused kernel."""
    mha = cls(D, H)
    x = torch.randn(B, T, D)
    mask = torch.rand(shape) > 0.4
    mask[..., 0] = True  # every query keeps a key, also under the causal mask
    as_4d = mask.reshape((1,) * (4 - mask.dim()) + shape)
    for need_weights in (False, True):
        for causal in (False, True):
            out, _ = mha(x, mask=mask, causal=causal, need_weights=need_weights)
            torch.testing.assert_close(out, mha(x, mask=as_4d, causal=causal, need_weights=need_weights)[0])
            if need_weights:
                assert torch.equal(mha(x, mask=mask, need_weights=True)[1] == 0, ~as_4d.expand(B, H, T, T))


def test_plain_causal_self_attention_takes_the_fused_kernel(monkeypatch):
    """Causal self-attention without a mask or weights runs torch's fused kernel with is_causal=True, reading the
    shared KV heads itself (enable_gqa); a mask goes to it as attn_mask; weights are computed step by step."""
    calls = []
    fused = F.scaled_dot_product_attention
    monkeypatch.setattr(F, "scaled_dot_product_attention", lambda *args, **kwargs: calls.append(kwargs) or fused(
        *args, **kwargs))
    mha, x = MultiHeadAttention(D, H, n_kv_heads=2), torch.randn(B, T, D)
    mha(x, causal=True)
    assert len(calls) == 1 and calls[0].get("is_causal") is True and calls[0].get("attn_mask") is None
    assert calls[0].get("enable_gqa") is True
    mha(x, mask=random_padding_mask())
    assert len(calls) == 2 and calls[1].get("attn_mask") is not None and not calls[1].get("is_causal")
    mha(x, causal=True, need_weights=True)
    assert len(calls) == 2


def test_explicit_attention_drops_weights_in_training_only():
    """Dropout on each head's weights: in training about half are zero and the rest are doubled (p = 0.5)."""
    explicit, x = ExplicitMultiHeadAttention(D, H, dropout=0.5), torch.randn(B, T, D)
    out, kept = explicit.eval()(x, need_weights=True)
    dropped_out, dropped = explicit.train()(x, need_weights=True)
    zero = dropped == 0
    assert 0.35 < zero.float().mean() < 0.65  # no mask: every weight of the eval pass is > 0
    torch.testing.assert_close(dropped[~zero], 2 * kept[~zero])
    assert not torch.allclose(dropped_out, out, atol=1e-3)


def test_matches_torch_multihead_attention():
    ours = MultiHeadAttention(D, H)
    theirs = nn.MultiheadAttention(D, H, batch_first=True)
    copy_mha_to_torch(ours, theirs)
    x, memory = torch.randn(B, T, D), torch.randn(B, 5, D)
    key_pad = torch.tensor([[True] * 5, [True] * 3 + [False] * 2, [True] + [False] * 4])  # True = real token
    ours_out, ours_w = ours(x, memory, memory, key_pad[:, None, None, :], need_weights=True)
    # torch's masks mean the opposite: True = "do not attend"
    theirs_out, theirs_w = theirs(x, memory, memory, key_padding_mask=~key_pad, average_attn_weights=False)
    torch.testing.assert_close(ours_out, theirs_out, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(ours_w, theirs_w, atol=1e-6, rtol=1e-5)
    causal_out, _ = ours(x, causal=True)
    theirs_causal, _ = theirs(x, x, x, attn_mask=~causal_mask(T)[0, 0])
    torch.testing.assert_close(causal_out, theirs_causal, atol=1e-6, rtol=1e-5)


def test_kv_cache_matches_full_causal_pass():
    mha = MultiHeadAttention(D, H).eval()
    x = torch.randn(2, T, D)
    full, _ = mha(x, causal=True)
    cache = KVCache()
    first, _ = mha(x[:, :3], causal=True, cache=cache)  # prompt
    chunk, _ = mha(x[:, 3:5], causal=True, cache=cache)  # two at once: needs the offset causal mask
    steps = [mha(x[:, t : t + 1], causal=True, cache=cache)[0] for t in range(5, T)]
    assert len(cache) == T
    torch.testing.assert_close(torch.cat([first, chunk, *steps], dim=1), full, atol=1e-6, rtol=1e-5)


def test_causality_changing_the_future_never_changes_the_past():
    mha = MultiHeadAttention(D, H)
    x = torch.randn(1, T, D)
    for t in range(T - 1):
        changed = x.clone()
        changed[:, t + 1 :] = torch.randn(1, T - t - 1, D)
        for need_weights in (False, True):
            a, _ = mha(x, causal=True, need_weights=need_weights)
            b, _ = mha(changed, causal=True, need_weights=need_weights)
            torch.testing.assert_close(a[:, : t + 1], b[:, : t + 1])
            assert not torch.allclose(a[:, t + 1 :], b[:, t + 1 :])


@pytest.mark.parametrize("cls", [MultiHeadAttention, ExplicitMultiHeadAttention])
def test_bad_sizes_are_rejected(cls):
    with pytest.raises(ValueError, match="d_model .*divisible by n_heads"):
        cls(10, 3)
    with pytest.raises(ValueError, match="n_heads must be a positive int"):
        cls(8, 0)
    mha = cls(8, 2)
    with pytest.raises(ValueError, match="query must have shape"):
        mha(torch.randn(2, 5, 6))
    with pytest.raises(ValueError, match="query must have shape"):
        mha(torch.randn(5, 8))
    with pytest.raises(TypeError, match="query must be a floating-point"):
        mha(torch.ones(2, 5, 8, dtype=torch.long))
    with pytest.raises(ValueError, match="mask of shape .* cannot broadcast"):
        mha(torch.randn(2, 5, 8), mask=torch.ones(2, 1, 1, 4, dtype=torch.bool))
    with pytest.raises(TypeError, match="mask must have dtype torch.bool"):
        mha(torch.randn(2, 5, 8), mask=torch.ones(2, 1, 1, 5))


def test_sdpa_bad_inputs():
    q = torch.randn(2, 3, 4)
    with pytest.raises(ValueError, match="q and k must share"):
        scaled_dot_product_attention(q, torch.randn(2, 3, 5), torch.randn(2, 3, 4))
    with pytest.raises(ValueError, match="k and v must have the same length"):
        scaled_dot_product_attention(q, q, torch.randn(2, 4, 4))
    with pytest.raises(TypeError, match="k must be a torch.Tensor"):
        scaled_dot_product_attention(q, [1, 2], q)
    with pytest.raises(ValueError, match="would enlarge"):
        scaled_dot_product_attention(q, q, q, torch.ones(5, 2, 3, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="same sizes"):
        copy_explicit_to_fused(ExplicitMultiHeadAttention(8, 2), MultiHeadAttention(8, 4))
