"""The English each block was translated from is stored (ci/edition/sources.py), so an English change is shown, not
only flagged, and only the bump command accepts it.

- An English edit that keeps every term's count (a swap of queries and keys; 'after' becomes 'before') fails the
  check, which prints the English diff with the changed words marked.
- A marker's hash bumped by hand still fails; `bump` prints the diff, stores the new English and the check passes.
- A new translation's blocks are stored by `bump --all-fresh`; skeleton stores nothing; stored English without a
  block fails the check until the bump drops it.
- A renamed block (a README heading changed, so its id) is never adopted by `--all-fresh`: only
  `bump FILE NEW --was OLD` accepts it, showing the diff from OLD's stored English; where nothing is stored, no
  empty diff pretends to show a change.
- A renamed heading whose marker is not renamed yet leaves an orphan block with stored English: the check says to
  rename the marker and bump with --was; `--all-fresh` keeps that English (only --drop drops it).
- A corrupt store (truncated, a merge conflict, not lines of text) is named with what to do; a bump interrupted while
  writing leaves each file whole, and the check names a marker bumped without its store.
- A code block may translate docstrings (the first string of a def or class), and nothing else of the code; a
  difference is said with its line, as a syntax error, an added or a left-out statement.
"""

import errno
import json
import pathlib
import re
import textwrap

import pytest

from .translation_helpers import (
    GLOSSARY,
    PILOT,
    ROOT,
    blocks_of,
    build,
    bump,
    bump_markers,
    check,
    common,
    copy_of_the_edition,
    guard,
    hand_bump,
    load,
    rel,
    skeleton,
    sources,
)

# (English file, what it says, the edit that keeps every term's count but says the opposite, the words changed)
SWAP = (ROOT / "notebooks" / "05_transformer_block.ipynb", "queries from the target, keys and values from the encoder",
        "keys from the target, queries and values from the encoder", "[-queries-]{+keys+}")
BEFORE = (ROOT / "README.md", "Share the solutions folder after the session",
          "Share the solutions folder before the session", "[-after-]{+before+}")


def edited_copy(tmp_path, english, said, edit):
    """A fresh copy of `english`'s edition, the check's lines for it, and the id of the block whose English now says
    `edit` instead of `said`."""
    root = copy_of_the_edition(tmp_path, english)
    path = root / rel(english)
    bump_markers(root, path)  # a copy fresh to begin with, whatever the translators are doing meanwhile
    baseline = check.check(root)[0]
    cells = common.load_english(path)["cells"]
    found = [c["id"] for c in cells if said in " ".join(common.source(c).split())]
    assert len(found) == 1, f"{rel(english)} no longer says {said!r} in one cell: choose another sentence"
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".md":
        assert text.count(said) == 1
        text = text.replace(said, edit)
    else:
        nb = json.loads(text)
        cell = next(c for c in nb["cells"] if c["id"] == found[0])
        assert said in common.source(cell), f"{said!r} is wrapped across lines: choose another sentence"
        cell["source"] = common.lines(common.source(cell).replace(said, edit))
        text = build.dumps(nb)
    path.write_text(text, encoding="utf-8")
    return root, path, baseline, found[0]


def block_range(translation, cell_id):
    """'first-last': the translation file's lines from a block's marker to its last line of text, counted from the
    file's text here (not from the parser the check uses)."""
    text = translation.read_text(encoding="utf-8").splitlines()
    first = next(n for n, line in enumerate(text, 1) if line.startswith(f"<!-- cell {cell_id} | en "))
    following = next((n for n, line in enumerate(text, 1) if n > first
                      and re.match(r"<!-- (cell|code|extra) \S+( \| en [0-9a-f]{12}( \| todo)?)? -->$", line)),
                     len(text) + 1)
    last = max(n for n in range(first, following) if text[n - 1].strip())
    return f"{first}-{last}"


