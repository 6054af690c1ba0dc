"""ALiBi, NoPE, randomized positions, position coupling and the position options of GPT / Transformer."""

import warnings

import pytest
import torch

from shared.attention import MultiHeadAttention, scaled_dot_product_attention
from shared.generation.seq2seq import exact_match, greedy_decode, load_reverser, reverse, save_reverser
from shared.gpt import GPT, GPTConfig
from shared.kv_cache import KVCache
from shared.lengthgen import (
    SCHEMES,
    CoupledGPT,
    accuracy_by_length,
    check_scheme,
    coupled_positions,
    held_out,
    length_test_sets,
    make_scheme_model,
    structured_sets,
    teacher_forced_match,
)
from shared.positions import (
    LearnedPositionalEmbedding,
    SinusoidalPositionalEncoding,
    alibi_bias,
    alibi_slopes,
    randomized_positions,
)
from shared.reversal import BOS, EOS, ReversalBatches, decoder_only_sample, make_model
from shared.transformer import Transformer, TransformerConfig


def test_alibi_slopes_match_the_paper():
    torch.testing.assert_close(alibi_slopes(8), torch.tensor([2.0 ** -(i + 1) for i in range(8)]))
    torch.testing.assert_close(alibi_slopes(4), torch.tensor([2.0 ** -(2 * (i + 1)) for i in range(4)]))
    # 6 heads: the 4 slopes of 4 heads, then every other slope of 8 heads (1/2, 1/8)
    torch.testing.assert_close(alibi_slopes(6), torch.tensor([1 / 4, 1 / 16, 1 / 64, 1 / 256, 1 / 2, 1 / 8]))
    with pytest.raises(ValueError, match="n_heads"):
        alibi_slopes(0)


def test_alibi_bias_matrix():
    slopes = torch.tensor([0.5, 0.25])
    bias = alibi_bias(slopes, torch.arange(3), torch.arange(3))
    expected = -torch.tensor([[0.0, 1, 2], [1, 0, 1], [2, 1, 0]])
    torch.testing.assert_close(bias, torch.stack([0.5 * expected, 0.25 * expected]))
    assert alibi_bias(slopes, torch.arange(4)[None].repeat(3, 1), torch.arange(4)[None].repeat(3, 1)).shape == (
        3, 2, 4, 4)
    with pytest.raises(TypeError, match="q_positions"):
        alibi_bias(slopes, torch.arange(3.0), torch.arange(3))


def test_alibi_attention_matches_reference_and_fused_path():
    torch.manual_seed(0)
    attn = MultiHeadAttention(16, 4, alibi=True).eval()
    x = torch.randn(2, 7, 16)
    q, k, v = (attn.split_heads(w(x)) for w in (attn.w_q, attn.w_k, attn.w_v))
    causal = torch.ones(7, 7, dtype=torch.bool).tril()
    bias = alibi_bias(alibi_slopes(4), torch.arange(7), torch.arange(7))
    reference = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias.masked_fill(~causal, -1e9))
    reference = attn.w_o(attn.merge_heads(reference))
    fused, _ = attn(x, causal=True)
    explicit, weights = attn(x, causal=True, need_weights=True)
    torch.testing.assert_close(fused, reference, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(explicit, reference, atol=1e-5, rtol=1e-5)
    assert torch.all(weights.masked_select(~causal) == 0)
    # a padding mask goes through the same bool convention
    pad = torch.ones(2, 1, 1, 7, dtype=torch.bool)
    pad[1, ..., 5:] = False
    masked, w = attn(x, mask=pad, causal=True, need_weights=True)
    torch.testing.assert_close(attn(x, mask=pad, causal=True)[0], masked, atol=1e-5, rtol=1e-5)
    assert torch.all(w[1, :, :, 5:] == 0)
    assert attn.state_dict().keys() == MultiHeadAttention(16, 4).state_dict().keys()  # no new parameters


def test_alibi_kv_cache_equivalence():
    torch.manual_seed(1)
    attn = MultiHeadAttention(16, 2, alibi=True).eval()
    x = torch.randn(1, 6, 16)
    full, _ = attn(x, causal=True)
    cache = KVCache()
    steps = [attn(x[:, :2], causal=True, cache=cache)[0]] + [attn(x[:, t : t + 1], causal=True, cache=cache)[0]
                                                             for t in range(2, 6)]
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="one position scheme"):
        MultiHeadAttention(16, 2, alibi=True, rope=True)


