import pytest
import torch

from shared.checkpoint import load_checkpoint, restore_model, save_checkpoint
from shared.decoding import (
    beam_search,
    exact_match,
    greedy_decode,
    greedy_loop,
    load_reverser,
    max_source_len,
    reverse,
    save_reverser,
)
from shared.reversal import BOS, EOS, MAX_LEN, PAD, VOCAB_SIZE, make_model, make_test_set
from shared.transformer import TransformerConfig

ARCHS = ["encoder_decoder", "decoder_only"]
SOURCES = [[1, 2, 3], [9, 8, 7, 6, 5, 4, 3], [0, 0, 1, 1], [5] * MAX_LEN, [4, 2, 4]]


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
def test_beam_size_one_equals_greedy(arch):
    model = small(arch)
    for source in SOURCES:
        assert beam_search(model, source, beam_size=1) == greedy_decode(model, [source])[0]
    wide = beam_search(model, SOURCES[1], beam_size=4)
    assert isinstance(wide, list) and len(wide) <= len(SOURCES[1]) + 1


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
    other = TransformerConfig(VOCAB_SIZE, VOCAB_SIZE, d_model=64, n_heads=4, max_len=MAX_LEN + 1)
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
    with pytest.raises(ValueError, match=f"at most {MAX_LEN}"):
        reverse(model, [1] * (MAX_LEN + 1))
    with pytest.raises(TypeError, match="model"):
        reverse(torch.nn.Linear(2, 2), [1, 2, 3])
    assert max_source_len(model) == max_source_len(small("decoder_only")) == MAX_LEN


def test_exact_match_counts_only_exact_reversals():
    model = small("encoder_decoder")
    sources = make_test_set(50, seed=0)
    outputs = greedy_decode(model, sources)
    expected = sum(out == [d + 3 for d in reversed(s)] for out, s in zip(outputs, sources)) / 50
    assert exact_match(model, sources, batch_size=30) == expected < 0.5