@pytest.mark.parametrize("case", [SWAP, BEFORE], ids=["keys-queries-swap", "after-before"])
def test_an_english_change_that_keeps_every_term_is_shown_and_only_bump_accepts_it(tmp_path, case):
    english, said, edit, words = case
    root, path, baseline, cell_id = edited_copy(tmp_path, english, said, edit)
    lines, failed = check.check(root)
    output = "\n".join(lines)
    assert failed and any(line.startswith(f"  stale    {cell_id}:") for line in lines), output
    assert any(line.strip().startswith("-") and said in line for line in lines), output  # old -> new
    assert any(line.strip().startswith("+") and edit in line for line in lines), output
    assert any(line.strip().startswith("words:") and words in line for line in lines), output
    command = f"python ci/translate.py bump {sources.command_name(path, root)} {cell_id}"
    assert command in output, output
    translation = common.translation_for(path, root)
    revisit = f"revisit the Chinese at {common.rel(translation, root)}:{block_range(translation, cell_id)}, then"
    assert revisit in output, output  # 05's 2fec21a2: 349-356 when written

    assert hand_bump(root, path) == 1  # the marker says the new hash; nothing else changed
    lines, failed = check.check(root)
    output = "\n".join(lines)
    stale = [line for line in lines if line.startswith(f"  stale    {cell_id}:")]
    assert failed and len(stale) == 1, output
    assert "an interrupted bump or a hand-edited hash: run bump FILE ID again" in stale[0], output
    assert any(line.strip().startswith("words:") and words in line for line in lines) and command in output, output

    said_by_bump = bump.bump(path, [cell_id], root=root)
    assert any(line.strip().startswith("words:") and words in line for line in said_by_bump), said_by_bump
    build.build(root)
    assert check.check(root)[0] == baseline  # accepted: the check says what it said before the edit
    stored = sources.load(common.translation_for(path, root), root)
    now = next(c for c in common.load_english(path)["cells"] if c["id"] == cell_id)
    assert stored[cell_id] == common.source(now) and edit in " ".join(stored[cell_id].split())


def test_a_bump_changes_the_marker_line_only(tmp_path):
    root, path, _, cell_id = edited_copy(tmp_path, *BEFORE[:3])
    translation = common.translation_for(path, root)
    before = translation.read_text(encoding="utf-8")
    bump.bump(path, [cell_id], root=root)
    after = translation.read_text(encoding="utf-8")
    changed = [(a, b) for a, b in zip(before.splitlines(), after.splitlines()) if a != b]
    assert len(changed) == 1 and changed[0][1].startswith(f"<!-- cell {cell_id} | en ")
    assert len(before.splitlines()) == len(after.splitlines())
    with pytest.raises(SystemExit, match="no block for cell nope"):
        bump.bump(path, ["nope"], root=root)


# ------------------------------------------------------------------------------------------------ renamed blocks


def renamed_copy(tmp_path, hash_typed):
    """A copy where README's section that says 'after the session' says 'before', under a changed heading (so a new
    block id), and the translator renamed the block's marker to the new id (with the new hash typed in, or the old
    one kept): (root, README's path, the check's lines before the edit, the old id, the new id)."""
    root, path, baseline, old_id = edited_copy(tmp_path, *BEFORE[:3])
    heading = common.source(next(c for c in common.load_english(path)["cells"] if c["id"] == old_id)).splitlines()[0]
    renamed = heading.replace("teaching", "teaching a class")
    assert renamed != heading
    path.write_text(path.read_text(encoding="utf-8").replace(heading + "\n", renamed + "\n", 1), encoding="utf-8")
    new_id = common.slug(renamed)
    if hash_typed is None:
        build.build(root)
        return root, path, baseline, old_id, new_id
    now = next(c for c in common.load_english(path)["cells"] if c["id"] == new_id)
    translation = common.translation_for(path, root)
    text = translation.read_text(encoding="utf-8")
    block = next(b for b in common.parse(text) if b.cell_id == old_id)
    marker = f"<!-- cell {old_id} | en {block.en} -->"
    en = common.cell_hash(common.source(now)) if hash_typed else block.en
    translation.write_text(text.replace(marker, f"<!-- cell {new_id} | en {en} -->"), encoding="utf-8")
    build.build(root)
    return root, path, baseline, old_id, new_id


