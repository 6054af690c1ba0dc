"""Issue 24, the model layer: bad input gets a clear error naming the argument, never a silent wrong answer or NaN.

Items 4 (the additive position layers), 5 (sdpa's NaN cases), 7 (flags that are not bools), 8 (max_position below
block_size), 10 (the (B, T_k) mask trap, a KV cache of another dtype) and the obscure errors of the model files.
"""

import inspect

import pytest
import torch

import shared.masks
from shared.attention import MultiHeadAttention, scaled_dot_product_attention
from shared.explicit_attention import ExplicitMultiHeadAttention
from shared.gpt import GPT, GPTConfig
from shared.kv_cache import KVCache
from shared.layers import stack_attention_weights
from shared.norms import make_norm
from shared.positions import (
    LearnedPositionalEmbedding,
    ScaledEmbedding,
    SinusoidalPositionalEncoding,
    alibi_bias,
    alibi_slopes,
    apply_rope,
    position_embedding,
    rope_frequencies,
)

INF = float("inf")


@pytest.fixture(autouse=True)
def seed():
    torch.manual_seed(0)


def tiny_gpt(**options):
    return GPT(GPTConfig(vocab_size=10, block_size=8, n_layers=2, n_heads=2, d_model=8, **options)).eval()


POSITION_LAYERS = {"sinusoidal": lambda: SinusoidalPositionalEncoding(8, max_len=16),
                   "learned": lambda: LearnedPositionalEmbedding(8, max_len=16)}


# ---------------------------------------------------------------- item 4: the additive position layers


@pytest.mark.parametrize("kind", POSITION_LAYERS)
def test_position_layers_refuse_x_of_another_width(kind):
    """x (2, 3, 1) broadcast against the (T, 8) table into a (2, 3, 8) result."""
    module = POSITION_LAYERS[kind]()
    for x in (torch.randn(2, 3, 1), torch.randn(2, 3, 16), torch.randn(3, 8)):
        with pytest.raises(ValueError, match=r"x must have shape \(B >= 1, T >= 1, d_model=8\)"):
            module(x)
    assert module(torch.randn(2, 3, 8)).shape == (2, 3, 8)


@pytest.mark.parametrize("kind", POSITION_LAYERS)
@pytest.mark.parametrize("dtype", [torch.int64, torch.bool])
def test_position_layers_refuse_integer_x(kind, dtype):
    """An int64 x gave an int64 result: the positions rounded away."""
    module = POSITION_LAYERS[kind]()
    with pytest.raises(TypeError, match="x must be a floating-point tensor"):
        module(torch.ones(2, 3, 8, dtype=dtype))


def test_the_two_position_tables_take_their_sizes_in_one_order():
    """Sinusoidal took (d_model, max_len), Learned (max_len, d_model): a swapped call built the wrong table."""
    for cls in (SinusoidalPositionalEncoding, LearnedPositionalEmbedding):
        assert list(inspect.signature(cls).parameters) == ["d_model", "max_len"]
    learned = LearnedPositionalEmbedding(8, 16)
    assert learned.embedding.weight.shape == (16, 8) and learned.max_len == 16
    assert LearnedPositionalEmbedding(8, max_len=16).embedding.weight.shape == (16, 8)
    assert position_embedding("learned", 16, 8).embedding.weight.shape == (16, 8)  # (kind, n_positions, d_model)
    assert SinusoidalPositionalEncoding(8, 16).table.shape == (16, 8)


# ---------------------------------------------------------------- item 5: sdpa's NaN cases


def test_sdpa_refuses_d_k_zero():
    """q k^T / sqrt(0) = 0 / 0: every output was NaN."""
    q, v = torch.randn(2, 3, 0), torch.randn(2, 3, 4)
    with pytest.raises(ValueError, match="d_k must be a positive int"):
        scaled_dot_product_attention(q, q, v)


