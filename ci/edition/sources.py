"""The English each block was translated from, and the diff a translator reads before accepting an English change.

A marker's hash says only THAT the English changed; to say WHAT changed, the English text of every translated block
is kept beside its translation file, in translations/zh/.source/ under the translation file's name with .json
(`.source/05_transformer_block.json`, `.source/solutions/05_solutions.json`, `.source/README.json`):

    {
     "2fec21a2": [
      "## 6. The Post-LN decoder layer\\n",
      "\\n",
      "..."
     ]
    }

One JSON object, block id -> the English source as a list of lines, keys sorted, one line of English on one line of
the file. This layout is chosen for review in git: accepting a change rewrites exactly the English lines that
changed, so a commit's diff shows the English change beside the Chinese one; sorted keys make the file independent
of cell order and of who wrote it; and a list of lines (not one string with \\n escapes) keeps each hunk small.

Only the deliberate command writes it (`python ci/translate.py bump FILE ID ...`, which prints the diff first, or
`bump FILE --all-fresh` for blocks that have no stored English yet); `skeleton` stores nothing for a todo block.
A block whose id changed (a README heading, a section's id, was edited) is accepted with `bump FILE NEW --was OLD`,
which shows the diff from the English stored under OLD; `--all-fresh` adopts nothing in a file that still stores
English for a block it no longer has, since the new id with no stored English may be that block renamed, and never
drops the English of an orphan block (still in the file under its old id: its marker is renamed, then `--was`);
only `bump FILE --drop OLD` drops that.
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


class StoreError(ValueError):
    """A store file that is not what `save` writes (a merge conflict, a hand edit, a truncated write)."""


def load(translation: pathlib.Path, root: pathlib.Path = ROOT) -> dict[str, str]:
    """The stored English of `translation`'s blocks, block id -> source text ({} when nothing is stored yet);
    StoreError naming the file if it is not a JSON object of block id -> list of str."""
    path = store_path(translation, root)
    if not path.exists():
        return {}
    name = rel(path, root)
    text = path.read_text(encoding="utf-8")
    restore = (f"restore it with `git checkout -- {name}` (or from the commit you want), then run "
               "python ci/translate.py check")
    if re.search(r"^(<{7}|={7}|>{7})( |$)", text, flags=re.MULTILINE):
        raise StoreError(f"{name}: holds git merge conflict markers (<<<<<<< ======= >>>>>>>): resolve the merge "
                         f"conflict by keeping one version of each block's lines, or {restore}")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise StoreError(f"{name}: not valid JSON (line {error.lineno}, column {error.colno}: {error.msg}); after "
                         f"a merge conflict or an interrupted edit, {restore}") from None
    if not isinstance(data, dict):
        raise StoreError(f"{name}: expected a JSON object of block id -> list of lines, got a "
                         f"{type(data).__name__}; {restore}")
    for cell_id, text_lines in data.items():
        if not isinstance(text_lines, list) or not all(isinstance(line, str) for line in text_lines):
            got = type(text_lines).__name__ if not isinstance(text_lines, list) else "a list with " + ", ".join(
                sorted({type(line).__name__ for line in text_lines if not isinstance(line, str)}))
            raise StoreError(f"{name}: block {cell_id!r}: expected a list of lines (str), got {got}; {restore}")
    return {cell_id: "".join(text_lines) for cell_id, text_lines in data.items()}


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


def cells_of(ids: list[str]) -> str:
    """'the cell of X is' or 'the cells of X and Y are': how a hint names the cells of stored English no block uses."""
    return f"the cell of {ids[0]} is" if len(ids) == 1 else f"the cells of {' and '.join(ids)} are"


def renamed_hint(command: str, new: list[str], old: list[str]) -> str:
    """What to run when a file has blocks with no stored English (`new`) and stored English with no block (`old`):
    the one wording the check and the bump print."""
    return (f"a block may have been renamed (a changed heading changes a section's id): if {new[0]} is {old[0]} "
            f"renamed, run {command} {new[0]} --was {old[0]} (it shows the English diff, stores the English under "
            f"{new[0]} and drops {old[0]}); if {cells_of(old)} gone, drop {'its' if len(old) == 1 else 'their'} "
            f"stored English: {command} --drop {' '.join(old)}")


def orphan_hint(command: str, orphan: str, new: str | None) -> str:
    """What to run when the file still has the block of stored English `orphan` but no English cell has its id: the
    marker is renamed first (`new`, a cell with no block, where there is one), then the bump shows the diff."""
    new_id = new or "NEW"
    return (f"its block is still in the file, as an orphan; if a changed heading renamed it, rename the marker of "
            f"{orphan} to the new id{f' ({new})' if new else ''}, then run {command} {new_id} --was {orphan} (it "
            f"shows the English diff); if its cell is gone, delete the block and run {command} --drop {orphan}")


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


NO_DIFF = "no stored English: no diff can be shown (read the whole English cell against the Chinese)"


def english_diff(old: str | None, new: str, old_name: str, new_name: str) -> list[str]:
    """A unified diff of a block's English, old -> new, and under it each run of changed lines marked word by word as
    one line (`words: ...`), so that re-wrapped lines show only the words that changed; with no old English (None),
    one line that says no diff can be shown (an empty -> new diff would look like a change that was read)."""
    if old is None:
        return [NO_DIFF]
    before, after = old.splitlines(), new.splitlines()
    out = list(difflib.unified_diff(before, after, old_name, new_name, n=1, lineterm=""))
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "replace":
            out.append(f"words: {word_marks(' '.join(before[i1:i2]), ' '.join(after[j1:j2]))}")
    return out
