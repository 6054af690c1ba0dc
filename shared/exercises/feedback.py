"""The engine behind the exercise checkers: call a learner's function safely, compare it, explain the difference.

A checker never shows a traceback for a wrong answer: it prints what went wrong (which input, which shape or
position, a hint) and returns False. An exercise still raising NotImplementedError is reported as "not solved yet",
and exit() or sys.exit() in the learner's function is feedback too. KeyboardInterrupt is not caught: interrupting
the kernel still stops a check.

Time limit. A check made with `exercise` must finish within TIME_LIMIT_S seconds (30; set
`shared.exercises.feedback.TIME_LIMIT_S` to change it): a learner's function that never returns is stopped, and the
check prints "your function did not return within 30 s" and returns False. The checkers' own work is short (well
under a second; up to about 5 s on a busy 2-core CPU the first time a process builds an optimizer, when torch
imports its compiler), so the limit is, in effect, the learner's. A Checker used without `exercise` (the
capstone's) gives each `Checker.run` call the same limit. It works by SIGALRM (`signal.setitimer`), in the main
thread on Linux and macOS, where a Jupyter kernel runs its cells; the previous SIGALRM handler and timer are put
back afterwards. A single long torch operation is stopped only when it returns, and learner code that catches
BaseException (a bare `except:`) inside its loop can keep running (it is still reported if it returns). Elsewhere
(Windows, or a check run outside the main thread) there is no limit: the check says so once, and a function that
never returns keeps the cell running until the kernel is interrupted.
"""

from __future__ import annotations

import functools
import math
import os
import signal
import threading
import time
import warnings
from collections.abc import Callable

import torch
from torch import Tensor

TIME_LIMIT_S = 30.0  # seconds a check may run before the learner's function is stopped (see the module docstring)

_DOT_T = "The use of `x.T` on tensors of dimension other than 2"  # torch's warning (2.x) for `.T` on a batch
_DOT_T_HINT = ("`.T` reverses every axis of a tensor with more than 2 dims ((B, H, T, d_k) becomes (d_k, T, H, B)): "
               "use `k.transpose(-2, -1)` to swap only the last two.")
_SLOW_HINT = ("look for a loop that never ends (a `while` whose condition never changes) or a very slow one (a "
              "Python loop over every entry of a tensor). On a slow machine, raise the limit: "
              "`shared.exercises.feedback.TIME_LIMIT_S = 60`.")
_EXIT_HINT = "exit(), quit() and sys.exit() end the whole program (in a notebook, the kernel): return a value instead."


def _exited(err: SystemExit) -> str:
    return f"your function called exit() or sys.exit() (SystemExit with code {err.code!r})."

# Messages of common PyTorch errors -> what the learner probably did.
_ERROR_HINTS = {
    "view size is not compatible": "`.view()` needs contiguous memory, which `.transpose()` breaks: call "
    "`.contiguous()` first, or use `.reshape()`.",
    "cannot be multiplied": "the shapes of a matrix product do not line up; `k.transpose(-2, -1)` turns "
    "(..., T_k, d_k) into (..., d_k, T_k).",
    "must match the size of tensor": "two tensors do not broadcast; print the shapes of the intermediate tensors.",
    "expected scalar type": "two tensors have different dtypes; keep everything in the input's dtype.",
    "masked_fill_ only supports boolean masks": "masks are bool tensors (True = may attend): `~mask` flips them.",
    "`x.T`": _DOT_T_HINT,  # a torch in which `.T` on a batch is an error, or warnings turned into errors
}


class NotSolved(Exception):
    """The learner's function still raises NotImplementedError."""


class Wrong(Exception):
    """A wrong answer; the message is the feedback shown to the learner."""


class TimedOut(Wrong):
    """The learner's code did not return within the time limit of a `Checker.run` call (one used on its own)."""


class TimeUp(BaseException):
    """A TimeLimit ran out. A BaseException, so that `except Exception` in the learner's code cannot swallow it."""

    def __init__(self, limit: TimeLimit) -> None:
        super().__init__(f"time limit of {limit.seconds:g} s")
        self.limit = limit
        self.case: str | None = None  # the case whose call was running, filled in by Checker.run


