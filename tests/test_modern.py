"""Modern block options: RMSNorm, SwiGLU, grouped-query attention, fused QKV, bias-free linears, KV-cache bytes."""

import importlib.util
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from shared.attention import MultiHeadAttention, repeat_kv
from shared.generation.lm import generate
from shared.gpt import GPT, GPTConfig
from shared.kv_cache import KVCache, kv_cache_bytes
from shared.layers import FeedForward, PreLNBlock, swiglu_hidden_size
from shared.norms import RMSNorm, make_norm

OPTIONS = {  # every option alone, and all together
    "rmsnorm": dict(norm="rmsnorm"),
    "swiglu": dict(activation="swiglu"),
    "gqa": dict(n_kv_heads=2),
    "mqa": dict(n_kv_heads=1),
    "fused_qkv": dict(fused_qkv=True),
    "no_bias": dict(bias=False),
    "rope": dict(position="rope"),
    "all": dict(norm="rmsnorm", activation="swiglu", n_kv_heads=2, fused_qkv=True, bias=False, position="rope"),
}


def small_config(**options):
    return GPTConfig(vocab_size=20, block_size=24, n_layers=2, n_heads=4, d_model=32, **options)


# ---------------------------------------------------------------- RMSNorm


@pytest.mark.parametrize("eps", [1e-5, 1e-6, None])
@pytest.mark.parametrize("scale", [3.0, 1e-2])  # at a small RMS, eps inside or outside the root differs by 5 %
def test_rmsnorm_equals_torch_and_the_formula(eps, scale):
    torch.manual_seed(0)
    ours, ref = RMSNorm(16, eps=eps), nn.RMSNorm(16, eps=eps)
    with torch.no_grad():
        ours.weight.copy_(torch.randn(16))
        ref.weight.copy_(ours.weight)
    x = torch.randn(3, 5, 16) * scale
    x64, e = x.double(), torch.finfo(torch.float32).eps if eps is None else eps
    formula = x64 / (x64.pow(2).mean(-1, keepdim=True) + e).sqrt() * ours.weight.double()  # eps inside the root
    torch.testing.assert_close(ours(x), ref(x), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(ours(x).double(), formula, rtol=1e-6, atol=1e-6)


@pytest.mark.filterwarnings("ignore:Mismatch dtype between input and weight")  # torch's own, for mixed dtypes
def test_rmsnorm_keeps_torchs_output_dtype_and_uses_its_fused_function(monkeypatch):
    """bf16 input with an fp32 gain (as under autocast) gives bf16, as torch.nn.RMSNorm does (issue 17, 5.9)."""
    x = torch.randn(2, 3, 8).to(torch.bfloat16)
    assert RMSNorm(8)(x).dtype == nn.RMSNorm(8)(x).dtype == torch.bfloat16
    ours, ref = RMSNorm(8).to(torch.bfloat16), nn.RMSNorm(8, eps=1e-5).to(torch.bfloat16)
    torch.testing.assert_close(ours(x), ref(x), rtol=0, atol=0)  # bf16 throughout: torch's rounding, bit for bit
    calls = []
    monkeypatch.setattr(F, "rms_norm", lambda *args, **kwargs: calls.append(args) or args[0])
    RMSNorm(8)(x)
    assert len(calls) == 1  # the package calls torch.nn.functional.rms_norm (one fused kernel), not a formula


def test_rmsnorm_is_scale_invariant_and_keeps_the_mean():
    x = torch.randn(4, 8) + 5.0  # a large mean: LayerNorm would remove it, RMSNorm does not
    norm = RMSNorm(8)
    assert torch.allclose(norm(x), norm(7.0 * x), atol=1e-5)
    assert torch.allclose(norm(x).pow(2).mean(-1), torch.ones(4), atol=1e-3)
    assert norm(x).mean() > 0.5


def test_rmsnorm_and_make_norm_reject_bad_input():
    with pytest.raises(ValueError, match="d_model"):
        RMSNorm(0)
    with pytest.raises(ValueError, match="eps"):
        RMSNorm(4, eps=-1.0)
    with pytest.raises(ValueError, match="d_model=4"):
        RMSNorm(4)(torch.randn(2, 5))
    with pytest.raises(ValueError, match="norm must be one of"):
        make_norm("batchnorm", 4)
    assert make_norm("layernorm", 4, bias=False).bias is None


# ---------------------------------------------------------------- SwiGLU


def test_swiglu_equals_its_formula():
    torch.manual_seed(0)
    ff = FeedForward(16, 40, activation="swiglu")
    x = torch.randn(2, 3, 16)
    expected = ff.linear2(F.silu(ff.gate(x)) * ff.linear1(x))
    assert torch.allclose(ff(x), expected, atol=1e-6)
    assert FeedForward(16, 40, activation="gelu").gate is None


@pytest.mark.parametrize("d_model", [32, 128, 384])
def test_swiglu_width_matches_the_gelu_mlp_parameter_count(d_model):
    hidden = swiglu_hidden_size(d_model, 4 * d_model)
    gelu = sum(p.numel() for p in FeedForward(d_model, 4 * d_model, activation="gelu").parameters())
    swiglu = sum(p.numel() for p in FeedForward(d_model, hidden, activation="swiglu").parameters())
    assert abs(swiglu - gelu) / gelu < 0.01
    assert GPTConfig(vocab_size=10, d_model=d_model, n_heads=4, activation="swiglu").ffn_width == hidden
    with pytest.raises(ValueError, match="d_ff"):
        swiglu_hidden_size(d_model, 0)


# ---------------------------------------------------------------- grouped-query attention and fused QKV


def test_repeat_kv_maps_each_query_head_to_its_group():
    x = torch.randn(2, 3, 5, 4)  # (B, H_kv, T, d_k)
    y = repeat_kv(x, 2)
    assert y.shape == (2, 6, 5, 4)
    for h in range(6):
        assert torch.equal(y[:, h], x[:, h // 2])
    assert repeat_kv(x, 1) is x
    with pytest.raises(ValueError, match="n_rep"):
        repeat_kv(x, 0)
    with pytest.raises(ValueError, match="H_kv"):
        repeat_kv(x[0], 2)


def _run_both(a, b, x, mask=None, **kw):
    out_a, w_a = a(x, mask=mask, **kw)
    out_b, w_b = b(x, mask=mask, **kw)
    assert torch.allclose(out_a, out_b, atol=1e-5)
    if w_a is not None:
        assert torch.allclose(w_a, w_b, atol=1e-6)


@pytest.mark.parametrize("need_weights", [False, True])
def test_gqa_with_all_kv_heads_is_multi_head_attention(need_weights):
    torch.manual_seed(0)
    mha, gqa = MultiHeadAttention(32, 4), MultiHeadAttention(32, 4, n_kv_heads=4)
    gqa.load_state_dict(mha.state_dict())  # same parameter names and shapes
    _run_both(mha, gqa, torch.randn(2, 6, 32), causal=True, need_weights=need_weights)


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("n_kv_heads", [1, 2])
def test_gqa_equals_mha_whose_kv_heads_are_copied_per_group(n_kv_heads, need_weights):
    torch.manual_seed(0)
    gqa, mha = MultiHeadAttention(32, 4, n_kv_heads=n_kv_heads), MultiHeadAttention(32, 4)
    d_k, n_rep = 8, 4 // n_kv_heads
    with torch.no_grad():
        for name in ("w_k", "w_v"):  # head h of the MHA gets the rows of KV head h // n_rep
            src, dst = getattr(gqa, name), getattr(mha, name)
            dst.weight.copy_(src.weight.view(n_kv_heads, d_k, 32).repeat_interleave(n_rep, 0).reshape(32, 32))
            dst.bias.copy_(src.bias.view(n_kv_heads, d_k).repeat_interleave(n_rep, 0).reshape(32))
        for name in ("w_q", "w_o"):
            getattr(mha, name).load_state_dict(getattr(gqa, name).state_dict())
    x = torch.randn(2, 6, 32)
    pad = torch.ones(2, 1, 1, 6, dtype=torch.bool)
    pad[1, ..., 4:] = False
    _run_both(mha, gqa, x, causal=True, need_weights=need_weights)
    _run_both(mha, gqa, x, mask=pad, need_weights=need_weights)
    assert gqa.w_k.weight.shape == (n_kv_heads * d_k, 32)


@pytest.mark.parametrize("n_kv_heads", [4, 2])
def test_fused_qkv_equals_separate_projections(n_kv_heads):
    torch.manual_seed(0)
    sep, fused = MultiHeadAttention(32, 4, n_kv_heads=n_kv_heads), MultiHeadAttention(32, 4, n_kv_heads=n_kv_heads,
                                                                                       fused_qkv=True)
    with torch.no_grad():
        fused.w_qkv.weight.copy_(torch.cat([sep.w_q.weight, sep.w_k.weight, sep.w_v.weight]))
        fused.w_qkv.bias.copy_(torch.cat([sep.w_q.bias, sep.w_k.bias, sep.w_v.bias]))
        fused.w_o.load_state_dict(sep.w_o.state_dict())
    x, memory = torch.randn(2, 5, 32), torch.randn(2, 7, 32)
    _run_both(sep, fused, x, causal=True)
    _run_both(sep, fused, x, need_weights=True)
    assert torch.allclose(sep(x, memory, memory)[0], fused(x, memory, memory)[0], atol=1e-5)  # cross-attention
    assert not hasattr(fused, "w_q") and fused.w_qkv.out_features == 32 + 2 * n_kv_heads * 8


def test_attention_options_reject_bad_values():
    for bad in (0, 3, 2.0, True):
        with pytest.raises(ValueError, match="n_kv_heads"):
            MultiHeadAttention(32, 4, n_kv_heads=bad)
    with pytest.raises(ValueError, match="n_kv_heads"):
        GPTConfig(vocab_size=10, n_heads=4, n_kv_heads=3)
    for field, bad in (("norm", "batchnorm"), ("activation", "tanh"), ("d_ff", 0), ("fused_qkv", 1), ("bias", None)):
        with pytest.raises(ValueError, match=f"GPTConfig.{field}"):
            GPTConfig(vocab_size=10, **{field: bad})


@pytest.mark.parametrize("n_kv_heads", [4, 2, 1])
def test_cached_decoding_equals_full_causal_attention(n_kv_heads):
    torch.manual_seed(0)
    attn = MultiHeadAttention(32, 4, n_kv_heads=n_kv_heads, fused_qkv=True, bias=False).eval()
    x = torch.randn(2, 6, 32)
    full, _ = attn(x, causal=True)
    cache = KVCache()
    steps = [attn(x[:, t : t + 1], causal=True, cache=cache)[0] for t in range(6)]
    assert torch.allclose(torch.cat(steps, dim=1), full, atol=1e-5)
    assert cache.k.shape == (2, n_kv_heads, 6, 8)  # the cache keeps only the KV heads


# ---------------------------------------------------------------- the GPT with options


def test_default_gpt_keeps_its_parameter_names():
    model = GPT(GPTConfig(vocab_size=20, block_size=8, n_layers=1, n_heads=2, d_model=8))
    names = [n for n, _ in model.named_parameters()]
    block = [f"blocks.0.{n}" for n in ("norm1.weight", "norm1.bias", "attn.w_q.weight", "attn.w_q.bias",
                                       "attn.w_k.weight", "attn.w_k.bias", "attn.w_v.weight", "attn.w_v.bias",
                                       "attn.w_o.weight", "attn.w_o.bias", "norm2.weight", "norm2.bias",
                                       "ff.linear1.weight", "ff.linear1.bias", "ff.linear2.weight", "ff.linear2.bias")]
    assert names == ["tok_emb.weight", "pos_emb.embedding.weight", *block, "norm.weight", "norm.bias"]


def test_bias_free_gpt_has_no_biases_and_fewer_parameters():
    with_bias, without = GPT(small_config()), GPT(small_config(bias=False))
    assert not [n for n, _ in without.named_parameters() if n.endswith("bias")]
    assert without.num_parameters() < with_bias.num_parameters()


def test_swiglu_gpt_has_about_the_default_parameter_count():
    default, swiglu = GPT(GPTConfig(vocab_size=65, d_model=128)), GPT(GPTConfig(vocab_size=65, activation="swiglu"))
    assert abs(swiglu.num_parameters() - default.num_parameters()) / default.num_parameters() < 0.005


@pytest.mark.parametrize("name", list(OPTIONS))
def test_every_option_is_causal_and_trains(name):
    torch.manual_seed(0)
    model = GPT(small_config(**OPTIONS[name]))
    tokens = torch.randint(0, 20, (2, 12))
    changed = tokens.clone()
    changed[:, 7:] = (changed[:, 7:] + 1) % 20
    model.eval()
    with torch.no_grad():
        a, b = model(tokens), model(changed)
    assert torch.allclose(a[:, :7], b[:, :7], atol=1e-5) and not torch.allclose(a[:, 7:], b[:, 7:])
    model.train()
    loss = F.cross_entropy(model(tokens).flatten(0, 1), tokens.roll(-1, 1).flatten())
    loss.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


@pytest.mark.parametrize("name", list(OPTIONS))
def test_kv_cache_gives_identical_greedy_tokens(name):
    torch.manual_seed(0)
    model = GPT(small_config(**OPTIONS[name]))
    prompt = torch.randint(0, 20, (2, 3))
    new = model.config.block_size - prompt.size(1)  # everything before the cache's first refill
    cached = generate(model, prompt, new, temperature=0.0, use_cache=True)
    uncached = generate(model, prompt, new, temperature=0.0, use_cache=False)
    assert torch.equal(cached, uncached)


@pytest.mark.parametrize("n_kv_heads", [4, 2, 1])
def test_kv_cache_bytes_shrink_by_heads_over_kv_heads(n_kv_heads):
    T = 10
    sizes = {}
    for kv in (None, n_kv_heads):
        model = GPT(small_config(n_kv_heads=kv)).eval()
        caches = model.new_caches()
        with torch.no_grad():
            model(torch.zeros(1, T, dtype=torch.long), caches=caches)
        sizes[kv] = kv_cache_bytes(caches)
    c = small_config()
    assert sizes[None] == c.n_layers * 2 * c.d_model * T * 4  # layers x (K and V) x width x tokens x fp32 bytes
    assert sizes[None] == sizes[n_kv_heads] * (c.n_heads // n_kv_heads)
    assert kv_cache_bytes([KVCache()]) == 0
    half = KVCache()
    half.update(torch.zeros(1, 2, T, 8, dtype=torch.float16), torch.zeros(1, 2, T, 8, dtype=torch.float16))
    assert kv_cache_bytes([half]) == 2 * (2 * T * 8) * 2  # K and V x numel x 2 bytes: measured, not assumed fp32


def test_block_options_pass_through():
    block = PreLNBlock(32, 4, 64, norm="rmsnorm", activation="swiglu", bias=False, n_kv_heads=1, fused_qkv=True)
    assert isinstance(block.norm1, RMSNorm) and block.ff.gate is not None and block.attn.n_kv_heads == 1
    assert block(torch.randn(2, 5, 32), causal=True).shape == (2, 5, 32)


def _benchmark_module():
    path = Path(__file__).resolve().parent.parent / "benchmarks" / "char_gpt.py"
    spec = importlib.util.spec_from_file_location("char_gpt_benchmark", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_benchmark_modern_shape_has_the_default_parameter_count():
    bench = _benchmark_module()

    def build(shape):
        options = {k: shape[k] for k in bench.MODEL_OPTIONS if k in shape}
        return GPT(GPTConfig(vocab_size=65, block_size=shape["block_size"], n_layers=shape["n_layers"],
                             n_heads=shape["n_heads"], d_model=shape["d_model"], **options))

    default, modern = build(bench.SHAPES["tuned"]), build(bench.SHAPES["modern"])
    assert abs(modern.num_parameters() - default.num_parameters()) / default.num_parameters() < 0.01
    c = modern.config
    assert (c.norm, c.position, c.activation, c.fused_qkv, c.bias) == ("rmsnorm", "rope", "swiglu", True, False)
    assert c.n_kv_heads < c.n_heads
    assert [bench.parse_value(v) for v in ("true", "False", "none", "3", "3e-3", "rmsnorm")] == [
        True, False, None, 3, 3e-3, "rmsnorm"]


def test_copying_to_explicit_heads_rejects_modern_options():
    from shared.explicit_attention import ExplicitMultiHeadAttention, copy_fused_to_explicit

    explicit = ExplicitMultiHeadAttention(32, 4)
    for options in (dict(n_kv_heads=2), dict(fused_qkv=True)):
        with pytest.raises(ValueError, match="plain multi-head attention"):
            copy_fused_to_explicit(MultiHeadAttention(32, 4, **options), explicit)
    copy_fused_to_explicit(MultiHeadAttention(32, 4, n_kv_heads=4), explicit)  # nothing shared: allowed


def test_a_modern_gpt_round_trips_through_a_checkpoint(tmp_path):
    from shared.checkpoint import config_from_checkpoint, load_checkpoint, restore_model, save_checkpoint

    model = GPT(small_config(**OPTIONS["all"])).eval()
    save_checkpoint(tmp_path / "modern.pt", model, model.config)
    state = load_checkpoint(tmp_path / "modern.pt")
    config = config_from_checkpoint(state, GPTConfig)
    assert config == model.config
    restored = restore_model(state, GPT(config), config).eval()
    tokens = torch.randint(0, 20, (2, 10))
    assert torch.equal(restored(tokens), model(tokens))
