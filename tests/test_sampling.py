"""Sampling: filters against hand-computed cases, knob checks, seeding, and KV cache == no cache."""

import math

import pytest
import torch

from shared.generation.lm import (
    apply_repetition_penalty,
    apply_temperature,
    ban_repeated_ngrams,
    generate,
    next_token_logits,
    top_k_filter,
    top_p_filter,
)
from shared.gpt import GPT, GPTConfig

INF = float("inf")


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=23, block_size=24, n_layers=2, n_heads=2, d_model=32)).eval()


def test_top_k_keeps_the_k_largest():
    logits = torch.tensor([[1.0, 3.0, 2.0, 0.0], [5.0, 4.0, 4.0, 1.0]])
    assert torch.equal(top_k_filter(logits, 2), torch.tensor([[-INF, 3.0, 2.0, -INF], [5.0, 4.0, 4.0, -INF]]))
    assert torch.equal(top_k_filter(logits, 10), logits)  # k >= vocabulary: nothing removed


def test_top_p_keeps_the_smallest_nucleus():
    probs = torch.tensor([[0.15, 0.5, 0.05, 0.3]])  # sorted: 0.5, 0.3, 0.15, 0.05
    logits = probs.log()
    # p = 0.7: 0.5 alone is not enough, 0.5 + 0.3 = 0.8 is -> keep those two
    assert torch.equal(top_p_filter(logits, 0.7).isfinite(), torch.tensor([[False, True, False, True]]))
    # p = 0.85: 0.5 + 0.3 + 0.15 = 0.95 -> three; p = 0.4: the top token alone
    assert torch.equal(top_p_filter(logits, 0.85).isfinite(), torch.tensor([[True, True, False, True]]))
    assert torch.equal(top_p_filter(logits, 0.4).isfinite(), torch.tensor([[False, True, False, False]]))
    kept = top_p_filter(logits, 0.7)
    assert torch.allclose(kept.softmax(-1), torch.tensor([[0.0, 0.625, 0.0, 0.375]]))  # renormalised 0.5 : 0.3
    assert torch.equal(top_p_filter(logits, 1.0), logits)


def test_top_p_boundary_is_inclusive():
    logits = torch.tensor([[0.5, 0.25, 0.25]]).log()  # exact in binary: the cumulative sums are 0.5, 0.75, 1
    # p = 0.5: the top token alone reaches p, so it alone is kept (a strict > would keep a second)
    assert torch.equal(top_p_filter(logits, 0.5).isfinite(), torch.tensor([[True, False, False]]))
    assert top_p_filter(logits, 0.75).isfinite().sum() == 2
    assert top_p_filter(logits, 0.7500001).isfinite().sum() == 3
    for bad in (True, False, "0.5", math.nan):
        with pytest.raises(ValueError, match="top_p"):
            top_p_filter(logits, bad)


def test_repetition_penalty_by_hand():
    logits = torch.tensor([[2.0, -1.0, 0.5, 3.0]])
    out = apply_repetition_penalty(logits, torch.tensor([[0, 1, 0]]), 2.0)
    assert torch.equal(out, torch.tensor([[1.0, -2.0, 0.5, 3.0]]))  # seen: 2/2 and -1*2; unseen unchanged
    assert torch.equal(logits, torch.tensor([[2.0, -1.0, 0.5, 3.0]]))  # pure: input untouched


@pytest.mark.parametrize("ids", [[[0, 4]], [[-1, 2]]])
def test_context_ids_outside_the_logits_are_refused_by_name(ids):
    logits, tokens = torch.zeros(1, 4), torch.tensor(ids)  # V = 4: ids 0..3
    with pytest.raises(ValueError, match=r"tokens must hold ids in 0\.\.3"):  # not torch's bare index error
        apply_repetition_penalty(logits, tokens, 2.0)
    with pytest.raises(ValueError, match=r"tokens must hold ids in 0\.\.3"):
        ban_repeated_ngrams(logits, tokens, 1)


def test_no_repeat_ngram_by_hand():
    logits = torch.zeros(1, 5)
    tokens = torch.tensor([[1, 2, 3, 1, 2]])
    only_3 = torch.tensor([[False, False, False, True, False]])
    # trigram: the context ends in (1, 2); (1, 2, 3) already occurred -> 3 is banned
    assert torch.equal(ban_repeated_ngrams(logits, tokens, 3).isinf(), only_3)
    # bigram: ends in 2; (2, 3) occurred -> 3 banned
    assert torch.equal(ban_repeated_ngrams(logits, tokens, 2).isinf(), only_3)
    # unigram: every token seen so far is banned
    assert torch.equal(ban_repeated_ngrams(logits, tokens, 1).isinf(), torch.tensor([[False, True, True, True, False]]))
    assert torch.equal(ban_repeated_ngrams(logits, tokens, 0), logits)
    assert torch.equal(ban_repeated_ngrams(logits, tokens, 6), logits)  # context shorter than n


