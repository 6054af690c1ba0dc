"""A decoder-only Transformer (GPT): Pre-LN blocks, GELU MLP, learned positions, tied embeddings."""

from __future__ import annotations

import math
from dataclasses import dataclass

from torch import Tensor, nn

from .kv_cache import KVCache
from .layers import PreLNBlock, num_parameters, stack_attention_weights, swiglu_hidden_size
from .norms import NORMS, make_norm
from .positions import POSITION_SCHEMES, position_embedding, randomized_positions
from .validation import (
    check_bool,
    check_choice,
    check_divisible,
    check_dropout,
    check_int,
    check_items,
    check_optional_positive_int,
    check_positive_ints,
    check_positive_number,
    check_tokens,
)


@dataclass
class GPTConfig:
    """Sizes and options of a GPT. The defaults are GPT-2's block; norm, activation, n_kv_heads, bias and position
    make it a Llama-style one (rope_base and norm_eps as a trained one names them, e.g. SmolLM2 in notebook 14).
    fused_qkv (one q|k|v matrix, as GPT-2's code has it) computes the same either way.

    d_ff: FFN width, default 4 * d_model (GELU) or, for SwiGLU, round(2/3 * 4 * d_model), the same weight count.
    """

    vocab_size: int
    block_size: int = 256  # longest context the model can see
    n_layers: int = 4
    n_heads: int = 4
    d_model: int = 128
    dropout: float = 0.0
    norm: str = "layernorm"  # or "rmsnorm"
    activation: str = "gelu"  # or "swiglu"
    d_ff: int | None = None  # None: see the class docstring
    n_kv_heads: int | None = None  # None: n_heads (multi-head); fewer: grouped-query; 1: multi-query
    fused_qkv: bool = False  # one (d_model -> q|k|v) matrix instead of three
    bias: bool = True  # False: no biases in linears and norms
    position: str = "learned"  # position scheme: one of POSITION_SCHEMES (see shared/positions.py)
    max_position: int | None = None  # ids 0..max_position-1 a positional table covers; None: block_size
    randomized_positions: bool = False  # training draws sorted random ids from 0..max_position-1 (Ruoss et al.)
    rope_base: float = 10000.0  # RoPE's base: theta_i = rope_base^(-2i / d_k) (a trained model names its own)
    norm_eps: float = 1e-5  # eps of every norm (under the square root)

    @property
    def ffn_width(self) -> int:
        """The FFN's hidden width that this config uses."""
        if self.d_ff is not None:
            return self.d_ff
        return swiglu_hidden_size(self.d_model, 4 * self.d_model) if self.activation == "swiglu" else 4 * self.d_model

    def __post_init__(self) -> None:
        check_positive_ints(self, ("vocab_size", "block_size", "n_layers", "n_heads", "d_model"))
        check_divisible(self.d_model, self.n_heads, "GPTConfig.")
        check_dropout("GPTConfig.dropout", self.dropout)
        for name, allowed in (("norm", NORMS), ("activation", ("gelu", "swiglu")), ("position", POSITION_SCHEMES)):
            check_choice(f"GPTConfig.{name}", getattr(self, name), allowed)
        for name in ("d_ff", "n_kv_heads", "max_position"):
            check_optional_positive_int(f"GPTConfig.{name}", getattr(self, name))
        check_int("GPTConfig.max_position", self.n_positions, self.block_size, " (GPTConfig.block_size)")
        for name in ("fused_qkv", "bias", "randomized_positions"):
            check_bool(f"GPTConfig.{name}", getattr(self, name))
        check_positive_number("GPTConfig.norm_eps", self.norm_eps)
        if not _is_number(self.rope_base) or not 1 < self.rope_base < float("inf"):  # NaN fails both comparisons
            raise ValueError(f"GPTConfig.rope_base must be a finite number > 1, got {self.rope_base!r}")
        if self.n_kv_heads is not None and self.n_heads % self.n_kv_heads:
            raise ValueError(f"GPTConfig.n_kv_heads ({self.n_kv_heads}) must divide n_heads ({self.n_heads})")
        if self.randomized_positions and self.position not in ("learned", "sinusoidal", "rope"):
            raise ValueError(f"GPTConfig.randomized_positions needs position 'learned', 'sinusoidal' or 'rope', "
                             f"got {self.position!r}")

    @property
    def n_positions(self) -> int:
        """Size of the range of position ids (the positional table, or the randomized draw)."""
        return self.block_size if self.max_position is None else self.max_position


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class GPT(nn.Module):
    """forward(tokens (B, T)) -> logits (B, T, vocab_size); position t sees only tokens 0..t."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.config = config
        c = config
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)
        self.pos_emb = position_embedding(c.position, c.n_positions, c.d_model)  # None: nothing added to the tokens
        self.drop = nn.Dropout(c.dropout)
        self.blocks = nn.ModuleList(
            PreLNBlock(c.d_model, c.n_heads, c.ffn_width, c.dropout, c.activation, norm=c.norm, bias=c.bias,
                       n_kv_heads=c.n_kv_heads, fused_qkv=c.fused_qkv, rope=c.position == "rope",
                       alibi=c.position == "alibi", rope_base=c.rope_base, norm_eps=c.norm_eps)
            for _ in range(c.n_layers)
        )
        self.norm = make_norm(c.norm, c.d_model, c.bias, c.norm_eps)
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        self.lm_head.weight = self.tok_emb.weight  # weight tying: one matrix reads and writes tokens
        self.apply(self._init_weights)
        # GPT-2: scale the projections that write into the residual stream by 1/sqrt(2 * n_layers)
        for block in self.blocks:
            for proj in (block.attn.w_o, block.ff.linear2):
                nn.init.normal_(proj.weight, mean=0.0, std=0.02 / math.sqrt(2 * c.n_layers))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def num_parameters(self) -> int:
        """Parameters, the tied embedding counted once."""
        return num_parameters(self)

    def new_caches(self) -> list[KVCache]:
        """One empty KV cache per block, for `forward(..., caches=...)` during generation."""
        return [KVCache() for _ in self.blocks]

    def forward(
        self, tokens: Tensor, caches: list[KVCache] | None = None, need_weights: bool = False,
        positions: Tensor | None = None,
    ) -> Tensor:
        """(B, T) ids -> (B, T, vocab_size) logits. With `caches`, tokens continue the cached positions.

        positions: optional (T,) or (B, T) position ids of the tokens (default offset..offset+T-1, or in
        training with randomized_positions a sorted random draw from 0..n_positions-1).
        Checking that every id is below vocab_size costs a min/max reduction over the tokens.
        """
        check_tokens("tokens", tokens, self.config.vocab_size)
        check_items("caches", caches, KVCache, len(self.blocks), per="block", optional=True)
        if caches and len({len(cache) for cache in caches}) > 1:  # every block must continue the same positions
            raise ValueError(f"caches must all hold the same number of positions, got {[len(c) for c in caches]}")
        offset = len(caches[0]) if caches else 0
        if offset + tokens.size(1) > self.config.block_size:
            raise ValueError(
                f"sequence length {offset + tokens.size(1)} exceeds block_size={self.config.block_size}; "
                "crop the context to the last block_size tokens"
            )
        c = self.config
        if positions is not None and c.position == "none":  # as MultiHeadAttention, refuse ids it cannot use
            raise ValueError("positions is not used with position='none' (NoPE adds no positions): pass None")
        if positions is None and c.randomized_positions and self.training and not caches:
            positions = randomized_positions(tokens.size(0), tokens.size(1), c.n_positions, tokens.device)
        x = self.tok_emb(tokens)  # (B, T, d_model)
        if self.pos_emb is not None:
            x = self.pos_emb(x, offset=offset, positions=positions)
        x = self.drop(x)
        block_positions = positions if c.position in ("rope", "alibi") else None  # the others used them above
        for i, block in enumerate(self.blocks):
            x = block(x, causal=True, need_weights=need_weights, cache=caches[i] if caches else None,
                      positions=block_positions)
        return self.lm_head(self.norm(x))  # (B, T, vocab_size)

    def attention_maps(self) -> Tensor:
        """Weights of the last forward with need_weights=True: (n_layers, B, H, T, T)."""
        return stack_attention_weights(self.blocks)
