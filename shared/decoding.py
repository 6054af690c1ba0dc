"""Inference for the reversal task: batched greedy decoding, beam search, exact match, reverse(), checkpoints.

Both architectures decode the same way: a `step_fn(sequence (B, t)) -> next-token logits (B, V)` and a
loop that appends the chosen token and feeds it back in (autoregressive inference, no teacher forcing).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Callable

import torch
from torch import Tensor, nn

from .checkpoint import config_from_checkpoint, load_checkpoint, restore_model, save_checkpoint
from .gpt import GPT, GPTConfig
from .reversal import BOS, EOS, PAD, decode_tokens, encode_digits, pad_to, vocabulary
from .transformer import Transformer, TransformerConfig

StepFn = Callable[[Tensor], Tensor]  # (B, t) tokens so far -> (B, V) logits of the next token


def max_source_len(model: nn.Module) -> int:
    """Longest source the model's positions allow: Transformer max_len - 1, GPT (block_size - 2) // 2."""
    if isinstance(model, Transformer):
        return model.config.max_len - 1  # the decoder reads BOS + n digits
    if isinstance(model, GPT):
        return (model.config.block_size - 2) // 2  # BOS src EOS tgt: 2n + 2 tokens
    raise TypeError(f"model must be a shared.transformer.Transformer or shared.gpt.GPT, got {type(model).__name__}")


def greedy_loop(step_fn: StepFn, start: Tensor, max_new: int) -> Tensor:
    """Append argmax tokens to `start` (B, t0) until every row has produced EOS; -> (B, t_new) new tokens."""
    B = start.size(0)
    seq, done = start, torch.zeros(B, dtype=torch.bool, device=start.device)
    for _ in range(max_new):
        next_token = step_fn(seq).argmax(dim=-1)  # (B,)
        next_token = next_token.masked_fill(done, PAD)  # finished rows only pad
        seq = torch.cat([seq, next_token[:, None]], dim=1)  # (B, t + 1)
        done |= next_token == EOS
        if done.all():
            break
    return seq[:, start.size(1):]


def _cut(rows: Tensor, limits: Sequence[int]) -> list[list[int]]:
    """(B, t) generated tokens -> token lists, each ending before its first EOS or after its row's limit."""
    out = []
    for row, limit in zip(rows.tolist(), limits):
        row = row[:limit]
        out.append(row[: row.index(EOS)] if EOS in row else row)
    return out


@torch.no_grad()
def greedy_decode(model: nn.Module, sources: Sequence[Sequence[int]], max_new: int | None = None) -> list[list[int]]:
    """Digit sources -> generated token lists (without EOS), decoded as one batch per call.

    A row with no EOS after `max_new` tokens (default: its source length + 1, enough for the reversed
    digits and EOS) is returned as generated, so it can never count as correct.
    """
    max_source_len(model)  # type check
    if len(sources) == 0:
        raise ValueError("sources must be a non-empty list of digit lists")
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    limits = [max_new or len(s) + 1 for s in sources]
    max_new = max(limits)
    try:
        if isinstance(model, Transformer):
            src = pad_to([encode_digits(s) for s in sources], PAD).to(device)  # (B, T_src)
            src_mask = model.src_mask(src)
            memory = model.encode(src, src_mask)  # (B, T_src, d_model), computed once
            start = torch.full((len(sources), 1), BOS, dtype=torch.long, device=device)
            new_max = min(max_new, model.config.max_len)  # the decoder reads at most max_len tokens
            return _cut(greedy_loop(lambda seq: model.decode(seq, memory, src_mask)[:, -1], start, new_max), limits)
        # decoder-only: prompts of one length share a batch, so no row needs padding in front
        results: list[list[int] | None] = [None] * len(sources)
        for length in sorted({len(s) for s in sources}):
            rows = [i for i, s in enumerate(sources) if len(s) == length]
            prompt = torch.tensor([[BOS] + encode_digits(sources[i]) + [EOS] for i in rows], device=device)
            new_max = min(max_new, model.config.block_size - prompt.size(1) + 1)
            generated = _cut(greedy_loop(lambda seq: model(seq)[:, -1], prompt, new_max), [limits[i] for i in rows])
            for i, tokens in zip(rows, generated):
                results[i] = tokens
        return results
    finally:
        model.train(was_training)