class TimeLimit:
    """`call(fn, ...)` runs fn under a limit of `seconds`, raising TimeUp when it runs out (module docstring).

    One limit is armed at a time in a process: a TimeLimit started inside another does nothing (the outer one
    governs), so an `exercise`'s limit covers the whole check and the Checker.run calls inside it. A forked
    process starts with none armed. Not armed at all where SIGALRM cannot be used (`no_limit_reason()`).
    """

    _armed: tuple[int, TimeLimit] | None = None  # (pid, limit): the limit armed in that process

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.fired = self.armed = False
        self._handler, self._timer, self._started = None, (0.0, 0.0), 0.0

    def call(self, fn: Callable, *args, **kwargs):
        """fn(*args, **kwargs); TimeUp if the limit ran out, even if the code caught the alarm and went on."""
        try:
            self._start()
            try:
                result = fn(*args, **kwargs)
            finally:
                self._stop()
        except BaseException as err:
            self._stop()  # again: an alarm or an interrupt may have cut the first one short
            if self._ran_out() and not isinstance(err, (TimeUp, KeyboardInterrupt)):
                raise TimeUp(self._ran_out()) from None  # e.g. a learner's bare `except:` caught it, then failed
            raise
        if self._ran_out():  # the code caught the alarm and returned: stop here, before it is called again
            raise TimeUp(self._ran_out())
        return result

    def _ran_out(self) -> TimeLimit | None:
        """This limit, or the one armed around it in this process, if it has fired."""
        outer = TimeLimit._armed[1] if TimeLimit._armed and TimeLimit._armed[0] == os.getpid() else None
        return self if self.fired else outer if outer is not None and outer.fired else None

    def _start(self) -> None:
        if (math.isinf(self.seconds) or no_limit_reason() or (TimeLimit._armed or (0,))[0] == os.getpid()
                or signal.getsignal(signal.SIGALRM) is None):  # None: a handler installed outside Python
            return
        self._handler = signal.signal(signal.SIGALRM, self._on_alarm)
        self._started, self.armed, TimeLimit._armed = time.monotonic(), True, (os.getpid(), self)
        self._timer = signal.setitimer(signal.ITIMER_REAL, self.seconds)  # (delay, interval) of the previous timer

    def _stop(self) -> None:
        if not self.armed:
            return
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, self._handler)
        delay, interval = self._timer
        if delay > 0:  # the previous timer, less the time spent here (it fires at once if it ran out meanwhile)
            signal.setitimer(signal.ITIMER_REAL, max(delay - (time.monotonic() - self._started), 1e-6), interval)
        TimeLimit._armed, self.armed = None, False

    def _on_alarm(self, signum, frame) -> None:
        if not self.fired:  # once: a second alarm must not cut the clean-up short
            self.fired = True
            raise TimeUp(self)


def no_limit_reason() -> str:
    """Why this process and thread cannot have a time limit ("" when it can)."""
    if not hasattr(signal, "setitimer"):
        return "this system (Windows) has no signal.setitimer"
    if threading.current_thread() is not threading.main_thread():
        return "the check runs outside the main thread, where no signal arrives"
    return ""


def time_limit_s(seconds: float | None = None) -> float:
    """`seconds`, or TIME_LIMIT_S when None; it must be a number > 0 (math.inf: no limit)."""
    seconds = TIME_LIMIT_S if seconds is None else seconds
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0:
        raise ValueError(f"the time limit (shared.exercises.feedback.TIME_LIMIT_S) must be a number of seconds > 0 "
                         f"(math.inf: none), got {seconds!r}")
    return seconds


