"""The per-stage attention printer: its stages are the real computation, its verdict can fail, bad input is refused."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from shared.attention import MultiHeadAttention
from shared.debug.attention_trace import OPTIONAL_STAGES, STAGES, attention_stages, trace_attention
from shared.masks import padding_mask


@pytest.fixture(autouse=True)
def seed():
    torch.manual_seed(0)


def test_stages_have_the_documented_shapes_and_values():
    mha = MultiHeadAttention(8, 2).eval()
    x, memory = torch.randn(2, 3, 8), torch.randn(2, 5, 8)  # cross-attention: T_q=3, T_k=5
    s = attention_stages(mha, x, memory)
    assert list(s) == [name for name in STAGES if name not in OPTIONAL_STAGES]  # no mask, RoPE, ALiBi or GQA
    assert s["q"].shape == (2, 3, 8) and s["k_heads"].shape == (2, 2, 5, 4) and s["scores"].shape == (2, 2, 3, 5)
    torch.testing.assert_close(s["q_heads"][:, 1], mha.w_q(x)[..., 4:])  # head 1 = features 4..7
    torch.testing.assert_close(s["scaled_scores"], s["scores"] / 2.0)  # sqrt(d_k) = 2
    torch.testing.assert_close(s["weights"], s["scaled_scores"].softmax(-1))
    reference = F.scaled_dot_product_attention(s["q_heads"], s["k_heads"], s["v_heads"])  # (B, H, T_q, d_k)
    torch.testing.assert_close(s["weighted_values"], reference)
    torch.testing.assert_close(s["merged"][..., 4:], reference[:, 1])
    with torch.no_grad():
        torch.testing.assert_close(s["output"], mha(x, memory)[0])


def test_masks_and_causal_give_zero_weight_to_blocked_keys():
    mha = MultiHeadAttention(8, 2).eval()
    x = torch.randn(2, 4, 8)
    pad = padding_mask(torch.tensor([[1, 2, 3, 4], [1, 2, 0, 0]]), 0)  # (B, 1, 1, T)
    s = attention_stages(mha, x, mask=pad, causal=True)
    assert (s["weights"][1, :, :, 2:] == 0).all() and (s["weights"][0].triu(1) == 0).all()
    assert (s["masked_scores"][1, :, :, 2:] == torch.finfo(torch.float32).min).all()
    with torch.no_grad():
        torch.testing.assert_close(s["output"], mha(x, mask=pad, causal=True)[0])


def test_trace_prints_every_stage_and_says_match(capsys):
    mha = MultiHeadAttention(4, 2).eval()
    stages = trace_attention(mha, torch.randn(1, 3, 4), causal=True)
    out = capsys.readouterr().out
    for title in ("q = x W^Q", "split into heads", "scaled scores", "masked scores", "softmax", "weighted values",
                  "merged", "output = merged W^O"):
        assert title in out
    assert "shape (1, 2, 3, 3) (B, H, T_q, T_k)" in out and "-inf" in out
    assert "output matches" in out and "module_output" in stages


class ForgotTheScale(nn.Module):
    """A learner's attention with a typical bug: no 1/sqrt(d_k)."""

    def __init__(self, d_model, n_heads):
        super().__init__()
        self.n_heads, self.d_k = n_heads, d_model // n_heads
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, query, key, value, mask=None):
        B, T, _ = query.shape
        q, k, v = (w(t).view(B, -1, self.n_heads, self.d_k).transpose(1, 2)
                   for w, t in ((self.w_q, query), (self.w_k, key), (self.w_v, value)))
        out = (q @ k.transpose(-2, -1)).softmax(-1) @ v  # (B, H, T, d_k), missing / sqrt(d_k)
        return self.w_o(out.transpose(1, 2).reshape(B, T, -1))


def test_trace_flags_a_learner_module_that_differs(capsys):
    buggy = ForgotTheScale(8, 2)
    with torch.no_grad():
        for w in (buggy.w_q, buggy.w_k):
            w.weight.mul_(4.0)  # sharper scores, so the missing scale surely changes the output
    trace_attention(buggy, torch.randn(2, 5, 8))
    out = capsys.readouterr().out
    assert "DIFFERS FROM" in out
    trace_attention(buggy, torch.randn(1, 2, 8), check=False)
    assert "module(...)" not in capsys.readouterr().out  # no verdict without check


def test_large_tensors_print_as_statistics(capsys):
    trace_attention(MultiHeadAttention(16, 4).eval(), torch.randn(2, 6, 16), max_values=10)
    out = capsys.readouterr().out
    assert "mean" in out and "std" in out and "[[[" not in out


