"""Exercise checkers under hostile learner code: a function that never returns, exit(), an interrupt; and two
comparison bugs (an expected -inf, `k.T` on a batched tensor) that once gave feedback that explained nothing.

A watchdog turns a hang into a failed test (via KeyboardInterrupt in the main thread) instead of a stuck suite.
"""

import _thread
import contextlib
import math
import signal
import sys
import threading
import time
import warnings

import pytest
import torch
import torch.distributed as dist

from shared import exercises as ex
from shared.addition import VOCAB_SIZE, sequence_length
from shared.attention import scaled_dot_product_attention
from shared.distributed import shard
from shared.exercises import distributed as ex_distributed
from shared.exercises import feedback
from shared.gpt import GPT, GPTConfig

from .helpers import accepts, rejects

LIMIT = 0.5  # seconds: the limit the tests set, instead of the default


@contextlib.contextmanager
def watchdog(seconds: float):
    """Fail (instead of hanging) if the block runs past `seconds`."""
    timer = threading.Timer(seconds, _thread.interrupt_main)
    timer.start()
    try:
        yield
    except KeyboardInterrupt:
        pytest.fail(f"the check did not return within {seconds} s (no time limit?)")
    finally:
        timer.cancel()


@pytest.fixture
def short_limit(monkeypatch):
    monkeypatch.setattr(feedback, "TIME_LIMIT_S", LIMIT)


def forever(*args, **kwargs):
    while True:
        pass


def forever_catching(*args, **kwargs):  # a learner's `except Exception` must not swallow the time limit
    while True:
        try:
            time.sleep(0.01)
        except Exception:
            pass


def forever_swallowing(*args, **kwargs):  # even a bare except that returns afterwards is still reported
    try:
        forever()
    except BaseException as err:
        if isinstance(err, KeyboardInterrupt):  # the watchdog's: lets a regression fail instead of hanging
            raise
        return torch.zeros(1)


def swallowing_then_right(step, d_model, warmup):  # caught the alarm, then answered right: still too slow
    try:
        forever()
    except BaseException as err:
        if isinstance(err, KeyboardInterrupt):
            raise
        return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def timed(check, fn, capsys, seconds=10.0):
    start = time.monotonic()
    with watchdog(seconds):
        result = check(fn)
    return result, capsys.readouterr().out, time.monotonic() - start


# ---------------------------------------------------------------- a function that never returns


@pytest.mark.parametrize("check, learner", [
    *[(check, forever) for check in (ex.check_attention, ex.check_noam_lr, ex.check_scaled_scores,
                                     ex.check_learned_positions, ex.check_shard_for_rank)],
    (ex.check_noam_lr, forever_catching), (ex.check_shard_for_rank, forever_swallowing),
    (ex.check_noam_lr, swallowing_then_right)])
def test_a_function_that_never_returns_gets_feedback_within_the_limit(check, learner, capsys, short_limit):
    result, out, elapsed = timed(check, learner, capsys)
    assert result is False and out.startswith("✗"), out
    assert f"your function did not return within {LIMIT:g} s" in out, out
    assert elapsed < LIMIT + 2.0, elapsed
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)  # no timer left behind


def test_the_limit_covers_the_whole_check_not_each_call(capsys, short_limit):
    def slow_noam(step, d_model, warmup):  # 0.2 s a call, 6 calls: every call in time, the check is not
        time.sleep(0.2)
        return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)

    result, out, elapsed = timed(ex.check_noam_lr, slow_noam, capsys)
    assert result is False and f"did not return within {LIMIT:g} s" in out and elapsed < LIMIT + 1.0


def test_the_default_limit_lets_the_reference_solutions_pass(capsys):
    assert 10 <= feedback.TIME_LIMIT_S <= 30
    accepts(ex.check_attention, lambda q, k, v, mask=None: scaled_dot_product_attention(q, k, v, mask), capsys)