def test_a_fully_minus_inf_bias_row_is_a_fully_masked_row():
    """torch's float masks use -inf for 'may not attend': a row of -inf was NaN, now what a bool mask gives."""
    q, k, v = torch.randn(2, 2, 3, 4), torch.randn(2, 2, 5, 4), torch.randn(2, 2, 5, 6)
    mask = torch.tensor([[True, True, False, True, False], [False] * 5, [True] * 5])  # (T_q, T_k)
    ramp = torch.linspace(-1, 1, 15).view(3, 5)  # finite bias values
    bias = ramp.masked_fill(~mask, -INF)
    out, weights = scaled_dot_product_attention(q, k, v, bias=bias)
    expected_out, expected_weights = scaled_dot_product_attention(q, k, v, mask=mask, bias=ramp)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, expected_out)
    torch.testing.assert_close(weights, expected_weights)
    assert (out[:, :, 1] == 0).all() and (weights[:, :, 1] == 0).all()  # the course's fully masked row: zeros
    both, _ = scaled_dot_product_attention(q, k, v, mask=torch.ones(5, dtype=torch.bool), bias=bias)  # mask + bias
    torch.testing.assert_close(both, expected_out)


@pytest.mark.parametrize("bad", [INF, float("nan")])
def test_sdpa_refuses_a_bias_of_plus_inf_or_nan(bad):
    q = torch.randn(1, 2, 3, 4)
    bias = torch.zeros(3, 3)
    bias[0, 0] = bad
    with pytest.raises(ValueError, match=r"bias must hold finite values or -inf"):
        scaled_dot_product_attention(q, q, q, bias=bias)


def test_sdpa_refuses_mixed_dtypes_by_name():
    """fp16 q with fp32 k, or bf16 q with an fp32 bias, failed in torch: "expected scalar type Half but found Float"."""
    q = torch.randn(1, 2, 3, 4)
    with pytest.raises(TypeError, match=r"k has dtype torch.float32, but q has dtype torch.float16"):
        scaled_dot_product_attention(q.half(), q, q.half())
    with pytest.raises(TypeError, match=r"v has dtype torch.float32, but q has dtype torch.bfloat16"):
        scaled_dot_product_attention(q.bfloat16(), q.bfloat16(), q)
    with pytest.raises(TypeError, match=r"bias has dtype torch.float32, but q has dtype torch.bfloat16"):
        scaled_dot_product_attention(q.bfloat16(), q.bfloat16(), q.bfloat16(), bias=torch.zeros(3, 3))
    with torch.autocast("cpu", dtype=torch.bfloat16):  # autocast casts the operands itself: accepted
        out, _ = scaled_dot_product_attention(q.bfloat16(), q, q, bias=torch.zeros(3, 3))
    assert torch.isfinite(out.float()).all()


@pytest.mark.parametrize("need_weights", [False, True])
def test_the_courses_alibi_bias_works_in_bf16(need_weights):
    """The bias MultiHeadAttention builds is cast to q's dtype: a bf16 model, and bf16 autocast training, still run."""
    model = tiny_gpt(position="alibi").train()
    tokens = torch.randint(0, 10, (2, 6))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(tokens, need_weights=need_weights)
    logits.float().logsumexp(-1).mean().backward()
    assert torch.isfinite(logits.float()).all()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    bf16_logits = model.to(torch.bfloat16).eval()(tokens, need_weights=need_weights)  # no autocast: bf16 throughout
    assert bf16_logits.dtype == torch.bfloat16 and torch.isfinite(bf16_logits.float()).all()


# ---------------------------------------------------------------- item 7: flags that are not bools


@pytest.mark.parametrize("attention", [MultiHeadAttention(8, 2), ExplicitMultiHeadAttention(8, 2)],
                         ids=["fused", "explicit"])
@pytest.mark.parametrize("flag", ["causal", "need_weights"])
def test_attention_flags_must_be_bools(attention, flag):
    """causal="no" was causal and need_weights="no" returned weights: a non-empty string is truthy."""
    for bad in ("no", 0, 1, None):
        with pytest.raises(ValueError, match=f"{flag} must be a bool, got {bad!r}"):
            attention(torch.randn(2, 3, 8), **{flag: bad})


