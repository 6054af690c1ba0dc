"""The package's import graph has no cycles, counting imports inside functions too (they hide cycles)."""

import ast
from pathlib import Path

SHARED = Path(__file__).resolve().parent.parent / "shared"


def shared_imports(path: Path) -> set[str]:
    """Names of the shared modules that `path` imports anywhere (top level or inside functions)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                found.add(node.module.split(".")[0])
            else:  # from . import x
                found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("shared."):
            found.add(node.module.split(".")[1])
    return found & {p.stem for p in SHARED.glob("*.py")}


def test_shared_has_no_import_cycles():
    graph = {p.stem: shared_imports(p) for p in SHARED.glob("*.py")}
    state: dict[str, str] = {}  # "visiting" or "done"

    def visit(module, path):
        state[module] = "visiting"
        for dep in sorted(graph[module]):
            if state.get(dep) == "visiting":
                cycle = path[path.index(dep):] + [dep]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if dep not in state:
                visit(dep, path + [dep])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])


def test_the_explorers_modules_import_in_one_direction():
    assert "explorers" not in shared_imports(SHARED / "explorers_models.py")
    assert "explorers" not in shared_imports(SHARED / "explorer_base.py")
    assert "explorers_models" not in shared_imports(SHARED / "explorer_base.py")