@torch.no_grad()
def beam_search(model: nn.Module, source: Sequence[int], beam_size: int = 4, max_new: int | None = None) -> list[int]:
    """The most probable token list (without EOS) kept by a beam of `beam_size` hypotheses, for one source.

    Finished hypotheses stay in the beam at no extra cost; the search stops when all have produced EOS.
    """
    if not isinstance(beam_size, int) or beam_size < 1:
        raise ValueError(f"beam_size must be a positive int, got {beam_size!r}")
    max_source_len(model)
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    max_new = max_new or len(source) + 1
    try:
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
        seq, scores = start, torch.zeros(1, device=device)  # (k, t), (k,) summed log-probabilities
        for _ in range(max_new):
            log_probs = step_fn(seq).log_softmax(dim=-1)  # (k, V)
            finished = (seq[:, start.size(1):] == EOS).any(dim=1)  # (k,)
            log_probs[finished] = float("-inf")
            log_probs[finished, PAD] = 0.0  # a finished hypothesis only pads, keeping its score
            candidates = (scores[:, None] + log_probs).flatten()  # (k * V,)
            scores, index = candidates.topk(min(beam_size, candidates.numel()))
            V = log_probs.size(-1)
            seq = torch.cat([seq[index // V], (index % V)[:, None]], dim=1)  # (k, t + 1)
            if (seq[:, start.size(1):] == EOS).any(dim=1).all():
                break
        return _cut(seq[:1, start.size(1):], [max_new])[0]  # the best hypothesis
    finally:
        model.train(was_training)


def exact_match(model: nn.Module, sources: Sequence[Sequence[int]], batch_size: int = 500) -> float:
    """Fraction of sources whose greedy output is exactly the reversed source (EOS included)."""
    correct = 0
    for i in range(0, len(sources), batch_size):
        chunk = sources[i : i + batch_size]
        outputs = greedy_decode(model, chunk)
        correct += sum(out == encode_digits(s)[::-1] for out, s in zip(outputs, chunk))
    return correct / len(sources)


def reverse(model: nn.Module, digits: Sequence[int]) -> list[int]:
    """Reverse a list of digits 0-9 with a trained model: reverse(model, [1, 2, 3]) -> [3, 2, 1]."""
    limit = max_source_len(model)
    if not isinstance(digits, (list, tuple)):
        raise TypeError(f"digits must be a list of ints 0-9, got {type(digits).__name__}")
    if not digits:
        raise ValueError("digits must be a non-empty list of ints 0-9, got an empty list")
    for d in digits:
        if not isinstance(d, int) or isinstance(d, bool):
            raise TypeError(f"digits must hold ints 0-9, got {d!r} ({type(d).__name__})")
        if not 0 <= d <= 9:
            raise ValueError(f"digits must hold ints 0-9, got {d!r}")
    if len(digits) > limit:
        raise ValueError(f"digits may hold at most {limit} digits for this model, got {len(digits)}")
    tokens = greedy_decode(model, [list(digits)])[0]
    try:
        return decode_tokens(tokens)
    except ValueError as err:
        raise RuntimeError(f"the model produced a non-digit token; is it trained? ({err})") from None


def save_reverser(path: str | os.PathLike, model: nn.Module, **kwargs):
    """Save a reversal model with shared.checkpoint; the task's vocabulary goes into `extra`."""
    max_source_len(model)
    extra = {"task": "reversal", "vocabulary": vocabulary(), **kwargs.pop("extra", {})}
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
    config = config_from_checkpoint(state, config_cls)
    model = restore_model(state, model_cls(config), config)
    return model.to(device).eval()
