"""Exercise checker for notebook 08 (a character-level GPT): the whole GPT class, proved equal to shared.gpt.GPT.

Import it from `shared.exercises`; see `shared.exercises.feedback` for how a checker reports.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..gpt import GPT, GPTConfig
from ..masks import causal_mask
from .feedback import Checker, exercise, random_tensor
from .modules import build_module, explained, load_reference

_SMALL = dict(vocab_size=11, block_size=8, n_layers=2, n_heads=2, d_model=16)  # for the equivalence
_LARGE = dict(vocab_size=64, block_size=16, n_layers=4, n_heads=4, d_model=64)  # enough weights for an std
_RESIDUAL = ("attn.w_o.weight", "ff.linear2.weight")  # the projections that write into the residual stream
_NAME_HINTS = {
    "tok_emb": "self.tok_emb = nn.Embedding(config.vocab_size, config.d_model).",
    "pos_emb": "self.pos_emb = nn.Embedding(config.block_size, config.d_model), one vector per position.",
    "lm_head.bias": "the head has no bias: nn.Linear(config.d_model, config.vocab_size, bias=False).",
    "lm_head": "self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False).",
    "blocks": "self.blocks = nn.ModuleList(PreLNBlock(d_model, n_heads, 4 * d_model, dropout) for each layer).",
    "norm": "the final LayerNorm: self.norm = nn.LayerNorm(config.d_model).",
    "": "name the parts like shared.gpt.GPT: tok_emb, pos_emb, drop, blocks, norm, lm_head.",
}
_PAST_TABLE = ("tok_emb takes the token ids, pos_emb the positions 0..T-1: pos_emb(torch.arange(T)), not the token "
               "ids (pos_emb(tokens) or pos_emb.weight[tokens]).")
_ERRORS = {"'tuple'": "PreLNBlock returns one tensor (B, T, d_model): x = block(x, causal=True).",
           "index out of range in self": "an nn.Embedding got an index past its table. " + _PAST_TABLE,
           "is out of bounds for dimension 0 with size": "an index went past the rows of a table. " + _PAST_TABLE,
           "before Module.__init__() call": "call `super().__init__()` first in __init__, before any submodule."}


def _reference(config: GPTConfig) -> GPT:
    """shared.gpt.GPT with seeded, spread-out weights: every wrong variant then gives different logits."""
    torch.manual_seed(0)
    ref = GPT(config).eval()
    with torch.no_grad():
        for i, (name, p) in enumerate(ref.named_parameters()):
            is_gain = name.rsplit(".", 2)[-2].startswith("norm") and name.endswith("weight")  # a LayerNorm's gamma
            p.copy_(random_tensor(*p.shape, seed=100 + i) * 0.3 + (1.0 if is_gain else 0.0))
    return ref


def _state_for(mine: nn.Module, ref: GPT) -> tuple[dict, dict]:
    """The reference's weights for yours, and reference name -> your name: the position table may be a plain
    nn.Embedding (pos_emb.weight) or a LearnedPositionalEmbedding (pos_emb.embedding.weight)."""
    names = {key: key for key in ref.state_dict()}
    ours = [k for k in names if k.startswith("pos_emb.")]
    theirs = [k for k in mine.state_dict() if k.startswith("pos_emb.")]
    if len(ours) == len(theirs) == 1:
        names[ours[0]] = theirs[0]
    return {names[key]: value for key, value in ref.state_dict().items()}, names


def _variants(ref: GPT, tokens) -> list:
    """Logits of the usual wrong GPTs, computed from the reference's own modules."""
    T, table = tokens.size(1), next(p for name, p in ref.named_parameters() if name.startswith("pos_emb."))

    def logits(pos=True, shift=0, scale=1.0, causal=True, final_norm=True, blocks=None, mask=None):
        x = ref.tok_emb(tokens) * scale
        if pos:
            x = x + table[torch.arange(shift, T + shift).clamp(max=len(table) - 1)]
        for block in blocks or ref.blocks:
            x = block(x, mask, causal=causal and mask is None)
        return ref.lm_head(ref.norm(x) if final_norm else x)

    return [(logits(pos=False), "add the position embeddings: x = tok_emb(tokens) + pos_emb(torch.arange(T))."),
            (logits(causal=False), "call each block with causal=True: a position must not see later tokens "
             "(here changing a later token changes earlier logits)."),
            (logits(final_norm=False), "apply the final LayerNorm before the head: logits = lm_head(norm(x))."),
            (logits(scale=math.sqrt(ref.config.d_model)), "GPT does not scale the token embeddings by "
             "sqrt(d_model)."),
            (logits(shift=1), "positions count from 0: torch.arange(T)."),
            (logits(blocks=[ref.blocks[-1]] * len(ref.blocks)), "each layer needs its own block: build n_layers "
             "PreLNBlocks, not [block] * n_layers (one block, shared)."),
            (logits(mask=~causal_mask(T)), "your causal mask is inverted: the course's masks are True = may attend "
             "(torch.nn.Transformer's are True = blocked). Pass causal=True, or the mask causal_mask(T)."),
            (logits(mask=~causal_mask(T) | torch.eye(T, dtype=torch.bool)), "your mask lets each position see "
             "itself and the later tokens: it is inverted (the course's masks are True = may attend; "
             "torch.triu(..., 0) is True on and above the diagonal). Pass causal=True, or the mask causal_mask(T).")]


