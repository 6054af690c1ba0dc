"""Inference for the reversal task: batched greedy decoding, beam search, exact match, reverse(), checkpoints.

Both architectures decode the same way: a `step_fn(sequence (B, t)) -> next-token logits (B, V)` and a
loop that appends the chosen token and feeds it back in (autoregressive inference, no teacher forcing).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Sequence

import torch
from torch import Tensor, nn

from ..checkpoint import config_from_checkpoint, load_checkpoint, restore_model, save_checkpoint
from ..gpt import GPT, GPTConfig
from ..lengthgen import CoupledGPT
from ..reversal import (
    BOS,
    EOS,
    PAD,
    check_digits,
    check_sources,
    decode_tokens,
    encode_digits,
    max_source_len,
    pad_to,
    vocabulary,
)
from ..runtime import eval_mode
from ..transformer import Transformer, TransformerConfig
from ..validation import (
    check_bool,
    check_finite,
    check_int,
    check_optional_positive_int,
    check_positive_int,
    check_tokens,
    describe,
)
from .lm import _check_finite_rows

StepFn = Callable[[Tensor], Tensor]  # (B, t) tokens so far -> (B, V) logits of the next token


def greedy_loop(step_fn: StepFn, start: Tensor, max_new: int) -> Tensor:
    """Append argmax tokens to `start` (B, t0) until every row has produced EOS, or `max_new` tokens (>= 0) have
    been appended; -> (B, t_new) new tokens. step_fn must return (B, V) logits."""
    check_tokens("start", start)
    check_int("max_new", max_new, minimum=0)
    B = start.size(0)
    seq, done = start, torch.zeros(B, dtype=torch.bool, device=start.device)
    for _ in range(max_new):
        next_token = _next_logits(step_fn, seq).argmax(dim=-1)  # (B,)
        next_token = next_token.masked_fill(done, PAD)  # finished rows only pad
        seq = torch.cat([seq, next_token[:, None]], dim=1)  # (B, t + 1)
        done |= next_token == EOS
        if done.all():
            break
    return seq[:, start.size(1):]


def _next_logits(step_fn: StepFn, seq: Tensor) -> Tensor:
    """step_fn(seq (B, t)) -> (B, V) next-token logits; another shape, NaN, +inf or a row without a finite logit
    raises ValueError (a -inf entry, a token masked out, is fine)."""
    logits = step_fn(seq)
    if not isinstance(logits, Tensor) or logits.dim() != 2 or logits.size(0) != seq.size(0):
        raise ValueError(f"step_fn must return next-token logits of shape (B={seq.size(0)}, V) for a sequence of "
                         f"shape {tuple(seq.shape)}, got {describe(logits)}")
    return _check_finite_rows(logits, seq.size(1), "step_fn's logits")


def _cut(rows: Tensor, limits: Sequence[int], keep_eos: bool = False) -> list[list[int]]:
    """(B, t) generated tokens -> token lists, each ending at its first EOS (kept or not) or at its row's limit."""
    out = []
    for row, limit in zip(rows.tolist(), limits):
        row = row[:limit]
        out.append(row[: row.index(EOS) + keep_eos] if EOS in row else row)
    return out


@torch.no_grad()
def greedy_decode(
    model: nn.Module, sources: Sequence[Sequence[int]], max_new: int | None = None, *, keep_eos: bool = False
) -> list[list[int]]:
    """Digit sources -> generated token lists (without EOS; with it, if `keep_eos`), decoded as one batch per call.

    Each row stops at EOS or after `max_new` tokens (EOS counted; default: its source length + 1, enough
    for the reversed digits and EOS); a row that did not stop is returned as generated. Sources must
    hold 1 to `max_source_len(model)` digits 0-9: a longer one would leave no position for the EOS.
    """
    sources = check_sources(sources, model)
    check_optional_positive_int("max_new", max_new)
    check_bool("keep_eos", keep_eos)
    device = next(model.parameters()).device
    limits = [len(s) + 1 if max_new is None else max_new for s in sources]
    max_new = max(limits)
    with eval_mode(model):
        if isinstance(model, Transformer):
            src = pad_to([encode_digits(s) for s in sources], PAD).to(device)  # (B, T_src)
            src_mask = model.src_mask(src)
            memory = model.encode(src, src_mask)  # (B, T_src, d_model), computed once
            start = torch.full((len(sources), 1), BOS, dtype=torch.long, device=device)
            new_max = min(max_new, model.config.max_len)  # the decoder reads at most max_len tokens
            new = greedy_loop(lambda seq: model.decode(seq, memory, src_mask)[:, -1], start, new_max)  # (B, t)
            return _cut(new, limits, keep_eos)
        # decoder-only: prompts of one length share a batch, so no row needs padding in front
        results: list[list[int] | None] = [None] * len(sources)
        for length in sorted({len(s) for s in sources}):
            rows = [i for i, s in enumerate(sources) if len(s) == length]
            prompt = torch.tensor([[BOS] + encode_digits(sources[i]) + [EOS] for i in rows], device=device)
            new_max = min(max_new, model.config.block_size - prompt.size(1) + 1)
            new = greedy_loop(lambda seq: model(seq)[:, -1], prompt, new_max)  # (b, t)
            generated = _cut(new, [limits[i] for i in rows], keep_eos)
            for i, tokens in zip(rows, generated):
                results[i] = tokens
        return results