@pytest.mark.parametrize("hash_typed", [True, False], ids=["new-hash-typed", "old-hash-kept"])
def test_a_renamed_block_is_never_adopted_without_its_diff(tmp_path, hash_typed):
    root, path, baseline, old_id, new_id = renamed_copy(tmp_path, hash_typed)
    translation = common.translation_for(path, root)
    store = sources.store_path(translation, root)
    before = store.read_text(encoding="utf-8")
    lines, failed = check.check(root)
    output = "\n".join(lines)
    was = f"python ci/translate.py bump README.md {new_id} --was {old_id}"
    assert failed and was in output and any(line.startswith(f"  unused   {old_id}:") for line in lines), output
    assert any(line.startswith("translations/zh/README.md (README.md): ") and "1 unused" in line for line in lines)
    if hash_typed:
        assert f"unrecorded 1 translated block(s) whose English source is not stored yet ({new_id})" in output
    else:  # stale, with no English stored under its id: no empty -> new diff that looks like a change shown
        assert any(line.startswith(f"  stale    {new_id}:") for line in lines), output
        assert sources.NO_DIFF in output and "+++ the English now" not in output, output
    assert "--all-fresh" not in output, output

    for refused in (lambda: bump.bump(path, [], all_fresh=True, root=root),
                    lambda: bump.bump(path, [new_id], root=root),
                    lambda: bump.bump(path, [new_id], all_fresh=True, root=root)):
        with pytest.raises(SystemExit, match=f"may have been renamed.*{re.escape(was)}"):
            refused()
        assert store.read_text(encoding="utf-8") == before  # nothing adopted, nothing dropped

    said = bump.bump(path, [new_id], root=root, was=old_id)
    assert any(line.strip().startswith("words:") and BEFORE[3] in line for line in said), said
    assert any(line.strip().startswith("-") and "teaching with them" in line for line in said), said
    stored = sources.load(translation, root)
    assert old_id not in stored and BEFORE[2] in " ".join(stored[new_id].split())
    build.build(root)
    assert check.check(root)[0] == baseline


def test_a_renamed_heading_before_the_marker_is_renamed_keeps_the_stored_english(tmp_path):
    root, path, baseline, old_id, new_id = renamed_copy(tmp_path, None)
    translation = common.translation_for(path, root)
    store = sources.store_path(translation, root)
    before = store.read_text(encoding="utf-8")
    lines, failed = check.check(root)
    output = "\n".join(lines)
    hint = (f"rename the marker of {old_id} to the new id ({new_id}), then run python ci/translate.py bump README.md "
            f"{new_id} --was {old_id}")
    unused = next(line for line in lines if line.startswith(f"  unused   {old_id}:"))
    assert failed and hint in unused and "--all-fresh" not in output, output
    assert f"  missing  {new_id}: " in output and f"  orphan   {old_id}: " in output, output

    said = bump.bump(path, [], all_fresh=True, root=root)  # the old advice: it must not drop what the diff needs
    assert any(line.startswith(f"{old_id}: its stored English is kept: ") and hint.replace(f" ({new_id})", "")
               .replace(new_id, "NEW") in line for line in said), said
    assert store.read_text(encoding="utf-8") == before
    with pytest.raises(SystemExit, match=re.escape(hint)):  # no block yet: the marker is renamed first
        bump.bump(path, [new_id], root=root)
    now = common.source(next(c for c in common.load_english(path)["cells"] if c["id"] == new_id))
    text = translation.read_text(encoding="utf-8")  # a new block for the new id, the orphan left beside it
    translation.write_text(text + f"\n<!-- cell {new_id} | en {common.cell_hash(now)} -->\n## 新译文\n",
                           encoding="utf-8")
    with pytest.raises(SystemExit, match=re.escape(f"bump README.md {new_id} --was {old_id}")):
        bump.bump(path, [new_id], root=root)  # no stored English to diff from, while the orphan's is stored
    assert store.read_text(encoding="utf-8") == before
    translation.write_text(text, encoding="utf-8")
    translation.write_text(translation.read_text(encoding="utf-8").replace(f"<!-- cell {old_id} |",
                                                                            f"<!-- cell {new_id} |"), encoding="utf-8")
    with pytest.raises(SystemExit, match=re.escape(f"bump README.md {new_id} --was {old_id}")):
        bump.bump(path, [new_id], root=root)  # a plain bump has no diff to show: refused
    said = bump.bump(path, [new_id], root=root, was=old_id)
    assert any(line.strip().startswith("words:") and BEFORE[3] in line for line in said), said
    build.build(root)
    assert check.check(root)[0] == baseline


