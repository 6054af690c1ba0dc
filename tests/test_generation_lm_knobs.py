"""Each knob of `generate` acts, in the documented order, seen through a model with fixed, known logits."""

import math

import pytest
import torch

from shared.generation.lm import generate, next_token_logits
from shared.gpt import GPT, GPTConfig


class FixedLogits(GPT):
    """A GPT whose next-token distribution is always `probs` (V,), whatever the context."""

    def __init__(self, probs):
        super().__init__(GPTConfig(vocab_size=len(probs), block_size=64, n_layers=1, n_heads=1, d_model=8))
        self.register_buffer("fixed", torch.tensor(probs).log())

    def forward(self, tokens, caches=None, need_weights=False, positions=None):
        return self.fixed.expand(tokens.size(0), tokens.size(1), -1)  # (B, T, V)


def sampled(model, prompt=None, **knobs) -> set:
    """The set of tokens drawn in 200 rows x 5 steps (seeded), prompt excluded."""
    prompt = torch.zeros(200, 1, dtype=torch.long) if prompt is None else prompt
    out = generate(model, prompt, 5, generator=torch.Generator().manual_seed(0), **knobs)
    return set(out[:, prompt.size(1) :].flatten().tolist())


FIVE = FixedLogits([0.3, 0.25, 0.2, 0.15, 0.1])


def test_sampling_without_knobs_draws_every_token():
    assert sampled(FIVE) == {0, 1, 2, 3, 4}  # so a missing filter below would show


def test_top_k_reaches_generate():
    assert sampled(FIVE, top_k=2) == {0, 1}
    assert sampled(FIVE, top_k=4) == {0, 1, 2, 3}


def test_top_p_reaches_generate():
    assert sampled(FIVE, top_p=0.5) == {0, 1}  # 0.3 < 0.5 <= 0.3 + 0.25
    assert sampled(FixedLogits([0.5, 0.25, 0.25]), top_p=0.5) == {0}  # exactly at the boundary: the top alone


def test_temperature_comes_before_the_filters():
    # (0.5, 0.3, 0.2) at temperature 0.5 becomes (0.66, 0.24, 0.11): top-p 0.6 then keeps the top token alone.
    # Filtering first would keep 0.5 + 0.3 and then sharpen: token 1 would still be drawn.
    model = FixedLogits([0.5, 0.3, 0.2])
    assert sampled(model, temperature=0.5, top_p=0.6) == {0}
    assert sampled(model, temperature=1.0, top_p=0.6) == {0, 1}
    logits = next_token_logits(model.fixed[None], torch.zeros(1, 1, dtype=torch.long), temperature=0.5, top_p=0.6)
    assert logits.isfinite().tolist() == [[True, False, False]]


def test_repetition_penalty_covers_the_whole_context():
    model = FixedLogits([0.4, 0.35, 0.25])  # logits -0.92, -1.05, -1.39
    prompt = torch.tensor([[0, 2]])  # token 0 was seen, but is not the last token
    assert generate(model, prompt, 1, temperature=0.0)[0, -1] == 0
    # with penalty 1.2, token 0's negative logit becomes -1.10, below token 1's -1.05
    assert generate(model, prompt, 1, temperature=0.0, repetition_penalty=1.2)[0, -1] == 1
    out = generate(model, torch.tensor([[2]]), 2, temperature=0.0, repetition_penalty=10.0)
    assert out.tolist() == [[2, 0, 1]]  # each token, once seen, drops below the unseen ones


def test_no_repeat_ngram_ban_reaches_generate():
    out = generate(FIVE, torch.tensor([[0]]), 4, temperature=0.0, no_repeat_ngram_size=1)
    assert out.tolist() == [[0, 1, 2, 3, 4]]  # greedy takes the best token not yet used


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_an_ngram_ban_that_leaves_no_token_raises(temperature):
    model = FixedLogits([0.5, 0.3, 0.2])
    prompt = torch.tensor([[0, 1, 2], [0, 0, 0]])  # row 0 has used every token of the vocabulary
    with pytest.raises(ValueError, match=r"no_repeat_ngram_size=1 bans every token.*row 0"):
        generate(model, prompt, 1, temperature=temperature, no_repeat_ngram_size=1,
                 generator=torch.Generator().manual_seed(0))
    # bigrams: after (.., 0, 0) only (0, 0) is banned in row 1; row 0 ends in 2 with (2, x) unseen
    out = generate(model, prompt, 1, temperature=0.0, no_repeat_ngram_size=2)
    assert out[:, -1].tolist() == [0, 1]


def test_knob_values_in_generate_match_by_hand():
    logits = torch.tensor([[2.0, 1.0, -1.0, 0.5]])
    tokens = torch.tensor([[0, 2, 3]])
    # penalty 2 on tokens 0, 2, 3: (1.0, 1.0, -2.0, 0.25); temperature 0.5 (after shifting the max to 0):
    # (0, 0, -6, -1.5); top-k 3 drops token 2
    out = next_token_logits(logits, tokens, temperature=0.5, top_k=3, repetition_penalty=2.0)
    assert torch.equal(out, torch.tensor([[0.0, 0.0, -math.inf, -1.5]]))