def test_sdpa_bias_argument():
    torch.manual_seed(2)
    q, k, v = torch.randn(3, 4, 8), torch.randn(3, 5, 8), torch.randn(3, 5, 8)
    bias = torch.randn(4, 5)
    out, _ = scaled_dot_product_attention(q, k, v, bias=bias)
    torch.testing.assert_close(out, torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias))


def test_randomized_positions_are_sorted_distinct_and_in_range():
    g = torch.Generator().manual_seed(0)
    pos = randomized_positions(64, 10, 40, generator=g)
    assert pos.shape == (64, 10) and pos.min() >= 0 and pos.max() < 40
    assert torch.all(pos[:, 1:] > pos[:, :-1])  # strictly increasing: sorted and distinct
    assert pos.max() > 30 and len(pos.unique()) > 35  # ids reach far past the sequence length
    with pytest.raises(ValueError, match="max_position"):
        randomized_positions(2, 10, 5)


def test_positional_tables_take_explicit_positions():
    x = torch.zeros(2, 3, 8)
    sin = SinusoidalPositionalEncoding(8, 20)
    torch.testing.assert_close(sin(x, positions=torch.tensor([4, 5, 6])), sin(x, offset=4))
    learned = LearnedPositionalEmbedding(8, max_len=20)
    out = learned(x, positions=torch.tensor([[0, 5, 9], [1, 2, 19]]))
    torch.testing.assert_close(out[1, 2], learned.embedding.weight[19])
    with pytest.raises(ValueError, match="positional table"):
        learned(x, positions=torch.tensor([0, 5, 20]))


def sharpened(model):
    """`model` with every matrix re-drawn at std 1/sqrt(fan_in): sharp attention and logits of order 1.

    At GPT's init (std 0.02) attention is nearly uniform, so a position off by one moves the logits by only ~5e-5.
    """
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0.0, p.size(-1) ** -0.5)
    return model


@pytest.mark.parametrize("position", ["learned", "sinusoidal", "rope", "alibi", "none"])
def test_gpt_position_schemes_cache_and_causality(position):
    """Cached decoding gives the logits of the full pass: each scheme places the new token at the cache's offset."""
    torch.manual_seed(3)
    model = GPT(GPTConfig(13, block_size=16, n_layers=2, n_heads=2, d_model=16, position=position)).eval()
    sharpened(model)
    tokens = torch.randint(0, 13, (2, 9))
    full = model(tokens)
    caches = model.new_caches()
    steps = [model(tokens[:, :4], caches=caches)] + [model(tokens[:, t : t + 1], caches=caches) for t in range(4, 9)]
    # float rounding leaves ~1e-6 here; an offset off by one moves some logit by 0.3 or more
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)
    changed = tokens.clone()
    changed[:, 6] = (changed[:, 6] + 1) % 13
    torch.testing.assert_close(model(changed)[:, :6], full[:, :6])  # the future does not leak
    has_table = position in ("learned", "sinusoidal")
    assert (model.pos_emb is not None) == has_table


