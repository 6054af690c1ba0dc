import math

import pytest
import torch

from shared.checkpoint import load_checkpoint, restore_model, save_checkpoint
from shared.generation import seq2seq as decoding
from shared.generation.seq2seq import (
    beam_loop,
    beam_search,
    exact_match,
    greedy_decode,
    greedy_loop,
    load_reverser,
    max_source_len,
    reverse,
    save_reverser,
)
from shared.reversal import BOS, EOS, MAX_DIGITS, PAD, VOCAB_SIZE, make_model
from shared.transformer import TransformerConfig

ARCHS = ["encoder_decoder", "decoder_only"]
SOURCES = [[1, 2, 3], [9, 8, 7, 6, 5, 4, 3], [0, 0, 1, 1], [5] * MAX_DIGITS, [4, 2, 4]]


def small(arch):
    torch.manual_seed(0)
    model = make_model(arch, d_model=32, n_heads=4, n_layers=1).eval()
    with torch.no_grad():  # larger random weights give varied outputs, EOS included, so decoding paths differ
        for p in model.parameters():
            if p.dim() > 1:
                torch.nn.init.normal_(p, std=0.5)
    return model


def test_greedy_loop_stops_when_every_row_has_eos_and_pads_after():
    script = torch.tensor([[5, EOS, 9, 9], [6, 7, EOS, 9]])  # token chosen at each step, per row
    calls = []

    def step_fn(seq):
        calls.append(seq.size(1))
        return torch.nn.functional.one_hot(script[:, seq.size(1) - 1], VOCAB_SIZE).float()

    out = greedy_loop(step_fn, torch.full((2, 1), BOS), max_new=10)
    assert out.tolist() == [[5, EOS, PAD], [6, 7, EOS]]
    assert calls == [1, 2, 3]  # fed back its own predictions, stopped after the last EOS


@pytest.mark.parametrize("arch", ARCHS)
def test_batched_greedy_equals_one_by_one(arch):
    model = small(arch)
    batched = greedy_decode(model, SOURCES)
    assert batched == [greedy_decode(model, [s])[0] for s in SOURCES]
    assert len({tuple(b) for b in batched}) > 1  # the outputs really differ from row to row


@pytest.mark.parametrize("arch", ARCHS)
def test_decoding_runs_without_dropout_and_gives_the_model_back_its_mode(arch):
    model = small(arch)
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.5  # in training mode, every decoding would draw other masks
    expected = greedy_decode(model, SOURCES), beam_search(model, SOURCES[1], beam_size=2)
    model.train()
    assert (greedy_decode(model, SOURCES), beam_search(model, SOURCES[1], beam_size=2)) == expected
    assert model.training and all(m.training for m in model.modules())


@pytest.mark.parametrize("arch", ARCHS)
def test_beam_size_one_equals_greedy(arch):
    model = small(arch)
    for source in SOURCES:
        assert beam_search(model, source, beam_size=1) == greedy_decode(model, [source])[0]
    with pytest.raises(ValueError, match="beam_size"):
        beam_search(model, SOURCES[0], beam_size=0)


@pytest.mark.parametrize("arch", ARCHS)
def test_checkpoint_round_trip(arch, tmp_path):
    model = small(arch)
    path = save_reverser(tmp_path / "reverser.pt", model)
    loaded = load_reverser(path)
    assert type(loaded) is type(model) and not loaded.training
    assert greedy_decode(loaded, SOURCES) == greedy_decode(model, SOURCES)
    assert load_checkpoint(path)["extra"]["vocabulary"]["eos"] == EOS