def test_bad_knobs_raise_value_error(model):
    prompt = torch.zeros(1, 1, dtype=torch.long)
    for kwargs, name in [
        (dict(temperature=-1.0), "temperature"), (dict(temperature=math.nan), "temperature"),
        (dict(top_k=0), "top_k"), (dict(top_p=0.0), "top_p"), (dict(top_p=1.5), "top_p"),
        (dict(repetition_penalty=0.0), "repetition_penalty"), (dict(no_repeat_ngram_size=-1), "no_repeat_ngram_size"),
    ]:
        with pytest.raises(ValueError, match=name):
            generate(model, prompt, 3, **kwargs)
    with pytest.raises(ValueError, match="max_new_tokens"):
        generate(model, prompt, -1)
    for kwargs, name in [  # checked before any token is generated, even when none is asked for
        (dict(temperature=-1.0), "temperature"), (dict(temperature=math.inf), "temperature"),
        (dict(top_k=0), "top_k"), (dict(top_p=True), "top_p"), (dict(repetition_penalty=-3.0), "repetition_penalty"),
        (dict(repetition_penalty=math.inf), "repetition_penalty"),
        (dict(repetition_penalty=True), "repetition_penalty"),
        (dict(no_repeat_ngram_size=-1), "no_repeat_ngram_size"),
        (dict(no_repeat_ngram_size=2.0), "no_repeat_ngram_size"),
    ]:
        with pytest.raises(ValueError, match=name):
            generate(model, prompt, 0, **kwargs)
    with pytest.raises(ValueError, match="prompt"):
        generate(model, torch.zeros(1, 1), 3)


def test_seeded_generator_reproduces_samples(model):
    prompt = torch.zeros(4, 2, dtype=torch.long)
    knobs = dict(temperature=0.9, top_k=10, top_p=0.95, repetition_penalty=1.2, no_repeat_ngram_size=3)
    a = generate(model, prompt, 20, generator=torch.Generator().manual_seed(7), **knobs)
    b = generate(model, prompt, 20, generator=torch.Generator().manual_seed(7), **knobs)
    c = generate(model, prompt, 20, generator=torch.Generator().manual_seed(8), **knobs)
    assert a.shape == (4, 22) and torch.equal(a, b) and not torch.equal(a, c)
    assert not torch.equal(a[0], a[1])  # rows of a batch are sampled independently
    for row in a:  # no trigram occurs twice
        trigrams = [tuple(row[i : i + 3].tolist()) for i in range(len(row) - 2)]
        assert len(trigrams) == len(set(trigrams))


def test_kv_cache_greedy_tokens_identical(model):
    torch.manual_seed(1)
    prompt = torch.randint(0, 23, (3, 5))
    cached = generate(model, prompt, 19, temperature=0.0, use_cache=True)  # fills block_size exactly
    plain = generate(model, prompt, 19, temperature=0.0, use_cache=False)
    assert cached.shape == (3, 24) and torch.equal(cached, plain)
    assert torch.equal(cached[:, :5], prompt)


def test_kv_cache_step_logits_equal_no_cache_logits(model):
    """The logits `generate` sees at each step, with and without the cache (the argmax alone hides offsets)."""
    seen = []
    hook = model.register_forward_hook(lambda module, args, out: seen.append(out[:, -1].clone()))  # (B, V)
    torch.manual_seed(5)
    prompt = torch.randint(0, 23, (2, 4))
    try:
        for use_cache in (True, False):  # 20 new tokens: the context stays within block_size (24)
            generate(model, prompt, 20, temperature=0.0, use_cache=use_cache)
    finally:
        hook.remove()
    cached, plain = seen[:20], seen[20:]
    assert len(plain) == 20
    for step, (a, b) in enumerate(zip(cached, plain)):
        assert torch.allclose(a, b, atol=1e-5), f"step {step}: logits differ by {(a - b).abs().max():.3g}"


def test_kv_cache_logits_close(model):
    torch.manual_seed(2)
    tokens = torch.randint(0, 23, (2, 24))
    with torch.no_grad():
        full = model(tokens)  # (B, T, V) in one pass
        caches = model.new_caches()
        steps = [model(tokens[:, :10], caches=caches)]  # prompt, then one token at a time
        steps += [model(tokens[:, t : t + 1], caches=caches) for t in range(10, 24)]
    assert torch.allclose(torch.cat(steps, dim=1), full, atol=1e-5)
    with pytest.raises(ValueError, match="block_size"):
        model(tokens[:, :1], caches=caches)  # the cache is full


def reference_greedy(model, prompt, n, use_cache):
    """Greedy decoding with full forward passes over the context that `generate` promises the model sees."""
    block_size, tokens, context = model.config.block_size, prompt, None
    for _ in range(n):
        if not use_cache:
            context = block_size  # always the last block_size tokens
        elif context is None:
            context = min(tokens.size(1), block_size)  # the first fill
        else:  # one more cached token, or a refill from the last block_size // 2 tokens when the cache is full
            context = context + 1 if context < block_size else block_size // 2
        with torch.no_grad():
            logits = model(tokens[:, -context:])[:, -1]
        tokens = torch.cat([tokens, logits.argmax(dim=-1, keepdim=True)], dim=1)
    return tokens