def beam_loop(
    step_fn: StepFn, start: Tensor, beam_size: int, max_new: int, length_penalty: float = 0.0
) -> tuple[Tensor, float]:
    """Beam search from `start` (1, t0) -> (the best hypothesis's new tokens (t_new,), its summed log-probability).

    Each step keeps the `beam_size` extensions with the highest summed log-probability; a finished
    hypothesis (it produced EOS) stays in the beam, padding at no cost. The search stops when all have
    finished. The best is the one with the highest score / length ** length_penalty (length: tokens up to
    and including EOS): 0, the default, compares plain sums, which favours short outputs since every
    token adds a negative log-probability; 1 compares the mean log-probability per token.
    """
    check_positive_int("beam_size", beam_size)
    check_positive_int("max_new", max_new)
    check_finite("length_penalty", length_penalty, 0.0)
    if check_tokens("start", start).size(0) != 1:
        raise ValueError(f"start must be one sequence of shape (1, t0): beam search keeps the hypotheses of one "
                         f"source, got {tuple(start.shape)}")
    t0 = start.size(1)
    seq, scores = start, torch.zeros(1, device=start.device)  # (k, t), (k,) summed log-probabilities
    for _ in range(max_new):
        log_probs = _next_logits(step_fn, seq).log_softmax(dim=-1)  # (k, V)
        finished = (seq[:, t0:] == EOS).any(dim=1)  # (k,)
        log_probs[finished] = float("-inf")
        log_probs[finished, PAD] = 0.0  # a finished hypothesis only pads, keeping its score
        candidates = (scores[:, None] + log_probs).flatten()  # (k * V,)
        scores, index = candidates.topk(min(beam_size, candidates.numel()))
        V = log_probs.size(-1)
        seq = torch.cat([seq[index // V], (index % V)[:, None]], dim=1)  # (k, t + 1)
        if (seq[:, t0:] == EOS).any(dim=1).all():
            break
    new = seq[:, t0:]  # (k, t_new)
    is_eos = new == EOS
    lengths = torch.where(is_eos.any(dim=1), is_eos.int().argmax(dim=1) + 1, new.size(1)).clamp(min=1)  # (k,)
    best = int((scores / lengths.float() ** length_penalty).argmax())
    return new[best], float(scores[best])


@torch.no_grad()
def beam_search(
    model: nn.Module, source: Sequence[int], beam_size: int = 4, max_new: int | None = None,
    length_penalty: float = 0.0, *, keep_eos: bool = False,
) -> list[int]:
    """The most probable token list (without EOS, unless `keep_eos`) kept by a beam of `beam_size` hypotheses.

    `source` and `max_new` as in `greedy_decode`; `beam_loop` explains the search and `length_penalty`.
    """
    check_positive_int("beam_size", beam_size)
    source = check_digits("source", source, model)
    check_optional_positive_int("max_new", max_new)
    check_bool("keep_eos", keep_eos)
    device = next(model.parameters()).device
    max_new = len(source) + 1 if max_new is None else max_new
    with eval_mode(model):
        if isinstance(model, Transformer):
            src = torch.tensor([encode_digits(source)], device=device)  # (1, T_src)
            memory = model.encode(src)  # (1, T_src, d_model)

            def step_fn(seq):
                return model.decode(seq, memory.expand(seq.size(0), -1, -1))[:, -1]  # (k, V)

            start = torch.tensor([[BOS]], device=device)
            max_new = min(max_new, model.config.max_len)
        else:
            step_fn = lambda seq: model(seq)[:, -1]  # noqa: E731
            start = torch.tensor([[BOS] + encode_digits(source) + [EOS]], device=device)
            max_new = min(max_new, model.config.block_size - start.size(1) + 1)
        best, _ = beam_loop(step_fn, start, beam_size, max_new, length_penalty)
        return _cut(best[None], [max_new], keep_eos)[0]


def exact_match(model: nn.Module, sources: Sequence[Sequence[int]], batch_size: int = 500) -> float:
    """Fraction of sources whose greedy output is exactly the reversed source followed by EOS.

    An answer without its EOS (the model never stopped) is wrong, as in `shared.lengthgen.teacher_forced_match`.
    An empty `sources` raises ValueError: a fraction of no examples is undefined (not 0, not 1).
    """
    if isinstance(sources, (list, tuple)) and len(sources) == 0:
        raise ValueError("sources must be a non-empty list of digit lists: exact match over no sources is undefined")
    check_positive_int("batch_size", batch_size)
    sources = check_sources(sources, model)  # here, so that an error names the index in all of `sources`
    correct = 0
    for i in range(0, len(sources), batch_size):
        chunk = sources[i : i + batch_size]
        outputs = greedy_decode(model, chunk, keep_eos=True)  # (digits..., EOS) when the model stopped
        correct += sum(out == encode_digits(s)[::-1] + [EOS] for out, s in zip(outputs, chunk))
    return correct / len(sources)


def reverse(model: nn.Module, digits: Sequence[int]) -> list[int]:
    """Reverse a list of digits 0-9 with a trained model: reverse(model, [1, 2, 3]) -> [3, 2, 1].

    Longer lists than the model's positions cover raise ValueError (the table limit). A length outside
    `model.train_lengths` (recorded by `make_model` and in checkpoints) is answered with a UserWarning:
    the model never saw such a length, and its answer is a guess (notebook 09 measures how good).
    The answer is the model's, unchecked: a wrong one may have another length (an untrained model often gives []).
    """
    digits = check_digits("digits", digits, model)
    lengths = getattr(model, "train_lengths", None)
    if lengths is not None and not lengths[0] <= len(digits) <= lengths[1]:
        warnings.warn(f"this model was trained on {lengths[0]}-{lengths[1]} digits, not {len(digits)}: "
                      "its answer is untested at this length", UserWarning, stacklevel=2)
    tokens = greedy_decode(model, [digits])[0]
    try:
        return decode_tokens(tokens)
    except ValueError as err:
        raise RuntimeError(f"the model produced a non-digit token; is it trained? ({err})") from None


def save_reverser(path: str | os.PathLike, model: nn.Module, **kwargs):
    """Save a reversal model with shared.checkpoint; the task's vocabulary goes into `extra`."""
    max_source_len(model)
    extra = {"task": "reversal", "vocabulary": vocabulary(), **kwargs.pop("extra", {})}
    if getattr(model, "train_lengths", None) is not None:
        extra["train_lengths"] = list(model.train_lengths)
    if isinstance(model, CoupledGPT):
        extra["model_class"] = "CoupledGPT"
    return save_checkpoint(path, model, model.config, extra=extra, **kwargs)


def load_reverser(path: str | os.PathLike, device: str | torch.device = "cpu") -> nn.Module:
    """Rebuild a reversal model (Transformer or GPT) from a checkpoint path, in eval mode."""
    state = load_checkpoint(path)
    saved = state["extra"].get("vocabulary")
    if state["extra"].get("task") != "reversal" or saved != vocabulary():
        raise ValueError(f"{path} does not hold a reversal model with this vocabulary ({vocabulary()}); "
                         f"it holds task={state['extra'].get('task')!r}, vocabulary={saved!r}")
    classes = {"TransformerConfig": (TransformerConfig, Transformer), "GPTConfig": (GPTConfig, GPT)}
    if state["config_class"] not in classes:
        raise ValueError(f"{path} holds a {state['config_class']}; expected one of {sorted(classes)}")
    config_cls, model_cls = classes[state["config_class"]]
    if state["extra"].get("model_class") == "CoupledGPT":
        model_cls = CoupledGPT
    config = config_from_checkpoint(state, config_cls)
    model = restore_model(state, model_cls(config), config)
    if "train_lengths" in state["extra"]:
        model.train_lengths = tuple(state["extra"]["train_lengths"])
    return model.to(device).eval()
