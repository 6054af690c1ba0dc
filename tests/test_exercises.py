"""Exercise checkers: each accepts the reference solution, rejects plausible wrong answers with the right hint,
and turns stubs, wrong shapes and crashes into feedback instead of a traceback."""

import math

import pytest
import torch
from torch import nn

from shared import exercises as ex
from shared.attention import MultiHeadAttention, scaled_dot_product_attention
from shared.generation.lm import top_k_filter, top_p_filter
from shared.masks import causal_mask, padding_mask
from shared.positions import LearnedPositionalEmbedding, SinusoidalPositionalEncoding, sinusoidal_table
from shared.reversal import BOS, EOS, encode_digits, seq2seq_sample

from .helpers import accepts, rejects, verdict

# ---------------------------------------------------------------- every checker: stubs, wrong shapes, crashes

ALL = [check for checks in ex.CHECKERS.values() for check in checks]


def stub(*args, **kwargs):
    raise NotImplementedError


@pytest.mark.parametrize("check", ALL, ids=lambda c: c.__name__)
def test_stub_is_not_solved_yet(check, capsys):
    result, out = verdict(check, stub, capsys)
    assert result is False and "not solved yet" in out


@pytest.mark.parametrize("check", ALL, ids=lambda c: c.__name__)
def test_wrong_shape_and_crash_are_feedback(check, capsys):
    result, out = verdict(check, lambda *a, **k: torch.zeros(3, 1, 7), capsys)
    assert result is False and out.startswith("✗")
    result, out = verdict(check, lambda *a, **k: 1 / 0, capsys)
    assert result is False and "ZeroDivisionError" in out and "Traceback" not in out
    result, out = verdict(check, "not a function", capsys)
    assert result is False and "pass your function itself" in out


def test_checkers_leave_global_random_state_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    ex.check_attention(scaled_dot_product_attention)
    ex.check_sample_next_token(lambda logits, t: torch.multinomial((logits / t).softmax(-1), 1)[:, 0])
    assert torch.equal(torch.rand(3), expected)


# ---------------------------------------------------------------- 01


def test_scaled_scores(capsys):
    accepts(ex.check_scaled_scores, lambda q, k: q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), capsys)
    rejects(ex.check_scaled_scores, lambda q, k: q @ k.transpose(-2, -1), capsys, "forgot to divide by √d_k")
    rejects(ex.check_scaled_scores, lambda q, k: q @ k.transpose(-2, -1) / q.size(-1), capsys, "divided by d_k")
    rejects(ex.check_scaled_scores, lambda q, k: k @ q.transpose(-2, -1) / math.sqrt(q.size(-1)), capsys,
            "rows must be queries")


def test_softmax_temperature(capsys):
    accepts(ex.check_softmax_temperature, lambda s, t: (s / t).softmax(-1), capsys)
    rejects(ex.check_softmax_temperature, lambda s, t: (s * t).softmax(-1), capsys, "multiplied")
    rejects(ex.check_softmax_temperature, lambda s, t: (s / t).exp() / (s / t).exp().sum(-1, keepdim=True), capsys,
            "NaN", "subtract each row's max")
    rejects(ex.check_softmax_temperature, lambda s, t: (s / t).softmax(0), capsys, "wrong axis")


def attention_with(scale=None, invert=False, fill=None, zero_after=True, dim=-1):
    def attention(q, k, v, mask=None):
        scores = q @ k.transpose(-2, -1) / (math.sqrt(q.size(-1)) if scale is None else scale)
        if mask is not None:
            blocked = mask if invert else ~mask
            scores = scores.masked_fill(blocked, torch.finfo(scores.dtype).min if fill is None else fill)
        weights = scores.softmax(dim)
        if mask is not None and zero_after:
            weights = weights.masked_fill(blocked, 0.0)
        return weights @ v, weights
    return attention


