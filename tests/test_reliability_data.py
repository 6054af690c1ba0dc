"""Bad input to the data and generation entry points gets a clear error that names the argument (issue 24).

Each case here once gave a silent wrong answer, a NaN, or an obscure error from deep inside torch or Python.
"""

import math

import pytest
import torch

from shared.addition import AdditionBatches
from shared.generation.lm import generate, next_token_logits
from shared.generation.seq2seq import beam_loop, greedy_decode, greedy_loop
from shared.gpt import GPT, GPTConfig
from shared.reversal import (
    ReversalBatches,
    collate,
    decoder_only_sample,
    make_model,
    pad_to,
    seq2seq_sample,
)
from shared.shakespeare import FILE_NAME, block_batches, load_tiny_shakespeare, train_val_split

# ---------------------------------------------------------------- collate: a sample of the other architecture


def test_collate_refuses_samples_of_the_other_architecture():
    seq2seq = [seq2seq_sample([1, 2, 3]), seq2seq_sample([4, 5])]
    decoder = [decoder_only_sample([1, 2, 3]), decoder_only_sample([4, 5])]
    # was: an LMBatch of (src, tgt_in)
    with pytest.raises(ValueError, match=r"samples\[0\] has 3 items.*'decoder_only' takes \(inputs, labels\)"):
        collate(seq2seq, "decoder_only")
    with pytest.raises(ValueError, match=r"samples\[0\] has 2 items.*arch='decoder_only'"):  # was: IndexError
        collate(decoder, "encoder_decoder")
    with pytest.raises(ValueError, match=r"samples\[1\]"):  # one stray sample among good ones
        collate([decoder[0], seq2seq[0]], "decoder_only")
    assert collate(seq2seq, "encoder_decoder").src.shape == (2, 3)  # the right kinds still collate
    assert collate(decoder, "decoder_only").tokens.shape == (2, 8)


def test_pad_to_needs_rows():
    with pytest.raises(ValueError, match="rows must be a non-empty"):
        pad_to([], 0)
    assert pad_to([[1], [2, 3]], 0).tolist() == [[1, 0], [2, 3]]


def test_batches_check_their_seed_and_exclusions():
    with pytest.raises(ValueError, match="seed must be an int"):
        ReversalBatches("decoder_only", 4, seed="a")
    with pytest.raises(ValueError, match="seed must be an int"):
        AdditionBatches("decoder_only", 4, seed=0.5)
    with pytest.raises(ValueError, match=r"exclude must hold \(a, b\) problems.*index 0"):
        AdditionBatches("decoder_only", 4, exclude=[1, 2])
    with pytest.raises(ValueError, match=r"exclude must hold \(a, b\) problems.*index 1"):
        AdditionBatches("decoder_only", 4, exclude=[(1, 2), (3, -4)])
    batches = AdditionBatches("decoder_only", 4, exclude=[(1, 2), [3, 4]])  # pairs as tuples or lists
    assert (2, 1) in batches.exclude and (4, 3) in batches.exclude


# ---------------------------------------------------------------- tiny Shakespeare: paths, splits, batches


def test_a_directory_is_not_the_corpus(tmp_path, monkeypatch):
    def no_download(*args, **kwargs):
        raise AssertionError("tried to download")

    monkeypatch.setattr("shared.shakespeare.download", no_download)
    with pytest.raises(ValueError, match=f"path must name the corpus file.*{FILE_NAME}"):
        load_tiny_shakespeare(tmp_path)
    monkeypatch.setenv("TINYSHAKESPEARE_PATH", str(tmp_path))
    with pytest.raises(ValueError, match="TINYSHAKESPEARE_PATH must name the corpus file"):
        load_tiny_shakespeare()


def test_train_val_split_never_returns_an_empty_split():
    tokens = torch.arange(50)
    with pytest.raises(ValueError, match="train_frac=0.01.*0 training tokens"):
        train_val_split(tokens, 0.01)
    with pytest.raises(ValueError, match="train_frac"):
        train_val_split(torch.arange(1), 0.5)  # one token cannot make two splits
    with pytest.raises(ValueError, match="train_frac must be a number"):
        train_val_split(tokens, "0.9")
    train, val = train_val_split(tokens, 0.99)
    assert len(train) == 49 and len(val) == 1


def test_block_batches_needs_a_1d_integer_tensor():
    for bad in (list(range(100)), torch.arange(100.0), torch.arange(100)[None]):
        with pytest.raises(ValueError, match="tokens must be a 1-D integer tensor"):
            block_batches(bad, 8, 2)
    with pytest.raises(ValueError, match="seed must be an int"):
        block_batches(torch.arange(100), 8, 2, seed="a")
    x, y = block_batches(torch.arange(100), 8, 2)(0)
    assert x.shape == y.shape == (2, 8)