def test_gpt_need_weights_must_be_a_bool():
    with pytest.raises(ValueError, match="need_weights must be a bool, got 'no'"):
        tiny_gpt()(torch.randint(0, 10, (1, 3)), need_weights="no")


# ---------------------------------------------------------------- item 8: max_position below block_size


@pytest.mark.parametrize("position", ["learned", "sinusoidal", "rope", "alibi", "none"])
def test_max_position_must_cover_the_block(position):
    """max_position=4 with block_size=8 was accepted, and failed only once a sequence passed 4 tokens."""
    with pytest.raises(ValueError, match=r"GPTConfig.max_position must be .*>= 8.*GPTConfig.block_size.*got 4"):
        GPTConfig(vocab_size=5, block_size=8, max_position=4, position=position)
    for ok in (None, 8, 40):
        assert GPTConfig(vocab_size=5, block_size=8, max_position=ok, position=position).n_positions >= 8


# ---------------------------------------------------------------- item 10: the (B, T_k) mask trap, the cache's dtype


def test_the_masks_module_says_how_a_2d_mask_is_read():
    """A (B, T_k) padding mask with B == T_q broadcasts as (T_q, T_k): said in the module that defines masks."""
    doc = shared.masks.__doc__
    assert "read as (T_q, T_k)" in doc and "(B, T_k) padding mask" in doc and "B == T_q" in doc
    assert "(B, 1, 1, T_k)" in doc
    assert "(T_q, T_k)" in shared.masks.check_mask.__doc__


@pytest.mark.parametrize("attention", [MultiHeadAttention(8, 2), ExplicitMultiHeadAttention(8, 2)],
                         ids=["fused", "explicit"])
def test_a_b_by_t_k_mask_that_does_not_fit_points_to_the_padding_shape(attention):
    x, keep = torch.randn(2, 3, 8), torch.tensor([[True, True, False], [True, False, False]])  # (B=2, T_k=3)
    with pytest.raises(ValueError, match=r"a 2-D mask is read as \(T_q, T_k\).*\(B, 1, 1, T_k\)"):
        attention(x, mask=keep)
    assert attention(x, mask=keep[:, None, None, :])[0].shape == (2, 3, 8)


@pytest.mark.parametrize("cached, step", [(torch.float32, torch.float16), (torch.float16, torch.float32),
                                          (torch.bfloat16, torch.float32)])
def test_a_kv_cache_refuses_a_step_of_another_dtype(cached, step):
    """torch.cat promoted an fp16 step to the fp32 cache (and the other way round) without a word."""
    cache = KVCache()
    cache.update(torch.randn(1, 2, 3, 4, dtype=cached), torch.randn(1, 2, 3, 4, dtype=cached))
    with pytest.raises(TypeError, match=rf"k has dtype {step}, but the KV cache has dtype {cached}: start a new cache"):
        cache.update(torch.randn(1, 2, 1, 4, dtype=step), torch.randn(1, 2, 1, 4, dtype=step))
    assert len(cache) == 3 and cache.k.dtype == cached  # the cache is unchanged
    k, _ = cache.update(torch.randn(1, 2, 1, 4, dtype=cached), torch.randn(1, 2, 1, 4, dtype=cached))
    assert k.shape == (1, 2, 4, 4) and k.dtype == cached


# ---------------------------------------------------------------- obscure errors


def test_scaled_embedding_refuses_ids_outside_the_vocabulary():
    """nn.Embedding raised a bare IndexError (a device-side assert on CUDA)."""
    emb = ScaledEmbedding(10, 8)
    for bad in (10, -1):
        with pytest.raises(ValueError, match=r"tokens must hold ids in 0..9 \(vocab_size=10\)"):
            emb(torch.tensor([[1, bad]]))
    with pytest.raises(TypeError, match="tokens must hold integer ids"):
        emb(torch.ones(1, 3))
    assert emb(torch.tensor([[0, 9]])).shape == (1, 2, 8)


