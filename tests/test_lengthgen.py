"""shared.lengthgen's scoring: teacher_forced_match and accuracy_by_length run in eval mode and refuse bad input."""

import pytest
import torch

from shared.kv_cache import kv_cache_bytes
from shared.lengthgen import accuracy_by_length, coupled_positions, mean_over, teacher_forced_match
from shared.reversal import make_model


def small(arch, dropout=0.0):
    torch.manual_seed(0)
    return make_model(arch, d_model=16, n_heads=2, n_layers=1, dropout=dropout)  # sources of up to 12 digits


@pytest.mark.parametrize("arch", ["encoder_decoder", "decoder_only"])
def test_teacher_forced_match_runs_in_eval_mode_and_restores_the_mode(arch):
    model = small(arch, dropout=0.5).train()
    modes = []
    handles = [m.register_forward_pre_hook(lambda m, args: modes.append(m.training)) for m in model.modules()]
    teacher_forced_match(model, [(1, 2, 3), (4, 5, 6, 7)])
    for handle in handles:
        handle.remove()
    assert modes and not any(modes)  # every module ran without dropout
    assert model.training and all(m.training for m in model.modules())  # and got its training mode back


@pytest.mark.parametrize("call, error, message", [
    (lambda m: teacher_forced_match(None, [(1, 2, 3)]), TypeError, "model must be"),
    (lambda m: teacher_forced_match(m, []), ValueError, "sources must be a non-empty list"),
    (lambda m: teacher_forced_match(m, "123"), TypeError, "sources must be a list of digit lists"),
    (lambda m: teacher_forced_match(m, [(1, 2), (3, 12)]), ValueError, r"sources\[1\] must hold ints 0-9"),
    (lambda m: teacher_forced_match(m, [(1, 2.0)]), TypeError, r"sources\[0\] must hold ints"),
    (lambda m: teacher_forced_match(m, [(1,) * 13]), ValueError, r"sources\[0\] may hold at most 12 digits"),
    (lambda m: teacher_forced_match(m, [(1, 2)], targets=[(2, 1, 0)]), ValueError, "targets must give"),
    (lambda m: teacher_forced_match(m, [(1, 2)], targets=[(2, -1)]), ValueError, r"targets\[0\] must hold ints"),
    (lambda m: accuracy_by_length(None, {3: [(1, 2, 3)]}), TypeError, "model must be"),
    (lambda m: accuracy_by_length(m, {}), ValueError, "test_sets must be a non-empty dict"),
    (lambda m: accuracy_by_length(m, [(1, 2, 3)]), ValueError, "test_sets must be a non-empty dict"),
    (lambda m: accuracy_by_length(m, {3: []}), ValueError, r"test_sets\[3\] must be a non-empty list"),
    (lambda m: accuracy_by_length(m, {3: [(1, 2, 3), (1, 2)]}), ValueError, r"test_sets\[3\] must hold lists of 3"),
    (lambda m: accuracy_by_length(m, {0: [()]}), ValueError, "each length must be a positive int"),
])
@pytest.mark.parametrize("arch", ["encoder_decoder", "decoder_only"])
def test_bad_input_is_refused_by_name(arch, call, error, message):
    with pytest.raises(error, match=message):
        call(small(arch))


def test_accuracy_by_length_is_the_fraction_per_length():
    model = small("decoder_only")
    sets = {2: [(1, 2), (3, 4), (5, 6)], 3: [(1, 2, 3)]}
    matched = {n: teacher_forced_match(model, lists).float().mean().item() for n, lists in sets.items()}
    assert accuracy_by_length(model, sets) == pytest.approx(matched)


def test_small_inputs_are_refused_with_the_argument_named():
    tokens = torch.tensor([[1, 5, 6, 7, 2, 9, 8, 7]])  # BOS, 3 digits, EOS, answer: ids up to 4
    with pytest.raises(ValueError, match="max_position=3 is too small.*at least 5"):
        coupled_positions(tokens, max_position=3)
    assert coupled_positions(tokens, max_position=5).max() <= 4  # exactly enough room: no offset, no error
    with pytest.raises(ValueError, match="at least one length"):
        mean_over({3: 1.0}, [])
    with pytest.raises(TypeError, match="caches must be an iterable of KVCache"):
        kv_cache_bytes(None)
    with pytest.raises(TypeError, match="caches must hold KVCache"):
        kv_cache_bytes([None])
