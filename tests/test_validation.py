"""The shared argument checks: what they accept, and errors that name the argument and the expected value."""

import math

import pytest
import torch

from shared.gpt import GPTConfig
from shared.validation import (
    check_batch_size,
    check_divisible,
    check_dropout,
    check_finite,
    check_int,
    check_positive_int,
    check_sequence,
    check_table_positions,
    check_tokens,
)


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


def test_sequence_token_batch_and_table_checks():
    """The checks behind the model's clear errors for empty sequences, batch mismatches and table ids."""
    x = torch.zeros(2, 3, 8)
    assert check_sequence("query", x, 8) is x and check_tokens("tokens", torch.ones(2, 1, dtype=torch.long)) is not None
    for bad, error in ((torch.zeros(2, 0, 8), ValueError), (torch.zeros(2, 3, 4), ValueError),
                       (torch.zeros(3, 8), ValueError), (torch.zeros(2, 3, 8, dtype=torch.long), TypeError)):
        with pytest.raises(error, match="query must"):
            check_sequence("query", bad, 8)
    for bad in (torch.ones(2, 0, dtype=torch.long), torch.ones(2, 3), torch.ones(3, dtype=torch.long), [[1]]):
        with pytest.raises(ValueError, match=r"tokens must be a \(B, T\) integer tensor of token ids with T >= 1"):
            check_tokens("tokens", bad)
    with pytest.raises(ValueError, match=r"^positions has batch size 2, but x has batch size 1$"):
        check_batch_size("positions", torch.zeros(2, 3), 1, of="x")
    check_table_positions(x, 5, None, max_len=8)  # ids 5..7: the last rows of the table
    check_table_positions(x, 0, torch.tensor([[0, 1, 7], [2, 2, 2]]), max_len=8)
    for offset, positions, message in ((-1, None, "offset must be an int >= 0"), (6, None, "offset 6 is longer"),
                                       (0, torch.tensor([0, 1, 8]), r"positions must lie in 0..7"),
                                       (0, torch.zeros(1, 3, dtype=torch.long), "positions has batch size 1")):
        with pytest.raises(ValueError, match=message):
            check_table_positions(x, offset, positions, max_len=8)
    with pytest.raises(TypeError, match="positions must be an integer tensor"):  # as for RoPE and ALiBi
        check_table_positions(x, 0, torch.tensor([0.0, 1.0, 2.0]), max_len=8)