class Checker:
    """Runs one learner function on test cases and turns every difference into a readable message.

    time_limit: seconds for each `run` call when no check-wide limit is running (None: TIME_LIMIT_S at the call).
    """

    def __init__(self, fn: Callable, time_limit: float | None = None) -> None:
        self.fn = fn
        self.n_cases = 0
        self.error_hint = ""  # shown when the learner's function raises an error no known hint explains
        self.time_limit = time_limit
        self.case: str | None = None  # the case of the latest call of the learner's code
        self.transposed_batch = False  # that call used `.T` on a tensor of more than 2 dims

    def call(self, case: str, *args, **kwargs):
        """The learner's fn(*args, **kwargs); NotImplementedError -> NotSolved, other errors -> Wrong with a hint."""
        return self.run(case, self.fn, *args, **kwargs)

    def run(self, case: str, fn: Callable, *args, **kwargs):
        """Call any learner-written callable (a function, a module) the same safe way as `call`, within the limit."""
        self.case = case
        limit = TimeLimit(time_limit_s(self.time_limit))  # armed only outside a check-wide limit (`exercise`'s)
        try:
            return limit.call(self._watched, fn, *args, **kwargs)
        except NotImplementedError:
            raise NotSolved from None
        except TimeUp as up:
            if up.limit is not limit:  # the check's limit: `exercise` reports it
                up.case = up.case or case
                raise
            raise TimedOut(_join(f'case "{case}": {_too_slow(limit.seconds)}', _SLOW_HINT)) from None
        except SystemExit as err:  # exit() in the learner's code must not end the kernel's cell without a word
            raise Wrong(_join(f'case "{case}": {_exited(err)}', _EXIT_HINT)) from None
        except Exception as err:  # the learner's bug becomes feedback, not a traceback
            hint = _DOT_T_HINT if self.transposed_batch else next(
                (h for key, h in _ERROR_HINTS.items() if key in str(err)), self.error_hint)
            raise Wrong(_join(f'case "{case}": your function raised {type(err).__name__}: {err}', hint)) from None

    def _watched(self, fn: Callable, *args, **kwargs):
        """fn(*args, **kwargs), noting whether it used `.T` on a batched tensor (torch warns, once per process
        unless warn_always); its other warnings are shown as usual, after the call."""
        self.transposed_batch, caught = False, []
        warn_always = torch.is_warn_always_enabled()
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                torch.set_warn_always(True)
                return fn(*args, **kwargs)
        finally:
            torch.set_warn_always(warn_always)
            for w in caught:
                if _DOT_T in str(w.message):
                    self.transposed_batch = True
                else:
                    warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, registry=_SHOWN,
                                           source=w.source)

    def fail(self, case: str, message: str, hint: str = "") -> None:
        """Stop the check with feedback about one case (the `.T` hint first, if the latest call used `.T`)."""
        raise Wrong(_join(f'case "{case}": {message}', _DOT_T_HINT if self.transposed_batch else hint))

    def unpack(self, result, case: str, names: tuple[str, ...]) -> tuple:
        """Check that `result` is a tuple of len(names) items (e.g. (out, weights)) and return it."""
        if not isinstance(result, (tuple, list)) or len(result) != len(names):
            got = f"a {type(result).__name__}"
            if isinstance(result, (tuple, list)):
                got += f" of {len(result)} items"
            self.fail(case, f"expected a tuple ({', '.join(names)}), got {got}.",
                      f"end your function with `return {', '.join(names)}`.")
        return tuple(result)

    def tensor(self, got, case: str, name: str = "output") -> Tensor:
        """Check that `got` is a tensor (not None, a list or a number)."""
        if not isinstance(got, Tensor):
            hint = "did you forget the `return` statement?" if got is None else "return a torch.Tensor."
            self.fail(case, f"{name} should be a torch.Tensor, got {type(got).__name__}.", hint)
        return got

    def dtype(self, got, expected: torch.dtype, case: str, name: str = "output", hint: str = "") -> Tensor:
        """Check that `got` is a tensor of dtype `expected` (e.g. the input's float32, not a float64 copy)."""
        got = self.tensor(got, case, name)
        if got.dtype != expected:
            self.fail(case, f"{name} has dtype {got.dtype}, expected {expected} (the dtype of the inputs).", hint)
        return got

    def shape(self, got, expected: Tensor | tuple, case: str, name: str = "output", meaning: str = "",
              hints: dict | None = None) -> Tensor:
        """Check the shape; `hints` maps a wrong shape (tuple) to an explanation."""
        got = self.tensor(got, case, name)
        want = tuple(expected.shape) if isinstance(expected, Tensor) else tuple(expected)
        if tuple(got.shape) != want:
            hint = (hints or {}).get(tuple(got.shape), "")
            self.fail(case, f"{name} has shape {tuple(got.shape)}, expected {want}{f' {meaning}' if meaning else ''}.",
                      hint)
        return got

    def close(self, got, expected: Tensor, case: str, name: str = "output", meaning: str = "",
              variants: tuple = (), shape_hints: dict | None = None, atol: float = 1e-5, rtol: float = 1e-4,
              nan_hint: str = "") -> None:
        """Check shape, dtype and values; `variants` is a list of (wrong_answer_tensor, hint) to diagnose a miss,
        `nan_hint` what to say of a NaN (or an inf where the expected values have none) that no variant explains."""
        got = self.shape(got, expected, case, name, meaning, shape_hints)
        if expected.dtype == torch.bool and got.dtype != torch.bool:
            self.fail(case, f"{name} has dtype {got.dtype}, expected torch.bool.",
                      "masks are bool tensors (True = may attend): compare with `==`/`!=` or call `.bool()`.")
        got_f, exp_f = got.detach().cpu().to(torch.float64), expected.detach().cpu().to(torch.float64)
        if torch.isnan(got_f).any() and not torch.isnan(exp_f).any():
            where = _position(torch.isnan(got_f).nonzero()[0])
            self.fail(case, f"{name} contains NaN (first at {where}).", _matching_hint(got_f, variants, atol, rtol)
                      or nan_hint or "NaN usually comes from a softmax over a row that is all -inf, or from exp() "
                      "of large numbers.")
        if nan_hint and not torch.isfinite(got_f).all() and torch.isfinite(exp_f).all():  # inf where none belongs
            where = _position((~torch.isfinite(got_f)).nonzero()[0])
            self.fail(case, f"{name} contains inf (first at {where}).",
                      _matching_hint(got_f, variants, atol, rtol) or nan_hint)
        if torch.allclose(got_f, exp_f, atol=atol, rtol=rtol, equal_nan=True):
            return
        bad = ~torch.isclose(got_f, exp_f, rtol=rtol, atol=atol, equal_nan=True)  # an infinity is close to itself only
        diff = torch.where(bad, (got_f - exp_f).abs().nan_to_num(nan=float("inf")), 0.0)
        index = _unravel(int(diff.argmax()), got_f.shape)
        n_bad = int(bad.sum())
        fmt = (lambda x: str(bool(x))) if expected.dtype == torch.bool else _fmt
        message = (f"{n_bad} of {got_f.numel()} entries of {name} differ from the expected values; the largest "
                   f"difference is at {_position(index)}: got {fmt(got_f[index])}, expected {fmt(exp_f[index])}.")
        self.fail(case, message, _matching_hint(got_f, variants, atol, rtol))

    def equal(self, got, expected, case: str, name: str = "output", hint: str = "") -> None:
        """Exact equality for plain Python values (lists, ints, floats)."""
        if got != expected:
            self.fail(case, f"{name} is {got!r}, expected {expected!r}.", hint)

    def passed(self) -> None:
        """Count one case as passed."""
        self.n_cases += 1


