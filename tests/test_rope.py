"""RoPE: the complex-number formula, the relative-position property, and the KV-cache hook in attention."""

import pytest
import torch

from shared.attention import MultiHeadAttention
from shared.kv_cache import KVCache
from shared.positions import RotaryEmbedding, apply_rope, rope_frequencies


def complex_rope(x, positions, base=10000.0):
    """Direct formula: channel pair (2i, 2i+1) as a complex number times exp(i * m * base^(-2i/d))."""
    d = x.size(-1)
    z = torch.view_as_complex(x.double().reshape(*x.shape[:-1], d // 2, 2).contiguous())
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    rotation = torch.polar(torch.ones_like(theta), positions.double()[..., None] * theta)
    if positions.dim() == 2:
        rotation = rotation[:, None]  # (B, 1, T, d/2)
    return torch.view_as_real(z * rotation).reshape(x.shape)


def test_matches_complex_formula():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 7, 8)
    rope = RotaryEmbedding(8)
    positions = torch.tensor([0, 1, 2, 5, 9, 40, 100])
    torch.testing.assert_close(rope(x, positions), complex_rope(x, positions).float(), atol=1e-5, rtol=1e-5)
    per_row = torch.randint(0, 500, (2, 7))
    torch.testing.assert_close(rope(x, per_row), complex_rope(x, per_row).float(), atol=1e-4, rtol=1e-5)


def test_position_zero_is_identity_and_norms_are_kept():
    torch.manual_seed(1)
    x = torch.randn(1, 2, 5, 16)
    rope = RotaryEmbedding(16)
    assert torch.equal(rope(x, torch.zeros(5, dtype=torch.long)), x)
    out = rope(x, torch.arange(5) * 13)
    torch.testing.assert_close(out.norm(dim=-1), x.norm(dim=-1))


def test_dot_product_depends_only_on_offset():
    torch.manual_seed(2)
    q, k = torch.randn(1, 1, 1, 32), torch.randn(1, 1, 1, 32)
    rope = RotaryEmbedding(32)

    def score(m, n):
        return (rope(q, torch.tensor([m])) * rope(k, torch.tensor([n]))).sum().item()

    for offset in (0, 3, -5, 17):
        values = [score(m + offset, m) for m in (0, 7, 50, 300)]
        assert max(values) - min(values) < 1e-4, (offset, values)
    assert abs(score(3, 0) - score(0, 0)) > 1e-3  # and it does depend on the offset


def test_dtype_and_shape_kept():
    x = torch.randn(2, 2, 4, 8, dtype=torch.bfloat16)
    out = RotaryEmbedding(8)(x, torch.arange(4))
    assert out.dtype == torch.bfloat16 and out.shape == x.shape
    assert RotaryEmbedding(8).state_dict() == {}  # no parameters, nothing added to checkpoints


def test_bad_input():
    rope = RotaryEmbedding(8)
    with pytest.raises(ValueError, match="d_k"):
        RotaryEmbedding(7)
    with pytest.raises(ValueError, match="base"):
        rope_frequencies(8, base=1.0)
    with pytest.raises(TypeError, match="positions"):
        rope(torch.randn(1, 1, 3, 8), torch.arange(3.0))
    with pytest.raises(ValueError, match="positions"):
        rope(torch.randn(1, 1, 3, 8), torch.arange(4))
    with pytest.raises(ValueError, match="d_k=8"):
        rope(torch.randn(1, 1, 3, 6), torch.arange(3))
    with pytest.raises(TypeError, match="x must"):
        apply_rope(torch.ones(3, 8, dtype=torch.long), torch.arange(3), rope.inv_freq)


@pytest.mark.parametrize("dtype", [torch.bool, torch.complex64])
def test_position_ids_must_be_integers(dtype):
    """A bool id would be read as 0 or 1 and a complex one lose its imaginary part: both raise TypeError."""
    positions = torch.tensor([1, 0, 1]).to(dtype)
    with pytest.raises(TypeError, match=r"positions must be an integer tensor"):
        apply_rope(torch.randn(1, 1, 3, 8), positions, rope_frequencies(8))
    with pytest.raises(TypeError, match=r"positions must be an integer tensor"):
        MultiHeadAttention(16, 2, rope=True)(torch.randn(1, 3, 16), positions=positions)
    with pytest.raises(TypeError, match=r"positions must be an integer tensor"):
        MultiHeadAttention(16, 2, alibi=True)(torch.randn(1, 3, 16), positions=positions)


def test_attention_rope_kv_cache_equivalence():
    torch.manual_seed(3)
    attn = MultiHeadAttention(16, 4, rope=True).eval()
    x = torch.randn(2, 9, 16)
    full, _ = attn(x, causal=True)
    cache, steps = KVCache(), []
    out, _ = attn(x[:, :4], causal=True, cache=cache)  # a prompt of 4, then one token at a time
    steps.append(out)
    for t in range(4, 9):
        out, _ = attn(x[:, t : t + 1], causal=True, cache=cache)
        steps.append(out)
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)
    with_weights, weights = attn(x, causal=True, need_weights=True)
    torch.testing.assert_close(with_weights, full, atol=1e-5, rtol=1e-5)
    assert weights.shape == (2, 4, 9, 9)


def test_attention_rope_is_relative_and_takes_positions():
    torch.manual_seed(4)
    attn = MultiHeadAttention(16, 2, rope=True).eval()
    x = torch.randn(1, 6, 16)
    base, _ = attn(x, causal=True)
    shifted, _ = attn(x, causal=True, positions=torch.arange(6) + 37)  # the same offsets: the same output
    torch.testing.assert_close(shifted, base, atol=1e-5, rtol=1e-4)
    spread, _ = attn(x, causal=True, positions=torch.tensor([[0, 2, 5, 6, 9, 20]]))
    assert not torch.allclose(spread, base, atol=1e-4)
    plain = MultiHeadAttention(16, 2)
    plain.load_state_dict(attn.state_dict())  # rope adds no parameters
    assert not torch.allclose(plain(x, causal=True)[0], base, atol=1e-4)
    with pytest.raises(ValueError, match="positions"):
        plain(x, positions=torch.arange(6))
    with pytest.raises(ValueError, match="self-attention"):
        attn(x, torch.randn(1, 4, 16))


def test_batched_positions_name_a_wrong_shape_and_a_batch_mismatch_apart():
    """(B, T) positions need a 4-dim x; a right-shaped x whose batch size differs is told as such, not as a shape."""
    inv_freq = rope_frequencies(16)
    with pytest.raises(ValueError, match=r"need x of shape \(B, H, T, d_k\), got \(12, 16\)"):
        apply_rope(torch.randn(12, 16), torch.arange(12)[None], inv_freq)
    with pytest.raises(ValueError, match=r"positions has batch size 1, but x has batch size 4") as caught:
        apply_rope(torch.randn(4, 4, 12, 16), torch.arange(12)[None], inv_freq)
    assert "need x of shape" not in str(caught.value)
    attention = MultiHeadAttention(64, 4, bias=False, rope=True)
    with pytest.raises(ValueError, match=r"positions has batch size 1, but .* has batch size 4"):
        attention(torch.randn(4, 12, 64), causal=True, positions=torch.arange(12)[None])
    rotated = apply_rope(torch.randn(4, 4, 12, 16), torch.arange(12).expand(4, 12), inv_freq)  # one row each: fine
    assert rotated.shape == (4, 4, 12, 16)