def test_was_and_drop_refuse_what_they_cannot_do(tmp_path):
    root, path, _, old_id, new_id = renamed_copy(tmp_path, True)
    translation = common.translation_for(path, root)
    stored = sources.load(translation, root)
    other = next(i for i in stored if i != old_id)
    for kwargs, message in [
        (dict(ids=[new_id], was="nope"), "no English is stored for nope"),
        (dict(ids=[new_id], was=other), f"block {other} is still in the file"),
        (dict(ids=[other], was=old_id), f"block {other} has stored English already"),
        (dict(ids=[new_id, other], was=old_id), "goes with one block id"),
        (dict(ids=[], drop=[other]), f"block {other} is translated"),
        (dict(ids=[], drop=["nope"]), "--drop nope: no English is stored for nope"),
        (dict(ids=[new_id], was=old_id, drop=[old_id]), f"--was {old_id} and --drop {old_id}: "),
        (dict(ids=["mainland-china"]), "extra blocks are never stale and never bumped"),
    ]:
        with pytest.raises(SystemExit, match=re.escape(message)):
            bump.bump(path, root=root, **kwargs)
    assert sources.load(translation, root) == stored
    bump.bump(path, [], drop=[old_id], root=root)  # the old cell is gone and the new block is another cell
    bump.bump(path, [], all_fresh=True, root=root)
    assert set(sources.load(translation, root)) == set(stored) - {old_id} | {new_id}


# ------------------------------------------------------------------------------------------------- a corrupt store


