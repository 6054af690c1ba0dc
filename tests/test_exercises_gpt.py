"""check_gpt (notebook 08): a learner's GPT class, proved equal to shared.gpt.GPT by loading its weights."""

import math

import pytest
import torch
from torch import nn

from shared import exercises as ex
from shared.gpt import GPT
from shared.layers import PreLNBlock
from shared.positions import LearnedPositionalEmbedding

from .helpers import accepts, rejects, verdict

check = ex.check_gpt


class MyGPT(nn.Module):
    """The solution; the class attributes switch in one planted mistake each."""

    tied = causal = final_norm = embedding_dropout = True
    positions = 0  # None: no positions added; 1: counted from 1
    residual_scale = 2  # None: not scaled; 1: sqrt(n_layers)
    embedding_std = 0.02  # None: PyTorch's default

    def __init__(self, config):
        super().__init__()
        c = config
        self.config = c
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)
        self.pos_emb = nn.Embedding(c.block_size, c.d_model)
        self.drop = nn.Dropout(c.dropout)
        self.blocks = nn.ModuleList(PreLNBlock(c.d_model, c.n_heads, 4 * c.d_model, c.dropout)
                                    for _ in range(c.n_layers))
        self.norm = nn.LayerNorm(c.d_model)
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        if self.tied:
            self.lm_head.weight = self.tok_emb.weight
        for module in self.modules():
            if isinstance(module, nn.Linear) or (isinstance(module, nn.Embedding) and self.embedding_std):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)
        if self.residual_scale:
            for block in self.blocks:
                for proj in (block.attn.w_o, block.ff.linear2):
                    nn.init.normal_(proj.weight, std=0.02 / math.sqrt(self.residual_scale * c.n_layers))

    def forward(self, tokens):
        T = tokens.size(1)
        x = self.tok_emb(tokens)
        if self.positions is not None:
            x = x + self.pos_emb(torch.arange(self.positions, T + self.positions).clamp(max=self.config.block_size - 1))
        x = self.drop(x) if self.embedding_dropout else x
        for block in self.blocks:
            x = block(x, causal=self.causal)
        return self.lm_head(self.norm(x) if self.final_norm else x)


def planted(**switches):
    return type("Planted", (MyGPT,), switches)


def test_registered_for_notebook_08():
    assert ex.CHECKERS["08"][-1] is check


def test_accepts_the_solution_and_the_course_gpt(capsys):
    torch.manual_seed(4)
    before = torch.random.get_rng_state()
    accepts(check, MyGPT, capsys)
    assert torch.equal(torch.random.get_rng_state(), before)
    accepts(check, GPT, capsys)


def test_accepts_a_learned_positional_embedding_module(capsys):
    class WithModule(MyGPT):
        def __init__(self, config):
            super().__init__(config)
            self.pos_emb = LearnedPositionalEmbedding(max_len=config.block_size, d_model=config.d_model)
            nn.init.normal_(self.pos_emb.embedding.weight, std=0.02)

        def forward(self, tokens):
            x = self.drop(self.pos_emb(self.tok_emb(tokens)))
            for block in self.blocks:
                x = block(x, causal=True)
            return self.lm_head(self.norm(x))

    accepts(check, WithModule, capsys)


@pytest.mark.parametrize("switches,hint", [
    ({"tied": False}, "not tied"),
    ({"causal": False}, "causal=True"),
    ({"positions": None}, "add the position embeddings"),
    ({"positions": 1}, "positions count from 0"),
    ({"final_norm": False}, "apply the final LayerNorm"),
    ({"embedding_dropout": False}, "apply self.drop"),
    ({"residual_scale": None}, "scale the residual projections"),
    ({"residual_scale": 1}, "not sqrt(n_layers)"),
    ({"embedding_std": None}, "nn.Embedding starts with std 1"),
], ids=lambda v: "-".join(f"{k}={w}" for k, w in v.items()) if isinstance(v, dict) else "")
def test_names_each_planted_mistake(switches, hint, capsys):
    rejects(check, planted(**switches), capsys, hint)


def test_structural_mistakes_are_feedback(capsys):
    class HeadWithBias(MyGPT):
        def __init__(self, config):
            super().__init__(config)
            self.lm_head = nn.Linear(config.d_model, config.vocab_size)
            self.lm_head.weight = self.tok_emb.weight

    class OneSharedBlock(MyGPT):
        def __init__(self, config):
            super().__init__(config)
            self.blocks = nn.ModuleList([self.blocks[0]] * config.n_layers)

    class ScaledEmbedding(MyGPT):
        def forward(self, tokens):
            x = self.tok_emb(tokens) * math.sqrt(self.config.d_model) + self.pos_emb(torch.arange(tokens.size(1)))
            for block in self.blocks:
                x = block(x, causal=True)
            return self.lm_head(self.norm(x))

    class NoBlockDropout(MyGPT):
        def __init__(self, config):
            super().__init__(config)
            for block in self.blocks:
                block.attn.dropout, block.ff.dropout.p, block.dropout.p = 0.0, 0.0, 0.0

    rejects(check, HeadWithBias, capsys, "unexpected lm_head.bias", "bias=False")
    rejects(check, OneSharedBlock, capsys, "its own block")
    rejects(check, ScaledEmbedding, capsys, "sqrt(d_model)")
    rejects(check, NoBlockDropout, capsys, "pass config.dropout on to every PreLNBlock")


