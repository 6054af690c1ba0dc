"""Read a notebook's own settings and definitions, at GPU size, without running the notebook.

`NotebookCode(path)` parses the notebook's code cells. `value(name)` evaluates the first top-level assignment to
`name`, in a namespace that holds the notebook's imports, `choose` returning its `cuda=` argument (the GPU size),
`device` = the meta device (shapes without memory) and whatever earlier `value`/`define` calls bound; `define(name)`
runs the notebook's own `def`/`class` of that name; `call_argument(function, i)` evaluates the i-th positional
argument of the first call of `function`. So a test reads exactly what the notebook runs: a renamed setting fails
the test with a message that says which name is gone, instead of a stale copy passing.
"""

from __future__ import annotations

import ast
import json
import pathlib

import torch

META = torch.device("meta")


def gpu_size(*, fast, cpu, cuda, device=None):
    """shared.runtime.choose at GPU size."""
    return cuda


class NotebookCode:
    """The code cells of one notebook, and a namespace to evaluate its settings in (see the module docstring)."""

    def __init__(self, path: pathlib.Path, **given) -> None:
        self.path = path
        cells = [c for c in json.loads(path.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "code"]
        sources = ["".join(c["source"]) for c in cells]
        self.statements = []
        for source in sources:
            if source.lstrip().startswith("%%"):  # a cell magic (%%writefile): not this notebook's Python
                continue
            lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]
            self.statements += ast.parse("\n".join(lines)).body
        self.namespace = {}
        for node in self.statements:  # the notebook's imports (torch, shared.*, ...)
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                exec(compile(ast.Module([node], []), str(path), "exec"), self.namespace)
        self.namespace.update(choose=gpu_size, device=META, **given)  # after the setup cell's import of choose

    def _fail(self, what: str) -> AssertionError:
        return AssertionError(f"{self.path.name} has no {what} any more: update tests/test_gpu_size.py to read the "
                              "setting where the notebook now keeps it")

    def value(self, name: str):
        """Evaluate the first top-level assignment to `name` (also `A, B = ...`), bind its names, return `name`'s."""
        for node in self.statements:
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
                names = [target.id] if isinstance(target, ast.Name) else [
                    e.id for e in getattr(target, "elts", []) if isinstance(e, ast.Name)]
                if name in names:
                    value = eval(compile(ast.Expression(node.value), str(self.path), "eval"), self.namespace)
                    bound = dict(zip(names, value)) if len(names) > 1 else {name: value}
                    self.namespace.update(bound)
                    return bound[name]
        raise self._fail(f"top-level assignment to {name!r}")

    def define(self, name: str):
        """Run the notebook's top-level `def name` or `class name`; return the function or class."""
        for node in self.statements:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name:
                exec(compile(ast.Module([node], []), str(self.path), "exec"), self.namespace)
                return self.namespace[name]
        raise self._fail(f"definition of {name!r}")

    def call_argument(self, function: str, index: int):
        """Evaluate positional argument `index` of the first call of `function` anywhere in the notebook."""
        for node in self.statements:
            for call in ast.walk(node):
                if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == function:
                    return eval(compile(ast.Expression(call.args[index]), str(self.path), "eval"), self.namespace)
        raise self._fail(f"call of {function}()")
