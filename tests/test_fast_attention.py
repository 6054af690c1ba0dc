"""shared.fast_attention: the online softmax, tiled attention forward and backward, split-KV decoding (notebook 15).

References: torch.softmax, F.scaled_dot_product_attention, autograd through `shared.attention`'s plain attention,
and a GPT's own attention output over its KV cache.
"""

import math

import pytest
import torch
import torch.nn.functional as F

from shared.attention import scaled_dot_product_attention as plain_attention
from shared.debug import peak_cpu_memory
from shared.fast_attention import (
    TileCounts,
    block_counts,
    merge_partials,
    online_softmax,
    online_softmax_update,
    split_kv_attention,
    tiled_attention,
    tiled_attention_backward,
    tiled_attention_forward,
)
from shared.gpt import GPT, GPTConfig
from shared.kv_cache import KVCache
from shared.masks import causal_mask, padding_mask


def qkv(*shape, dtype=torch.float32, seed=0, grad=False):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(*shape, generator=g, dtype=dtype).requires_grad_(grad) for _ in range(3))


@pytest.mark.parametrize("block", [1, 2, 4, 6, 7, 100])
def test_online_softmax_equals_softmax(block):
    x = torch.randn(3, 5, 7, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(online_softmax(x, block), x.softmax(dim=-1), rtol=0, atol=1e-6)


def test_online_softmax_is_safe_where_a_naive_exp_overflows():
    x = torch.tensor([[1e4, -1e4, 9999.0, 0.0, 1e4, -5.0]])
    naive = torch.exp(x) / torch.exp(x).sum(dim=-1, keepdim=True)
    assert naive.isnan().any()  # inf / inf
    torch.testing.assert_close(online_softmax(x, 2), x.softmax(dim=-1))


def test_update_rescales_the_old_sum_by_the_change_of_maximum():
    m, l = online_softmax_update(torch.tensor(-math.inf), torch.tensor(0.0), torch.tensor([1.0, 3.0, 2.0]))
    assert m == 3.0 and torch.isclose(l, torch.exp(torch.tensor([-2.0, 0.0, -1.0])).sum())
    m2, l2 = online_softmax_update(m, l, torch.tensor([5.0, 0.0, 4.0]))
    full = torch.tensor([1.0, 3.0, 2.0, 5.0, 0.0, 4.0])
    assert m2 == 5.0 and torch.isclose(l2, torch.exp(full - 5.0).sum())


def test_update_names_bad_input():
    with pytest.raises(ValueError, match="m and l must have the shape of scores"):
        online_softmax_update(torch.zeros(2), torch.zeros(3), torch.zeros(2, 4))
    with pytest.raises(ValueError, match="block_size"):
        online_softmax(torch.zeros(2, 4), 0)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("blocks", [(16, 16), (32, 8), (7, 13), (64, 64)])
def test_forward_equals_sdpa(causal, blocks):
    q, k, v = qkv(2, 3, 50, 16)
    out, lse = tiled_attention_forward(q, k, v, causal=causal, block_q=blocks[0], block_k=blocks[1])
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=causal), rtol=0, atol=2e-6)
    scores = q @ k.transpose(-2, -1) / 4.0
    if causal:
        scores = scores.masked_fill(~causal_mask(50), -math.inf)
    torch.testing.assert_close(lse, scores.logsumexp(dim=-1), rtol=0, atol=2e-6)


def test_causal_with_more_keys_than_queries_lines_up_the_last_query_with_the_last_key():
    q, _, _ = qkv(1, 2, 5, 8, seed=1)
    _, k, v = qkv(1, 2, 12, 8, seed=2)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=causal_mask(5, n_keys=12))
    torch.testing.assert_close(tiled_attention(q, k, v, causal=True, block_q=2, block_k=5), expected,
                               rtol=0, atol=2e-6)