def test_gpt_alibi_uses_the_positions_it_is_given():
    """ALiBi reads only distances: ids shifted by a constant change nothing, spread-out ids change the logits, and
    (B, T) ids give each row its own distances, as if it ran alone."""
    torch.manual_seed(8)
    model = sharpened(GPT(GPTConfig(13, block_size=16, n_layers=2, n_heads=2, d_model=16, position="alibi")).eval())
    tokens = torch.randint(0, 13, (2, 6))
    spread = torch.tensor([0, 2, 5, 6, 9, 15])
    default = model(tokens)
    torch.testing.assert_close(model(tokens, positions=torch.arange(6) + 7), default, atol=1e-5, rtol=1e-5)
    assert (model(tokens, positions=spread) - default).abs().max() > 0.1
    per_row = model(tokens, positions=torch.stack([spread, torch.arange(6)]))  # (B, T) ids
    torch.testing.assert_close(per_row[0], model(tokens[:1], positions=spread)[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(per_row[1], default[1], atol=1e-5, rtol=1e-5)


def test_nope_cannot_tell_positions_without_the_mask():
    """One layer, no positions: the last output depends on which tokens came before, not their order (from the
    earlier tokens leaves the last output unchanged."""
    torch.manual_seed(4)
    model = GPT(GPTConfig(13, block_size=16, n_layers=1, n_heads=2, d_model=16, position="none")).eval()
    tokens = torch.tensor([[3, 4, 5, 6, 7]])
    permuted = torch.tensor([[5, 3, 6, 4, 7]])
    torch.testing.assert_close(model(tokens)[:, -1], model(permuted)[:, -1], atol=1e-5, rtol=1e-5)
    learned = GPT(GPTConfig(13, block_size=16, n_layers=1, n_heads=2, d_model=16)).eval()
    assert not torch.allclose(learned(tokens)[:, -1], learned(permuted)[:, -1], atol=1e-4)


def test_randomized_gpt_uses_random_ids_in_training_only():
    torch.manual_seed(5)
    model = GPT(GPTConfig(13, block_size=40, n_layers=1, n_heads=2, d_model=16, randomized_positions=True))
    tokens = torch.randint(0, 13, (2, 6))
    model.train()
    a, b = model(tokens), model(tokens)
    assert not torch.allclose(a, b)  # new ids every call
    model.eval()
    torch.testing.assert_close(model(tokens), model(tokens, positions=torch.arange(6)))
    with pytest.raises(ValueError, match="randomized_positions"):
        GPTConfig(13, position="alibi", randomized_positions=True)
    with pytest.raises(ValueError, match="position must be one of"):
        GPTConfig(13, position="absolute")


def test_transformer_position_options():
    torch.manual_seed(6)
    src, tgt = torch.randint(3, 13, (2, 5)), torch.randint(3, 13, (2, 6))
    for position in ("learned", "rope"):
        model = Transformer(TransformerConfig(13, 13, 16, 2, 1, 1, 32, 0.0, max_len=20, position=position)).eval()
        assert model(src, tgt).shape == (2, 6, 13)
    model = Transformer(TransformerConfig(13, 13, 16, 2, 1, 1, 32, 0.0, max_len=20, randomized_positions=True))
    assert not torch.allclose(model(src, tgt), model(src, tgt))  # training mode: random ids
    model.eval()
    torch.testing.assert_close(model(src, tgt), model(src, tgt))
    with pytest.raises(ValueError, match="position"):
        TransformerConfig(13, 13, position="alibi")


def test_transformer_randomized_rope_ids_reach_both_self_attentions(monkeypatch):
    """In training, the drawn ids rotate q and k in the encoder and in the decoder: ids with the default spacing
    give the eval output (RoPE reads only differences), spread-out ids change both the memory and the logits."""
    import shared.transformer

    torch.manual_seed(9)
    config = TransformerConfig(13, 13, 16, 2, 1, 1, 32, 0.0, max_len=40, position="rope", randomized_positions=True)
    model = sharpened(Transformer(config))
    src, tgt = torch.randint(3, 13, (2, 5)), torch.randint(3, 13, (2, 6))
    model.eval()
    memory = model.encode(src)
    logits = model.decode(tgt, memory)
    model.train()  # dropout is 0: only the position ids differ from eval mode
    for shift, same in ((lambda ids: ids + 11, True), (lambda ids: ids**2, False)):  # (B, T) ids 0..T-1 -> new ids
        monkeypatch.setattr(shared.transformer, "randomized_positions",
                            lambda B, T, max_position, device, shift=shift: shift(torch.arange(T).repeat(B, 1)))
        for got, expected in ((model.encode(src), memory), (model.decode(tgt, memory), logits)):
            assert torch.allclose(got, expected, atol=1e-5) == same


def test_defaults_are_unchanged():
    """The default configs build exactly the modules they built before position schemes existed."""
    gpt = GPT(GPTConfig(13, block_size=8, n_layers=1, n_heads=2, d_model=8))
    assert isinstance(gpt.pos_emb, LearnedPositionalEmbedding) and gpt.pos_emb.max_len == 8
    assert all(b.attn.rope is None and b.attn.alibi_slopes is None for b in gpt.blocks)
    model = Transformer(TransformerConfig(13, 13, 16, 2, 1, 1, 32, 0.0, max_len=20))
    assert isinstance(model.positional, SinusoidalPositionalEncoding)


def test_coupled_positions():
    tokens, _ = decoder_only_sample([4, 5, 6])  # BOS 4 5 6 EOS 6 5 4 (the last EOS is a label only)
    ids = coupled_positions(torch.tensor([tokens]))
    assert ids.tolist() == [[0, 3, 2, 1, 1, 2, 3, 4]]
    # the token predicting answer step j has the id of the source digit that answer copies
    assert tokens[1 + 2] == 6 + 3 and ids[0, 4] == ids[0, 3]
    shifted = coupled_positions(torch.tensor([tokens] * 50), max_position=30)
    offsets = shifted[:, 1:] - ids[:, 1:]
    assert torch.all(offsets == offsets[:, :1]) and offsets.min() >= 0 and shifted.max() < 30
    assert len(offsets[:, 0].unique()) > 5
    assert coupled_positions(torch.tensor([[BOS, 3, 4]])).tolist() == [[0, 2, 1]]  # no EOS yet: all source
    assert EOS == tokens[4]


def test_coupled_gpt_and_schemes():
    model = make_scheme_model("coupled", "decoder_only", d_model=16, n_heads=2, n_layers=1)
    assert isinstance(model, CoupledGPT) and model.config.block_size == 66
    with pytest.raises(ValueError, match="caches"):
        model(torch.tensor([[BOS, 3]]), caches=model.new_caches())
    for scheme, (_, archs) in SCHEMES.items():
        for arch in archs:
            check_scheme(scheme, arch)
    with pytest.raises(ValueError, match="applies to"):
        check_scheme("alibi", "encoder_decoder")
    with pytest.raises(ValueError, match="scheme must be"):
        check_scheme("bogus", "decoder_only")


def test_length_test_sets_and_exclusion():
    sets = length_test_sets([1, 2, 3, 13], n=200)
    assert len(sets[1]) == 10 and len(sets[2]) == 100  # every list of these lengths
    assert len(sets[3]) == 200 == len(set(sets[3])) and all(len(s) == 13 for s in sets[13])
    excluded = held_out(sets)
    assert set(sets[3]) <= excluded and not set(sets[1]) & excluded
    batches = ReversalBatches("decoder_only", 512, exclude=excluded, min_len=1, max_len=3)
    drawn = {s for step in range(4) for s in batches.sources(step)}
    assert not drawn & excluded and batches.redrawn > 0 and min(map(len, drawn)) == 1
    assert structured_sets(6)["palindrome"][0] == structured_sets(6)["palindrome"][0][::-1]
    for bad in (0, -5, 2.5):  # used to give empty (or 3-list) sets without a word
        with pytest.raises(ValueError, match="n must be a positive int"):
            length_test_sets([3], n=bad)
        with pytest.raises(ValueError, match="n must be a positive int"):
            structured_sets(6, n=bad)


def _oracle_next(src: list, answer: list) -> int:
    """Reverses correctly, except: digit 7 is answered as 0, and a source starting with 9 ends one step early."""
    n, k = len(src), len(answer)
    if k >= n or (src[0] == 9 + 3 and k == n - 1):
        return EOS
    return 3 if src[n - 1 - k] == 7 + 3 else src[n - 1 - k]


def _one_hot(rows: list) -> torch.Tensor:
    return torch.nn.functional.one_hot(torch.tensor(rows), 13).float()


class OracleGPT(GPT):
    def forward(self, tokens, caches=None, need_weights=False, positions=None):
        out = []
        for row in tokens.tolist():
            e = row.index(EOS) if EOS in row else len(row)
            out.append([_oracle_next(row[1:e], row[e + 1 : t + 1]) if t >= e else 0 for t in range(len(row))])
        return _one_hot(out)


class OracleTransformer(Transformer):
    def encode(self, src, src_mask=None, need_weights=False):
        return src.float()[..., None]  # (B, T_src, 1): the memory is the source itself

    def decode(self, tgt, memory, src_mask=None, need_weights=False):
        out = []
        for src, row in zip(memory[..., 0].long().tolist(), tgt.tolist()):
            src = [t for t in src if t != 0]
            out.append([_oracle_next(src, row[1 : t + 1]) for t in range(len(row))])
        return _one_hot(out)

    def forward(self, src, tgt, need_weights=False):
        return self.decode(tgt, self.encode(src))


@pytest.mark.parametrize("arch", ["encoder_decoder", "decoder_only"])
def test_teacher_forced_match_equals_greedy_decoding(arch):
    model = (OracleTransformer(TransformerConfig(13, 13, 8, 1, 1, 1, 8, 0.0, max_len=40)) if arch == "encoder_decoder"
             else OracleGPT(GPTConfig(13, block_size=66, n_layers=1, n_heads=1, d_model=8)))
    g = torch.Generator().manual_seed(7)
    sources = [tuple(torch.randint(0, 10, (n,), generator=g).tolist()) for n in (1, 2, 3, 5, 9) for _ in range(12)]
    outputs = [[t - 3 for t in out] for out in greedy_decode(model, sources)]
    right = torch.tensor([out == list(s)[::-1] for out, s in zip(outputs, sources)])
    assert 0 < right.sum() < len(sources), "the check needs both right and wrong answers"
    assert torch.equal(teacher_forced_match(model, sources), right)  # row by row
    # a wrong answer of full length, used as the target, is what greedy decoding produces
    keep = [i for i, out in enumerate(outputs) if len(out) == len(sources[i])]
    assert any(not right[i] for i in keep)
    assert teacher_forced_match(model, [sources[i] for i in keep], [outputs[i] for i in keep]).all()
    assert accuracy_by_length(model, {5: sources[36:48]})[5] == exact_match(model, sources[36:48])


def test_reverse_warns_outside_trained_lengths(tmp_path):
    model = make_model("decoder_only", 16, 2, 1, train_lengths=(3, 12))
    with pytest.warns(UserWarning, match="trained on 3-12 digits, not 1"):
        reverse(model, [7])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reverse(model, [1, 2, 3])  # inside: no warning
    with pytest.raises(ValueError, match="limit of its positions"):
        reverse(model, [1] * 13)
    path = save_reverser(tmp_path / "m.pt", make_scheme_model("coupled", "decoder_only", 16, 2, 1))
    loaded = load_reverser(path)
    assert isinstance(loaded, CoupledGPT) and loaded.train_lengths == (1, 12)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reverse(loaded, [1])  # 1 digit is inside 1-12
    with pytest.warns(UserWarning, match="not 13"):
        reverse(loaded, [1] * 13)
