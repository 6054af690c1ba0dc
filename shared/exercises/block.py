"""Exercise checkers for notebook 05 (the Transformer block): LayerNorm, the sublayer connection, counting.

Import them from `shared.exercises`; see `shared.exercises.feedback` for how a checker reports.
"""

from __future__ import annotations

from numbers import Integral

import torch
import torch.nn.functional as F
from torch import nn

from ..layers import EncoderLayer, PreLNBlock
from .feedback import Checker, exercise, random_tensor
from .modules import build_module, explained, load_reference


def _norm(x, gamma, beta, eps, unbiased=False, eps_outside=False, dim=-1):
    """LayerNorm written out, with switches for the usual mistakes."""
    mean = x.mean(dim, keepdim=True)
    var = x.var(dim, keepdim=True, unbiased=unbiased)
    scale = var.sqrt() + eps if eps_outside else (var + eps).sqrt()
    return (x - mean) / scale * gamma + beta


@exercise("layer normalisation")
def check_layer_norm(c: Checker) -> None:
    """fn(x (..., d), gamma (d,), beta (d,), eps) -> (..., d), normalised over the last axis, then gamma * . + beta."""
    cases = {"x (2, 3, 8), eps=1e-5": ((2, 3, 8), 1e-5, 0.0), "x (4, 6), eps=1e-5": ((4, 6), 1e-5, 0.0),
             "x (5, 16) + 100 (a large offset)": ((5, 16), 1e-5, 100.0), "x (3, 4), eps=0.5": ((3, 4), 0.5, 0.0),
             "one feature (d=1): x - mean is 0": ((3, 1), 1e-5, 0.0)}
    for seed, (case, (shape, eps, offset)) in enumerate(cases.items()):
        x = random_tensor(*shape, seed=seed) * 3.0 + offset
        d = shape[-1]
        gamma, beta = random_tensor(d, seed=seed + 10) + 1.0, random_tensor(d, seed=seed + 20)
        expected = F.layer_norm(x, (d,), gamma, beta, eps)
        variants = [(_norm(x, beta, gamma, eps), "gamma and beta are swapped: multiply by gamma, then add beta."),
                    (_norm(x, 1.0, 0.0, eps), "after normalising, scale by gamma and shift by beta."),
                    (_norm(x, gamma, beta, eps, eps_outside=True), "eps goes inside the square root: "
                     "sqrt(var + eps), not sqrt(var) + eps."),
                    (_norm(x, gamma, beta, 0.0), "add eps to the variance before the square root."),
                    (_norm(x, 1.0, 0.0, eps) * gamma, "add beta after scaling by gamma.")]
        if d > 1:
            variants.insert(0, (_norm(x, gamma, beta, eps, unbiased=True), "LayerNorm uses the biased variance "
                                "(divide by d, not d - 1): x.var(-1, unbiased=False), or ((x - mean)**2).mean(-1)."))
        if x.dim() > 1 and shape[0] > 1:
            variants.append((_norm(x, gamma, beta, eps, dim=0), "normalise over the last axis (the features of one "
                             "token), dim=-1, not over the first axis."))
        c.close(c.call(case, x.clone(), gamma.clone(), beta.clone(), eps), expected, case, "output",
                "(same shape as x)", variants=variants, atol=1e-4)
        c.passed()


def _block(d: int, seed: int) -> tuple:
    """A seeded sublayer (Linear), a LayerNorm with non-trivial gamma/beta, and an input x (2, 5, d)."""
    torch.manual_seed(seed)  # the checker's own modules; the learner's state is not involved
    sublayer, norm = nn.Linear(d, d), nn.LayerNorm(d)
    with torch.no_grad():
        norm.weight.copy_(random_tensor(d, seed=seed) + 1.0)
        norm.bias.copy_(random_tensor(d, seed=seed + 1))
    return sublayer, norm, random_tensor(2, 5, d, seed=seed + 2) * 2.0 + 0.5