def _close(c: Checker, got, want, case: str, variants, meaning: str = "(B, T, vocab_size)") -> None:
    """c.close on logits, with the wrong variants computed only when they are needed."""
    got = c.shape(got, want, case, "logits", meaning)
    if not torch.allclose(got.double(), want.double(), atol=1e-5, rtol=1e-4):
        c.close(got, want, case, "logits", meaning, variants=variants())


@exercise("the GPT model")
def check_gpt(c: Checker) -> None:
    """MyGPT: an nn.Module class, MyGPT(config: GPTConfig); forward(tokens (B, T)) -> logits (B, T, vocab_size)."""
    state = torch.random.get_rng_state()
    try:
        _check_equivalence(c, GPTConfig(**_SMALL))
        _check_dropout(c, GPTConfig(**_SMALL, dropout=0.2))
        _check_init(c, GPTConfig(**_LARGE))
    finally:
        torch.random.set_rng_state(state)


def _check_equivalence(c: Checker, config: GPTConfig) -> None:
    case, ref = "MyGPT(GPTConfig(vocab_size=11, block_size=8, n_layers=2, n_heads=2, d_model=16))", _reference(config)
    mine = build_module(c, c.fn, (config,), case, _ERRORS)
    state, names = _state_for(mine, ref)
    load_reference(c, mine, state, case, _NAME_HINTS)
    if mine.get_parameter("lm_head.weight") is not mine.get_parameter("tok_emb.weight"):
        c.fail(case, "lm_head.weight is not tok_emb.weight: the head is not tied to the embedding.",
               "tie them after building both: self.lm_head.weight = self.tok_emb.weight.")
    learner = explained(c, mine.eval(), _ERRORS)
    for seed, (B, T) in enumerate(((2, 8), (3, 5))):
        case = f"tokens ({B}, {T}), eval mode"
        tokens = torch.randint(0, config.vocab_size, (B, T), generator=torch.Generator().manual_seed(seed))
        with torch.no_grad():
            _close(c, c.run(case, learner, tokens.clone()), ref(tokens), case, lambda t=tokens: _variants(ref, t))
        c.passed()
    case = "gradients of the cross-entropy, train mode"
    tokens = torch.randint(0, config.vocab_size, (2, 8), generator=torch.Generator().manual_seed(5))
    targets = torch.roll(tokens, -1, dims=1)
    for model in (mine.train(), ref.train()):
        logits = c.shape(c.run(case, explained(c, model, _ERRORS), tokens), (2, 8, config.vocab_size), case, "logits")
        F.cross_entropy(logits.flatten(0, 1), targets.flatten()).backward()
    for name, p in ref.named_parameters():
        grad = mine.get_parameter(names[name]).grad
        if grad is None:
            c.fail(case, f"{names[name]} got no gradient.", "use every module in forward, without .detach().")
        c.close(grad, p.grad, case, f"the gradient of {names[name]}", atol=1e-5)
    c.passed()


