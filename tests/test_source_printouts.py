"""Stored printouts of the package's source (`print(inspect.getsource(X))` in a notebook) match the package today.

A notebook that shows a function's code must show the code the package runs: after a change to that function,
re-execute the cell."""

import ast
import inspect
import json
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def printouts(path: pathlib.Path) -> list[tuple[int, tuple[str, ...], str]]:
    """(cell index, the print call's argument expressions, stored stdout) for each print of a source."""
    found = []
    for index, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
        source = "".join(cell["source"])
        if cell["cell_type"] != "code" or "getsource(" not in source:
            continue
        stored = "".join("".join(o.get("text", "")) for o in cell.get("outputs", []) if o.get("name") == "stdout")
        for node in ast.walk(ast.parse(source)):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "print"
                    and "getsource(" in ast.unparse(node)):
                found.append((index, tuple(ast.unparse(arg) for arg in node.args), stored))
    return found


def imports_of(path: pathlib.Path) -> dict:
    """`inspect` and the names the notebook imports from `shared`, imported here."""
    namespace: dict = {"inspect": inspect}
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] != "code":
            continue
        try:
            tree = ast.parse("".join(cell["source"]))
        except SyntaxError:  # a cell with IPython syntax
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("shared"):
                exec(ast.unparse(node), namespace)
    return namespace


CASES = [(path, *case) for path in NOTEBOOKS for case in printouts(path)]


def test_the_notebooks_print_some_source():
    assert len(CASES) >= 10  # the scan finds the printouts (a broken scan would pass every case below vacuously)


@pytest.mark.parametrize("path, index, args, stored", CASES, ids=[f"{p.stem[:2]}-c{i}" for p, i, _, _ in CASES])
def test_stored_source_matches_the_package(path, index, args, stored):
    namespace = imports_of(path)
    printed = " ".join(str(eval(arg, namespace)) for arg in args)  # what print(*args) writes today
    assert printed in stored, (f"{path.name} cell {index} prints {', '.join(args)}; its stored output is not what "
                               f"that prints today: re-execute the cell")
