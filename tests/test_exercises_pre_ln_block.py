"""check_pre_ln_block (notebook 05): a learner's whole Pre-LN block, proved equal to shared.layers.PreLNBlock."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from shared import exercises as ex
from shared.attention import MultiHeadAttention
from shared.layers import FeedForward, PreLNBlock

from .helpers import accepts, rejects, verdict

check = ex.check_pre_ln_block


class MyBlock(nn.Module):
    """The solution; the planted mistakes below change one line each through the switches."""

    residual1 = residual2 = pass_causal = True
    post_ln = shared_norm = swapped = eval_dropout = relu = False

    def __init__(self, d_model, n_heads, d_ff, dropout):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.norm2 = nn.LayerNorm(d_model)
        self.ff = FeedForward(d_model, d_ff, dropout, activation="relu" if self.relu else "gelu")
        self.dropout = nn.Dropout(dropout)
        self.p = dropout

    def drop(self, x):
        return F.dropout(x, self.p, training=True) if self.eval_dropout else self.dropout(x)

    def forward(self, x, causal=False):
        causal = causal if self.pass_causal else False
        norm1, norm2 = (self.norm2, self.norm1) if self.swapped else (self.norm1, self.norm2)
        norm2 = norm1 if self.shared_norm else norm2
        if self.post_ln:
            x = norm1(x + self.drop(self.attn(x, causal=causal)[0]))
            return norm2(x + self.drop(self.ff(x)))
        h, _ = self.attn(norm1(x), causal=causal)
        x = x + self.drop(h) if self.residual1 else self.drop(h)
        h = self.drop(self.ff(norm2(x)))
        return x + h if self.residual2 else h


def planted(**switches):
    return type("Planted", (MyBlock,), switches)


def test_registered_for_notebook_05():
    assert ex.CHECKERS["05"][-1] is check


def test_accepts_the_solution_and_the_course_block_and_keeps_the_rng(capsys):
    torch.manual_seed(5)
    before = torch.random.get_rng_state()
    accepts(check, MyBlock, capsys)
    assert torch.equal(torch.random.get_rng_state(), before)
    accepts(check, PreLNBlock, capsys)


@pytest.mark.parametrize("switches,hint", [
    ({"residual1": False}, "attention sublayer's residual is missing"),
    ({"residual2": False}, "feed-forward sublayer's residual is missing"),
    ({"post_ln": True}, "this is Post-LN"),
    ({"shared_norm": True}, "norm1 is used for both sublayers"),
    ({"swapped": True}, "norm1 and norm2 are swapped"),
    ({"pass_causal": False}, "the causal flag is ignored"),
    ({"eval_dropout": True}, "dropout is still on in eval mode"),
    ({"relu": True}, 'activation="gelu"'),
], ids=lambda v: next(iter(v)) if isinstance(v, dict) else "")
def test_names_each_planted_mistake(switches, hint, capsys):
    rejects(check, planted(**switches), capsys, hint)


def test_dropout_in_the_wrong_places(capsys):
    class NoResidualDropout(MyBlock):
        def drop(self, x):
            return x

    class NoInnerDropout(MyBlock):
        def __init__(self, d_model, n_heads, d_ff, dropout):
            super().__init__(d_model, n_heads, d_ff, 0.0)
            self.dropout = nn.Dropout(dropout)

    rejects(check, NoResidualDropout, capsys, "dropout is missing on the sublayers' outputs")
    rejects(check, NoInnerDropout, capsys, "pass dropout on to MultiHeadAttention and FeedForward")


def test_wrong_names_and_structure_are_feedback(capsys):
    class OneNorm(MyBlock):
        def __init__(self, *args):
            super().__init__(*args)
            del self.norm2

    class OwnFFN(MyBlock):
        def __init__(self, d_model, n_heads, d_ff, dropout):
            super().__init__(d_model, n_heads, d_ff, dropout)
            self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))

    class ReturnsTuple(MyBlock):
        def forward(self, x, causal=False):
            return super().forward(x, causal), None

    class NoCausalArgument(MyBlock):
        def forward(self, x):
            return super().forward(x)

    class Unpacked(MyBlock):
        def forward(self, x, causal=False):
            return x + self.attn(self.norm1(x), causal=causal)

    out = rejects(check, OneNorm, capsys, "missing norm2.bias, norm2.weight", "its own LayerNorm")
    assert "Traceback" not in out
    rejects(check, OwnFFN, capsys, "unexpected ff.0.bias", "FeedForward(d_model, d_ff, dropout")
    rejects(check, ReturnsTuple, capsys, "returns a tuple")
    rejects(check, NoCausalArgument, capsys, "def forward(self, x, causal=False)")
    rejects(check, Unpacked, capsys, "returns (output, weights)")


def test_the_attention_tuple_fed_to_dropout_is_named(capsys):
    """The exercise's own form, x + self.dropout(self.attn(...)): torch's message then has no quoted 'tuple'."""
    class UnpackedInDropout(MyBlock):
        def forward(self, x, causal=False):
            x = x + self.dropout(self.attn(self.norm1(x), causal=causal))
            return x + self.dropout(self.ff(self.norm2(x)))

    rejects(check, UnpackedInDropout, capsys, "must be Tensor, not tuple", "returns (output, weights)",
            "out, _ = self.attn(h, causal=causal)")


def test_stub_and_broken_init_are_feedback(capsys):
    class Stub(nn.Module):
        def __init__(self, d_model, n_heads, d_ff, dropout):
            super().__init__()

        def forward(self, x, causal=False):
            raise NotImplementedError

    class StubInit(nn.Module):
        def __init__(self, d_model, n_heads, d_ff, dropout):
            raise NotImplementedError

    class NoSuper(nn.Module):
        def __init__(self, d_model, n_heads, d_ff, dropout):
            self.norm1 = nn.LayerNorm(d_model)

    class Crashes(MyBlock):
        def __init__(self, *args):
            super().__init__(*args)
            raise ValueError("bad size")

    assert "not solved yet" in verdict(check, StubInit, capsys)[1]
    out = rejects(check, Stub, capsys)  # an empty module: the reference weights do not load
    assert "missing" in out
    rejects(check, NoSuper, capsys, "super().__init__()")
    out = rejects(check, Crashes, capsys, "ValueError: bad size")
    assert "Traceback" not in out
    rejects(check, MyBlock(16, 2, 32, 0.0), capsys, "not the class")  # an instance, not the class


def test_a_hard_coded_causal_mask_and_a_detached_sublayer_are_named(capsys):
    class AlwaysCausal(MyBlock):
        def forward(self, x, causal=False):
            return super().forward(x, causal=True)

    class Detached(MyBlock):
        def forward(self, x, causal=False):
            h, _ = self.attn(self.norm1(x), causal=causal)
            x = x + self.dropout(h).detach()
            return x + self.dropout(self.ff(self.norm2(x)))

    rejects(check, AlwaysCausal, capsys, "causal")
    rejects(check, Detached, capsys, "gradient")