def test_padding_and_fully_masked_rows_follow_the_course_convention():
    """Padding masks agree with SDPA; a row with every key masked gives a zero output, as notebook 03's attention."""
    q, k, v = qkv(2, 2, 10, 8, dtype=torch.float64)
    mask = padding_mask(torch.tensor([[5, 3, 1, 0, 0, 0, 0, 0, 0, 0], [1] * 10]), pad_id=0)  # (2, 1, 1, 10)
    mask = mask & causal_mask(10)
    mask = mask.expand(2, 2, 10, 10).clone()
    mask[1, 0, 4] = False  # one fully masked row
    expected, _ = plain_attention(q, k, v, mask)
    out = tiled_attention(q, k, v, mask=mask, block_q=3, block_k=4)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-12)
    assert (out[1, 0, 4] == 0).all()
    pad_only = padding_mask(torch.tensor([[5, 3, 1, 0, 0, 0, 0, 0, 0, 0]] * 2), pad_id=0)
    torch.testing.assert_close(tiled_attention(q, k, v, mask=pad_only, causal=True, block_q=4, block_k=3),
                               F.scaled_dot_product_attention(q, k, v, attn_mask=pad_only & causal_mask(10)))


def gradcheck_inputs():
    q, k, v = qkv(1, 2, 9, 4, dtype=torch.float64, seed=3, grad=True)
    mask = torch.ones(1, 2, 9, 9, dtype=torch.bool)
    mask[..., 7:] = False  # padded keys
    mask[0, 1, 2] = False  # a fully masked row
    return q, k, v, mask


@pytest.mark.parametrize("options", [dict(causal=True), dict(mask="padding"), dict(mask="padding", causal=True),
                                     dict()])
def test_gradcheck_float64(options):
    q, k, v, mask = gradcheck_inputs()
    options = dict(options, mask=mask) if "mask" in options else options
    assert torch.autograd.gradcheck(lambda a, b, c: tiled_attention(a, b, c, block_q=4, block_k=3, **options),
                                    (q, k, v))


def test_gradients_match_plain_autograd_in_float32_at_a_larger_size():
    q, k, v = qkv(2, 2, 333, 32, seed=4, grad=True)
    d_out = torch.randn(2, 2, 333, 32, generator=torch.Generator().manual_seed(5))
    grads = []
    for fn in (lambda: plain_attention(q, k, v, causal_mask(333))[0],
               lambda: tiled_attention(q, k, v, causal=True, block_q=64, block_k=48)):
        out = fn()
        grads.append(torch.autograd.grad(out, (q, k, v), d_out) + (out,))
    for got, expected in zip(grads[1], grads[0]):
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=2e-5)


def test_backward_function_alone_equals_autograd():
    q, k, v, mask = gradcheck_inputs()
    out, lse = tiled_attention_forward(q, k, v, mask, block_q=2, block_k=5)
    d_out = torch.randn_like(out)
    expected = torch.autograd.grad(plain_attention(q, k, v, mask)[0], (q, k, v), d_out)
    for got, want in zip(tiled_attention_backward(q, k, v, out, lse, d_out, mask, block_q=2, block_k=5), expected):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-12)


