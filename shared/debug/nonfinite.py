"""Debugging helpers: find the first module whose output is not finite, per-layer statistics, anomaly origin.

    with FirstNonFinite(model) as watch:      # forward hooks on every submodule
        loss = loss_fn(model, batch)
    print(watch.first)                        # e.g. "decoder.0.self_attn (MultiHeadAttention): 12 NaN, 0 inf"
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn


class NonFiniteError(FloatingPointError):
    """Raised by `FirstNonFinite(stop=True)` at the first module whose output holds NaN or inf."""


@dataclass
class NonFinite:
    """The first module whose output held NaN or +-inf: its qualified name, type and what was found."""

    name: str  # qualified name, as in model.named_modules(); "" is the model itself
    module_type: str
    n_nan: int
    n_inf: int
    shape: tuple[int, ...]
    forward_pass: int  # which forward pass of the model (0 = the first one watched)

    def __str__(self) -> str:
        return (f"{self.name or '(the model)'} ({self.module_type}): {self.n_nan} NaN, {self.n_inf} inf "
                f"in an output of shape {self.shape}, forward pass {self.forward_pass}")


def _tensors(output) -> list[Tensor]:
    """Every floating-point tensor in a module's inputs or output (a tensor, or tuples/lists/dicts of them)."""
    if isinstance(output, Tensor):
        return [output] if output.is_floating_point() else []
    if isinstance(output, (tuple, list)):
        return [t for item in output for t in _tensors(item)]
    if isinstance(output, dict):
        return [t for item in output.values() for t in _tensors(item)]
    return []


class FirstNonFinite:
    """Context manager: forward hooks on every submodule of `model`; `.first` names where NaN/inf was born.

    `.first` is the first module whose inputs (positional and keyword) were all finite but whose output is not:
    the module whose own computation made the first NaN or inf (a child that only passes a NaN on is not
    reported). If no module
    qualifies (the model's input itself was bad), it is the first module with a non-finite output.
    With stop=True the hook raises `NonFiniteError` at that moment (e.g. to stop a training run).
    """

    def __init__(self, model: nn.Module, stop: bool = False) -> None:
        if not isinstance(model, nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        self.model, self.stop = model, stop
        self.first: NonFinite | None = None
        self.first_output: NonFinite | None = None  # the first non-finite output of any module
        self.forward_passes = 0
        self._handles: list = []

    def __enter__(self) -> FirstNonFinite:
        def count_pass(module, args):
            self.forward_passes += 1

        self._handles.append(self.model.register_forward_pre_hook(count_pass))
        for name, module in self.model.named_modules():  # with_kwargs: the hook also sees keyword inputs
            self._handles.append(module.register_forward_hook(self._hook(name), with_kwargs=True))
        return self

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        if self.first is None:
            self.first = self.first_output

    def _hook(self, name: str):
        def hook(module, args, kwargs, output):
            if self.first is not None:
                return
            bad = next((t.detach() for t in _tensors(output) if not torch.isfinite(t).all()), None)
            if bad is None:
                return
            found = NonFinite(name, type(module).__name__, int(bad.isnan().sum()), int(bad.isinf().sum()),
                              tuple(bad.shape), self.forward_passes - 1)
            self.first_output = self.first_output or found
            if all(torch.isfinite(t).all() for t in _tensors([args, kwargs])):  # born here, not passed on
                self.first = found
                if self.stop:
                    raise NonFiniteError(f"first non-finite output: {found}")

        return hook


@dataclass
class LayerStat:
    """Statistics of one module in one forward/backward pass: output mean/std/max|x|, gradient norm."""

    name: str
    module_type: str
    mean: float
    std: float
    max_abs: float
    grad_norm: float  # norm of the gradients of this module's own parameters (NaN if it has none)


def _has_own_parameters(name: str, module: nn.Module) -> bool:
    return any(True for _ in module.parameters(recurse=False))


def layer_stats(
    model: nn.Module,
    loss_fn: Callable[[nn.Module], Tensor],
    keep: Callable[[str, nn.Module], bool] = _has_own_parameters,
) -> list[LayerStat]:
    """Run `loss_fn(model)` forward and backward once; one row per module that `keep(name, module)` selects.

    Default: modules with parameters of their own (Linear, LayerNorm, Embedding). Leaves gradients in .grad.
    """
    outputs: dict[str, Tensor] = {}
    chosen = [(name, m) for name, m in model.named_modules() if keep(name, m)]

    def hook_for(name):
        def hook(module, args, output):
            tensors = _tensors(output)
            if tensors and name not in outputs:  # first call only (a module used twice keeps its first output)
                outputs[name] = tensors[0].detach().float()

        return hook

    handles = [m.register_forward_hook(hook_for(name)) for name, m in chosen]
    try:
        model.zero_grad(set_to_none=True)
        loss = loss_fn(model)
        loss.backward()
    finally:
        for handle in handles:
            handle.remove()
    rows = []
    for name, module in chosen:
        out = outputs.get(name)
        grads = [p.grad.detach().float().flatten() for p in module.parameters(recurse=False) if p.grad is not None]
        grad_norm = float(torch.cat(grads).norm()) if grads else float("nan")
        if out is None:
            continue  # not called by this loss
        rows.append(LayerStat(name, type(module).__name__, float(out.mean()), float(out.std()),
                              float(out.abs().max()), grad_norm))
    return rows


def format_stats(rows: list[LayerStat]) -> str:
    """A fixed-width text table of `layer_stats` rows, one module per line."""
    width = max([len(r.name) for r in rows] + [6])
    lines = [f"{'module':<{width}}  {'type':<14} {'mean':>9} {'std':>9} {'max|x|':>9} {'grad norm':>10}"]
    for r in rows:
        lines.append(f"{r.name:<{width}}  {r.module_type:<14} {r.mean:>9.3g} {r.std:>9.3g} {r.max_abs:>9.3g} "
                     f"{r.grad_norm:>10.3g}")
    return "\n".join(lines)


def nonfinite_parameters(model: nn.Module) -> list[str]:
    """Names of the parameters that hold NaN or inf (after a bad optimizer step, say)."""
    return [name for name, p in model.named_parameters() if not torch.isfinite(p.detach()).all()]


@dataclass
class Anomaly:
    """Where autograd's anomaly mode saw the first NaN appear in the backward pass."""

    backward_function: str  # e.g. "LogBackward0": the backward of torch.log
    forward_line: str  # the last line of the forward call that created it, from the traceback


def anomaly_origin(run: Callable[[], None]) -> Anomaly | None:
    """Run `run()` (forward and backward) under torch.autograd.detect_anomaly; None if no NaN appeared."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with torch.autograd.detect_anomaly():
                run()
        except RuntimeError as error:
            found = re.search(r"Function '(\w+)' returned nan", str(error))
            if found is None:
                raise
            trace = "\n".join(str(w.message) for w in caught if "Traceback of forward call" in str(w.message))
            lines = trace.splitlines()  # pairs: '  File "...", line N, in f' then the code line itself
            code = [b.strip() for a, b in zip(lines, lines[1:]) if a.strip().startswith("File ")]
            return Anomaly(found.group(1), code[-1] if code else "")
    return None
