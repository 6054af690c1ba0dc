"""Print the shape of every named module's output as a forward pass runs through it (notebooks 05, 06, 08)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping

from torch import nn


@contextlib.contextmanager
def print_shapes(parts: Mapping[str, nn.Module]) -> Iterator[None]:
    """Within the block, each module in `parts` prints "name: (output shape)" when it runs, and for attention
    modules, which return (output, weights), the weights' shape as well. The hooks are removed on exit."""
    if not isinstance(parts, Mapping) or not parts:
        raise ValueError(f"parts must be a non-empty mapping of names to modules, got {parts!r}")
    for name, module in parts.items():
        if not isinstance(name, str) or not isinstance(module, nn.Module):
            raise TypeError(f"parts must map str names to nn.Module, got {name!r}: {type(module).__name__}")
    width = max(len(name) for name in parts)

    def hook_for(name: str):
        def hook(module: nn.Module, args: tuple, output) -> None:
            out, weights = output if isinstance(output, tuple) else (output, None)  # attention: (output, weights)
            line = f"{name:>{width}}: {tuple(out.shape)}"
            print(line + (f"   weights {tuple(weights.shape)}" if weights is not None else ""))
        return hook

    handles = [module.register_forward_hook(hook_for(name)) for name, module in parts.items()]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