def test_checkpoint_errors(tmp_path):
    model = small("encoder_decoder")
    path = save_reverser(tmp_path / "reverser.pt", model)
    with pytest.raises(FileNotFoundError):
        load_reverser(tmp_path / "missing.pt")
    broken = tmp_path / "broken.pt"
    broken.write_bytes(path.read_bytes()[: path.stat().st_size // 2])  # a truncated download
    with pytest.raises(ValueError, match="truncated or corrupt"):
        load_reverser(broken)
    other = TransformerConfig(VOCAB_SIZE, VOCAB_SIZE, d_model=64, n_heads=4, max_len=MAX_DIGITS + 1)
    with pytest.raises(ValueError, match="another config"):
        restore_model(load_checkpoint(path), make_model("encoder_decoder", d_model=64), other)
    plain = save_checkpoint(tmp_path / "plain.pt", model, model.config)  # no vocabulary in `extra`
    with pytest.raises(ValueError, match="vocabulary"):
        load_reverser(plain)


def test_reverse_rejects_bad_input():
    model = small("encoder_decoder")
    with pytest.raises(TypeError, match="digits"):
        reverse(model, "123")
    with pytest.raises(TypeError, match="digits"):
        reverse(model, [1, 2.0, 3])
    with pytest.raises(TypeError, match="digits"):
        reverse(model, [True, 2, 3])
    with pytest.raises(ValueError, match="0-9"):
        reverse(model, [1, 12, 3])
    with pytest.raises(ValueError, match="empty"):
        reverse(model, [])
    with pytest.raises(ValueError, match=f"at most {MAX_DIGITS}"):
        reverse(model, [1] * (MAX_DIGITS + 1))
    with pytest.raises(TypeError, match="model"):
        reverse(torch.nn.Linear(2, 2), [1, 2, 3])
    assert max_source_len(model) == max_source_len(small("decoder_only")) == MAX_DIGITS


def test_exact_match_counts_only_exact_reversals_with_eos(monkeypatch):
    sources = [[1, 2, 3], [4, 5], [6, 7, 8], [9, 0], [1, 1, 1], [2, 2]]
    outputs = {  # what a model might generate (tokens = digit + 3), EOS kept, and whether it is an exact match
        (1, 2, 3): [6, 5, 4, EOS],  # right
        (4, 5): [8, 7, 7],  # right, then an extra token
        (6, 7, 8): [11, 10, EOS],  # a correct prefix, one token short
        (9, 0): [3, 12, EOS],  # right
        (1, 1, 1): [4, 4, 5, EOS],  # one token wrong
        (2, 2): [5, 5],  # the right digits, but no EOS: the model never stopped
    }
    calls = []

    def scripted(model, chunk, max_new=None, *, keep_eos=False):
        assert keep_eos, "exact_match must look at the EOS"
        calls.append(len(chunk))
        return [outputs[tuple(s)] for s in chunk]

    monkeypatch.setattr(decoding, "greedy_decode", scripted)
    assert exact_match(small("encoder_decoder"), sources, batch_size=2) == 2 / 6
    assert calls == [2, 2, 2]  # every source decoded once, in batches of batch_size
    with pytest.raises(ValueError, match="non-empty"):
        exact_match(small("encoder_decoder"), [])
    with pytest.raises(ValueError, match="batch_size"):
        exact_match(small("encoder_decoder"), sources, batch_size=0)


A, B, X, Y, Z = 3, 4, 5, 6, 7  # digit tokens used as the words of a scripted step function


def scripted_step(table):
    """step_fn from {generated prefix: {token: probability}}; every other token gets probability ~0."""

    def step_fn(seq):
        logits = torch.full((seq.size(0), VOCAB_SIZE), -30.0)
        for row, tokens in enumerate(seq[:, 1:].tolist()):  # drop the start token
            for token, p in table.get(tuple(tokens), {}).items():
                logits[row, token] = torch.tensor(p).log()
        return logits

    return step_fn


def test_beam_finds_the_more_probable_sequence_that_greedy_misses():
    # greedy takes A (0.6) but then at best X (0.4): 0.24. B (0.4) then X (0.9) is 0.36.
    step = scripted_step({(): {A: 0.6, B: 0.4}, (A,): {X: 0.4, Y: 0.3, Z: 0.3}, (B,): {X: 0.9, Y: 0.1},
                          (A, X): {EOS: 1.0}, (B, X): {EOS: 1.0}, (A, Y): {EOS: 1.0}, (A, Z): {EOS: 1.0}})
    start = torch.full((1, 1), BOS)
    assert greedy_loop(step, start, max_new=5)[0].tolist() == [A, X, EOS]
    tokens, score = beam_loop(step, start, beam_size=1, max_new=5)
    assert tokens.tolist() == [A, X, EOS] and score == pytest.approx(math.log(0.24), abs=1e-4)
    tokens, score = beam_loop(step, start, beam_size=2, max_new=5)
    assert tokens.tolist() == [B, X, EOS] and score == pytest.approx(math.log(0.36), abs=1e-4)


def test_length_penalty_prefers_the_longer_output_with_the_better_mean():
    # stopping at once: log 0.55 = -0.60 in 1 token; A B EOS: log 0.45 = -0.80 in 3 tokens (mean -0.27)
    step = scripted_step({(): {EOS: 0.55, A: 0.45}, (A,): {B: 1.0}, (A, B): {EOS: 1.0}})
    start = torch.full((1, 1), BOS)
    short, _ = beam_loop(step, start, beam_size=2, max_new=5)
    assert short.tolist()[:1] == [EOS]  # plain sums favour the short output
    long, score = beam_loop(step, start, beam_size=2, max_new=5, length_penalty=1.0)
    assert long.tolist() == [A, B, EOS] and score == pytest.approx(math.log(0.45), abs=1e-4)
    with pytest.raises(ValueError, match="length_penalty"):
        beam_loop(step, start, beam_size=2, max_new=5, length_penalty=-1.0)


def test_length_penalty_counts_the_eos():
    # [EOS]: log 0.4 = -0.92 in 1 token. [A, EOS]: log 0.36 = -1.02 in 2 tokens, the better mean (-0.51)
    # only if the EOS counts: without it, -1.02 over 1 token would lose to -0.92.
    step = scripted_step({(): {EOS: 0.4, A: 0.6}, (A,): {EOS: 0.6, B: 0.4}})
    start = torch.full((1, 1), BOS)
    assert beam_loop(step, start, beam_size=2, max_new=5)[0].tolist()[:1] == [EOS]
    tokens, score = beam_loop(step, start, beam_size=2, max_new=5, length_penalty=1.0)
    assert tokens.tolist() == [A, EOS] and score == pytest.approx(math.log(0.36), abs=1e-4)


def test_length_penalty_counts_every_token_of_a_hypothesis_that_never_stopped():
    # [EOS]: log 0.5 = -0.69 in 1 token. [A, A, A] hits max_new without EOS: log 0.3 = -1.20 in 3 tokens, the
    # better mean (-0.40) only if its length is its 3 tokens: counted as 1, -1.20 would lose to -0.69.
    step = scripted_step({(): {EOS: 0.5, A: 0.3, B: 0.2}, (A,): {A: 1.0}, (A, A): {A: 1.0}})
    start = torch.full((1, 1), BOS)
    assert beam_loop(step, start, beam_size=2, max_new=3)[0].tolist()[:1] == [EOS]
    tokens, score = beam_loop(step, start, beam_size=2, max_new=3, length_penalty=1.0)
    assert tokens.tolist() == [A, A, A] and score == pytest.approx(math.log(0.3), abs=1e-4)


def test_finished_hypotheses_only_pad():
    # After EOS a model may still predict anything (here Y, 0.99). A finished hypothesis must not spawn
    # [EOS, Y]: such copies would fill the beam and push out A X Z EOS, the best mean (-1.31 / 4).
    after_eos = {Y: 0.99, Z: 0.01}
    step = scripted_step({(): {EOS: 0.5, A: 0.3, B: 0.2}, (EOS,): after_eos, (EOS, PAD): after_eos,
                          (A,): {X: 0.9, Y: 0.1}, (A, X): {Z: 1.0}, (A, X, Z): {EOS: 1.0}})
    fed = []

    def recording(seq):
        fed.extend(seq[:, 1:].tolist())
        return step(seq)

    tokens, score = beam_loop(recording, torch.full((1, 1), BOS), beam_size=2, max_new=6, length_penalty=1.0)
    assert tokens.tolist() == [A, X, Z, EOS] and score == pytest.approx(math.log(0.27), abs=1e-3)
    for row in fed:  # every hypothesis the model was asked to extend: only PAD after its EOS
        assert EOS not in row or set(row[row.index(EOS) + 1 :]) <= {PAD}, row


def uniform_step(seq):
    return torch.zeros(seq.size(0), VOCAB_SIZE)  # (B, V): every token equally likely


@pytest.mark.parametrize("call, message", [
    (lambda: greedy_loop(uniform_step, torch.full((2, 1), BOS), max_new=-1), "max_new must be an int >= 0"),
    (lambda: greedy_loop(uniform_step, torch.full((2, 1), BOS), max_new=2.5), "max_new must be an int >= 0"),
    (lambda: greedy_loop(uniform_step, torch.full((2,), BOS), max_new=3), r"start must be a \(B, T\) integer"),
    (lambda: greedy_loop(uniform_step, torch.full((2, 1), 1.0), max_new=3), r"start must be a \(B, T\) integer"),
    (lambda: greedy_loop(lambda seq: torch.zeros(1, VOCAB_SIZE), torch.full((2, 1), BOS), max_new=3),
     r"step_fn must return next-token logits of shape \(B=2, V\)"),
    (lambda: greedy_loop(lambda seq: torch.zeros(2, 1, VOCAB_SIZE), torch.full((2, 1), BOS), max_new=3),
     r"step_fn must return .* got shape \(2, 1, 13\)"),
    (lambda: beam_loop(uniform_step, torch.full((2, 1), BOS), beam_size=2, max_new=3), r"start must be one sequence"),
    (lambda: beam_loop(uniform_step, torch.full((1, 1), BOS), beam_size=2, max_new=0), "max_new must be a positive"),
    (lambda: beam_loop(uniform_step, torch.full((1, 1), BOS), beam_size=2, max_new=3, length_penalty=math.nan),
     "length_penalty"),
    (lambda: beam_loop(lambda seq: torch.zeros(1, VOCAB_SIZE), torch.full((1, 1), BOS), beam_size=2, max_new=3),
     r"step_fn must return next-token logits of shape \(B=2, V\)"),  # the second step holds 2 hypotheses
])
def test_the_decoding_loops_refuse_bad_input_by_name(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_greedy_loop_may_append_nothing():
    assert greedy_loop(uniform_step, torch.full((2, 1), BOS), max_new=0).shape == (2, 0)
