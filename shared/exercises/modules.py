"""Helpers for checkers that take a learner's nn.Module class: build it safely, load the reference's weights into it.

A learner's error while building becomes feedback (with a hint where one fits), as in `Checker.run`; a name or
shape that keeps the reference's state_dict from loading is reported key by key, with a hint.
"""

from __future__ import annotations

from torch import nn

from .feedback import Checker


def explained(c: Checker, fn, hints: dict):
    """fn, wrapped: an error whose message contains a key of `hints` is explained by that hint."""
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as err:
            c.error_hint = next((h for key, h in hints.items() if key in str(err)), "")
            raise

    return call


def build_module(c: Checker, cls, args: tuple, case: str, hints: dict) -> nn.Module:
    """cls(*args) called safely; an error (explained by `hints` where one fits) or a non-module becomes feedback."""
    if isinstance(cls, nn.Module):
        c.fail(case, f"you passed an instance ({type(cls).__name__}(...)), not the class.",
               "pass the class itself: check(MyClass), not check(MyClass(...)).")
    module = c.run(case, explained(c, cls, hints), *args)
    if not isinstance(module, nn.Module):
        c.fail(case, f"expected an nn.Module, got {type(module).__name__}.",
               "write a class that subclasses nn.Module and pass the class itself, not an instance.")
    return module


def load_reference(c: Checker, module: nn.Module, state: dict, case: str, hints: dict) -> None:
    """Load the reference weights `state` into `module` (strict); a name or shape mismatch becomes feedback.

    `hints` maps a key prefix to a hint for a mismatch there ("" for any other key).
    """
    got = module.state_dict()
    missing, unexpected = sorted(set(state) - set(got)), sorted(set(got) - set(state))
    wrong = [key for key in state if key in got and got[key].shape != state[key].shape]

    def hint(keys):
        return next((h for prefix, h in hints.items() if prefix and any(k.startswith(prefix) for k in keys)),
                    hints.get("", ""))

    if missing or unexpected:
        c.fail(case, f"the reference's weights do not load into yours: missing {_show(missing)}; unexpected "
               f"{_show(unexpected)}.", hint(missing + unexpected))
    if wrong:
        c.fail(case, f"{wrong[0]} has shape {tuple(got[wrong[0]].shape)}, expected {tuple(state[wrong[0]].shape)}.",
               hint(wrong))
    module.load_state_dict(state)


def _show(keys: list[str]) -> str:
    return ", ".join(keys[:6]) + (f" and {len(keys) - 6} more" if len(keys) > 6 else "") if keys else "none"