def test_attention_accepts_references(capsys):
    accepts(ex.check_attention, scaled_dot_product_attention, capsys)
    accepts(lambda fn: ex.check_attention(fn, fully_masked_rows=True), scaled_dot_product_attention, capsys)
    accepts(lambda fn: ex.check_attention(fn, fully_masked_rows=True), attention_with(), capsys)
    no_mask = lambda q, k, v: (torch.nn.functional.scaled_dot_product_attention(q, k, v),  # noqa: E731
                               (q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))).softmax(-1))
    accepts(lambda fn: ex.check_attention(fn, masks=False), no_mask, capsys)


def test_attention_rejects_mistakes(capsys):
    rejects(ex.check_attention, attention_with(scale=1.0), capsys, "forgot to divide the scores by √d_k")
    rejects(ex.check_attention, attention_with(dim=-2), capsys, "wrong axis")
    rejects(ex.check_attention, attention_with(invert=True), capsys, "padding mask", "inverted mask")
    rejects(ex.check_attention, attention_with(fill=0.0, zero_after=False), capsys, "set to 0")
    full = lambda fn: ex.check_attention(fn, fully_masked_rows=True)  # noqa: E731
    rejects(full, attention_with(fill=float("-inf"), zero_after=False), capsys, "every key masked", "NaN",
            "finfo")
    rejects(full, attention_with(zero_after=False), capsys, "every key masked", "uniform weights")
    swapped = lambda q, k, v, mask=None: scaled_dot_product_attention(q, k, v, mask)[::-1]  # noqa: E731
    rejects(ex.check_attention, swapped, capsys, "(out, weights)")
    rejects(ex.check_attention, lambda q, k, v, mask=None: q, capsys, "expected a tuple (out, weights)")


def test_attention_names_an_answer_computed_in_float64(capsys):
    """The values agree within float32 rounding, but a cast to float64 is not what the course teaches."""
    def in_float64(q, k, v, mask=None):
        return scaled_dot_product_attention(q.double(), k.double(), v.double(), mask)

    def weights_in_float64(q, k, v, mask=None):
        out, weights = scaled_dot_product_attention(q, k, v, mask)
        return out, weights.double()

    rejects(ex.check_attention, in_float64, capsys, "weights has dtype torch.float64, expected torch.float32",
            ".double()")
    rejects(ex.check_attention, weights_in_float64, capsys, "weights has dtype torch.float64")
    out = rejects(ex.check_attention, lambda q, k, v, mask=None: tuple(
        t.double() if i == 0 else t for i, t in enumerate(scaled_dot_product_attention(q, k, v, mask))), capsys)
    assert "out has dtype torch.float64, expected torch.float32" in out


@pytest.mark.parametrize("dtype,cast", [(torch.float16, ".half()"), (torch.bfloat16, ".bfloat16()")])
def test_attention_names_the_dtype_it_found(dtype, cast, capsys):
    """The hint names the cast to the dtype actually returned (it spoke of float64 for a float16 answer)."""
    def in_low_precision(q, k, v, mask=None):
        return tuple(t.to(dtype) for t in scaled_dot_product_attention(q, k, v, mask))

    out = rejects(ex.check_attention, in_low_precision, capsys, f"weights has dtype {dtype}",
                  f"Remove the cast to {dtype} ({cast}")
    assert "float64" not in out


# ---------------------------------------------------------------- 02