# ---------------------------------------------------------------- generate: flags and generator


@pytest.fixture(scope="module")
def gpt():
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=7, block_size=8, n_layers=1, n_heads=1, d_model=8)).eval()


def test_generate_flags_must_be_booleans(gpt):
    prompt = torch.zeros(1, 1, dtype=torch.long)
    with pytest.raises(ValueError, match="use_cache must be a bool"):
        generate(gpt, prompt, 2, use_cache="no")
    with pytest.raises(TypeError, match="generator must be a torch.Generator or None, got int"):
        generate(gpt, prompt, 2, generator=42)
    a = generate(gpt, prompt, 3, generator=torch.Generator().manual_seed(1), use_cache=False)
    b = generate(gpt, prompt, 3, generator=torch.Generator().manual_seed(1), use_cache=True)
    assert torch.equal(a, b)


# ---------------------------------------------------------------- NaN and inf logits


class Broken(GPT):
    """A GPT whose logits are 0 except for `value` at (row, token) of the last position."""

    def __init__(self, value, row=0, token=None):
        super().__init__(GPTConfig(vocab_size=5, block_size=16, n_layers=1, n_heads=1, d_model=8))
        self.value, self.row, self.token = value, row, token

    def forward(self, tokens, caches=None, need_weights=False, positions=None):
        logits = torch.zeros(tokens.size(0), tokens.size(1), 5)
        if self.token is None:
            logits[self.row, -1, :] = self.value  # the whole row
        else:
            logits[self.row, -1, self.token] = self.value
        return logits


@pytest.mark.parametrize("value, token, what", [(math.nan, 2, "NaN"), (math.inf, 2, r"\+inf"),
                                                (-math.inf, None, "no finite")])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_generate_refuses_non_finite_logits(value, token, what, temperature):
    model = Broken(value, row=1, token=token)
    prompt = torch.zeros(2, 3, dtype=torch.long)
    with pytest.raises(ValueError, match=f"logits of row 1.*after 3 tokens.*{what}"):
        generate(model, prompt, 2, temperature=temperature, generator=torch.Generator().manual_seed(0))


def test_next_token_logits_refuses_nan_and_keeps_single_minus_inf():
    tokens = torch.zeros(2, 4, dtype=torch.long)
    with pytest.raises(ValueError, match="logits of row 0.*after 4 tokens.*NaN"):
        next_token_logits(torch.tensor([[0.0, math.nan], [0.0, 1.0]]), tokens)
    masked = next_token_logits(torch.tensor([[0.0, -math.inf], [-math.inf, 1.0]]), tokens, top_k=1)
    assert torch.isfinite(masked.amax(-1)).all()  # -inf entries (masking, top-k) stay legal


@pytest.mark.parametrize("value, token", [(math.nan, 4), (math.inf, 4), (-math.inf, None)])
def test_seq2seq_decoding_refuses_non_finite_logits(value, token):
    def step_fn(seq):
        logits = torch.zeros(seq.size(0), 13)
        if token is None:
            logits[0] = value
        else:
            logits[0, token] = value
        return logits

    start = torch.ones(1, 2, dtype=torch.long)
    with pytest.raises(ValueError, match="step_fn's logits of row 0.*after 2 tokens"):
        greedy_loop(step_fn, start, 3)
    with pytest.raises(ValueError, match="step_fn's logits of row 0.*after 2 tokens"):
        beam_loop(step_fn, start, 2, 3)  # was: score NaN


def test_greedy_decode_of_a_nan_model_raises():
    model = make_model("decoder_only", 8, 1, 1)
    with torch.no_grad():
        model.tok_emb.weight.fill_(math.nan)
    with pytest.raises(ValueError, match="NaN"):
        greedy_decode(model, [[1, 2, 3]])


def test_collate_refuses_inputs_and_labels_of_different_lengths_and_non_list_parts():
    from shared.reversal import collate

    with pytest.raises(ValueError, match=r"samples\[0\]"):
        collate([([1, 2, 3], [1])], "decoder_only")
    with pytest.raises(ValueError, match=r"samples\[0\]"):
        collate([([1], [1, 2], [3])])
    with pytest.raises(ValueError, match=r"samples\[0\]"):
        collate([(1, 2, 3)])


def test_train_val_split_checks_its_tokens():
    from shared.shakespeare import train_val_split

    for bad in (torch.zeros(2, 50, dtype=torch.long), torch.tensor(3), torch.zeros(50)):
        with pytest.raises(ValueError, match="tokens"):
            train_val_split(bad, 0.5)