def test_double_backward_raises_instead_of_returning_wrong_second_derivatives():
    q, k, v = qkv(1, 1, 5, 3, dtype=torch.float64, grad=True)
    (dq,) = torch.autograd.grad(tiled_attention(q, k, v, block_q=2, block_k=2).pow(2).sum(), q, create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable|double backward|twice"):
        dq.sum().backward()


@pytest.mark.parametrize("name, bad", [("out", lambda o, s, d: (o[..., :-1, :], s, d)),
                                       ("lse", lambda o, s, d: (o, s[..., None], d)),
                                       ("d_out", lambda o, s, d: (o, s, d[..., :2]))])
def test_backward_function_names_a_badly_shaped_argument(name, bad):
    q, k, v = qkv(1, 2, 6, 4)
    out, lse = tiled_attention_forward(q, k, v)
    with pytest.raises(ValueError, match=f"^{name} must have shape"):
        tiled_attention_backward(q, k, v, *bad(out, lse, torch.ones_like(out)))


@pytest.mark.parametrize("args, message", [((4, 4, 0, 2, True), "block_q"), ((4, 4, 2, -1, False), "block_k"),
                                           ((0, 4, 2, 2, False), "T_q"), ((8, 4, 2, 2, True), "T_k >= T_q"),
                                           ((4, 4, 2, 2, 1), "causal must be a bool")])
def test_block_counts_names_bad_input(args, message):
    with pytest.raises(ValueError, match=message):
        block_counts(*args)


def test_causal_blocks_above_the_diagonal_are_skipped_and_counted():
    counts = TileCounts()
    q, k, v = qkv(1, 1, 128, 8)
    tiled_attention(q, k, v, causal=True, block_q=16, block_k=16, counts=counts)
    assert counts == TileCounts(computed=8 * 9 // 2, skipped=8 * 7 // 2) == block_counts(128, 128, 16, 16, True)
    assert block_counts(128, 128, 16, 16, False) == TileCounts(computed=64, skipped=0)


@pytest.mark.parametrize("shape", [(100, 100, 32, 16), (20, 50, 8, 16), (30, 30, 7, 11)])
def test_a_tile_is_skipped_exactly_when_the_causal_mask_hides_all_of_it(shape):
    T_q, T_k, bq, bk = shape
    mask = causal_mask(T_q, n_keys=T_k)[0, 0]
    expected = TileCounts()
    for i0 in range(0, T_q, bq):
        for j0 in range(0, T_k, bk):
            hidden = not mask[i0:i0 + bq, j0:j0 + bk].any()
            expected.skipped += hidden
            expected.computed += not hidden
    assert block_counts(T_q, T_k, bq, bk, causal=True) == expected


def test_half_precision_is_computed_in_float32_and_returned_in_its_dtype():
    q, k, v = qkv(1, 2, 40, 16, dtype=torch.bfloat16)
    out = tiled_attention(q, k, v, causal=True, block_q=16, block_k=16)
    assert out.dtype == torch.bfloat16
    expected = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True)
    torch.testing.assert_close(out.float(), expected, rtol=0, atol=1e-2)


@pytest.mark.parametrize("call, error, message", [
    (lambda q, k, v: tiled_attention(q, k, v, block_q=0), ValueError, "block_q"),
    (lambda q, k, v: tiled_attention(q, k, v, block_k=2.5), ValueError, "block_k"),
    (lambda q, k, v: tiled_attention(q, k, v, mask=torch.ones(6, 6)), TypeError, "mask must have dtype torch.bool"),
    (lambda q, k, v: tiled_attention(q, k, v, causal="yes"), ValueError, "causal must be a bool"),
    (lambda q, k, v: tiled_attention(q[..., :3, :], k[..., :2, :], v[..., :2, :], causal=True), ValueError,
     "T_k >= T_q"),
    (lambda q, k, v: tiled_attention(q, k[:, :1], v[:, :1]), ValueError, "repeat_kv"),
    (lambda q, k, v: tiled_attention(q, k.double(), v), TypeError, "k has dtype"),
    (lambda q, k, v: tiled_attention_forward(q, k, v, counts=3), TypeError, "counts"),
])
def test_bad_input_is_named(call, error, message):
    q, k, v = qkv(1, 2, 6, 4)
    with pytest.raises(error, match=message):
        call(q, k, v)


def test_merge_of_partials_equals_attention_over_all_keys_even_with_an_empty_block():
    q, _, _ = qkv(1, 1, 3, 4, dtype=torch.float64)
    _, k, v = qkv(1, 1, 9, 4, dtype=torch.float64, seed=1)
    mask = torch.ones(1, 1, 3, 9, dtype=torch.bool)
    mask[..., 3:6] = False  # the middle block sees no key
    parts = [tiled_attention_forward(q, k[..., j:j + 3, :], v[..., j:j + 3, :], mask[..., j:j + 3], block_q=3,
                                     block_k=3) for j in (0, 3, 6)]
    out, lse = merge_partials(torch.stack([o for o, _ in parts]), torch.stack([s for _, s in parts]))
    torch.testing.assert_close(out, plain_attention(q, k, v, mask)[0])
    with pytest.raises(ValueError, match="lses must have the shape"):
        merge_partials(torch.zeros(2, 1, 3, 4), torch.zeros(2, 1, 4))


def test_merge_of_a_row_masked_in_every_block_is_zero_with_lse_minus_inf():
    outs, lses = torch.randn(3, 2, 4, 5), torch.randn(3, 2, 4)
    lses[:, 1, 2] = -math.inf  # row (1, 2) saw no key in any block
    outs[:, 1, 2] = 0.0  # as a fully masked tiled forward leaves it
    out, lse = merge_partials(outs, lses)
    assert not out.isnan().any() and (out[1, 2] == 0).all() and torch.isneginf(lse[1, 2])
    torch.testing.assert_close(lse[0], torch.logsumexp(lses[:, 0], dim=0))


@pytest.mark.parametrize("lses, outs_dtype, message", [
    (torch.tensor([[0.0, math.inf]]), torch.float32, "lses must be finite or -inf"),
    (torch.tensor([[0.0, math.nan]]), torch.float32, "lses must be finite or -inf"),
    (torch.zeros(1, 2), torch.float64, "the same dtype"),
])
def test_merge_names_bad_lses(lses, outs_dtype, message):
    with pytest.raises((ValueError, TypeError), match=message):
        merge_partials(torch.zeros(1, 2, 3, dtype=outs_dtype), lses)


@pytest.mark.parametrize("n_kv_heads", [None, 2])
@pytest.mark.parametrize("n_splits", [1, 3, 64])
def test_split_kv_decoding_equals_the_models_own_attention_over_its_cache(n_kv_heads, n_splits):
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=20, block_size=32, n_layers=2, n_heads=4, d_model=32, n_kv_heads=n_kv_heads,
                          position="rope")).eval()
    caches = model.new_caches()
    seen = {}
    attn = model.blocks[1].attn
    attn.register_forward_pre_hook(lambda m, args, kwargs: seen.update(x=args[0]), with_kwargs=True)
    attn.register_forward_hook(lambda m, args, out: seen.update(out=out[0]))
    with torch.no_grad():
        model(torch.randint(0, 20, (2, 11)), caches=caches)  # the prompt fills the caches
        for new in (1, 3):  # one token, then three at once (causal among themselves)
            model(torch.randint(0, 20, (2, new)), caches=caches)
            q, _, _ = attn.project_qkv(seen["x"], seen["x"], seen["x"])
            positions = torch.arange(len(caches[1]) - new, len(caches[1]))
            q = attn.rope(q, positions)  # (B, H, new, d_k), rotated as the model does
            out = attn.w_o(attn.merge_heads(split_kv_attention(q, caches[1], n_splits)))
            torch.testing.assert_close(out, seen["out"], rtol=0, atol=1e-5)