@pytest.fixture(scope="module")
def sensitive_model():
    """Large random weights: the argmax depends on every token of the context, so a wrong window shows."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=23, block_size=24, n_layers=2, n_heads=2, d_model=32)).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                torch.nn.init.normal_(p, std=0.5)
    return model


@pytest.mark.parametrize("use_cache", [True, False])
def test_generation_past_block_size_matches_a_reference(sensitive_model, use_cache):
    model = sensitive_model
    torch.manual_seed(3)
    prompt = torch.randint(0, 23, (2, 30))  # longer than block_size (24): cropped
    out = generate(model, prompt, 40, temperature=0.0, use_cache=use_cache)  # the cache refills twice
    assert out.shape == (2, 70) and torch.equal(out[:, :30], prompt)
    assert torch.equal(out, reference_greedy(model, prompt, 40, use_cache))


def test_tiny_temperature_is_greedy_not_nan(model):
    torch.manual_seed(4)
    prompt = torch.randint(0, 23, (3, 4))
    greedy = generate(model, prompt, 10, temperature=0.0)
    for temperature in (1e-6, 1e-30, 1e-300, 5e-324):  # logits / temperature overflows to inf
        sampled = generate(model, prompt, 10, temperature=temperature, generator=torch.Generator().manual_seed(0))
        assert torch.equal(sampled, greedy), temperature
    logits = torch.tensor([[1.0, 3.0, 3.0, float("-inf")]])
    assert torch.equal(apply_temperature(logits, 1e-300).softmax(-1), torch.tensor([[0.0, 0.5, 0.5, 0.0]]))
    torch.testing.assert_close(apply_temperature(logits, 2.0).softmax(-1), (logits / 2.0).softmax(-1))


LOGITS, CONTEXT = torch.tensor([[2.0, 1.0, 0.0], [0.0, 1.0, 2.0]]), torch.tensor([[0, 1], [2, 2]])  # (B=2, V=3), (2, 2)


@pytest.mark.parametrize("call, error, message", [
    (lambda: apply_temperature(LOGITS, 0.0), ValueError, "temperature must be a finite number > 0"),
    (lambda: apply_temperature(LOGITS, -1.0), ValueError, "temperature"),
    (lambda: apply_temperature(LOGITS, math.nan), ValueError, "temperature"),
    (lambda: apply_temperature(LOGITS, True), ValueError, "temperature"),
    (lambda: next_token_logits(LOGITS, CONTEXT, temperature=-0.5), ValueError, "temperature"),
    (lambda: next_token_logits(LOGITS, CONTEXT, temperature=math.nan), ValueError, "temperature"),
    (lambda: next_token_logits(LOGITS, CONTEXT, top_k=0), ValueError, "top_k"),
    (lambda: next_token_logits(LOGITS, CONTEXT, top_k=2.0), ValueError, "top_k"),
    (lambda: next_token_logits(LOGITS, CONTEXT, top_p=0.0), ValueError, "top_p"),
    (lambda: next_token_logits(LOGITS, CONTEXT, top_p=math.nan), ValueError, "top_p"),
    (lambda: next_token_logits(LOGITS, CONTEXT[:1]), ValueError, "tokens has batch size 1, but logits has .* 2"),
    (lambda: next_token_logits(LOGITS[None], CONTEXT), ValueError, r"logits must have shape \(B, V\)"),
    (lambda: next_token_logits(LOGITS, CONTEXT.float()), ValueError, "tokens must be a .* integer tensor"),
    (lambda: apply_repetition_penalty(LOGITS, CONTEXT[:1], 2.0), ValueError, "tokens has batch size 1"),
    (lambda: ban_repeated_ngrams(LOGITS, CONTEXT[:1], 2), ValueError, "tokens has batch size 1"),
    (lambda: ban_repeated_ngrams(LOGITS, CONTEXT[0], 2), ValueError, "tokens must be a .* integer tensor"),
    (lambda: top_k_filter(LOGITS[0], 2), ValueError, r"logits must have shape \(B, V\)"),
    (lambda: top_p_filter(LOGITS.long(), 0.5), TypeError, "logits must be a floating-point tensor"),
    (lambda: top_p_filter([[1.0, 2.0]], 0.5), TypeError, "logits must be a torch.Tensor"),
])
def test_the_public_helpers_check_their_knob_and_shapes(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_generate_refuses_a_model_that_is_not_a_gpt():
    with pytest.raises(TypeError, match="model must be a shared.gpt.GPT"):
        generate(torch.nn.Linear(2, 2), torch.zeros(1, 1, dtype=torch.long), 3)
