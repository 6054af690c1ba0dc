"""The package's layers: the model reads alone, nothing imports in a cycle, the teaching layer sits on top.

Imports are read from the source (top level and inside functions: those hide cycles too; `from ... import` and
`import shared.x` alike) and resolved to module names such as "attention", "generation.seq2seq" or
"exercises.feedback".
"""

import ast
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parent.parent / "shared"

# The layers in order (README, "The notebooks"). A module imports only its own layer and the layers before it.
LAYERS = {
    "base": {"validation", "runtime", "files", "history"},
    "tokenization": {"tokenization"},  # text -> token ids (Part II); from the base only
    "model": {"masks", "positions", "norms", "kv_cache", "attention", "explicit_attention", "layers", "transformer",
              "gpt", "fast_attention"},
    "training": {"training", "checkpoint", "distributed", "muon"},
    "tasks": {"reversal", "lengthgen", "shakespeare", "addition"},
    "generation": {"generation"},
    "pretrained": {"pretrained"},  # GGUF files -> gpt.GPT (Part II)
    "tools": {"architecture", "plotting", "debug"},
    "teaching": {"exercises", "explorers"},  # nothing else imports it
}
ORDER = list(LAYERS)
MODEL, BASE = LAYERS["model"], LAYERS["base"]
TEACHING_ROOMS = tuple(LAYERS["teaching"])


def layer_of(name: str) -> str:
    top = name.split(".")[0]
    return next(layer for layer, members in LAYERS.items() if top in members)


def module_name(path: Path) -> str:
    parts = path.relative_to(SHARED).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in SHARED.rglob("*.py") if "__pycache__" not in p.parts}


def shared_imports(path: Path) -> set[str]:
    """The shared modules that `path` imports anywhere, as names relative to the package ("generation.lm")."""
    known = modules()
    package = module_name(path).split(".") if path.name == "__init__.py" else module_name(path).split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):  # import shared.training (as t)
            for alias in node.names:
                parts = alias.name.split(".")
                while parts[0] == "shared" and len(parts) > 1:
                    if ".".join(parts[1:]) in known:
                        found.add(".".join(parts[1:]))
                        break
                    parts = parts[:-1]
            continue
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = package[: len(package) - (node.level - 1)]
        elif (node.module or "").split(".")[0] == "shared":
            base = []
        else:
            continue
        module = [*base, *(node.module.split(".") if node.module else [])]
        if module and module[0] == "shared" and not node.level:
            module = module[1:]
        name = ".".join(module)
        if name in known:
            found.add(name)
        for alias in node.names:  # from . import x, from .generation import lm
            sub = f"{name}.{alias.name}" if name else alias.name
            if sub in known:
                found.add(sub)
    return found - {module_name(path)}


def graph() -> dict[str, set[str]]:
    return {name: shared_imports(path) for name, path in modules().items() if name}


def test_the_layers_are_known():
    """Every module belongs to a layer that this test names, so a new file cannot escape the rules."""
    listed = set().union(*LAYERS.values())
    for name in graph():
        assert name.split(".")[0] in listed, f"{name}: add it to a layer in this test"


def test_each_layer_imports_only_itself_and_the_layers_before_it():
    for name, deps in graph().items():
        for dep in deps:
            assert ORDER.index(layer_of(dep)) <= ORDER.index(layer_of(name)), \
                f"{name} ({layer_of(name)}) imports {dep} ({layer_of(dep)}), a later layer"


def test_shared_has_no_import_cycles():
    g = graph()
    state: dict[str, str] = {}  # "visiting" or "done"

    def visit(module, path):
        state[module] = "visiting"
        for dep in sorted(g[module]):
            if state.get(dep) == "visiting":
                cycle = path[path.index(dep):] + [dep]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if dep not in state:
                visit(dep, path + [dep])
        state[module] = "done"

    for module in sorted(g):
        if module not in state:
            visit(module, [module])


@pytest.mark.parametrize("name", sorted(n for n in modules() if n and n.split(".")[0] in MODEL))
def test_model_files_import_only_the_model_and_validation(name):
    """The model reads alone: no teaching layer, tasks, training, generation, plotting or debugging aids."""
    assert {d.split(".")[0] for d in shared_imports(modules()[name])} <= MODEL | {"validation"}


@pytest.mark.parametrize("name", sorted(BASE))
def test_base_modules_import_nothing_of_the_course(name):
    assert shared_imports(SHARED / f"{name}.py") <= {"validation"}


def test_nothing_outside_the_teaching_layer_imports_it():
    for name, deps in graph().items():
        if name.split(".")[0] not in TEACHING_ROOMS:
            assert not {d for d in deps if d.split(".")[0] in TEACHING_ROOMS}, name


def test_checkpointing_does_not_pull_in_the_training_loop():
    """History lives in its own module, so shared.checkpoint does not depend on the training loop."""
    seen, todo = set(), ["checkpoint"]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += sorted(graph()[name])
    assert not seen & {"training", "distributed"}, seen


def test_the_explorers_modules_import_in_one_direction():
    assert "explorers" not in shared_imports(SHARED / "explorers" / "models.py")
    assert shared_imports(SHARED / "explorers" / "base.py") == set()


def test_the_resolver_sees_relative_and_absolute_imports(tmp_path, monkeypatch):
    """A planted cross-layer import is seen whichever way it is written (so the tests above can fail)."""
    for text in ("from ..training import train\n", "from shared.training import train\n",
                 "def f():\n    from .. import training\n", "import shared.training\n",
                 "import shared.training.x as t\n"):
        fake = SHARED / "exercises" / "_planted_for_test.py"
        monkeypatch.setattr(Path, "read_text", lambda self, encoding=None, text=text: text)
        assert "training" in shared_imports(fake), text
