"""The English each block was translated from, and the diff a translator reads before accepting an English change.

A marker's hash says only THAT the English changed; to say WHAT changed, the English text of every translated block
is kept beside its translation file, in translations/zh/.source/ under the translation file's name with .json
(`.source/05_transformer_block.json`, `.source/solutions/05_solutions.json`, `.source/README.json`):

    {
     "c41": [
      "2. **cross-attention**: queries from the target, keys and values from ...\\n",
      "..."
     ]
    }

One JSON object, block id -> the English source as a list of lines, keys sorted, one line of English on one line of
the file. This layout is chosen for review in git: accepting a change rewrites exactly the English lines that
changed, so a commit's diff shows the English change beside the Chinese one; sorted keys make the file independent
of cell order and of who wrote it; and a list of lines (not one string with \\n escapes) keeps each hunk small.

Only the deliberate command writes it (`python ci/translate.py bump FILE ID ...`, which prints the diff first, or
`bump FILE --all-fresh` for blocks that have no stored English yet); `skeleton` stores nothing for a todo block.
"""

from __future__ import annotations

import difflib
import json
import pathlib
import re
import sys

from edition.common import LANGUAGE, ROOT, chapter, is_document, lines, rel

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # the course package, for its atomic write
from shared.files import atomic_write  # noqa: E402

STORE = ".source"


def store_path(translation: pathlib.Path, root: pathlib.Path = ROOT) -> pathlib.Path:
    """translations/zh/[solutions/]X.md -> translations/zh/.source/[solutions/]X.json"""
    folder = root / "translations" / LANGUAGE
    return folder / STORE / translation.relative_to(folder).with_suffix(".json")


def load(translation: pathlib.Path, root: pathlib.Path = ROOT) -> dict[str, str]:
    """The stored English of `translation`'s blocks, block id -> source text ({} when nothing is stored yet)."""
    path = store_path(translation, root)
    if not path.exists():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
        raise ValueError(f"{rel(path, root)}: expected a JSON object of block id -> list of lines")
    return {cell_id: "".join(text) for cell_id, text in data.items()}


def dumps(store: dict[str, str]) -> str:
    """The store's file text: sorted keys, one line of English per line (see the module docstring)."""
    return json.dumps({k: lines(v) for k, v in store.items()}, ensure_ascii=False, indent=1, sort_keys=True) + "\n"


def save(translation: pathlib.Path, store: dict[str, str], root: pathlib.Path = ROOT) -> None:
    """Write the store of `translation` atomically (remove it when it is empty)."""
    path = store_path(translation, root)
    if not store:
        path.unlink(missing_ok=True)
        return
    with atomic_write(path) as tmp:
        tmp.write_text(dumps(store), encoding="utf-8")


def command_name(english: pathlib.Path, root: pathlib.Path = ROOT) -> str:
    """How the command line names an English file: '05', 'solutions/05', 'README.md', 'TEACHING.md'."""
    if is_document(english):
        return english.name
    solutions = english.parent.name == "solutions"
    return ("solutions/" if solutions else "") + chapter(english)


def bump_command(english: pathlib.Path, ids: list[str] | str, root: pathlib.Path = ROOT) -> str:
    """The exact command that accepts blocks `ids` (or '--all-fresh') of `english`'s translation."""
    ids = [ids] if isinstance(ids, str) else ids
    return f"python ci/translate.py bump {command_name(english, root)} {' '.join(ids)}"


# ------------------------------------------------------------------------------------------------------ diffs

WORD = re.compile(r"\s+|\w+|[^\w\s]")


def word_marks(old: str, new: str) -> str:
    """The new line with its changes marked word by word, as `git diff --word-diff` does: [-old-]{+new+}."""
    a, b = WORD.findall(old), WORD.findall(new)
    out = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            out.append("".join(a[i1:i2]))
            continue
        if i2 > i1:
            out.append("[-" + "".join(a[i1:i2]) + "-]")
        if j2 > j1:
            out.append("{+" + "".join(b[j1:j2]) + "+}")
    return "".join(out)


def english_diff(old: str | None, new: str, old_name: str, new_name: str) -> list[str]:
    """A unified diff of a block's English, old -> new (no old: the whole new text as added), and under it each run
    of changed lines marked word by word as one line (`words: ...`), so that re-wrapped lines show only the words
    that changed."""
    before, after = (old or "").splitlines(), new.splitlines()
    out = list(difflib.unified_diff(before, after, old_name, new_name, n=1, lineterm=""))
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "replace":
            out.append(f"words: {word_marks(' '.join(before[i1:i2]), ' '.join(after[j1:j2]))}")
    return out
