"""shared.debug.print_shapes: one line per module run, attention weights included, hooks removed on exit."""

import pytest
import torch
from torch import nn

from shared.attention import MultiHeadAttention
from shared.debug import print_shapes


def test_prints_each_output_shape_and_the_attention_weights(capsys):
    torch.manual_seed(0)
    attn, linear = MultiHeadAttention(8, 2), nn.Linear(8, 3)
    x = torch.randn(2, 5, 8)
    with print_shapes({"attn": attn, "a longer name": linear}):
        out, _ = attn(x, x, x, need_weights=True)
        linear(out)
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["         attn: (2, 5, 8)   weights (2, 2, 5, 5)", "a longer name: (2, 5, 3)"]


def test_hooks_are_removed_on_exit_and_on_error(capsys):
    linear = nn.Linear(4, 4)
    with print_shapes({"linear": linear}):
        pass
    with pytest.raises(RuntimeError, match="inside"):
        with print_shapes({"linear": linear}):
            raise RuntimeError("inside")
    assert not linear._forward_hooks
    linear(torch.zeros(1, 4))
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("parts, error, words", [
    ({}, ValueError, "non-empty mapping"),
    ([nn.Linear(1, 1)], ValueError, "non-empty mapping"),
    ({"linear": "not a module"}, TypeError, "nn.Module"),
    ({1: nn.Linear(1, 1)}, TypeError, "str names"),
])
def test_bad_parts_are_named(parts, error, words):
    with pytest.raises(error, match=words):
        with print_shapes(parts):
            pass