def exercise(title: str, time_limit: float | None = None):
    """Decorator: turns `body(checker)` into `check(fn) -> bool` that prints friendly feedback.

    The whole check runs within `time_limit` seconds (None: TIME_LIMIT_S when it runs; math.inf: no limit, for
    a checker that bounds its own waits): see the module docstring.
    """

    def decorate(body: Callable[[Checker], None]) -> Callable[[Callable], bool]:
        @functools.wraps(body)
        def check(fn: Callable) -> bool:
            if not callable(fn):
                print(f"✗ {title}: pass your function itself, e.g. check(my_function), not {type(fn).__name__} "
                      "(no parentheses after its name).")
                return False
            checker, limit = Checker(fn), TimeLimit(time_limit_s(time_limit))
            _note_if_unlimited(limit.seconds)
            try:
                limit.call(body, checker)
            except NotSolved:
                print(f"… {title}: not solved yet. Replace `raise NotImplementedError` with your code and run "
                      "the cell again.")
                return False
            except Wrong as wrong:
                print(f"✗ {title}: {wrong}")
                return False
            except TimeUp as up:
                if up.limit is not limit:  # a check run inside another check's limit: the outer one reports
                    raise
                case = up.case or checker.case
                where = f'case "{case}": ' if case else ""
                print(f"✗ {title}: {_join(where + _too_slow(limit.seconds), _SLOW_HINT)}")
                return False
            except SystemExit as err:  # raised by the learner's code that the body called directly
                print(f"✗ {title}: {_join(_exited(err), _EXIT_HINT)}")
                return False
            print(f"✓ {title}: correct on all {checker.n_cases} test cases.")
            return True

        return check

    return decorate


_noted_no_limit = False  # the note that this process has no time limit was printed
_SHOWN: dict = {}  # the warnings registry of the learner's warnings shown again after a call


def _note_if_unlimited(seconds: float) -> None:
    """Once per process, where no limit can be set: say so, and how to stop a function that never returns."""
    global _noted_no_limit
    reason = no_limit_reason()
    if reason and not math.isinf(seconds) and not _noted_no_limit:
        _noted_no_limit = True
        print(f"Note: no time limit on the checks here ({reason}): if your function never returns, the cell keeps "
              "running; interrupt the kernel (■) to stop it.")


def _too_slow(seconds: float) -> str:
    return f"your function did not return within {seconds:g} s."


def random_tensor(*shape: int, seed: int = 0, dtype=torch.float32) -> Tensor:
    """Standard-normal tensor from a private generator (leaves the global random state alone)."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator, dtype=dtype)


def _matching_hint(got: Tensor, variants, atol: float, rtol: float) -> str:
    for wrong, hint in variants:
        wrong = wrong.detach().cpu().to(torch.float64)
        if wrong.shape == got.shape and torch.allclose(got, wrong, atol=atol, rtol=rtol, equal_nan=True):
            return hint
    return ""


def _unravel(flat: int, shape) -> tuple[int, ...]:
    index = []
    for size in reversed(shape):
        index.append(flat % size)
        flat //= size
    return tuple(reversed(index))


def _position(index) -> str:
    return "[" + ", ".join(str(int(i)) for i in index) + "]"


def _fmt(x: Tensor) -> str:
    return f"{float(x):.4g}"


def _join(message: str, hint: str) -> str:
    return f"{message}\n  Hint: {hint}" if hint else message
