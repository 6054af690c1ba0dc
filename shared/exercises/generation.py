"""Exercise checkers for notebooks 06 (reversal: decoder inputs, greedy step, exact match) and 08 (sampling).

Import them from `shared.exercises`; see there and `shared.exercises.feedback` for how a checker reports.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ..attention import scaled_dot_product_attention
from ..generation.lm import top_k_filter, top_p_filter
from ..masks import causal_mask
from ..reversal import BOS, EOS, encode_digits, seq2seq_sample
from .feedback import Checker, exercise, random_tensor

# ---------------------------------------------------------------- 05 encoder-decoder on list reversal


def _as_list(x):
    return x.tolist() if isinstance(x, Tensor) else x


@exercise("decoder input and labels")
def check_decoder_inputs(c: Checker) -> None:
    """fn(digits) -> (tgt_in, tgt_out) token lists: tgt_in = [BOS] + reversed tokens, tgt_out = reversed + [EOS]."""
    for digits in ([1, 2, 3], [7], [0, 0, 9, 4, 5], [9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 1, 2]):
        case = f"digits {digits}"
        tgt_in, tgt_out = c.unpack(c.call(case, list(digits)), case, ("tgt_in", "tgt_out"))
        tgt_in, tgt_out = _as_list(tgt_in), _as_list(tgt_out)
        _, want_in, want_out = seq2seq_sample(digits)
        tokens, rev = encode_digits(digits), encode_digits(digits)[::-1]
        mistakes = {(tuple([BOS] + tokens), tuple(tokens + [EOS])): "reverse the digits: the target is the source "
                    "read backwards.",
                    (tuple([BOS] + digits[::-1]), tuple(digits[::-1] + [EOS])): "encode the digits as tokens "
                    "(digit + 3, shared.reversal.encode_digits) before adding BOS/EOS.",
                    (tuple(want_out), tuple(want_in)): "tgt_in and tgt_out are swapped: the decoder reads "
                    "[BOS] + reversed and must predict reversed + [EOS].",
                    (tuple(want_in), tuple(rev)): "tgt_out must end with EOS so the model learns when to stop.",
                    (tuple(want_in), tuple(want_in)): "tgt_out is tgt_in shifted left by one: reversed + [EOS]."}
        hint = mistakes.get((tuple(tgt_in), tuple(tgt_out)), "")
        c.equal(tgt_in, want_in, case, "tgt_in", hint)
        c.equal(tgt_out, want_out, case, "tgt_out", hint)
        c.passed()


@exercise("greedy decoding step")
def check_greedy_step(c: Checker) -> None:
    """fn(seq (B, t) ids, logits (B, t, V) of the model on seq) -> (B, t + 1): seq + the most likely next token."""
    for seed, (B, t, V) in enumerate(((2, 3, 13), (3, 1, 13), (1, 6, 5))):
        case = f"B={B}, t={t}, V={V}"
        seq = torch.randint(0, V, (B, t), generator=torch.Generator().manual_seed(seed))
        logits = random_tensor(B, t, V, seed=seed)
        expected = torch.cat([seq, logits[:, -1].argmax(-1, keepdim=True)], dim=1)  # (B, t + 1)
        got = c.tensor(c.call(case, seq.clone(), logits.clone()), case)
        if got.is_floating_point():
            c.fail(case, f"the sequence has dtype {got.dtype}; token ids are integers.",
                   "argmax already returns long ids: concatenate them without converting.")
        c.close(got, expected, case, "sequence", "(B, t + 1)",
                variants=[(torch.cat([seq, logits[:, 0].argmax(-1, keepdim=True)], 1), "the next token is predicted "
                           "by the LAST position: use logits[:, -1], not logits[:, 0]."),
                          (torch.cat([expected[:, -1:], seq], 1), "append the new token at the end, not the front.")],
                shape_hints={(B, 1): "return the whole sequence with the new token appended, not the token alone.",
                             (B,): "return the whole sequence with the new token appended, not the token alone."})
        c.passed()


@exercise("exact match")
def check_exact_match(c: Checker) -> None:
    """fn(predictions, targets: lists of token lists) -> fraction (0..1) of predictions equal to their target."""
    cases = {"all correct": ([[5, 4, 3], [9]], [[5, 4, 3], [9]]),
             "one token wrong in one of 4": ([[5, 4, 3], [9, 8], [3, 3, 7], [6, 5]], [[5, 4, 3], [9, 8], [3, 4, 7],
                                                                                        [6, 5]]),
             "a prediction with an extra token": ([[5, 4, 3, 3], [9, 8]], [[5, 4, 3], [9, 8]]),
             "an empty prediction": ([[], [7, 7]], [[4, 4], [7, 7]]),
             "a prediction in the wrong order": ([[3, 4, 5], [9, 8]], [[5, 4, 3], [9, 8]])}
    for case, (preds, targets) in cases.items():
        expected = sum(p == t for p, t in zip(preds, targets)) / len(targets)
        got = c.call(case, [list(p) for p in preds], [list(t) for t in targets])
        got = float(got) if isinstance(got, Tensor) and got.numel() == 1 else got
        if not isinstance(got, (int, float)):
            c.fail(case, f"expected a number between 0 and 1, got {type(got).__name__}.")
        tokens = sum(sum(a == b for a, b in zip(p, t)) for p, t in zip(preds, targets)) / sum(map(len, targets))
        prefix = sum(all(a == b for a, b in zip(p, t)) and len(p) > 0 for p, t in zip(preds, targets)) / len(targets)
        unordered = sum(sorted(p) == sorted(t) for p, t in zip(preds, targets)) / len(targets)
        hints = {expected * len(targets): "return a fraction (correct / total), not a count.",
                 tokens: "this is per-token accuracy; exact match counts a sequence only when every token matches.",
                 prefix: "a prediction with extra or missing tokens is not an exact match (zip() stops at the "
                         "shorter list: compare the lists with ==).",
                 unordered: "the order matters: [3, 4, 5] is not [5, 4, 3] (compare the lists with ==, not their "
                            "sorted() copies or set())."}
        if not math.isclose(got, expected, abs_tol=1e-9):
            hint = next((h for value, h in hints.items() if math.isclose(got, value, abs_tol=1e-9)), "")
            c.fail(case, f"got {got:.4g}, expected {expected:.4g}.", hint)
        c.passed()


# ---------------------------------------------------------------- 06 sampling from a GPT


def _no_inplace(c: Checker, case: str, before: Tensor, after: Tensor) -> None:
    if not torch.equal(before, after):
        c.fail(case, "your function changed the logits passed in.",
               "work on a copy: use the out-of-place `logits.masked_fill(...)` (no underscore) or logits.clone().")


def _keep_first(logits: Tensor, n: Tensor) -> Tensor:
    """Keep the n[b] most likely tokens of each row (n: (B,) counts), -inf elsewhere."""
    order = logits.argsort(dim=-1, descending=True)  # (B, V)
    rank = torch.empty_like(order).scatter_(-1, order, torch.arange(logits.size(-1)).expand_as(order))
    return logits.masked_fill(rank >= n[:, None].clamp(min=1), float("-inf"))


def _filter_mistakes(logits: Tensor, expected: Tensor, kept: Tensor) -> list:
    return [(_keep_first(logits, kept - 1), "keeps one token too few."),
            (_keep_first(logits, kept + 1), "keeps one token too many."),
            (logits.masked_fill(expected.isinf(), 0.0), "removed tokens got logit 0, which still has probability; "
             "set them to float('-inf')."),
            (expected.softmax(-1), "return the filtered logits (with -inf), not probabilities.")]


@exercise("top-k filter")
def check_top_k(c: Checker) -> None:
    """fn(logits (B, V), k) -> logits with all but the k largest of each row set to -inf."""
    ties = torch.tensor([[1.0, 3.0, 3.0, 2.0, 0.0], [0.5, 0.5, 0.5, 0.5, 0.5]])
    cases = {"B=2, V=10, k=3": (random_tensor(2, 10, seed=1), 3), "k=1": (random_tensor(3, 8, seed=2), 1),
             "k = V (keep everything)": (random_tensor(2, 6, seed=3), 6), "ties, k=2": (ties, 2)}
    for case, (logits, k) in cases.items():
        before = logits.clone()
        got = c.tensor(c.call(case, logits, k), case)
        _no_inplace(c, case, before, logits)
        expected = top_k_filter(logits, k)
        if case.startswith("ties") and got.shape == logits.shape:  # keeping exactly k of the tied logits is fine too
            kept = ~got.isinf()
            strict = logits > logits.topk(k, -1).values[..., -1:]
            exact_k = (kept.sum(-1) == k).all() and (kept <= ~expected.isinf()).all() and (kept >= strict).all()
            if exact_k and torch.equal(got[kept], logits[kept]):
                c.passed()
                continue
        variants = _filter_mistakes(logits, expected, (~expected.isinf()).sum(-1))
        variants.append((-top_k_filter(-logits, k), "this keeps the k *smallest* logits; keep the largest."))
        c.close(got, expected, case, "filtered logits", "(B, V)", variants=variants)
        c.passed()


@exercise("top-p (nucleus) filter")
def check_top_p(c: Checker) -> None:
    """fn(logits (B, V), p) -> logits keeping the fewest most likely tokens whose probabilities sum to >= p."""
    nucleus = torch.tensor([[0.05, 0.3, 0.15, 0.5]]).log()  # sorted: 0.5, 0.3 | 0.15, 0.05
    boundary = torch.tensor([[0.25, 0.125, 0.5, 0.125]]).log()  # exact in binary: the top token alone sums to 0.5
    cases = {"probabilities [0.05, 0.3, 0.15, 0.5], p=0.7": (nucleus, 0.7),
             "probabilities [0.25, 0.125, 0.5, 0.125], p=0.5 (the top token alone reaches p)": (boundary, 0.5),
             "p=1.0 (keep everything)": (random_tensor(2, 6, seed=4), 1.0),
             "p=0.01 (only the most likely token)": (random_tensor(2, 6, seed=5), 0.01),
             "B=3, V=12, p=0.9": (random_tensor(3, 12, seed=6) * 2, 0.9)}
    for case, (logits, p) in cases.items():
        before = logits.clone()
        got = c.tensor(c.call(case, logits, p), case)
        _no_inplace(c, case, before, logits)
        expected = top_p_filter(logits, p)
        sorted_logits, order = logits.sort(dim=-1, descending=True)
        probs = sorted_logits.softmax(-1)
        remove = probs.cumsum(-1) - probs >= p  # (B, V), in sorted order
        unsorted = logits.masked_fill(remove, float("-inf"))  # mask left in sorted order
        gathered = ("gather reads with the permutation; putting the sorted entries back in vocabulary order needs "
                    "its inverse, scatter: mask.scatter(-1, sorted_indices, mask).")
        variants = _filter_mistakes(logits, expected, (~expected.isinf()).sum(-1))
        variants += [(unsorted, "the mask was computed in sorted order; map it back to the vocabulary order "
                      "(e.g. mask.scatter(-1, sorted_indices, mask))."),
                     (logits.masked_fill(remove.gather(-1, order), float("-inf")), gathered),
                     (sorted_logits.masked_fill(remove, float("-inf")).gather(-1, order), gathered)]
        c.close(got, expected, case, "filtered logits", "(B, V)", variants=variants)
        c.passed()


@exercise("sampling with temperature")
def check_sample_next_token(c: Checker) -> None:
    """fn(logits (B, V), temperature) -> (B,) sampled ids from softmax(logits / temperature); temperature 0 = argmax."""
    logits = torch.tensor([2.0, 1.0, 0.0, -1.0, -2.0])
    n = 4000
    for t in (1.0, 0.5, 2.0):
        case = f"{n} rows of logits {logits.tolist()}, temperature {t}"
        with torch.random.fork_rng(devices=[]):  # the learner's sampler may use the global generator
            torch.manual_seed(0)
            got = c.shape(c.call(case, logits.expand(n, -1).clone(), t), (n,), case, "ids", "(B,)",
                          hints={(n, 1): "return one id per row, shape (B,): .squeeze(-1) the (B, 1) result."})
        freq = torch.bincount(got.long().clamp(0, 4), minlength=5).float() / n

        def distance(temperature, freq=freq):
            return 0.5 * (freq - (logits / temperature).softmax(-1)).abs().sum().item()

        if distance(t) > 0.05:
            hint = ("you multiplied by the temperature; divide the logits by it." if distance(1 / t) < 0.05 else
                    "the temperature is ignored: sample from softmax(logits / temperature)." if distance(1.0) < 0.05
                    else "sample with torch.multinomial(probs, 1) from the probabilities after the temperature.")
            c.fail(case, f"the sampled ids do not follow softmax(logits / {t}): total variation distance "
                   f"{distance(t):.3f} (allowed 0.05).", hint)
        c.passed()
    case = "temperature 0 (greedy)"
    rows = random_tensor(6, 9, seed=7)
    c.close(c.call(case, rows.clone(), 0.0), rows.argmax(-1), case, "ids", "(B,)",
            shape_hints={(6, 1): "return one id per row, shape (B,)."})
    c.passed()


def _attend(q, k_all, v_all, scale=None):
    d_k = q.size(-1)
    weights = (q @ k_all.transpose(-2, -1) / (scale or math.sqrt(d_k))).softmax(-1)  # (B, H, 1, T_k)
    return weights @ v_all


@exercise("decoding step with a KV cache")
def check_kv_cache_step(c: Checker) -> None:
    """fn(q, k, v (B, H, 1, d_k) of the newest token, cache (k_past, v_past) or None) -> (out, (k_all, v_all))."""
    B, H, d_k, T = 2, 2, 4, 5
    q, k, v = (random_tensor(B, H, T, d_k, seed=s) for s in (1, 2, 3))  # the whole sequence, for reference
    full, _ = scaled_dot_product_attention(q, k, v, causal_mask(T))  # (B, H, T, d_k)
    cache, outs = None, []
    c.error_hint = ("print the shapes of your cache: keys and values grow along the time axis, "
                    "torch.cat([k_past, k], dim=2) gives (B, H, t + 1, d_k).")
    for t in range(T):
        case = f"step {t} (cache holds {t} position{'s' if t != 1 else ''})"
        qt, kt, vt = q[:, :, t : t + 1], k[:, :, t : t + 1], v[:, :, t : t + 1]  # (B, H, 1, d_k)
        out, new_cache = c.unpack(c.call(case, qt.clone(), kt.clone(), vt.clone(), cache), case, ("out", "cache"))
        k_all, v_all = c.unpack(new_cache, case, ("k_all", "v_all"))
        want_k, want_v = k[:, :, : t + 1], v[:, :, : t + 1]  # (B, H, t + 1, d_k)
        cache_hints = {(B, H, 1, d_k * (t + 1)): "concatenate along the time axis: torch.cat([k_past, k], dim=2).",
                       (B, H, 1, d_k): "the cache must keep every position so far: append, do not replace."}
        variants = [(torch.cat([kt, k[:, :, :t].flip(2)], 2) if t else kt, "append the new key at the end: "
                     "torch.cat([k_past, k], dim=2).")]
        c.close(k_all, want_k, case, "cached keys", "(B, H, t + 1, d_k)", variants=variants, shape_hints=cache_hints)
        c.close(v_all, want_v, case, "cached values", "(B, H, t + 1, d_k)", shape_hints=cache_hints)
        mistakes = [(_attend(qt, want_k, want_v, scale=1.0), "looks like you forgot to divide by √d_k.")]
        if t:
            mistakes.append((_attend(qt, k[:, :, :t], v[:, :, :t]), "the newest token must attend to itself too: "
                             "append its key and value to the cache *before* attending."))
        c.close(out, full[:, :, t : t + 1], case, "out", "(B, H, 1, d_k)", variants=mistakes)
        cache = (k_all, v_all)
        outs.append(out)
        c.passed()
    c.close(torch.cat(outs, dim=2), full, "all steps together", "outputs",
            "(equal to causal attention over the whole sequence)")
    c.passed()
