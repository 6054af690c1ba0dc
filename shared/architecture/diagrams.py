"""The map's tables: each kind of model as boxes on a grid of columns and rows, its N× frames and its extra arrows.

A box gives the paper's name, the course object that implements it (a dotted name inside `shared`, e.g.
"attention.MultiHeadAttention"), the notebook that builds it, and the parts it belongs to (what `highlight` shades).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Box:
    """One part on the map; without `code` it is an input/output label drawn as plain text."""

    key: str
    column: str
    row: float  # in row pitches from the bottom; the data flows upwards, as in the paper's figure
    title: str  # the paper's name
    code: str = ""  # the course object, relative to `shared`
    notebook: str = ""  # "02": notebooks/02_*.ipynb builds it
    parts: tuple[str, ...] = ()  # highlight names that shade it
    shape: str = ""  # the shape it hands on, written on its outgoing arrow when shapes=True
    skip_from: str = ""  # a residual add: the box whose input the skip connection brings here


@dataclass(frozen=True)
class Link:
    """An arrow besides the upward flow: a mask, the KV cache, the encoder's memory, tied weights."""

    start: str
    end: str
    style: str = "side"  # "side" (box to box), "both" (both ways), "memory" (elbow), "tied" (dashed, both ways),
    # "same" (dashed: computes what the end box computes), "weights" (dashed, into the end box's N× frame)
    label: str = ""
    shape: str = ""
    parts: tuple[str, ...] = ()  # highlighting any of them colours the arrow (default: the start box's parts)


@dataclass(frozen=True)
class Frame:
    """The "N×" box around a repeated layer."""

    column: str
    first: float
    last: float
    title: str
    code: str
    notebook: str
    parts: tuple[str, ...] = ("layers",)  # highlight names that shade the frame (the layer it repeats)


@dataclass(frozen=True)
class Diagram:
    """One kind of model: its columns, its boxes on them, its N× frames and its extra arrows."""

    title: str
    model: str  # the course object that builds the whole model
    notebook: str
    size: tuple[float, float]  # figure inches; the drawing uses inches as data units
    columns: dict  # name -> (x centre, box width, side of the residual skips: -1 left, +1 right, 0 no upward flow)
    boxes: tuple[Box, ...]
    frames: tuple[Frame, ...] = ()
    links: tuple[Link, ...] = ()
    options: dict | None = None  # the model's keyword options, written under the title


B = Box
MHA = "attention.MultiHeadAttention"
BPE = "tokenization.BPETokenizer"


def tokenizer(softmax_row: float) -> tuple[Box, Box]:
    """The tokenizer in front of the model (text -> ids, bottom left) and behind it (ids -> text, by the sampler)."""
    return (B("encode", "side", 0.2, "Tokenizer: text → ids", BPE + ".encode", "13", ("tokenizer",)),
            B("decode", "side", softmax_row, "Tokenizer: ids → text", BPE + ".decode", "13", ("tokenizer",)))