def test_a_model_that_never_returns_in_the_capstone(capsys, short_limit):
    class Stuck(GPT):
        def forward(self, tokens, caches=None, need_weights=False, positions=None):
            forever()

    model = Stuck(GPTConfig(VOCAB_SIZE, block_size=sequence_length(), n_layers=1, n_heads=1, d_model=8))
    with watchdog(10.0):
        result = ex.check_addition_model(model, problems=[(1, 2), (3, 4)])
    out = capsys.readouterr().out
    assert result is False and f"did not return within {LIMIT:g} s" in out, out


def test_average_gradients_that_never_return_are_named(capsys, monkeypatch):
    monkeypatch.setattr(ex_distributed, "FUNCTION_LIMIT_S", LIMIT)
    with watchdog(40.0):
        out = rejects(ex.check_average_gradients, forever, capsys, f"did not return within {LIMIT:g} s")
    assert "same order" not in out  # not blamed on all_reduce ordering

    def stuck_on_rank_1(model):  # rank 0 waits in all_reduce for a rank that never comes: the loop is named
        if dist.get_rank() == 1:
            forever()
        for p in model.parameters():
            dist.all_reduce(p.grad)

    # as by default, the collectives time out (rank 0: a gloo error) before the function limit (rank 1: the loop)
    monkeypatch.setattr(ex_distributed, "COLLECTIVE_TIMEOUT_S", 3)
    monkeypatch.setattr(ex_distributed, "FUNCTION_LIMIT_S", 4.0)
    with watchdog(40.0):
        rejects(ex.check_average_gradients, stuck_on_rank_1, capsys, "rank=1", "did not return within 4 s")


# ---------------------------------------------------------------- exit(), interrupts, the previous timer


def test_exit_in_the_learners_function_is_feedback(capsys):
    for check, case in ((ex.check_noam_lr, "step=1"), (ex.check_attention, "hand example"),
                        (ex.check_shard_for_rank, "B=8")):
        out = rejects(check, lambda *a, **k: sys.exit(3), capsys, "SystemExit with code 3", f'case "{case}')
        assert "Traceback" not in out
    exit_if_uneven = lambda b, r, w: sys.exit() if len(b) % w else shard(b, r, w)  # noqa: E731
    rejects(ex.check_shard_for_rank, exit_if_uneven, capsys, "called exit()")  # a call the checker makes itself


def test_an_interrupt_still_interrupts_and_leaves_no_timer(capsys):
    def interrupted(*args):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        ex.check_noam_lr(interrupted)
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert signal.getsignal(signal.SIGALRM) is signal.SIG_DFL or callable(signal.getsignal(signal.SIGALRM))


def test_the_previous_alarm_handler_and_timer_are_restored(capsys, short_limit):
    fired = []

    def mine(signum, frame):
        fired.append(time.monotonic())

    previous = signal.signal(signal.SIGALRM, mine)
    try:
        signal.setitimer(signal.ITIMER_REAL, 100.0)
        assert timed(ex.check_noam_lr, forever, capsys)[0] is False
        assert ex.check_scaled_scores(lambda q, k: q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)))
        assert signal.getsignal(signal.SIGALRM) is mine
        left = signal.getitimer(signal.ITIMER_REAL)[0]
        assert 90.0 < left <= 100.0, left  # still armed, less the time the checks took
        signal.setitimer(signal.ITIMER_REAL, 0.2)  # one that runs out during the check fires right after it
        start = time.monotonic()
        assert timed(ex.check_noam_lr, forever, capsys)[0] is False
        time.sleep(0.05)
        assert len(fired) == 1 and fired[0] - start >= LIMIT - 0.1
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_outside_the_main_thread_there_is_no_limit_and_the_check_says_so(capsys, monkeypatch):
    monkeypatch.setattr(feedback, "_noted_no_limit", False)
    results = []
    thread = threading.Thread(target=lambda: results.append(ex.check_noam_lr(
        lambda step, d, w: d**-0.5 * min(step**-0.5, step * w**-1.5))))
    thread.start()
    thread.join()
    out = capsys.readouterr().out
    assert results == [True] and "no time limit" in out and "interrupt" in out, out