def split(x, H):
    B, T, d_model = x.shape
    return x.view(B, T, H, d_model // H).transpose(1, 2)


def test_split_and_merge_heads(capsys):
    accepts(ex.check_split_heads, split, capsys)
    rejects(ex.check_split_heads, lambda x, H: x.view(x.size(0), H, x.size(1), -1), capsys,
            "view without transpose")
    rejects(ex.check_split_heads, lambda x, H: x.view(x.size(0), x.size(1), H, -1), capsys, ".transpose(1, 2)")
    accepts(ex.check_merge_heads, lambda x: x.transpose(1, 2).reshape(x.size(0), x.size(2), -1), capsys)
    accepts(ex.check_merge_heads, lambda x: x.transpose(1, 2).contiguous().view(x.size(0), x.size(2), -1), capsys)
    rejects(ex.check_merge_heads, lambda x: x.reshape(x.size(0), x.size(2), -1), capsys,
            "reshape without transpose")
    rejects(ex.check_merge_heads, lambda x: x.transpose(1, 2).view(x.size(0), x.size(2), -1), capsys,
            "contiguous")


def test_reference_multi_head_attention_matches_the_package():
    torch.manual_seed(0)
    mha = MultiHeadAttention(8, 2, bias=False)
    x = torch.randn(2, 5, 8)
    weights = [m.weight.T for m in (mha.w_q, mha.w_k, mha.w_v, mha.w_o)]  # nn.Linear computes x @ W.T
    assert torch.allclose(ex.reference_multi_head_attention(x, *weights, 2), mha(x)[0], atol=1e-6)


def test_multi_head_attention(capsys):
    ref = ex.reference_multi_head_attention
    accepts(ex.check_multi_head_attention, ref, capsys)
    rejects(ex.check_multi_head_attention, lambda *a: ref(*a, mistake="no_w_o"), capsys, "W^O")
    rejects(ex.check_multi_head_attention, lambda *a: ref(*a, mistake="scale_d_model"), capsys, "not √d_model")
    rejects(ex.check_multi_head_attention, lambda *a: ref(*a, mistake="no_transpose"), capsys, "view(B, H, T, d_k)")


# ---------------------------------------------------------------- 03


def test_causal_mask(capsys):
    accepts(ex.check_causal_mask, lambda T: causal_mask(T)[0, 0], capsys)
    accepts(ex.check_causal_mask, lambda T: torch.ones(T, T, dtype=torch.bool).tril(), capsys)
    rejects(ex.check_causal_mask, lambda T: torch.ones(T, T, dtype=torch.bool).tril(1), capsys, "off by one",
            "i+1")
    rejects(ex.check_causal_mask, lambda T: torch.ones(T, T, dtype=torch.bool).triu(1), capsys, "T=4",
            "inverted polarity")
    rejects(ex.check_causal_mask, lambda T: torch.ones(T, T).tril(), capsys, "torch.bool")
    rejects(ex.check_causal_mask, causal_mask, capsys, "leading (1, 1)")


def test_padding_mask(capsys):
    accepts(ex.check_padding_mask, padding_mask, capsys)
    rejects(ex.check_padding_mask, lambda t, pad: (t == pad)[:, None, None, :], capsys, "inverted polarity")
    rejects(ex.check_padding_mask, lambda t, pad: (t != 0)[:, None, None, :], capsys, "pad_id=5",
            "hard-coded 0")
    rejects(ex.check_padding_mask, lambda t, pad: t != pad, capsys, "mask[:, None, None, :]")
    rejects(ex.check_padding_mask, lambda t, pad: (t != pad)[:, None, :, None], capsys, "*keys*")


# ---------------------------------------------------------------- 04


def table_with(swap=False, halves=False):
    def table(max_len, d_model):
        angles = torch.arange(max_len)[:, None] / 10000 ** (torch.arange(0, d_model, 2) / d_model)
        first, second = (angles.cos(), angles.sin()) if swap else (angles.sin(), angles.cos())
        if halves:
            return torch.cat([first, second], dim=-1)
        return torch.stack([first, second], dim=-1).flatten(1)  # interleave: sin, cos, sin, cos, ...
    return table


def test_sinusoidal_table(capsys):
    accepts(ex.check_sinusoidal_table, sinusoidal_table, capsys)
    accepts(ex.check_sinusoidal_table, table_with(), capsys)
    rejects(ex.check_sinusoidal_table, table_with(swap=True), capsys, "sin and cos are swapped")
    rejects(ex.check_sinusoidal_table, table_with(halves=True), capsys, "interleaved")
    rejects(ex.check_sinusoidal_table, lambda n, d: sinusoidal_table(n, d).T, capsys, "rows are positions")


class Concatenating(nn.Module):
    def __init__(self, d_model, max_len):
        super().__init__()
        self.table = nn.Parameter(torch.randn(max_len, d_model))

    def forward(self, x):
        return torch.cat([x, self.table[: x.size(1)].expand(x.size(0), -1, -1)], dim=-1)


class SwappedSizes(nn.Module):
    def __init__(self, max_len, d_model):  # wrong: called as (d_model, max_len)
        super().__init__()
        self.table = nn.Embedding(max_len, d_model)

    def forward(self, x):
        return x + self.table(torch.arange(x.size(1)))


def test_learned_positions(capsys):
    accepts(ex.check_learned_positions, LearnedPositionalEmbedding, capsys)  # the same (d_model, max_len) order
    accepts(ex.check_learned_positions, lambda d, n: LearnedPositionalEmbedding(d_model=d, max_len=n), capsys)
    rejects(ex.check_learned_positions, SinusoidalPositionalEncoding, capsys, "0 trainable parameters", "nn.Embedding")
    rejects(ex.check_learned_positions, Concatenating, capsys, "do not concatenate")
    rejects(ex.check_learned_positions, lambda d, n: nn.Linear(d, d), capsys, "trainable parameters")
    # sizes taken in the old (max_len, d_model) order: the table comes out (d_model, max_len) and forward fails
    rejects(ex.check_learned_positions, SwappedSizes, capsys,
            "IndexError", "the order (d_model, max_len)", "nn.Embedding(max_len, d_model)")


# ---------------------------------------------------------------- 05


def test_decoder_inputs(capsys):
    accepts(ex.check_decoder_inputs, lambda d: seq2seq_sample(d)[1:], capsys)
    accepts(ex.check_decoder_inputs, lambda d: tuple(torch.tensor(t) for t in seq2seq_sample(d)[1:]), capsys)
    rejects(ex.check_decoder_inputs, lambda d: ([BOS] + encode_digits(d), encode_digits(d) + [EOS]), capsys,
            "reverse the digits")
    rejects(ex.check_decoder_inputs, lambda d: ([BOS] + d[::-1], d[::-1] + [EOS]), capsys, "encode the digits")
    rejects(ex.check_decoder_inputs, lambda d: ([BOS] + encode_digits(d)[::-1], encode_digits(d)[::-1]), capsys,
            "end with EOS")


def test_greedy_step(capsys):
    accepts(ex.check_greedy_step, lambda s, lg: torch.cat([s, lg[:, -1].argmax(-1, keepdim=True)], 1), capsys)
    rejects(ex.check_greedy_step, lambda s, lg: torch.cat([s, lg[:, 0].argmax(-1, keepdim=True)], 1), capsys,
            "LAST position")
    rejects(ex.check_greedy_step, lambda s, lg: lg[:, -1].argmax(-1, keepdim=True), capsys, "not the token alone")
    rejects(ex.check_greedy_step, lambda s, lg: torch.cat([s, lg[:, -1].argmax(-1, keepdim=True)], 1).float(),
            capsys, "integers")


def test_exact_match(capsys):
    accepts(ex.check_exact_match, lambda p, t: sum(a == b for a, b in zip(p, t)) / len(t), capsys)
    tokens = lambda p, t: (sum(sum(x == y for x, y in zip(a, b)) for a, b in zip(p, t))  # noqa: E731
                           / sum(map(len, t)))
    rejects(ex.check_exact_match, tokens, capsys, "per-token accuracy")
    prefix = lambda p, t: sum(all(x == y for x, y in zip(a, b)) for a, b in zip(p, t)) / len(t)  # noqa: E731
    rejects(ex.check_exact_match, prefix, capsys, "extra token", "zip()")
    rejects(ex.check_exact_match, lambda p, t: sum(a == b for a, b in zip(p, t)), capsys, "not a count")


# ---------------------------------------------------------------- 06


def top_k_exact(logits, k):  # keeps exactly k even when the k-th logit is tied: accepted too
    keep = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, logits.topk(k, -1).indices, True)
    return logits.masked_fill(~keep, float("-inf"))


