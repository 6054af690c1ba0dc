"""The shared argument checks: what they accept, and errors that name the argument and the expected value."""

import math

import pytest

from shared.gpt import GPTConfig
from shared.validation import check_divisible, check_dropout, check_finite, check_int, check_positive_int


def test_positive_int_accepts_ints_and_rejects_bools_floats_and_small_values():
    assert check_positive_int("n_heads", 3) == 3
    for bad in (0, -1, 2.0, True, "4", None):
        with pytest.raises(ValueError, match=r"n_heads must be a positive int, got"):
            check_positive_int("n_heads", bad)
    assert check_int("max_new_tokens", 0, minimum=0) == 0
    with pytest.raises(ValueError, match=r"max_new_tokens must be an int >= 0, got -1"):
        check_int("max_new_tokens", -1, minimum=0)


def test_divisible_dropout_and_finite():
    check_divisible(8, 4)
    with pytest.raises(ValueError, match=r"GPTConfig.d_model \(10\) must be divisible by GPTConfig.n_heads \(4\)"):
        check_divisible(10, 4, "GPTConfig.")
    assert check_dropout("dropout", 0.0) == 0.0
    for bad in (1.0, -0.1, True, "0.1"):
        with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\)"):
            check_dropout("dropout", bad)
    assert check_finite("temperature", 0.5, 0.0) == 0.5
    for bad in (math.nan, math.inf, -1.0, None):
        with pytest.raises(ValueError, match="temperature must be a finite number >= 0.0"):
            check_finite("temperature", bad, 0.0)


def test_configs_use_the_checks_with_their_own_name():
    with pytest.raises(ValueError, match=r"GPTConfig.n_layers must be a positive int, got 0"):
        GPTConfig(vocab_size=10, n_layers=0)
    with pytest.raises(ValueError, match=r"GPTConfig.dropout must be in \[0, 1\), got 1.5"):
        GPTConfig(vocab_size=10, dropout=1.5)