def test_without_setitimer_there_is_no_limit_and_the_check_says_so(capsys, monkeypatch):
    monkeypatch.setattr(feedback, "_noted_no_limit", False)
    monkeypatch.delattr(signal, "setitimer")  # as on Windows
    noam = lambda step, d, w: d**-0.5 * min(step**-0.5, step * w**-1.5)  # noqa: E731
    assert ex.check_noam_lr(noam) and ex.check_noam_lr(noam)
    out = capsys.readouterr().out
    assert out.count("no time limit") == 1 and "Windows" in out, out  # said once, not at every check


# ---------------------------------------------------------------- Checker.close with infinite expected values


def test_an_expected_minus_inf_that_is_missed_is_counted():
    expected = torch.zeros(4, 5)
    expected[0, 1:] = -math.inf
    c = feedback.Checker(lambda: None)
    with pytest.raises(feedback.Wrong, match=r"4 of 20 entries .* got 0, expected -inf"):
        c.close(torch.zeros(4, 5), expected, "case")
    flipped = expected.clone()
    flipped[0, 1] = math.inf  # the other sign
    with pytest.raises(feedback.Wrong, match=r"1 of 20 entries"):
        c.close(flipped, expected, "case")
    both_nan = torch.zeros(2)
    both_nan[0], got = math.nan, torch.tensor([math.nan, 1.0])
    with pytest.raises(feedback.Wrong, match=r"1 of 2 entries"):  # NaN where NaN is expected is no difference
        c.close(got, both_nan, "case")
    with pytest.raises(feedback.Wrong, match=r"1 of 2 entries .* got 1, expected nan"):  # a NaN that is missed
        c.close(torch.tensor([1.0, 1.0]), torch.tensor([math.nan, 1.0]), "case")
    c.close(expected.clone(), expected, "case")  # equal infinities pass


# ---------------------------------------------------------------- k.T on batched tensors


def scores_with_dot_T(q, k):
    return q @ k.T / math.sqrt(q.size(-1))


def attention_with_dot_T(q, k, v, mask=None):
    scores = q @ k.T / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    return scores.softmax(-1) @ v, scores.softmax(-1)


def multi_head_with_dot_T(x, w_q, w_k, w_v, w_o, n_heads):  # (B, H, T, d_k) @ (d_k, T, H, B): an error
    B, T, d_model = x.shape
    q, k, v = ((x @ w).view(B, T, n_heads, -1).transpose(1, 2) for w in (w_q, w_k, w_v))
    weights = (q @ k.T / math.sqrt(q.size(-1))).softmax(-1)
    return (weights @ v).transpose(1, 2).reshape(B, T, d_model) @ w_o


@pytest.mark.parametrize("check, fn", [(ex.check_scaled_scores, scores_with_dot_T),  # wrong values
                                       (ex.check_attention, attention_with_dot_T),
                                       (ex.check_multi_head_attention, multi_head_with_dot_T)])
def test_dot_T_on_a_batched_tensor_gets_the_transpose_hint(check, fn, capsys):
    with warnings.catch_warnings():  # torch warns once per process: the hint must not need to be the first
        warnings.simplefilter("ignore")
        assert torch.zeros(2, 3, 4).T.shape == (4, 3, 2)
    out = rejects(check, fn, capsys, "k.transpose(-2, -1)", ".T")
    assert "reverses" in out


def test_the_learners_own_warnings_are_still_shown(capsys):
    def noisy_scores(q, k):
        warnings.warn("a warning of the learner's own", UserWarning, stacklevel=1)
        return q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))

    with pytest.warns(UserWarning, match="of the learner's own"):
        accepts(ex.check_scaled_scores, noisy_scores, capsys)
    assert not torch.is_warn_always_enabled()  # torch's once-per-process warnings are as before