def test_top_k(capsys):
    accepts(ex.check_top_k, top_k_filter, capsys)
    accepts(ex.check_top_k, top_k_exact, capsys)
    rejects(ex.check_top_k, lambda lg, k: top_k_filter(lg, k + 1), capsys, "one token too many")
    rejects(ex.check_top_k, lambda lg, k: lg.masked_fill(top_k_filter(lg, k).isinf(), 0.0), capsys,
            "float('-inf')")
    rejects(ex.check_top_k, lambda lg, k: -top_k_filter(-lg, k), capsys, "*smallest*")
    rejects(ex.check_top_k, lambda lg, k: lg.masked_fill_(top_k_filter(lg, k).isinf(), float("-inf")), capsys,
            "changed the logits passed in")


def top_p_with(remove_at_crossing=False, unsort=True, strict=False, gather=False):
    def top_p(logits, p):
        sorted_logits, order = logits.sort(-1, descending=True)
        probs = sorted_logits.softmax(-1)
        cum = probs.cumsum(-1)
        remove = cum > p if remove_at_crossing else cum - probs > p if strict else cum - probs >= p
        if gather == "logits":  # filter the sorted logits, then read them back with gather (the inverse of scatter)
            return sorted_logits.masked_fill(remove, float("-inf")).gather(-1, order)
        if gather:
            remove = remove.gather(-1, order)
        elif unsort:
            remove = remove.scatter(-1, order, remove)
        return logits.masked_fill(remove, float("-inf"))
    return top_p