def _check_dropout(c: Checker, config: GPTConfig) -> None:
    """Train mode with dropout 0.2, seeded alike: the same masks in the same places as the reference."""
    case, ref = "GPTConfig(..., dropout=0.2), train mode, seeded", _reference(config).train()
    mine = build_module(c, c.fn, (config,), case, _ERRORS)
    load_reference(c, mine, _state_for(mine, ref)[0], case, _NAME_HINTS)
    tokens = torch.randint(0, config.vocab_size, (2, 8), generator=torch.Generator().manual_seed(7))

    def seeded(model):
        torch.manual_seed(3)
        return c.run(case, explained(c, model, _ERRORS), tokens)

    def variants():
        found = []
        for hint, drop_p, blocks_train in (("apply self.drop to the embeddings' sum, before the blocks.", 0.0, True),
                                           ("pass config.dropout on to every PreLNBlock.", config.dropout, False),
                                           ("dropout is off in train mode: use config.dropout.", 0.0, False)):
            ref.drop.p = drop_p
            for block in ref.blocks:
                block.train(blocks_train)
            found.append((seeded(ref), hint))
        return found

    with torch.no_grad():
        _close(c, seeded(mine.train()), seeded(ref), case, variants, "(same random seed as the reference)")
    c.passed()


def _check_init(c: Checker, config: GPTConfig) -> None:
    """GPT-2's initialisation, measured on a freshly built model with enough weights for a steady std."""
    case = "a fresh MyGPT(GPTConfig(vocab_size=64, block_size=16, n_layers=4, n_heads=4, d_model=64))"
    torch.manual_seed(1)
    mine = build_module(c, c.fn, (config,), case, _ERRORS)
    params = dict(mine.named_parameters())
    residual = torch.cat([p.detach().flatten() for n, p in params.items() if n.endswith(_RESIDUAL)])
    for name, p in params.items():
        p = p.detach()
        if name.endswith("bias") and "norm" not in name and p.abs().max() > 0:
            c.fail(case, f"{name} does not start at zero.", "GPT-2 starts every Linear's bias at 0: nn.init.zeros_.")
        if name.endswith("weight") and "norm" not in name and not name.endswith(_RESIDUAL):
            std = float(p.std())
            if abs(std / 0.02 - 1) > 0.15:
                hint = ("nn.Embedding starts with std 1: initialise embeddings with std 0.02 too."
                        if abs(std - 1) < 0.15 else "GPT-2, as nanoGPT and Hugging Face initialise it, draws every "
                        "Linear and Embedding weight from N(0, 0.02): nn.init.normal_(module.weight, std=0.02).")
                c.fail(case, f"{name} has std {std:.4f}, expected 0.02.", hint)
    want, std = 0.02 / math.sqrt(2 * config.n_layers), float(residual.std())
    if abs(std / want - 1) > 0.15:
        hints = {0.02: "scale the residual projections (attn.w_o and ff.linear2 of each block) to std 0.02 / "
                 "sqrt(2 * n_layers), after the general initialisation (which would overwrite them).",
                 0.02 / math.sqrt(config.n_layers): "each block has two residual branches: divide by "
                 "sqrt(2 * n_layers), not sqrt(n_layers)."}
        hint = next((h for value, h in hints.items() if abs(std / value - 1) < 0.15), "")
        c.fail(case, f"the weights of attn.w_o and ff.linear2 have std {std:.4f}, expected 0.02 / sqrt(2 * "
               f"{config.n_layers}) = {want:.4f}.", hint)
    c.passed()
