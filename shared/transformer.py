"""The encoder-decoder Transformer of "Attention Is All You Need" (Post-LN, sinusoidal positions).

One difference from the paper: its two embeddings and the output projection share one matrix (section 3.4, over a
joint source-target vocabulary); here they are three separate matrices, so the two vocabularies may differ.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor, nn

from .layers import DecoderLayer, EncoderLayer, num_parameters, stack_attention_weights
from .masks import decoder_mask, padding_mask
from .positions import ScaledEmbedding, position_embedding, randomized_positions
from .validation import (
    check_bool,
    check_choice,
    check_divisible,
    check_dropout,
    check_int,
    check_positive_ints,
    check_tokens,
)


@dataclass
class TransformerConfig:
    """Sizes of an encoder-decoder Transformer (defaults: the paper's base model).

    One positional table serves both sides: with position="learned" the encoder and the decoder share its rows.
    """

    src_vocab_size: int
    tgt_vocab_size: int
    d_model: int = 512
    n_heads: int = 8
    n_encoder_layers: int = 6
    n_decoder_layers: int = 6
    d_ff: int = 2048
    dropout: float = 0.1
    max_len: int = 512  # longest source or target the positional table covers
    pad_id: int = 0
    position: str = "sinusoidal"  # or "learned" (a table of max_len) or "rope" (in both self-attentions)
    randomized_positions: bool = False  # training draws sorted random ids from 0..max_len-1 (Ruoss et al.)

    def __post_init__(self) -> None:
        check_positive_ints(self, ("src_vocab_size", "tgt_vocab_size", "d_model", "n_heads", "n_encoder_layers",
                                   "n_decoder_layers", "d_ff", "max_len"))
        check_divisible(self.d_model, self.n_heads, "TransformerConfig.")
        check_dropout("TransformerConfig.dropout", self.dropout)
        # alibi and none cannot locate the source: cross-attention has no distances
        check_choice("TransformerConfig.position", self.position, ("sinusoidal", "learned", "rope"))
        check_bool("TransformerConfig.randomized_positions", self.randomized_positions)
        if check_int("TransformerConfig.pad_id", self.pad_id, 0) >= min(self.src_vocab_size, self.tgt_vocab_size):
            raise ValueError(f"TransformerConfig.pad_id must be a token id of both vocabularies, got {self.pad_id!r}")


class Transformer(nn.Module):
    """forward(src (B, T_src), tgt (B, T_tgt)) -> logits (B, T_tgt, tgt_vocab_size); tgt position t sees tgt[:t+1]."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = c = config
        self.src_embed = ScaledEmbedding(c.src_vocab_size, c.d_model)  # x sqrt(d_model)
        self.tgt_embed = ScaledEmbedding(c.tgt_vocab_size, c.d_model)
        self.positional = position_embedding(c.position, c.max_len, c.d_model)  # None for rope (inside attention)
        self.dropout = nn.Dropout(c.dropout)
        sizes = (c.d_model, c.n_heads, c.d_ff, c.dropout)
        rope = c.position == "rope"
        self.encoder = nn.ModuleList(EncoderLayer(*sizes, rope=rope) for _ in range(c.n_encoder_layers))
        self.decoder = nn.ModuleList(DecoderLayer(*sizes, rope=rope) for _ in range(c.n_decoder_layers))
        self.generator = nn.Linear(c.d_model, c.tgt_vocab_size)  # output projection to the target vocabulary
        # Xavier/Glorot init of every matrix, as in the Annotated Transformer, except the two embeddings: they
        # keep ScaledEmbedding's N(0, 1/d_model), so that after the x sqrt(d_model) factor tokens have std 1.
        embeddings = {id(self.src_embed.embedding.weight), id(self.tgt_embed.embedding.weight)}
        for p in self.parameters():
            if p.dim() > 1 and id(p) not in embeddings:
                nn.init.xavier_uniform_(p)

    def num_parameters(self) -> int:
        """Parameters of the whole model."""
        return num_parameters(self)

    def src_mask(self, src: Tensor) -> Tensor:
        """(B, T_src) ids -> (B, 1, 1, T_src) bool, False at source padding."""
        return padding_mask(check_tokens("src", src), self.config.pad_id)

    def encode(self, src: Tensor, src_mask: Tensor | None = None, need_weights: bool = False) -> Tensor:
        """src (B, T_src) ids -> memory (B, T_src, d_model). Checking the ids' range costs a min/max reduction."""
        check_tokens("src", src, self.config.src_vocab_size)
        src_mask = self.src_mask(src) if src_mask is None else src_mask
        x, positions = self._add_positions(self.src_embed(src))  # (B, T_src, d_model)
        for layer in self.encoder:
            x = layer(x, src_mask, need_weights=need_weights, positions=positions)
        return x

    def decode(self, tgt: Tensor, memory: Tensor, src_mask: Tensor | None = None, need_weights: bool = False) -> Tensor:
        """tgt (B, T_tgt) ids, memory (B, T_src, d_model) -> logits (B, T_tgt, tgt_vocab_size).

        Builds the causal + target-padding mask itself; `src_mask` (B, 1, 1, T_src) hides source padding.
        Checking the ids' range costs a min/max reduction.
        """
        check_tokens("tgt", tgt, self.config.tgt_vocab_size)
        if memory.dim() != 3 or memory.size(0) != tgt.size(0) or memory.size(-1) != self.config.d_model:
            raise ValueError(f"memory must be (B={tgt.size(0)}, T_src, d_model={self.config.d_model}), "
                             f"got {tuple(memory.shape)}")
        tgt_mask = decoder_mask(tgt, self.config.pad_id)  # (B, 1, T_tgt, T_tgt)
        x, positions = self._add_positions(self.tgt_embed(tgt))  # (B, T_tgt, d_model)
        for layer in self.decoder:
            x = layer(x, memory, tgt_mask, src_mask, need_weights=need_weights, positions=positions)
        return self.generator(x)  # (B, T_tgt, tgt_vocab_size)

    def _add_positions(self, x: Tensor) -> tuple[Tensor, Tensor | None]:
        """Embedded (B, T, d_model) -> (dropout(x + positions), the ids RoPE needs or None for the default)."""
        c, positions = self.config, None
        if c.randomized_positions and self.training:
            positions = randomized_positions(x.size(0), x.size(1), c.max_len, x.device)  # (B, T) sorted ids
        if self.positional is not None:
            x = self.positional(x, positions=positions)
        return self.dropout(x), positions if c.position == "rope" else None

    def forward(self, src: Tensor, tgt: Tensor, need_weights: bool = False) -> Tensor:
        """Teacher forcing: src (B, T_src), tgt (B, T_tgt) -> logits (B, T_tgt, tgt_vocab_size)."""
        src_mask = self.src_mask(src)
        memory = self.encode(src, src_mask, need_weights=need_weights)
        return self.decode(tgt, memory, src_mask, need_weights=need_weights)

    def attention_maps(self, kind: str = "cross") -> Tensor:
        """Weights of the last pass with need_weights=True: (n_layers, B, H, T_q, T_k).

        kind: "encoder" (encoder self-attention), "self" (decoder self-attention) or "cross".
        """
        sources = {"encoder": (self.encoder, "self_attn_weights"), "self": (self.decoder, "self_attn_weights"),
                   "cross": (self.decoder, "cross_attn_weights")}
        if kind not in sources:
            raise ValueError(f"kind must be one of {sorted(sources)}, got {kind!r}")
        return stack_attention_weights(*sources[kind])