def test_bad_input_is_refused():
    with pytest.raises(TypeError, match="w_q"):
        attention_stages(nn.Linear(4, 4), torch.randn(1, 2, 4))
    with pytest.raises(ValueError, match="query"):
        attention_stages(MultiHeadAttention(4, 2), torch.randn(2, 4))
    with pytest.raises(ValueError, match="decimals"):
        trace_attention(MultiHeadAttention(4, 2), torch.randn(1, 2, 4), decimals=-1)
    with pytest.raises(ValueError, match="mask"):
        attention_stages(MultiHeadAttention(4, 2), torch.randn(1, 2, 4), mask=torch.ones(3, 3, dtype=torch.bool))


@pytest.mark.parametrize("options", [{"rope": True}, {"alibi": True}, {"n_kv_heads": 1}, {"n_kv_heads": 2},
                                     {"fused_qkv": True, "n_kv_heads": 2, "rope": True}])
def test_trace_follows_rope_alibi_gqa_and_fused_qkv_as_the_module_does(options, capsys):
    """The course's own module with its options: the trace used to say DIFFERS (RoPE, ALiBi) or fail (GQA)."""
    mha = MultiHeadAttention(16, 4, **options).eval()
    x = torch.randn(2, 5, 16)
    pad = padding_mask(torch.tensor([[0, 1, 2, 3, 4], [1, 2, 3, 4, 5]]), 0)
    for kwargs in ({"causal": True}, {"mask": pad}):
        stages = trace_attention(mha, x, **kwargs)
        assert "output matches" in capsys.readouterr().out
        torch.testing.assert_close(stages["output"], stages["module_output"])
    assert stages["k_heads"].shape == (2, mha.n_kv_heads, 5, 4) and stages["weights"].shape == (2, 4, 5, 5)
    assert ("q_rotated" in stages) == ("rope" in options) and ("alibi_bias" in stages) == ("alibi" in options)
    assert ("k_repeated" in stages) == (mha.n_kv_heads < 4)


@pytest.mark.parametrize("options", [{"rope": True}, {"alibi": True}])
def test_trace_takes_the_positions_the_module_takes(options, capsys):
    mha = MultiHeadAttention(8, 2, **options).eval()
    x, positions = torch.randn(2, 3, 8), torch.tensor([[0, 2, 5], [3, 4, 9]])  # (B, T) ids
    stages = trace_attention(mha, x, causal=True, positions=positions)
    assert "output matches" in capsys.readouterr().out
    default = attention_stages(mha, x, causal=True)
    assert not torch.allclose(stages["output"], default["output"])  # the ids were used
    with pytest.raises(ValueError, match="positions"):
        attention_stages(MultiHeadAttention(8, 2), x, positions=positions)  # no RoPE or ALiBi to use them


def test_trace_of_a_module_in_training_mode_turns_dropout_off_and_restores_the_mode(capsys):
    mha = MultiHeadAttention(8, 2, dropout=0.5).train()  # dropout on the weights: outputs differ at random
    stages = trace_attention(mha, torch.randn(2, 4, 8), causal=True)
    assert "output matches" in capsys.readouterr().out
    torch.testing.assert_close(stages["output"], stages["module_output"])
    assert mha.training and mha.w_q.training  # its own mode back
    trace_attention(mha.eval(), torch.randn(1, 3, 8))
    assert not mha.training  # a module in eval mode stays in eval mode


class OffBy(MultiHeadAttention):
    """The course's module with a small error planted in its output."""

    def __init__(self, error):
        super().__init__(8, 2)
        self.error = error

    def forward(self, query, key=None, value=None, mask=None, **options):
        out, weights = super().forward(query, key, value, mask, **options)
        return out + self.error, weights


@pytest.mark.parametrize("error", [1e-1, 1e-2, 1e-3])
def test_trace_flags_an_output_off_by_a_small_error(error, capsys):
    stages = trace_attention(OffBy(error).eval(), torch.randn(2, 5, 8), causal=True)
    out = capsys.readouterr().out
    assert stages["output"].abs().max() < 2  # so the tolerance is 1e-4, not scaled up by large outputs
    assert "DIFFERS FROM" in out and f"max abs diff {error:.2e}" in out
    trace_attention(OffBy(0.0).eval(), torch.randn(2, 5, 8), causal=True)
    assert "output matches" in capsys.readouterr().out