def test_split_kv_decoding_names_bad_input():
    with pytest.raises(ValueError, match="cache is empty"):
        split_kv_attention(torch.zeros(1, 1, 1, 4), GPT(GPTConfig(vocab_size=5, n_layers=1)).new_caches()[0], 2)
    cache = KVCache()
    cache.update(*qkv(1, 2, 5, 4)[:2])
    with pytest.raises(TypeError, match="q has dtype torch.float64 but the cache holds torch.float32"):
        split_kv_attention(torch.zeros(1, 2, 1, 4, dtype=torch.float64), cache, 2)


def test_split_kv_decoding_with_a_short_last_block_equals_attention_over_every_key():
    q, _, _ = qkv(1, 2, 3, 4, seed=2)
    k, v, _ = qkv(1, 2, 13, 4, seed=3)
    cache = KVCache()
    cache.update(k, v)
    expected, _ = plain_attention(q, k, v, causal_mask(3, n_keys=13))
    for n_splits in (5, 4, 13):  # blocks of 3, 4 and 1 keys: 13 = 4 * 3 + 1 and 3 * 4 + 1, a last block of one key
        torch.testing.assert_close(split_kv_attention(q, cache, n_splits), expected, rtol=0, atol=1e-6)


def test_peak_memory_reads_known_allocations_exactly_and_tiling_saves_the_square():
    def two():
        a, b = torch.empty(1000, 1000), torch.empty(250, 1000)  # 4,000,000 + 1,000,000 bytes
        return a, b
    assert peak_cpu_memory(two).peak == 5_000_000
    q, k, v = qkv(1, 1, 1024, 32, grad=True)
    plain = peak_cpu_memory(lambda: plain_attention(q, k, v, causal_mask(1024))[0].sum().backward())
    q.grad = k.grad = v.grad = None
    tiled = peak_cpu_memory(lambda: tiled_attention(q, k, v, causal=True, block_q=128, block_k=128).sum().backward())
    assert plain.peak > 3 * 1024 * 1024 * 4 and tiled.peak < 1024 * 1024 * 4 / 2  # several (T, T) vs under half of one
    assert any(size == 1024 * 1024 * 4 for _, size in plain.large) and not tiled.large
    with pytest.raises(TypeError, match="fn must be a callable"):
        peak_cpu_memory(3)


def test_peak_memory_names_the_operations_that_ran():
    q, k, v = qkv(1, 1, 64, 8, grad=True)
    report = peak_cpu_memory(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward())
    assert "aten::scaled_dot_product_attention" in report.operations and "aten::sum" in report.operations
    assert "aten::softmax" not in report.operations  # a fused kernel, not notebook 01's steps
    assert "aten::softmax" in peak_cpu_memory(lambda: plain_attention(q, k, v)).operations