def test_rope_and_alibi_want_tensors_of_frequencies_and_slopes():
    """A list raised AttributeError: 'list' object has no attribute 'numel' (or 'dim')."""
    x, positions = torch.randn(1, 2, 3, 8), torch.arange(3)
    with pytest.raises(TypeError, match="inv_freq must be a torch.Tensor, got list"):
        apply_rope(x, positions, inv_freq=rope_frequencies(8).tolist())
    with pytest.raises(TypeError, match="slopes must be a torch.Tensor, got list"):
        alibi_bias([0.5, 0.25], positions, positions)
    with pytest.raises(ValueError, match=r"slopes must have shape \(H,\)"):
        alibi_bias(torch.ones(2, 2), positions, positions)
    assert alibi_bias(alibi_slopes(2), positions, positions).shape == (2, 3, 3)


def test_a_cache_must_be_a_kv_cache():
    attn, x = MultiHeadAttention(8, 2), torch.randn(1, 2, 8)
    for bad in ([], {}, "cache"):
        with pytest.raises(TypeError, match=r"cache must be None or a KVCache, got"):
            attn(x, cache=bad)
    with pytest.raises(TypeError, match=r"caches\[1\] must be a KVCache, got NoneType"):
        tiny_gpt()(torch.randint(0, 10, (1, 2)), caches=[KVCache(), None])
    with pytest.raises(TypeError, match=r"caches\[0\] must be a KVCache, got NoneType"):
        tiny_gpt()(torch.randint(0, 10, (1, 2)), caches=[None, None])


def test_stacking_no_layers_says_so():
    """torch.stack raised "stack expects a non-empty TensorList"."""
    with pytest.raises(ValueError, match="layers must hold at least one layer"):
        stack_attention_weights([])


def test_causal_cross_attention_with_fewer_keys_names_n_keys():
    """The error named causal_mask's n_keys, an argument the caller never passed, and not what it is."""
    for attention in (MultiHeadAttention(8, 2), ExplicitMultiHeadAttention(8, 2)):
        for need_weights in (False, True):
            with pytest.raises(ValueError, match=r"n_keys must be an int >= 4 .*number of keys T_k.*got 2"):
                attention(torch.randn(2, 4, 8), torch.randn(2, 2, 8), causal=True, need_weights=need_weights)


def test_make_norm_checks_its_size_and_its_bias_flag():
    for kind in ("layernorm", "rmsnorm"):
        for bad in (0, -1, 2.0):
            with pytest.raises(ValueError, match=f"d_model must be a positive int, got {bad!r}"):
                make_norm(kind, bad)
        with pytest.raises(ValueError, match="bias must be a bool, got 'no'"):  # rmsnorm ignored it
            make_norm(kind, 8, bias="no")
    assert make_norm("rmsnorm", 8, bias=False).weight.shape == (8,)


def test_kv_cache_checks_the_values_as_well_as_the_keys():
    from shared.kv_cache import KVCache

    cache = KVCache()
    cache.update(torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 4))
    with pytest.raises(ValueError, match="k and v"):
        cache.update(torch.randn(1, 2, 1, 4), torch.randn(1, 2, 1, 4).half())
    with pytest.raises(ValueError, match="k and v"):
        cache.update(torch.randn(1, 2, 1, 4), torch.randn(1, 2, 2, 4))
    with pytest.raises(ValueError, match="k and v"):
        KVCache().update(torch.randn(1, 2, 3, 4), torch.randn(1, 2, 2, 4))
    assert len(cache) == 3 and cache.v.size(2) == 3  # nothing was appended


def test_gpt_refuses_caches_of_different_lengths():
    from shared.gpt import GPT, GPTConfig

    model = GPT(GPTConfig(vocab_size=7, block_size=8, n_layers=2, n_heads=2, d_model=8)).eval()
    caches = model.new_caches()
    with torch.no_grad():
        model(torch.zeros(1, 3, dtype=torch.long), caches=caches)
        caches[1] = type(caches[1])()
        with pytest.raises(ValueError, match="same number of positions"):
            model(torch.zeros(1, 1, dtype=torch.long), caches=caches)
