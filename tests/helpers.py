"""Test helpers: weight copying into PyTorch's built-in modules (equivalence tests), and running exercise checkers."""

import torch
from torch import nn

from shared.attention import MultiHeadAttention


@torch.no_grad()
def copy_mha_to_torch(ours: MultiHeadAttention, theirs: nn.MultiheadAttention) -> None:
    """torch keeps W^Q, W^K, W^V stacked in one in_proj matrix (3 * d_model, d_model)."""
    theirs.in_proj_weight.copy_(torch.cat([ours.w_q.weight, ours.w_k.weight, ours.w_v.weight]))
    theirs.in_proj_bias.copy_(torch.cat([ours.w_q.bias, ours.w_k.bias, ours.w_v.bias]))
    theirs.out_proj.load_state_dict(ours.w_o.state_dict())


@torch.no_grad()
def copy_layer_to_torch(ours, theirs) -> None:
    """Copy an EncoderLayer/DecoderLayer into nn.TransformerEncoderLayer/TransformerDecoderLayer."""
    copy_mha_to_torch(ours.self_attn, theirs.self_attn)
    if hasattr(ours, "cross_attn"):
        copy_mha_to_torch(ours.cross_attn, theirs.multihead_attn)
        theirs.norm3.load_state_dict(ours.norm3.state_dict())
    theirs.linear1.load_state_dict(ours.ff.linear1.state_dict())
    theirs.linear2.load_state_dict(ours.ff.linear2.state_dict())
    theirs.norm1.load_state_dict(ours.norm1.state_dict())
    theirs.norm2.load_state_dict(ours.norm2.state_dict())


def verdict(check, fn, capsys):
    """Run an exercise checker; return (result, printed feedback)."""
    result = check(fn)
    return result, capsys.readouterr().out


def accepts(check, fn, capsys):
    """The checker passes `fn` and says so."""
    result, out = verdict(check, fn, capsys)
    assert result is True, out
    assert out.startswith("✓"), out


def rejects(check, fn, capsys, *fragments):
    """The checker rejects `fn` with feedback that contains every fragment; returns the feedback."""
    result, out = verdict(check, fn, capsys)
    assert result is False, out
    assert out.startswith("✗"), out
    for fragment in fragments:
        assert fragment in out, f"expected {fragment!r} in the feedback:\n{out}"
    return out