@exercise("sublayer connection")
def check_sublayer_connection(c: Checker) -> None:
    """fn(x (B, T, d), sublayer, norm, pre_ln) -> Post-LN norm(x + sublayer(x)), or Pre-LN x + sublayer(norm(x))."""
    state = torch.random.get_rng_state()
    try:
        for seed, d in enumerate((8, 16)):
            sublayer, norm, x = _block(d, seed)
            with torch.no_grad():
                post, pre = norm(x + sublayer(x)), x + sublayer(norm(x))
                swapped_hint = "this is the other order. Post-LN (pre_ln=False) normalises after the residual sum; "
                for pre_ln, expected in ((False, post), (True, pre)):
                    case = f"d={d}, pre_ln={pre_ln}"
                    with torch.no_grad():
                        got = c.call(case, x.clone(), sublayer, norm, pre_ln)
                    variants = [((pre if not pre_ln else post), swapped_hint + "Pre-LN (pre_ln=True) normalises the "
                                 "sublayer's input and adds the raw x."),
                                (norm(sublayer(x)) if not pre_ln else sublayer(norm(x)), "the residual is missing: "
                                 "add x back."),
                                (norm(x) + sublayer(norm(x)), "the residual must carry x itself, not norm(x)."),
                                (x + norm(sublayer(x)), "norm is applied to the sublayer's output; in Pre-LN it is "
                                 "applied to the sublayer's input: x + sublayer(norm(x))."),
                                (sublayer(x) + norm(x), "add x and sublayer(x) first, then normalise the sum.")]
                    c.close(got, expected, case, "output", "(B, T, d)", variants=variants)
                    c.passed()
    finally:
        torch.random.set_rng_state(state)


ENCODER_LAYER_CASES = ((512, 8, 2048), (64, 4, 256), (8, 2, 16), (6, 3, 10))  # (d_model, n_heads, d_ff)


def reference_encoder_layer_params(d_model: int, n_heads: int, d_ff: int) -> int:
    """Parameters of one Post-LN encoder layer, counted from the module itself."""
    return sum(p.numel() for p in EncoderLayer(d_model, n_heads, d_ff).parameters())


_HEADS = ("the number of heads does not change the count: W^Q, W^K, W^V and W^O are each one (d_model x d_model) "
          "matrix holding all heads side by side (self-check 4).")


