"""The engine behind the exercise checkers: call a learner's function safely, compare it, explain the difference.

A checker never shows a traceback for a wrong answer: it prints what went wrong (which input, which shape or
position, a hint) and returns False. An exercise still raising NotImplementedError is reported as "not solved yet".
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
from torch import Tensor

# Messages of common PyTorch errors -> what the learner probably did.
_ERROR_HINTS = {
    "view size is not compatible": "`.view()` needs contiguous memory, which `.transpose()` breaks: call "
    "`.contiguous()` first, or use `.reshape()`.",
    "cannot be multiplied": "the shapes of a matrix product do not line up; `k.transpose(-2, -1)` turns "
    "(..., T_k, d_k) into (..., d_k, T_k).",
    "must match the size of tensor": "two tensors do not broadcast; print the shapes of the intermediate tensors.",
    "expected scalar type": "two tensors have different dtypes; keep everything in the input's dtype.",
    "masked_fill_ only supports boolean masks": "masks are bool tensors (True = may attend): `~mask` flips them.",
}


class NotSolved(Exception):
    """The learner's function still raises NotImplementedError."""


class Wrong(Exception):
    """A wrong answer; the message is the feedback shown to the learner."""


class Checker:
    """Runs one learner function on test cases and turns every difference into a readable message."""

    def __init__(self, fn: Callable) -> None:
        self.fn = fn
        self.n_cases = 0
        self.error_hint = ""  # shown when the learner's function raises an error no known hint explains

    def call(self, case: str, *args, **kwargs):
        """The learner's fn(*args, **kwargs); NotImplementedError -> NotSolved, other errors -> Wrong with a hint."""
        return self.run(case, self.fn, *args, **kwargs)

    def run(self, case: str, fn: Callable, *args, **kwargs):
        """Call any learner-written callable (a function, a module) the same safe way as `call`."""
        try:
            return fn(*args, **kwargs)
        except NotImplementedError:
            raise NotSolved from None
        except Exception as err:  # the learner's bug becomes feedback, not a traceback
            hint = next((h for key, h in _ERROR_HINTS.items() if key in str(err)), self.error_hint)
            raise Wrong(_join(f'case "{case}": your function raised {type(err).__name__}: {err}', hint)) from None

    def fail(self, case: str, message: str, hint: str = "") -> None:
        """Stop the check with feedback about one case."""
        raise Wrong(_join(f'case "{case}": {message}', hint))

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
              variants: tuple = (), shape_hints: dict | None = None, atol: float = 1e-5, rtol: float = 1e-4) -> None:
        """Check shape, dtype and values; `variants` is a list of (wrong_answer_tensor, hint) to diagnose a miss."""
        got = self.shape(got, expected, case, name, meaning, shape_hints)
        if expected.dtype == torch.bool and got.dtype != torch.bool:
            self.fail(case, f"{name} has dtype {got.dtype}, expected torch.bool.",
                      "masks are bool tensors (True = may attend): compare with `==`/`!=` or call `.bool()`.")
        got_f, exp_f = got.detach().cpu().to(torch.float64), expected.detach().cpu().to(torch.float64)
        if torch.isnan(got_f).any() and not torch.isnan(exp_f).any():
            where = _position(torch.isnan(got_f).nonzero()[0])
            self.fail(case, f"{name} contains NaN (first at {where}).", _matching_hint(got_f, variants, atol, rtol)
                      or "NaN usually comes from a softmax over a row that is all -inf, or from exp() of large "
                      "numbers.")
        if torch.allclose(got_f, exp_f, atol=atol, rtol=rtol, equal_nan=True):
            return
        diff = (got_f - exp_f).abs().nan_to_num(nan=float("inf"))
        diff = torch.where(got_f == exp_f, torch.zeros_like(diff), diff)  # equal infinities are no difference
        index = _unravel(int(diff.argmax()), got_f.shape)
        n_bad = int((diff > atol + rtol * exp_f.abs()).sum())
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


def exercise(title: str):
    """Decorator: turns `body(checker)` into `check(fn) -> bool` that prints friendly feedback."""

    def decorate(body: Callable[[Checker], None]) -> Callable[[Callable], bool]:
        @functools.wraps(body)
        def check(fn: Callable) -> bool:
            if not callable(fn):
                print(f"✗ {title}: pass your function itself, e.g. check(my_function), not {type(fn).__name__} "
                      "(no parentheses after its name).")
                return False
            checker = Checker(fn)
            try:
                body(checker)
            except NotSolved:
                print(f"… {title}: not solved yet. Replace `raise NotImplementedError` with your code and run "
                      "the cell again.")
                return False
            except Wrong as wrong:
                print(f"✗ {title}: {wrong}")
                return False
            print(f"✓ {title}: correct on all {checker.n_cases} test cases.")
            return True

        return check

    return decorate


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
