"""Checkers of notebook 05: each accepts a correct answer and rejects plausible wrong ones with the right hint."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from shared import exercises as ex
from shared.exercises.block import ENCODER_LAYER_CASES, encoder_layer_count_mistakes, reference_encoder_layer_params
from shared.layers import EncoderLayer

from .helpers import accepts, rejects, verdict

ALL = ex.CHECKERS["05"]



def test_notebook_05_has_four_checkers_registered():
    assert ALL == [ex.check_layer_norm, ex.check_sublayer_connection, ex.check_encoder_layer_params,
                   ex.check_pre_ln_block]


@pytest.mark.parametrize("check", ALL, ids=lambda c: c.__name__)
def test_stub_and_crash_are_feedback(check, capsys):
    def stub(*args):
        raise NotImplementedError

    assert "not solved yet" in verdict(check, stub, capsys)[1]
    result, out = verdict(check, lambda *a: 1 / 0, capsys)
    assert result is False and "ZeroDivisionError" in out and "Traceback" not in out


# ---------------------------------------------------------------- layer norm


def mean_var(x):
    return x.mean(-1, keepdim=True), x.var(-1, keepdim=True, unbiased=False)


def layer_norm(x, gamma, beta, eps):
    mean, var = mean_var(x)
    return (x - mean) / torch.sqrt(var + eps) * gamma + beta


def test_layer_norm_accepts_by_hand_and_torch(capsys):
    accepts(ex.check_layer_norm, layer_norm, capsys)
    accepts(ex.check_layer_norm, lambda x, g, b, eps: F.layer_norm(x, x.shape[-1:], g, b, eps), capsys)


@pytest.mark.parametrize("wrong,hint", [
    (lambda x, g, b, eps: (x - x.mean(-1, keepdim=True)) / (x.var(-1, keepdim=True) + eps).sqrt() * g + b,
     "biased variance"),
    (lambda x, g, b, eps: (x - mean_var(x)[0]) / (mean_var(x)[1].sqrt() + eps) * g + b, "inside the square root"),
    (lambda x, g, b, eps: layer_norm(x, b, g, eps), "swapped"),
    (lambda x, g, b, eps: layer_norm(x, 1.0, 0.0, eps), "scale by gamma"),
    (lambda x, g, b, eps: (x - x.mean(0, keepdim=True)) / (x.var(0, keepdim=True, unbiased=False) + eps).sqrt() * g + b,
     "last axis"),
])
def test_layer_norm_rejects_common_mistakes(wrong, hint, capsys):
    rejects(ex.check_layer_norm, wrong, capsys, hint)


# ---------------------------------------------------------------- sublayer connection


def sublayer_connection(x, sublayer, norm, pre_ln):
    return x + sublayer(norm(x)) if pre_ln else norm(x + sublayer(x))


def test_sublayer_connection_accepts_both_orders_and_keeps_the_global_rng(capsys):
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    accepts(ex.check_sublayer_connection, sublayer_connection, capsys)
    assert torch.equal(torch.random.get_rng_state(), before)


@pytest.mark.parametrize("wrong,hint", [
    (lambda x, s, n, pre: sublayer_connection(x, s, n, not pre), "other order"),
    (lambda x, s, n, pre: n(x) + s(n(x)) if pre else n(x + s(x)), "x itself, not norm(x)"),
    (lambda x, s, n, pre: s(n(x)) if pre else n(x + s(x)), "residual is missing"),
    (lambda x, s, n, pre: x + n(s(x)) if pre else n(x + s(x)), "sublayer's input"),
    (lambda x, s, n, pre: n(s(x)) if not pre else x + s(n(x)), "residual is missing"),
])
def test_sublayer_connection_rejects_common_mistakes(wrong, hint, capsys):
    rejects(ex.check_sublayer_connection, wrong, capsys, hint)


# ---------------------------------------------------------------- parameter count


def count(d, h, ff):
    attention = 4 * (d * d + d)  # W^Q, W^K, W^V, W^O with biases
    ffn = d * ff + ff + ff * d + d
    return attention + ffn + 2 * (2 * d)  # two LayerNorms


def test_reference_count_is_the_module_count():
    layer = EncoderLayer(512, 8, 2048)
    assert reference_encoder_layer_params(512, 8, 2048) == sum(p.numel() for p in layer.parameters())
    assert reference_encoder_layer_params(512, 8, 2048) == 3_152_384  # the 2017 base model's encoder layer


def test_encoder_layer_params_accepts_the_formula_and_ints_in_disguise(capsys):
    accepts(ex.check_encoder_layer_params, count, capsys)
    accepts(ex.check_encoder_layer_params, lambda d, h, ff: float(count(d, h, ff)), capsys)
    accepts(ex.check_encoder_layer_params, lambda d, h, ff: np.int64(count(d, h, ff)), capsys)  # e.g. from np.prod


@pytest.mark.parametrize("d,h,ff", ENCODER_LAYER_CASES)
def test_encoder_layer_count_hints_name_one_mistake_each(d, h, ff):
    """Each hinted wrong count is a different number and none is the right one, so no hint lands on another
    mistake's count (the first listed would win) or on a correct answer."""
    wrong = [value for value, _ in encoder_layer_count_mistakes(d, h, ff)]
    assert len(set(wrong)) == len(wrong) and reference_encoder_layer_params(d, h, ff) not in wrong


@pytest.mark.parametrize("wrong,hint", [
    (lambda d, h, ff: 4 * d * d + 2 * d * ff + 4 * d, "biases count too"),
    (lambda d, h, ff: count(d, h, ff) - 4 * d, "gamma and beta"),
    (lambda d, h, ff: count(d, h, ff) - 2 * d, "two LayerNorms"),
    (lambda d, h, ff: count(d, h, ff) - d * d - d, "W^O"),
    (lambda d, h, ff: count(d, h, ff) - 3 * (d * d + d) + 3 * (d * (d // h) + d // h), "whatever n_heads is"),
    (lambda d, h, ff: count(d, h, ff) - d * ff - ff, "two linear layers"),
    (lambda d, h, ff: count(d, h, ff) * h, "the number of heads does not change the count"),
    (lambda d, h, ff: count(d, h, ff) + (h - 1) * 4 * (d * d + d), "the number of heads does not change the count"),
    (lambda d, h, ff: count(d, h, ff) + (h - 1) * 3 * (d * d + d), "the number of heads does not change the count"),
    (lambda d, h, ff: count(d, h, ff) + (h - 1) * 4 * d * d, "the number of heads does not change the count"),
    (lambda d, h, ff: count(d, h, ff) + (h - 1) * 3 * d * d, "the number of heads does not change the count"),
    (lambda d, h, ff: h * (4 * (d * d + d) + 2 * d * ff + ff + d) + 4 * d,
     "the number of heads does not change the count"),  # attention and FFN per head, the LayerNorms once
    (lambda d, h, ff: str(count(d, h, ff)), "expected an int"),
])
def test_encoder_layer_params_rejects_common_mistakes(wrong, hint, capsys):
    rejects(ex.check_encoder_layer_params, wrong, capsys, hint)