def test_top_p(capsys):
    accepts(ex.check_top_p, top_p_filter, capsys)
    accepts(ex.check_top_p, top_p_with(), capsys)
    rejects(ex.check_top_p, top_p_with(remove_at_crossing=True), capsys, "p=0.7", "one token too few")
    rejects(ex.check_top_p, top_p_with(unsort=False), capsys, "vocabulary order")
    rejects(ex.check_top_p, top_p_with(gather=True), capsys, "gather", "scatter(-1, sorted_indices")
    rejects(ex.check_top_p, top_p_with(gather="logits"), capsys, "gather", "scatter(-1, sorted_indices")
    rejects(ex.check_top_p, top_p_with(strict=True), capsys, "reaches p", "one token too many")  # > p, not >= p


def sampler(scale=lambda t: 1 / t, squeeze=True):
    def sample(logits, temperature):
        if temperature == 0:
            return logits.argmax(-1)
        ids = torch.multinomial((logits * scale(temperature)).softmax(-1), 1)
        return ids[:, 0] if squeeze else ids
    return sample


def test_sample_next_token(capsys):
    accepts(ex.check_sample_next_token, sampler(), capsys)
    rejects(ex.check_sample_next_token, sampler(scale=lambda t: t), capsys, "multiplied")
    rejects(ex.check_sample_next_token, sampler(scale=lambda t: 1.0), capsys, "temperature is ignored")
    rejects(ex.check_sample_next_token, sampler(squeeze=False), capsys, "shape (B,)")
    rejects(ex.check_sample_next_token, lambda lg, t: lg.argmax(-1), capsys, "total variation")


def kv_step(order="append", attend_first=False, dim=2):
    def step(q, k, v, cache):
        if attend_first and cache is not None:
            out = scaled_dot_product_attention(q, *cache)[0]
        if cache is not None:
            pair = ((cache[0], k), (cache[1], v)) if order == "append" else ((k, cache[0]), (v, cache[1]))
            k, v = torch.cat(pair[0], dim=dim), torch.cat(pair[1], dim=dim)
        if not (attend_first and cache is not None):
            out = scaled_dot_product_attention(q, k, v)[0]
        return out, (k, v)
    return step


def test_kv_cache_step(capsys):
    accepts(ex.check_kv_cache_step, kv_step(), capsys)
    rejects(ex.check_kv_cache_step, kv_step(attend_first=True), capsys, "step 1", "attend to itself")
    rejects(ex.check_kv_cache_step, kv_step(order="prepend"), capsys, "at the end")
    rejects(ex.check_kv_cache_step, kv_step(dim=-1), capsys, "step 1", "time axis")