TOKENIZER_LINKS = (Link("encode", "tokens"), Link("softmax", "decode", parts=("tokenizer",)))
TIED = Link("lm_head", "tok_emb", "tied", "one matrix: lm_head.weight is tok_emb.weight", parts=("embedding", "output"))
DIAGRAMS = {
    "encoder_decoder": Diagram(
        "The encoder-decoder Transformer (Vaswani et al. 2017)", "transformer.Transformer", "06", (8.5, 9.2),
        {"enc": (1.8, 2.8, -1), "gap": (4.25, 1.5, 0), "dec": (6.7, 2.8, 1)},
        (B("src", "enc", 0, "source tokens", shape="(B, T_src)"),
         B("src_emb", "enc", 1, "Input embedding × √d_model", "positions.ScaledEmbedding", "04", ("embedding",)),
         B("src_pos", "enc", 2, "+ positional encoding", "positions.SinusoidalPositionalEncoding", "04",
           ("positions",), "(B, T_src, d_model)"),
         B("enc_attn", "enc", 3.2, "Multi-head self-attention", MHA, "02", ("attention",)),
         B("enc_add1", "enc", 4.2, "Add & Norm", "layers.EncoderLayer.norm1", "05", ("residual", "norm"),
           skip_from="enc_attn"),
         B("enc_ffn", "enc", 5.2, "Feed-forward (ReLU)", "layers.FeedForward", "05", ("ffn",)),
         B("enc_add2", "enc", 6.2, "Add & Norm", "layers.EncoderLayer.norm2", "05", ("residual", "norm"),
           skip_from="enc_ffn"),
         B("tgt_mask", "gap", 2.1, "Causal + pad mask", "masks.decoder_mask", "03", ("masks",)),
         B("src_mask", "gap", 4.2, "Source pad mask", "masks.padding_mask", "03", ("masks",)),
         B("tgt", "dec", 0, "target tokens, shifted right", shape="(B, T_tgt)"),
         B("tgt_emb", "dec", 1, "Output embedding × √d_model", "positions.ScaledEmbedding", "04", ("embedding",)),
         B("tgt_pos", "dec", 2, "+ positional encoding", "positions.SinusoidalPositionalEncoding", "04",
           ("positions",), "(B, T_tgt, d_model)"),
         B("dec_attn", "dec", 3.2, "Masked self-attention", MHA, "02", ("attention",)),
         B("dec_add1", "dec", 4.2, "Add & Norm", "layers.DecoderLayer.norm1", "05", ("residual", "norm"),
           skip_from="dec_attn"),
         B("dec_cross", "dec", 5.2, "Cross-attention", MHA, "05", ("attention", "cross_attention")),
         B("dec_add2", "dec", 6.2, "Add & Norm", "layers.DecoderLayer.norm2", "05", ("residual", "norm"),
           skip_from="dec_cross"),
         B("dec_ffn", "dec", 7.2, "Feed-forward (ReLU)", "layers.FeedForward", "05", ("ffn",)),
         B("dec_add3", "dec", 8.2, "Add & Norm", "layers.DecoderLayer.norm3", "05", ("residual", "norm"),
           "(B, T_tgt, d_model)", skip_from="dec_ffn"),
         B("generator", "dec", 9.8, "Linear (generator)", "transformer.Transformer.generator", "06", ("output",),
           "(B, T_tgt, tgt_vocab_size)"),
         B("softmax", "dec", 10.8, "Softmax, decode", "generation.seq2seq.greedy_decode", "06", ("output",)),
         B("probs", "dec", 11.65, "output probabilities")),
        (Frame("enc", 3.2, 6.2, "N× encoder layer", "layers.EncoderLayer", "05"),
         Frame("dec", 3.2, 8.2, "N× decoder layer", "layers.DecoderLayer", "05")),
        (Link("enc_add2", "dec_cross", "memory", "memory", "(B, T_src, d_model)", ("cross_attention",)),
         Link("src_mask", "enc_attn", shape="(B, 1, 1, T_src)"),
         Link("src_mask", "dec_cross", parts=("masks", "cross_attention")),
         Link("tgt_mask", "dec_attn", shape="(B, 1, T_tgt, T_tgt)"))),
    "gpt": Diagram(
        "The decoder-only GPT (GPT-2: Radford et al. 2019)", "gpt.GPT", "08", (7.5, 9.7),
        {"side": (1.3, 2.35, 0), "main": (4.45, 2.7, 1)},
        (B("tokens", "main", 0, "token ids", shape="(B, T)"),
         B("tok_emb", "main", 1, "Token embedding (tok_emb)", "gpt.GPT.tok_emb", "08", ("embedding",)),
         B("pos_emb", "main", 2, "+ learned positions", "positions.LearnedPositionalEmbedding", "04",
           ("positions",), "(B, T, d_model)"),
         B("ln1", "main", 3.2, "LayerNorm", "layers.PreLNBlock.norm1", "05", ("norm",)),
         B("attn", "main", 4.2, "Causal multi-head attention", MHA, "02", ("attention",)),
         B("add1", "main", 5.2, "Residual add", "layers.PreLNBlock.forward", "05", ("residual",), skip_from="ln1"),
         B("ln2", "main", 6.2, "LayerNorm", "layers.PreLNBlock.norm2", "05", ("norm",)),
         B("ffn", "main", 7.2, "Feed-forward (GELU)", "layers.FeedForward", "05", ("ffn",)),
         B("add2", "main", 8.2, "Residual add", "layers.PreLNBlock.forward", "05", ("residual",), "(B, T, d_model)",
           skip_from="ln2"),
         B("ln_f", "main", 9.8, "Final LayerNorm", "gpt.GPT.norm", "08", ("norm",)),
         B("lm_head", "main", 10.8, "Linear lm_head (tied)", "gpt.GPT.lm_head", "08", ("output",),
           "(B, T, vocab_size)"),
         B("softmax", "main", 11.8, "Softmax, sample", "generation.lm.generate", "08", ("output",)),
         B("next", "main", 12.65, "next-token probabilities"),
         B("mask", "side", 4.2, "Causal mask", "masks.causal_mask", "03", ("masks",)),
         B("cache", "side", 5.4, "KV cache", "kv_cache.KVCache", "08", ("kv_cache",)),
         B("tiled", "side", 3.0, "Tiled attention", "fast_attention.tiled_attention", "15", ("tiled_attention",)),
         *tokenizer(11.8)),
        (Frame("main", 3.2, 8.2, "N× Pre-LN block", "layers.PreLNBlock", "05"),),
        (Link("mask", "attn", shape="(1, 1, T, T)"),
         Link("cache", "attn", "both", shape="(B, H, T_past, d_k)"),
         Link("tiled", "attn", "same", "same output"),
         TIED, *TOKENIZER_LINKS)),
    "modern": Diagram(
        "A modern decoder block (Llama-style)", "gpt.GPTConfig", "10", (7.5, 9.3),
        {"side": (1.3, 2.35, 0), "main": (4.45, 2.7, 1)},
        (B("tokens", "main", 0, "token ids", shape="(B, T)"),
         B("tok_emb", "main", 1, "Token embedding (tok_emb)", "gpt.GPT.tok_emb", "08", ("embedding",),
           "(B, T, d_model)"),
         B("norm1", "main", 2.2, "RMSNorm", "layers.PreLNBlock.norm1", "10", ("norm",)),
         B("attn", "main", 3.2, "Grouped-query attn, fused QKV", MHA, "10", ("attention",)),
         B("add1", "main", 4.2, "Residual add", "layers.PreLNBlock.forward", "05", ("residual",), skip_from="norm1"),
         B("norm2", "main", 5.2, "RMSNorm", "layers.PreLNBlock.norm2", "10", ("norm",)),
         B("ffn", "main", 6.2, "SwiGLU feed-forward", "layers.FeedForward", "10", ("ffn",)),
         B("add2", "main", 7.2, "Residual add", "layers.PreLNBlock.forward", "05", ("residual",), "(B, T, d_model)",
           skip_from="norm2"),
         B("norm_f", "main", 8.8, "Final RMSNorm", "gpt.GPT.norm", "10", ("norm",)),
         B("lm_head", "main", 9.8, "Linear lm_head (tied)", "gpt.GPT.lm_head", "08", ("output",),
           "(B, T, vocab_size)"),
         B("softmax", "main", 10.8, "Softmax, sample", "generation.lm.generate", "08", ("output",)),
         B("next", "main", 11.65, "next-token probabilities"),
         B("rope", "side", 2.0, "RoPE: rotates q, k", "positions.RotaryEmbedding", "09", ("positions",)),
         B("mask", "side", 3.2, "Causal mask", "masks.causal_mask", "03", ("masks",)),
         B("cache", "side", 4.4, "KV cache", "kv_cache.KVCache", "08", ("kv_cache",)),
         B("weights", "side", 6.2, "GGUF file → weights", "pretrained.load_gpt", "14", ("weights",)),
         *tokenizer(10.8)),
        (Frame("main", 2.2, 7.2, "N× block, no bias", "layers.PreLNBlock", "10"),),
        (Link("rope", "attn", shape="q, k: (B, H, T, d_k)"),
         Link("mask", "attn", shape="(1, 1, T, T)"),
         Link("cache", "attn", "both", shape="(B, H_kv, T_past, d_k)"),
         Link("weights", "ffn", "weights", "the model's weights"),
         TIED, *TOKENIZER_LINKS),
        dict(norm="rmsnorm", position="rope", activation="swiglu", n_kv_heads=2, fused_qkv=True, bias=False)),
}
KINDS = tuple(DIAGRAMS)


def parts_of(kind: str) -> tuple[str, ...]:
    """The highlight names a kind accepts, sorted."""
    d = diagram(kind)
    return tuple(sorted({part for item in (*d.boxes, *d.frames) for part in item.parts}))


def diagram(kind: str) -> Diagram:
    """The table of one kind; an unknown kind is refused with the choices."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}; got {kind!r}")
    return DIAGRAMS[kind]