@pytest.mark.parametrize("corrupt, message", ids=["truncated", "merge-conflict", "not-str", "not-an-object"],
                         argvalues=[
    (lambda text: text[: len(text) // 2], "not valid JSON (line "),
    (lambda text: text.replace('\n "', '\n<<<<<<< HEAD\n "', 1).replace('\n ]', '\n=======\n ]\n>>>>>>> x', 1),
     "git merge conflict markers"),
    (lambda text: text.replace('  "', "  3, \"", 1), "expected a list of lines (str), got a list with int"),
    (lambda text: "[]\n", "expected a JSON object of block id -> list of lines, got a list"),
])
def test_a_corrupt_store_is_named_with_what_to_do(tmp_path, corrupt, message):
    root = copy_of_the_edition(tmp_path)
    translation = common.translation_for(root / rel(PILOT), root)
    store = sources.store_path(translation, root)
    store.write_text(corrupt(store.read_text(encoding="utf-8")), encoding="utf-8")
    name = "translations/zh/.source/solutions/01_solutions.json"
    with pytest.raises(sources.StoreError, match=re.escape(message)) as raised:
        sources.load(translation, root)
    assert str(raised.value).startswith(f"{name}: ") and f"git checkout -- {name}" in str(raised.value)
    lines, failed = check.check(root)  # the check names it and goes on
    assert failed and any(name in line and message in line for line in lines), "\n".join(lines)


def test_the_command_line_reports_a_corrupt_store_without_a_traceback(monkeypatch, capsys):
    import translate

    def corrupt(*args, **kwargs):
        raise sources.StoreError("translations/zh/.source/x.json: not valid JSON")

    monkeypatch.setattr(translate, "build", corrupt)
    assert translate.main(["build"]) == 2
    assert capsys.readouterr().err == "error: translations/zh/.source/x.json: not valid JSON\n"


@pytest.mark.parametrize("failing", [1, 2], ids=["translation-write-fails", "store-write-fails"])
def test_a_bump_interrupted_while_writing_leaves_no_half_file(tmp_path, monkeypatch, failing):
    """The bump writes the translation file (write 1), then the store (write 2), each atomically: a failure leaves
    each file whole, old or new; after a failure on write 2 the check names it and a second bump finishes it."""
    root, path, baseline, cell_id = edited_copy(tmp_path, *BEFORE[:3])
    translation = common.translation_for(path, root)
    store = sources.store_path(translation, root)
    before = {p: p.read_bytes() for p in (translation, store)}
    files = sorted(translation.parent.rglob("*"))
    write_text, writes = pathlib.Path.write_text, []

    def fail_on_one_write(self, data, *args, **kwargs):  # the disk fails half-way through write number `failing`
        writes.append(self)
        if len(writes) != failing:
            return write_text(self, data, *args, **kwargs)
        write_text(self, data[: len(data) // 2], *args, **kwargs)
        raise OSError(errno.EIO, "input/output error")

    monkeypatch.setattr(pathlib.Path, "write_text", fail_on_one_write)
    with pytest.raises(OSError, match="input/output error"):
        bump.bump(path, [cell_id], root=root)
    monkeypatch.undo()
    assert sorted(translation.parent.rglob("*")) == files  # no temporary file left behind
    assert store.read_bytes() == before[store]
    if failing == 1:
        assert translation.read_bytes() == before[translation]
        return
    assert translation.read_bytes() != before[translation]  # the marker holds the new hash, the store the old
    build.build(root)
    lines, failed = check.check(root)
    output = "\n".join(lines)
    assert failed and f"  stale    {cell_id}: " in output, output
    assert "an interrupted bump or a hand-edited hash: run bump FILE ID again" in output, output
    assert any(line.strip().startswith("words:") and BEFORE[3] in line for line in lines), output  # the diff
    bump.bump(path, [cell_id], root=root)
    build.build(root)
    assert check.check(root)[0] == baseline


def test_the_documented_bump_examples_name_real_blocks():
    import translate

    blocks = {b.cell_id for b in blocks_of(ROOT / "translations" / "zh" / "05_transformer_block.md")}
    named = re.findall(r"bump 05 (\S+)", translate.__doc__) + re.findall(r'^ *"(\S+)": \[$', sources.__doc__, re.M)
    assert len(named) == 2 and set(named) <= blocks, named


# --------------------------------------------------------------------------------------------- new translations


def test_a_new_translation_is_stored_by_bump_all_fresh_and_skeleton_stores_nothing(tmp_path):
    root = copy_of_the_edition(tmp_path)
    english = root / rel(PILOT)
    translation = common.translation_for(english, root)
    blocks = common.parse(translation.read_text(encoding="utf-8"))
    block = next(b for b in blocks if b.kind == "cell" and b.cell_id != blocks[0].cell_id)
    chinese, block.todo = block.text, True  # as skeleton left it, before anyone translated it
    translation.write_text(common.render(blocks, rel(PILOT)), encoding="utf-8")
    assert any("dropped" in line for line in bump.bump(english, [], all_fresh=True, root=root))
    assert block.cell_id not in sources.load(translation, root)
    skeleton.skeleton(english, root=root)
    assert block.cell_id not in sources.load(translation, root)

    block.text, block.todo = chinese, False  # translated, and the marker's todo removed by hand
    translation.write_text(common.render(blocks, rel(PILOT)), encoding="utf-8")
    build.build(root)
    lines, failed = check.check(root)
    output = "\n".join(lines)
    assert failed and "unrecorded 1 translated block(s)" in output and block.cell_id in output, output
    assert "python ci/translate.py bump solutions/01 --all-fresh" in output, output
    bump.bump(english, [], all_fresh=True, root=root)
    build.build(root)
    assert check.check(root)[1] is False, "\n".join(check.check(root)[0])
    assert block.cell_id in sources.load(translation, root)


def test_stored_english_without_a_block_fails_until_the_bump_drops_it(tmp_path):
    root = copy_of_the_edition(tmp_path)
    translation = common.translation_for(root / rel(PILOT), root)
    stored = sources.load(translation, root)
    sources.save(translation, {**stored, "gone1234": "# A cell that is gone\n"}, root)
    lines, failed = check.check(root)
    assert failed and any(line.startswith("  unused   gone1234:") for line in lines), "\n".join(lines)
    bump.bump(root / rel(PILOT), [], all_fresh=True, root=root)
    assert sources.load(translation, root) == stored and not check.check(root)[1]


def test_all_fresh_does_not_accept_a_changed_english_cell(tmp_path):
    root, path, _, cell_id = edited_copy(tmp_path, *BEFORE[:3])
    bump.bump(path, [], all_fresh=True, root=root)
    assert BEFORE[1] in sources.load(common.translation_for(path, root), root)[cell_id]  # the old English stays
    assert check.check(root)[1]  # still stale
    translation = common.translation_for(path, root)
    stored = sources.load(translation, root)
    del stored[cell_id]  # a block from before the store whose English changed since: its hash differs too
    sources.save(translation, stored, root)
    said = bump.bump(path, [], all_fresh=True, root=root)
    assert f"{cell_id}: not adopted: the English changed since it was translated; revisit it, then run python " \
           f"ci/translate.py bump README.md {cell_id}" in said, said
    assert cell_id not in sources.load(translation, root) and check.check(root)[1]


def test_the_store_is_sorted_json_with_one_line_of_english_per_line(tmp_path):
    store = {"b-2": "second\nblock\n", "a-1": "first"}
    text = sources.dumps(store)
    assert list(json.loads(text)) == ["a-1", "b-2"] and '  "block\\n"' in text.splitlines()[-3]
    translation = tmp_path / "translations" / "zh" / "solutions" / "01_solutions.md"
    sources.save(translation, store, tmp_path)
    assert sources.store_path(translation, tmp_path) == tmp_path / "translations/zh/.source/solutions/01_solutions.json"
    assert sources.load(translation, tmp_path) == store


def test_the_build_keeps_the_english_code_of_a_block_bumped_by_hand(tmp_path):
    root = copy_of_the_edition(tmp_path)
    english = root / rel(PILOT)
    nb = load(english)
    block = next(b for b in common.read_blocks(english, root) if b.kind == "code")
    cell = next(c for c in nb["cells"] if c["id"] == block.cell_id)
    cell["source"] = common.lines(common.source(cell) + "\nprint('new')")
    english.write_text(build.dumps(nb), encoding="utf-8")
    hand_bump(root, english)
    built = load(common.built_for(english, root))
    assert common.source(next(c for c in built["cells"] if c["id"] == block.cell_id)) == common.source(cell)


# ----------------------------------------------------------------------------------------- docstrings in code

STUB = textwrap.dedent('''\
    def layer_norm(x, gamma, beta, eps):
        """x (..., d), gamma (d,), beta (d,) -> (..., d), normalised over the last axis."""
        raise NotImplementedError  # your code here


    class Block:
        "One layer."

        name = "block"
    ''')
TRANSLATED = (STUB.replace("normalised over the last axis.", "在最后一维上归一化。")
              .replace('"One layer."', '"一层。"').replace("# your code here", "# 在这里写你的代码"))


def test_a_translated_docstring_passes():
    assert guard.code_difference(STUB, TRANSLATED) is None and guard.same_code(STUB, TRANSLATED)


def review_problems(english, chinese):
    """What the check says of a code block `chinese` for the English code cell `english` (after a setup cell)."""
    nb = {"cells": [{"cell_type": "code", "id": "stub", "metadata": {}, "source": common.lines("import x\n")},
                    {"cell_type": "code", "id": "c1", "metadata": {}, "source": common.lines(english)}]}
    return check.review(nb, [common.Block("code", "c1", common.cell_hash(english), chinese)], GLOSSARY).problems


BEYOND = "the code differs from the English beyond its comments and docstrings: "


@pytest.mark.parametrize("planted, message", [
    (TRANSLATED.replace('name = "block"', 'name = "块"'),
     BEYOND + "line 9: a string literal changed, English '\"block\"', translation '\"块\"'"),
    (TRANSLATED.replace("def layer_norm", "def layernorm"), BEYOND + "line 1: a name changed, English 'layer_norm'"),
    (TRANSLATED.replace("raise NotImplementedError", '"""再一个字符串。"""\n    raise NotImplementedError'),
     BEYOND + "line 3 of the translation adds code the English does not have (after the English's line 2): "
              "'\"\"\"再一个字符串。\"\"\"'"),
    (TRANSLATED.replace('"一层。"\n', '"一层。"\n    x = 1\n'),
     BEYOND + "line 8 of the translation adds code the English does not have (after the English's line 7): 'x = 1'"),
    (TRANSLATED.replace('    name = "block"\n', ""),
     BEYOND + "the translation leaves out the English's line 9 (after its own line 7): 'name = \"block\"'"),
    (TRANSLATED.replace('"""\n    raise', '\n    x = 1"""\n    raise').replace("    name =", "    label ="),
     BEYOND + "line 10 (the English's line 9): a name changed, English 'name', translation 'label'"),
    (TRANSLATED.replace("# 在这里写你的代码", "在这里写你的代码"),
     "the translation is not valid Python, though the English is: line 3 of the code: invalid syntax"),
    (TRANSLATED.replace('归一化。"""', '归一化。""'),
     "the translation is not valid Python, though the English is: line 2 of the code: unterminated triple-quoted"),
])
def test_a_code_block_that_changes_more_than_docstrings_fails_with_a_clear_message(planted, message):
    difference = guard.code_difference(STUB, planted)
    assert difference and difference.startswith(message), difference
    assert review_problems(STUB, planted) == [("c1", difference)]
    assert review_problems(STUB, TRANSLATED) == []


# A code cell whose strings are not all docstrings: its first string and its last are output (a notebook shows a
# cell's last expression), and a def's second string is a plain statement; only the def's first string is prose.
CELL = textwrap.dedent('''\
    """Notes on this cell."""
    x = 3


    def f():
        """Say done."""
        "a second string"
        return x


    "done"
    ''')


def test_only_a_def_or_class_first_string_is_a_docstring():
    assert guard.code_difference(CELL, CELL.replace('"""Say done."""', '"""说完成。"""')) is None
    assert guard.docstrings(CELL) == "Say done."
    for english, chinese, line in [('"done"', '"完成"', 11), ('"a second string"', '"第二个字符串"', 7),
                                   ('"""Notes on this cell."""', '"""这个单元格的说明。"""', 1)]:
        difference = guard.code_difference(CELL, CELL.replace(english, chinese))
        assert difference == f"{BEYOND}line {line}: a string literal changed, English {english!r}, " \
                             f"translation {chinese!r}", difference
        assert review_problems(CELL, CELL.replace(english, chinese)) == [("c1", difference)]