def encoder_layer_count_mistakes(d: int, h: int, ff: int) -> list[tuple[int, str]]:
    """(wrong count, hint) for the usual mistakes in counting an EncoderLayer(d, h, ff); first match wins."""
    expected = reference_encoder_layer_params(d, h, ff)
    attention, ffn = 4 * (d * d + d), 2 * d * ff + ff + d
    return [(expected - 4 * d - d - ff, "biases count too: every nn.Linear has one bias per output."),
            (expected - 4 * d, "each of the two LayerNorms has gamma and beta, d_model each: 4 * d_model."),
            (expected - 2 * d, "there are two LayerNorms (one per sublayer), each with 2 * d_model parameters."),
            (expected - d * d - d, "count W^O too: attention has four (d_model x d_model) projections."),
            (expected - 3 * (d * d + d) + 3 * (d * (d // h) + d // h), "W^Q, W^K, W^V hold all heads at once: "
             "each is (d_model x d_model), whatever n_heads is."),
            (expected - d * ff - ff, "the FFN has two linear layers: d_model -> d_ff and d_ff -> d_model."),
            # counted once per head: the whole layer; attention, or Q, K, V (weights and biases, or weights only);
            # attention and FFN both (the LayerNorms once)
            (expected * h, _HEADS), (expected + (h - 1) * attention, _HEADS),
            (expected + (h - 1) * 3 * (d * d + d), _HEADS), (expected + (h - 1) * 4 * d * d, _HEADS),
            (expected + (h - 1) * 3 * d * d, _HEADS), (expected + (h - 1) * (attention + ffn), _HEADS)]


@exercise("parameters of an encoder layer")
def check_encoder_layer_params(c: Checker) -> None:
    """fn(d_model, n_heads, d_ff) -> int: the parameter count of `shared.layers.EncoderLayer`."""
    for d, h, ff in ENCODER_LAYER_CASES:
        case = f"d_model={d}, n_heads={h}, d_ff={ff}"
        expected = reference_encoder_layer_params(d, h, ff)
        got = c.call(case, d, h, ff)
        if isinstance(got, torch.Tensor) and got.numel() == 1:
            got = got.item()
        if isinstance(got, float) and got.is_integer():
            got = int(got)
        if not isinstance(got, Integral) or isinstance(got, bool):
            c.fail(case, f"expected an int, got {type(got).__name__}.", "return the count as a Python int.")
        hints = {}
        for wrong, hint in encoder_layer_count_mistakes(d, h, ff):
            hints.setdefault(wrong, hint)
        c.equal(int(got), expected, case, "your count", hints.get(int(got), ""))
        c.passed()


# ---------------------------------------------------------------- a whole Pre-LN block, as an nn.Module

_SIZES = (16, 2, 32)  # d_model, n_heads, d_ff of the blocks the checker builds
_INIT_HINTS = {"before Module.__init__() call": "call `super().__init__()` first in __init__, before any submodule.",
               "unexpected keyword argument 'causal'": "give forward a flag: `def forward(self, x, causal=False)`.",
               "'tuple'": "MultiHeadAttention returns (output, weights): `out, _ = self.attn(h, causal=causal)`.",
               "must be Tensor, not tuple": "MultiHeadAttention returns (output, weights): "
               "`out, _ = self.attn(h, causal=causal)`, then `x + self.dropout(out)`."}  # torch's own message


def _seeded(block: nn.Module, x, seed: int = 1):
    torch.manual_seed(seed)
    return block(x, causal=True)


def _pre_ln_variants(ref: nn.Module, x, causal: bool) -> list:
    """The usual wrong blocks, computed from the reference's own submodules."""
    def attn(h, causal=causal):
        return ref.attn(h, causal=causal)[0]

    def relu_ff(h):
        return ref.ff.linear2(F.relu(ref.ff.linear1(h)))

    def block(x, n1=ref.norm1, n2=ref.norm2, res1=True, res2=True, post=False, causal=causal, ff=ref.ff, keep=False):
        if post:
            x = n1(x + attn(x, causal))
            return n2(x + ff(x))
        h = attn(n1(x), causal)
        x = (n1(x) if keep else x) + h if res1 else h
        h = ff(n2(x))
        return x + h if res2 else h

    flag = ("the causal flag is ignored: pass it on, `self.attn(h, causal=causal)`." if causal else
            "your block hides later positions although causal=False: pass the flag on, do not hard-code True.")
    return [(block(x, res1=False), "the attention sublayer's residual is missing: x = x + self.dropout(attn_out)."),
            (block(x, res2=False), "the feed-forward sublayer's residual is missing: add its output to x."),
            (block(x, res1=False, res2=False), "both residuals are missing: each sublayer's output is added to x."),
            (block(x, post=True), "this is Post-LN (norm after the residual sum); Pre-LN normalises each sublayer's "
             "input: x = x + sublayer(norm(x))."),
            (block(x, n2=ref.norm1), "norm1 is used for both sublayers: the feed-forward sublayer has its own, norm2."),
            (block(x, n1=ref.norm2), "norm2 is used for both sublayers: the attention sublayer uses norm1."),
            (block(x, n1=ref.norm2, n2=ref.norm1), "norm1 and norm2 are swapped: norm1 goes before the attention, "
             "norm2 before the feed-forward."),
            (block(x, causal=not causal), flag),
            (block(x, keep=True), "the residual must carry x itself, not norm1(x)."),
            (block(x, ff=relu_ff), "FeedForward uses ReLU by default; this block uses activation=\"gelu\".")]


@exercise("a Pre-LN Transformer block")
def check_pre_ln_block(c: Checker) -> None:
    """MyBlock: an nn.Module class, MyBlock(d_model, n_heads, d_ff, dropout); forward(x (B, T, d), causal) -> same."""
    state = torch.random.get_rng_state()
    try:
        _check_pre_ln_block(c)
    finally:
        torch.random.set_rng_state(state)


def _check_pre_ln_block(c: Checker) -> None:
    hints = {"norm2": "each sublayer has its own LayerNorm: self.norm1 and self.norm2 = nn.LayerNorm(d_model).",
             "ff": "self.ff = FeedForward(d_model, d_ff, dropout, activation=\"gelu\") from shared.layers.",
             "attn": "self.attn = MultiHeadAttention(d_model, n_heads, dropout) from shared.attention.",
             "": "name the submodules like shared.layers.PreLNBlock: norm1, attn, norm2, ff (and dropout)."}
    torch.manual_seed(0)
    ref = PreLNBlock(*_SIZES, 0.0).eval()
    with torch.no_grad():  # distinct gammas and betas, so that a swapped or shared norm shows
        for i, p in enumerate(p for name, p in ref.named_parameters() if name.startswith("norm")):
            p.copy_(random_tensor(*p.shape, seed=50 + i) * 0.5 + (1.0 if i % 2 == 0 else 0.0))
    case = f"MyBlock{(*_SIZES, 0.0)}"
    mine = build_module(c, c.fn, (*_SIZES, 0.0), case, _INIT_HINTS)
    load_reference(c, mine, ref.state_dict(), case, hints)
    mine, learner = mine.eval(), explained(c, mine, _INIT_HINTS)
    for seed, causal in enumerate((False, True)):
        case, x = f"eval mode, causal={causal}", random_tensor(2, 5, _SIZES[0], seed=seed) * 2.0
        with torch.no_grad():
            got, want = c.run(case, learner, x.clone(), causal=causal), ref(x, causal=causal)
            if isinstance(got, tuple):
                c.fail(case, "your forward returns a tuple.", _INIT_HINTS["'tuple'"])
            c.close(got, want, case, "output", "(B, T, d_model)", variants=_pre_ln_variants(ref, x, causal))
        c.passed()
    case, weight = "gradients, causal=True", random_tensor(2, 5, _SIZES[0], seed=7)
    inputs = [random_tensor(2, 5, _SIZES[0], seed=8).requires_grad_() for _ in range(2)]
    for module, x in ((mine, inputs[0]), (ref, inputs[1])):
        out = c.run(case, explained(c, module.train(), _INIT_HINTS), x, causal=True)
        (c.shape(out, weight, case, meaning="(B, T, d_model)") * weight).sum().backward()
    c.close(inputs[0].grad, inputs[1].grad, case, "the gradient of x")
    params = dict(mine.named_parameters())
    for name, p in ref.named_parameters():
        if params[name].grad is None:
            c.fail(case, f"{name} got no gradient.", "use every submodule in forward, without .detach() or no_grad().")
        c.close(params[name].grad, p.grad, case, f"the gradient of {name}", atol=1e-4)
    c.passed()
    _check_dropout(c, ref.state_dict())


def _check_dropout(c: Checker, state: dict) -> None:
    """With dropout=0.5: off in eval mode, and in train mode the reference's masks in the reference's places."""
    case = f"MyBlock{(*_SIZES, 0.5)}"
    mine, ref = build_module(c, c.fn, (*_SIZES, 0.5), case, _INIT_HINTS), PreLNBlock(*_SIZES, 0.5)
    load_reference(c, mine, state, case, {})
    ref.load_state_dict(state)
    x, learner = random_tensor(2, 5, _SIZES[0], seed=9), explained(c, mine, _INIT_HINTS)
    with torch.no_grad():
        mine.eval()
        case = "dropout=0.5, eval mode"
        first, second = (c.tensor(c.run(case, learner, x, causal=True), case) for _ in range(2))
        if not torch.equal(first, second):
            c.fail(case, "two calls on the same input differ: dropout is still on in eval mode.",
                   "use nn.Dropout modules (model.eval() turns them off); F.dropout needs training=self.training.")
        c.passed()
        case, outputs = "dropout=0.5, train mode, seeded", []
        mine.train()
        for seed in (1, 2):
            torch.manual_seed(seed)
            outputs.append(c.tensor(c.run(case, learner, x, causal=True), case))
        if torch.equal(*outputs):
            c.fail(case, "in train mode, calls with different random seeds give the same output: no dropout.",
                   "apply self.dropout to each sublayer's output, and pass dropout to MultiHeadAttention and "
                   "FeedForward.")
        want, variants = _seeded(ref, x), []
        ref.dropout.p = 0.0
        variants.append((_seeded(ref, x), "dropout is missing on the sublayers' outputs: x + self.dropout(out)."))
        ref.dropout.p, ref.attn.dropout, ref.ff.dropout.p = 0.5, 0.0, 0.0
        variants.append((_seeded(ref, x), "pass dropout on to MultiHeadAttention and FeedForward: they drop inside."))
        c.close(outputs[0], want, case, "output", "(same random seed as the reference)", variants=variants)
        c.passed()
