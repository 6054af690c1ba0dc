"""Text generation for `shared.gpt.GPT`: greedy, temperature, top-k, top-p, repetition penalty,
no-repeat n-gram, batched, seedable, with or without a KV cache.

Every filter is a small pure function on logits (B, V) -> (B, V): removed tokens get -inf, so the
softmax gives them probability exactly zero. Each checks its knob and the shapes of what it is given.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..gpt import GPT
from ..runtime import eval_mode
from ..validation import (
    check_batch_size,
    check_bool,
    check_finite,
    check_float_tensor,
    check_int,
    check_positive_int,
    check_positive_number,
    check_tokens,
    describe,
    is_integer_tensor,
)


def check_logits(logits: Tensor, tokens: Tensor | None = None) -> Tensor:
    """Return `logits` if it is a float (B, V) tensor and `tokens`, if given, a (B, T) integer context (T >= 0)."""
    if check_float_tensor("logits", logits).dim() != 2 or logits.size(-1) < 1:
        raise ValueError(f"logits must have shape (B, V): one row of next-token scores per sequence, got "
                         f"{tuple(logits.shape)}")
    if tokens is not None:
        if not is_integer_tensor(tokens) or tokens.dim() != 2:
            raise ValueError(f"tokens must be a (B, T) integer tensor of the ids so far, got {describe(tokens)}")
        check_batch_size("tokens", tokens, logits.size(0), of="logits")
    return logits


def _check_finite_rows(logits: Tensor, position: int | None = None, name: str = "logits") -> Tensor:
    """Return (B, V) next-token `logits` if every row has a finite maximum: no NaN, no +inf, not all -inf.

    One reduction and one wait for the device per call (once per generated token); the slow part, finding
    what went wrong, runs only when something did. position: tokens so far, for the message.
    """
    if bool(torch.isfinite(logits.amax(dim=-1)).all()):  # amax is NaN if a row holds NaN, +inf if one holds +inf
        return logits
    row = int((~torch.isfinite(logits.amax(dim=-1))).int().argmax())
    values = logits[row]
    what = ("NaN" if values.isnan().any() else "+inf" if values.isposinf().any() else
            "no finite logit (every entry -inf, so no token can be chosen)")
    after = f" (the next token after {position} tokens)" if position is not None else ""
    raise ValueError(f"{name} of row {row}{after} contain {what}: the model's scores are not usable. A model whose "
                     "weights or activations went NaN/inf (check torch.isfinite on its parameters) cannot generate")


def top_k_filter(logits: Tensor, k: int) -> Tensor:
    """Keep the k largest logits of each row (ties with the k-th are kept); set the rest to -inf."""
    check_positive_int("top_k", k)
    check_logits(logits)
    if k >= logits.size(-1):
        return logits
    kth = logits.topk(k, dim=-1).values[..., -1:]  # (B, 1): the k-th largest logit
    return logits.masked_fill(logits < kth, float("-inf"))


def top_p_filter(logits: Tensor, p: float) -> Tensor:
    """Nucleus filter: keep the smallest set of most likely tokens whose probabilities sum to >= p."""
    _check_top_p(p)
    check_logits(logits)
    if p >= 1.0:
        return logits
    sorted_logits, order = logits.sort(dim=-1, descending=True)  # (B, V)
    probs = sorted_logits.softmax(dim=-1)
    mass_before = probs.cumsum(dim=-1) - probs  # probability of the tokens ranked above this one
    remove_sorted = mass_before >= p  # the most likely token always stays (mass_before = 0)
    remove = remove_sorted.scatter(-1, order, remove_sorted)  # back to vocabulary order
    return logits.masked_fill(remove, float("-inf"))


def apply_repetition_penalty(logits: Tensor, tokens: Tensor, penalty: float) -> Tensor:
    """Make every token already in `tokens` (B, T) less likely: positive logits / penalty, negative * penalty."""
    check_positive_number("repetition_penalty", penalty, " (1.0 = off)")
    check_logits(logits, tokens)
    if penalty == 1.0:
        return logits
    _check_ids(tokens, logits.size(-1))
    seen = logits.gather(-1, tokens)  # (B, T) logits of the tokens already present
    seen = torch.where(seen > 0, seen / penalty, seen * penalty)
    return logits.scatter(-1, tokens, seen)


def ban_repeated_ngrams(logits: Tensor, tokens: Tensor, n: int) -> Tensor:
    """Set to -inf every token that would repeat an n-gram already present in `tokens` (B, T).

    Raises ValueError when a row would have no token left (every continuation repeats an n-gram):
    no choice could keep the promise, and argmax or sampling over all -inf gives no honest answer.
    """
    check_int("no_repeat_ngram_size", n, minimum=0)
    check_logits(logits, tokens)
    if n == 0 or tokens.size(1) < n:
        return logits
    _check_ids(tokens, logits.size(-1))
    ngrams = tokens.unfold(1, n, 1)  # (B, T - n + 1, n): every n-gram so far
    prefix = tokens[:, tokens.size(1) - (n - 1) :]  # (B, n - 1): the tokens a new n-gram would start with
    matches = (ngrams[:, :, :-1] == prefix[:, None, :]).all(dim=-1)  # (B, T - n + 1)
    banned = torch.zeros_like(logits).scatter_add(-1, ngrams[:, :, -1], matches.to(logits.dtype))  # (B, V)
    out = logits.masked_fill(banned > 0, float("-inf"))
    empty = out.isneginf().all(dim=-1)  # (B,) rows with nothing left to choose
    if empty.any():
        raise ValueError(f"no_repeat_ngram_size={n} bans every token of row {int(empty.int().argmax())} after "
                         f"{tokens.size(1)} tokens: use a larger size, or generate fewer tokens")
    return out


def next_token_logits(
    logits: Tensor, tokens: Tensor, *, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
    repetition_penalty: float = 1.0, no_repeat_ngram_size: int = 0,
) -> Tensor:
    """Apply penalties, then temperature, then top-k and top-p to (B, V) logits given the (B, T) context.

    temperature=0 (greedy) leaves the scale alone: the caller takes the argmax. Logits with NaN or +inf, or a
    row without one finite logit, raise ValueError naming the row and the position (a model gone NaN has no
    next token to give); single -inf entries are legal (a token masked out).
    """
    check_finite("temperature", temperature, 0.0, " (0 = greedy)")
    _check_finite_rows(check_logits(logits, tokens), tokens.size(1))
    logits = apply_repetition_penalty(logits.float(), tokens, repetition_penalty)
    logits = ban_repeated_ngrams(logits, tokens, no_repeat_ngram_size)
    if temperature > 0:
        logits = apply_temperature(logits, temperature)
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    if top_p is not None:
        logits = top_p_filter(logits, top_p)
    return logits


def apply_temperature(logits: Tensor, temperature: float) -> Tensor:
    """(B, V) logits / temperature, safe for any temperature > 0: the largest logit of each row stays finite.

    Shifting each row so that its largest logit is 0 changes no probability; then even a temperature so
    small that the division overflows gives -inf to the other tokens (their probability 0), never NaN.
    Temperature 0 (greedy decoding) has no division: take the argmax of the logits instead.
    """
    check_positive_number("temperature", temperature, " (for greedy decoding, temperature 0, take the argmax instead)")
    check_logits(logits)
    shifted = logits - logits.amax(dim=-1, keepdim=True)  # (B, V), <= 0; the top token(s) exactly 0
    return torch.where(shifted == 0, shifted, shifted / temperature)  # 0 / tiny stays 0 rather than 0 / 0 = NaN


@torch.no_grad()
def generate(
    model: GPT,
    prompt: Tensor,
    max_new_tokens: int,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    repetition_penalty: float = 1.0,
    no_repeat_ngram_size: int = 0,
    generator: torch.Generator | None = None,
    use_cache: bool = True,
) -> Tensor:
    """Continue each row of `prompt` (B, T) by `max_new_tokens` tokens -> (B, T + max_new_tokens).

    temperature=0 is greedy decoding (always the most likely token). Without a cache every step runs
    the model on the last block_size tokens. With a cache every step runs it on the newest token only;
    when the cache reaches block_size it is refilled from the last block_size // 2 tokens (from then
    on, the model sees between block_size // 2 and block_size tokens of context).

    Every knob is checked before the first step. Each step applies the repetition penalty and the n-gram
    ban, then temperature, then top-k and top-p (`next_token_logits`). If the n-gram ban leaves a row no
    token at all, that step raises ValueError naming no_repeat_ngram_size (no token would keep its promise);
    if the model's logits hold NaN or +inf, or a row has no finite logit, it raises ValueError naming the row.
    """
    if not isinstance(model, GPT):
        raise TypeError(f"model must be a shared.gpt.GPT, got {type(model).__name__}")
    _check_knobs(prompt, max_new_tokens, temperature, top_k, top_p, repetition_penalty, no_repeat_ngram_size,
                 generator, use_cache)
    with eval_mode(model):
        return _generate_loop(model, prompt, max_new_tokens, temperature, generator, use_cache, dict(
            top_k=top_k, top_p=top_p, repetition_penalty=repetition_penalty, no_repeat_ngram_size=no_repeat_ngram_size))


def _generate_loop(model, tokens, max_new_tokens, temperature, generator, use_cache, knobs) -> Tensor:
    block_size = model.config.block_size
    caches = None
    for _ in range(max_new_tokens):
        if not use_cache:
            logits = model(tokens[:, -block_size:])[:, -1]  # (B, V): crop to the last block_size tokens
        elif caches is None or len(caches[0]) >= block_size:
            keep = block_size if caches is None else max(1, block_size // 2)  # first fill, or refill when full
            caches = model.new_caches()
            logits = model(tokens[:, -keep:], caches=caches)[:, -1]  # run once over the recent context
        else:
            logits = model(tokens[:, -1:], caches=caches)[:, -1]  # (B, V): only the newest token is new
        logits = next_token_logits(logits, tokens, temperature=temperature, **knobs)
        tokens = torch.cat([tokens, _pick(logits, temperature, generator)], dim=1)  # (B, T + 1)
    return tokens


def _pick(logits: Tensor, temperature: float, generator: torch.Generator | None) -> Tensor:
    """(B, V) filtered logits -> (B, 1) ids: argmax when temperature is 0, else a sample."""
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    probs = logits.softmax(dim=-1)  # (B, V)
    if generator is not None and generator.device != probs.device:
        return torch.multinomial(probs.cpu(), 1, generator=generator).to(probs.device)
    return torch.multinomial(probs, 1, generator=generator)


def _check_knobs(prompt, max_new_tokens, temperature, top_k, top_p, repetition_penalty, no_repeat_ngram_size,
                 generator, use_cache) -> None:
    """generate's checks, all before the first step: the same ones as the filters themselves make."""
    check_tokens("prompt", prompt)
    check_int("max_new_tokens", max_new_tokens, minimum=0)
    check_finite("temperature", temperature, 0.0, " (0 = greedy)")
    if top_k is not None:
        check_positive_int("top_k", top_k)
    if top_p is not None:
        _check_top_p(top_p)
    check_positive_number("repetition_penalty", repetition_penalty, " (1.0 = off)")
    check_int("no_repeat_ngram_size", no_repeat_ngram_size, minimum=0)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    check_bool("use_cache", use_cache)


def _check_ids(tokens: Tensor, vocab_size: int) -> None:
    """The context's ids must index the logits (0..V-1): gather and scatter would fail with a bare index error."""
    if tokens.numel() == 0:  # an empty context (T = 0) has nothing to index
        return
    low, high = torch.aminmax(tokens)
    if bool((low < 0) | (high >= vocab_size)):
        raise ValueError(f"tokens must hold ids in 0..{vocab_size - 1} (one per column of logits), "
                         f"got ids from {low.item()} to {high.item()}")


def _check_top_p(p) -> None:
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 < p <= 1.0:
        raise ValueError(f"top_p must be a number in (0, 1], got {p!r}")