def test_positions_looked_up_by_token_id_are_named(capsys):
    """pos_emb(tokens) reads token ids as positions: the checker's vocabulary (11) outgrows its block_size (8)."""
    class PositionsFromTokens(MyGPT):
        def forward(self, tokens):
            x = self.drop(self.tok_emb(tokens) + self.pos_emb(tokens))
            for block in self.blocks:
                x = block(x, causal=True)
            return self.lm_head(self.norm(x))

    rejects(check, PositionsFromTokens, capsys, "IndexError", "pos_emb(torch.arange(T))", "not the token ids")


def test_positions_indexed_by_token_id_from_the_table_are_named(capsys):
    """pos_emb.weight[tokens]: the same mistake through the table itself fails with "index 10 is out of bounds"."""
    class TableFromTokens(MyGPT):
        def forward(self, tokens):
            x = self.drop(self.tok_emb(tokens) + self.pos_emb.weight[tokens])
            for block in self.blocks:
                x = block(x, causal=True)
            return self.lm_head(self.norm(x))

    rejects(check, TableFromTokens, capsys, "out of bounds", "pos_emb(torch.arange(T))", "pos_emb.weight[tokens]")


def test_a_causal_mask_in_the_inverted_convention_is_named(capsys):
    """True = blocked (the convention of torch.nn.Transformer), passed where the course's True = may attend goes."""
    class InvertedMask(MyGPT):
        def forward(self, tokens):
            T = tokens.size(1)
            blocked = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)  # True above the diagonal
            x = self.drop(self.tok_emb(tokens) + self.pos_emb(torch.arange(T)))
            for block in self.blocks:
                x = block(x, blocked)
            return self.lm_head(self.norm(x))

    rejects(check, InvertedMask, capsys, "True = may attend", "causal_mask(T)")


def test_an_inverted_causal_mask_that_keeps_the_diagonal_is_named(capsys):
    """torch.triu(ones, 0): True on and above the diagonal, each position sees itself and the later tokens."""
    class InvertedWithDiagonal(MyGPT):
        def forward(self, tokens):
            T = tokens.size(1)
            mask = torch.triu(torch.ones(T, T), 0).bool()
            x = self.drop(self.tok_emb(tokens) + self.pos_emb(torch.arange(T)))
            for block in self.blocks:
                x = block(x, mask)
            return self.lm_head(self.norm(x))

    rejects(check, InvertedWithDiagonal, capsys, "itself and the later tokens", "causal_mask(T)")


def test_untrained_biases_and_default_linear_init_are_named(capsys):
    class NonzeroBias(MyGPT):
        def __init__(self, config):
            super().__init__(config)
            nn.init.constant_(self.blocks[0].attn.w_q.bias, 0.1)

    class TorchDefaults(MyGPT):
        def __init__(self, config):
            super().__init__(config)
            for block in self.blocks:
                block.attn.w_q.reset_parameters()
                nn.init.zeros_(block.attn.w_q.bias)

    rejects(check, NonzeroBias, capsys, "blocks.0.attn.w_q.bias does not start at zero")
    rejects(check, TorchDefaults, capsys, "blocks.0.attn.w_q.weight has std", "N(0, 0.02)")


def test_stub_and_broken_init_are_feedback(capsys):
    class Stub(nn.Module):
        def __init__(self, config):
            super().__init__()
            raise NotImplementedError

    class Crashes(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.blocks = [PreLNBlock(config.d_model, config.n_heads, 4 * config.d_model) for _ in range(3)]
            raise KeyError("oops")

    assert "not solved yet" in verdict(check, Stub, capsys)[1]
    out = rejects(check, Crashes, capsys, "KeyError")
    assert "Traceback" not in out
    rejects(check, nn.Linear, capsys)  # a module of another kind: an error message, not a traceback


def test_a_detached_embedding_is_named_by_its_missing_gradient(capsys):
    class Detached(MyGPT):
        def forward(self, tokens):
            T = tokens.size(1)
            x = self.drop(self.tok_emb(tokens) + self.pos_emb(torch.arange(T)).detach())
            for block in self.blocks:
                x = block(x, causal=True)
            return self.lm_head(self.norm(x))

    rejects(check, Detached, capsys, "pos_emb.weight")
