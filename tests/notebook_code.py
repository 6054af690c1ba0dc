"""Read a notebook's own settings and definitions, at GPU size, without running the notebook.

`NotebookCode(path)` parses the notebook's code cells. `value(name)` evaluates the first top-level assignment to
`name`, in a namespace that holds the notebook's imports, `choose` returning its `cuda=` argument (the GPU size),
`device` = the meta device (shapes without memory) and whatever earlier `value`/`define` calls bound; where the
notebook binds `name` again later (`settings = dict(settings, batch_size=1024)`), it fails and names the statement.
`define(name)` runs the notebook's own `def`/`class` of that name; `call_argument(function, i)` evaluates the i-th
positional argument (or keyword i) of the first call of `function` that passes it; `calls(function)` lists every
call, `evaluate(expression)` evaluates one of their arguments. So a test reads exactly what the notebook runs: a
renamed setting fails the test with a message that says which name is gone, instead of a stale copy passing.
"""

from __future__ import annotations

import ast
import json
import pathlib
from collections.abc import Iterator
from dataclasses import dataclass

import torch

META = torch.device("meta")


def gpu_size(*, fast, cpu, cuda, device=None):
    """shared.runtime.choose at GPU size."""
    return cuda


@dataclass
class Binding:
    """A name bound at a notebook's top level and the statement that binds it."""

    name: str
    node: ast.AST


SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
          ast.GeneratorExp)  # names bound inside these are not the notebook's top-level names


def _bindings(node: ast.AST, statement: ast.AST | None = None) -> Iterator[Binding]:
    """Every top-level name that `node` binds: assignment targets (also augmented, annotated, `for`, `with ... as`,
    `:=`), imports, `del`, and the name of a top-level def or class; not names local to a function or comprehension."""
    statement = node if isinstance(node, ast.stmt) else statement
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        yield Binding(node.name, statement)
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        for alias in node.names:
            yield Binding((alias.asname or alias.name).split(".")[0], statement)
    if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
        yield Binding(node.id, statement)
    if isinstance(node, SCOPES):
        return
    for child in ast.iter_child_nodes(node):
        yield from _bindings(child, statement)


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
                    self._refuse_a_later_assignment(name, node)
                    value = eval(compile(ast.Expression(node.value), str(self.path), "eval"), self.namespace)
                    bound = dict(zip(names, value)) if len(names) > 1 else {name: value}
                    self.namespace.update(bound)
                    return bound[name]
        raise self._fail(f"top-level assignment to {name!r}")

    def _refuse_a_later_assignment(self, name: str, first: ast.stmt) -> None:
        """Fail when the notebook binds `name` again at top level after `first` (`settings = dict(settings, ...)`,
        `for name in ...`, `name += ...`, an import as `name`): the first value would not be the one it runs."""
        later = self.statements[self.statements.index(first) + 1:]
        for node in later:
            for bound in _bindings(node):
                if bound.name == name:
                    raise AssertionError(
                        f"{self.path.name} assigns {name!r} again after the assignment tests/test_gpu_size.py reads "
                        f"(in {ast.unparse(bound.node)[:100]!r}): the first value "
                        "is not the one the notebook runs; read the setting where the notebook last sets it, or "
                        "give the new value its own name in the notebook")

    def define(self, name: str):
        """Run the notebook's top-level `def name` or `class name`; return the function or class."""
        for node in self.statements:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name:
                exec(compile(ast.Module([node], []), str(self.path), "exec"), self.namespace)
                return self.namespace[name]
        raise self._fail(f"definition of {name!r}")

    def calls(self, function: str) -> list[ast.Call]:
        """Every call of `function` (by its plain name) anywhere in the notebook, in order."""
        found = [call for node in self.statements for call in ast.walk(node)
                 if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == function]
        if not found:
            raise self._fail(f"call of {function}()")
        return found

    def evaluate(self, expression: ast.expr):
        """The value of one expression of the notebook, in the namespace."""
        return eval(compile(ast.Expression(expression), str(self.path), "eval"), self.namespace)

    def call_argument(self, function: str, argument: int | str):
        """Evaluate argument `argument` (a position or a keyword) of the first call of `function` that passes it."""
        for call in self.calls(function):
            if isinstance(argument, int) and len(call.args) > argument:
                return self.evaluate(call.args[argument])
            for keyword in call.keywords:
                if keyword.arg == argument:
                    return self.evaluate(keyword.value)
        raise self._fail(f"call of {function}() with argument {argument!r}")
