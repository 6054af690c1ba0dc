"""The Chinese edition (notebooks/zh/, README.zh.md) is built from the English files and translations/zh/, and keeps
up with them.

- Every translation file is complete and fresh, and each Chinese file is exactly what `ci/translate.py build` writes.
- Editing one English markdown cell makes the check fail and name that cell.
- Code: each Chinese code cell equals the English one, or equals it once comments are removed (Python's tokenizer).
What a translated cell must keep (numbers, code, links, terms) is tested in test_translation_guard.py; the documents
(TEACHING.md, README.md) in test_translation_documents.py. Nothing is executed: notebooks/zh/01 runs under nbval
(conftest.py), the others are covered by the code test.
"""

import re
import shutil

import pytest

from .translation_helpers import (
    GLOSSARY,
    PILOT,
    ROOT,
    blocks_of,
    build,
    check,
    common,
    copy_of_the_edition,
    english_cells,
    guard,
    load,
    rel,
    skeleton,
)

TRANSLATIONS = common.translation_files()
BUILT = sorted(common.zh_folder_files(ROOT))  # Chinese notebooks and documents in notebooks/zh/
BUILT_NOTEBOOKS = [path for path in BUILT if path.suffix == ".ipynb"]


def english_of(built):
    return ROOT / "notebooks" / built.relative_to(ROOT / "notebooks" / "zh")


def pilot_pair() -> tuple[dict, list]:
    return load(PILOT), blocks_of(common.translation_for(PILOT))


# ---------------------------------------------------------------------- 1. complete, fresh, and built as written


def test_the_pilot_translation_exists():
    assert common.translation_for(PILOT) in TRANSLATIONS
    assert common.built_for(PILOT) in BUILT


@pytest.mark.parametrize("translation", TRANSLATIONS, ids=rel)
def test_translation_is_complete_fresh_and_built(translation):
    report = check.file_report(common.english_for(translation), ROOT, GLOSSARY)
    assert not report.failed, "\n".join(report.lines())


def test_notebooks_zh_holds_only_built_files():
    expected = {common.built_for(common.english_for(t)) for t in TRANSLATIONS}
    assert set(BUILT) == {path for path in expected if path.is_relative_to(ROOT / "notebooks" / "zh")}
    assert expected - set(BUILT) == {ROOT / "README.zh.md"}, "run python ci/translate.py build"


def test_the_check_passes_on_the_repository():
    lines, failed = check.check()
    assert not failed, "\n".join(lines)
    # every English notebook is named: translated (a report line) or "not translated"
    for english in common.english_notebooks():
        assert any(rel(english) in line for line in lines), rel(english)


@pytest.mark.parametrize("built", BUILT_NOTEBOOKS, ids=rel)
def test_outputs_ids_and_metadata_are_the_english_ones(built):
    english, chinese = load(english_of(built)), load(built)
    assert [c["id"] for c in chinese["cells"]] == [c["id"] for c in english["cells"]]
    for en, zh in zip(english["cells"], chinese["cells"]):
        assert zh["cell_type"] == en["cell_type"] and zh["metadata"] == en["metadata"], zh["id"]
        assert zh.get("outputs") == en.get("outputs") and zh.get("execution_count") == en.get("execution_count")
    assert chinese["metadata"] == {**english["metadata"], "language": "zh-CN"}


# --------------------------------------------------------------------- 2. an English edit makes the check fail


def test_the_check_fails_and_names_the_cell_after_an_english_markdown_cell_changes(tmp_path):
    root = copy_of_the_edition(tmp_path)
    lines, failed = check.check(root)
    assert not failed, "\n".join(lines)
    english = root / rel(PILOT)
    nb = load(english)
    cell = next(c for c in nb["cells"][1:] if c["cell_type"] == "markdown")
    cell["source"][-1] += " One more sentence."
    english.write_text(build.dumps(nb), encoding="utf-8")
    lines, failed = check.check(root)
    assert failed
    stale = [line for line in lines if line.strip().startswith("stale")]
    assert len(stale) == 1 and cell["id"] in stale[0], "\n".join(lines)
    assert not any("out of date" in line for line in lines)  # the stale translation still stands in the build


def test_the_check_fails_when_notebooks_zh_is_not_the_build(tmp_path):
    root = copy_of_the_edition(tmp_path)
    english = root / rel(PILOT)
    nb = load(english)
    cell = next(c for c in nb["cells"] if c["cell_type"] == "code" and c["outputs"])
    cell["outputs"][0]["text"] = ["a new run printed this\n"]  # the English notebook was executed again
    english.write_text(build.dumps(nb), encoding="utf-8")
    lines, failed = check.check(root)
    assert failed and any("out of date" in line for line in lines)
    assert build.build(root) == [rel(common.built_for(PILOT))]
    assert check.check(root) == (check.check(root)[0], False)
    built = load(common.built_for(english, root))
    assert next(c for c in built["cells"] if c["id"] == cell["id"])["outputs"] == cell["outputs"]
    stray = root / "notebooks" / "zh" / "02_stray.ipynb"
    stray.write_text("{}", encoding="utf-8")
    assert check.check(root)[1] and build.build(root) and not stray.exists()


def test_review_names_stale_missing_and_orphan_blocks():
    nb, blocks = pilot_pair()
    markdown = [c for c in common.translatable(nb) if c["cell_type"] == "markdown"]
    nb["cells"][nb["cells"].index(markdown[0])]["source"] = ["# 01 · Solutions, edited"]
    dropped = next(b for b in blocks if b.cell_id == markdown[1]["id"])
    blocks = [b for b in blocks if b is not dropped]
    blocks.append(common.Block("cell", "gone1234", "0" * 12, "已删除的单元格"))
    report = check.review(nb, blocks, GLOSSARY)
    assert [s[0] for s in report.stale] == [markdown[0]["id"]]
    assert [m[0] for m in report.missing] == [markdown[1]["id"]]
    assert [o[0] for o in report.orphan] == ["gone1234"]


def test_a_new_notebook_fails_the_check_only_once_its_chapter_is_in_the_edition(tmp_path):
    root = copy_of_the_edition(tmp_path)
    new_solutions = root / "notebooks" / "solutions" / "02_solutions.ipynb"
    shutil.copy(PILOT, new_solutions)
    lines, failed = check.check(root)
    assert not failed and "not translated: notebooks/solutions/02_solutions.ipynb (chapter 02 is not in" in \
        "\n".join(lines)
    chapter = root / "notebooks" / "02_new_chapter.ipynb"  # the chapter's notebook is translated: 02 joins
    shutil.copy(PILOT, chapter)
    shutil.copy(common.translation_for(PILOT), common.translation_for(chapter, root))
    build.build(root)
    lines, failed = check.check(root)
    assert failed and "not translated: notebooks/solutions/02_solutions.ipynb (chapter 02 is in" in "\n".join(lines)


def test_skeleton_adds_todo_blocks_in_cell_order_and_keeps_translated_ones(tmp_path):
    root = copy_of_the_edition(tmp_path)
    english = root / rel(PILOT)
    translation = common.translation_for(english, root)
    nb, kept = load(english), common.parse(translation.read_text(encoding="utf-8"))[:3]
    translation.write_text(common.render(kept, rel(PILOT)), encoding="utf-8")
    _, added = skeleton.skeleton(english, root=root)
    blocks = common.parse(translation.read_text(encoding="utf-8"))
    assert blocks[:2] == [b for b in kept if b.kind == "cell"][:2] and added > 0
    order = [c["id"] for c in nb["cells"]]
    assert [b.cell_id for b in blocks] == sorted((b.cell_id for b in blocks), key=order.index)
    markdown = [c["id"] for c in common.translatable(nb) if c["cell_type"] == "markdown"]
    assert {b.cell_id for b in blocks if b.kind == "cell"} == set(markdown)
    todo = [b for b in blocks if b.todo]
    assert all(b.text == "".join(english_cells(translation, root)[b.cell_id]["source"]) for b in todo)
    lines, failed = check.check(root)
    assert failed and sum(line.strip().startswith("missing") for line in lines) == len(todo)
    text = translation.read_text(encoding="utf-8")
    assert skeleton.skeleton(english, root=root)[1] == 0 and translation.read_text(encoding="utf-8") == text
    skeleton.skeleton(english, code=True, root=root)  # --code: code cells with comments, the setup cell never
    code = [b for b in common.parse(translation.read_text(encoding="utf-8")) if b.kind == "code"]
    setup = next(c for c in nb["cells"] if c["cell_type"] == "code")
    assert code and setup["id"] not in {b.cell_id for b in code}
    assert all(guard.has_comment(b.text) or guard.has_docstring(b.text) for b in code)


@pytest.mark.parametrize("text,message", [
    ("stray words\n<!-- cell a1 | en 000000000000 -->\nx", "before the first block marker"),
    ("<!-- cell a1 | en 000000000000 -->\nx\n<!-- cell a1 | en 000000000000 -->\ny", "second block for cell a1"),
    ("<!-- code a1 | en 000000000000 -->\nprint(1)", "fenced block"),
])
def test_malformed_translation_files_are_rejected(text, message):
    with pytest.raises(ValueError, match=message):
        common.parse(text, "t.md")
    with pytest.raises(TypeError, match="text"):
        common.parse(None)


def test_blocks_render_and_parse_back():
    blocks = [common.Block("cell", "a1", "0123456789ab", "# 标题\n\n正文"),
              common.Block("extra", "zh-only", "", "## 只有中文版才有的一节"),
              common.Block("code", "b2", "ba9876543210", "x = 1  # 注释", todo=True)]
    assert common.parse(common.render(blocks, "notebooks/x.ipynb")) == blocks


# ------------------------------------------------------------------------------------------- 3. code identity


@pytest.mark.parametrize("built", BUILT_NOTEBOOKS, ids=rel)
def test_chinese_code_is_the_english_code(built):
    english = {c["id"]: c for c in load(english_of(built))["cells"]}
    differ = [cell["id"] for cell in load(built)["cells"] if cell["cell_type"] == "code"
              and not guard.same_code(common.source(english[cell["id"]]), common.source(cell))]
    assert not differ, f"{rel(built)}: code cells differ from the English beyond their comments: {differ}"


def test_the_pilot_translates_comments():
    nb = load(common.built_for(PILOT))
    english = {c["id"]: common.source(c) for c in load(PILOT)["cells"]}
    translated = [c["id"] for c in nb["cells"] if c["cell_type"] == "code" and common.source(c) != english[c["id"]]]
    assert len(translated) >= 3  # the setup cell and the pilot's code blocks


@pytest.mark.parametrize("chinese,same", [
    ("x = torch.softmax(s, dim=-1)  # 在最后一个轴上\n", True),  # a translated comment
    ("# 先做 softmax\n# 再返回\nx = torch.softmax(s, dim=-1)\n", True),  # comments moved onto their own lines
    ("x = torch.softmax(s, dim=-2)  # 在最后一个轴上\n", False),  # planted: a changed number
    ("x = torch.softmax(s, dim=-1.0)  # over the last axis\n", False),  # planted: 1 -> 1.0
    ("x = torch.softmax(t, dim=-1)  # over the last axis\n", False),  # planted: a renamed variable
    ('x = torch.softmax(s, dim=-1)  # over the last axis\ny = "# 不是注释"\n', False),  # a string is code
])
def test_same_code_ignores_comments_only(chinese, same):
    assert guard.same_code("x = torch.softmax(s, dim=-1)  # over the last axis\n", chinese) is same


def test_code_that_does_not_tokenize_must_be_identical():
    shell = "!ls data  # the files\n"
    assert guard.same_code(shell, shell)
    assert not guard.same_code(shell, "!ls data  # 文件\n")


def test_setup_templates_differ_in_comments_only():
    header = build.notebook_header
    english, chinese = header.SETUP_TEMPLATE, header.SETUP_TEMPLATE_ZH
    assert english != chinese and guard.same_code(english, chinese)
    assert not guard.same_code(english, chinese.replace("--depth", "--depth-planted"))


def test_review_reports_a_code_block_that_changes_code():
    nb, blocks = pilot_pair()
    block = next(b for b in blocks if b.kind == "code" and "dim=-1" in b.text)  # a cell the test can change
    block.text = re.sub(r"dim=-(\d)", lambda m: f"dim=-{int(m.group(1)) + 1}", block.text, count=1)  # planted
    report = check.review(nb, blocks, GLOSSARY)
    assert [p[0] for p in report.problems] == [block.cell_id]


def test_the_build_never_uses_a_stale_code_block():
    nb, blocks = pilot_pair()
    block = next(b for b in blocks if b.kind == "code" and "dim=-1" in b.text)  # a cell the test can change
    cell = next(c for c in nb["cells"] if c["id"] == block.cell_id)
    cell["source"] = common.lines(common.source(cell).replace("dim=-1", "dim=-1, dtype=None"))
    built = build.build_notebook(PILOT, ROOT, blocks, nb)
    out = next(c for c in built["cells"] if c["id"] == block.cell_id)
    assert common.source(out) == common.source(cell)  # the new English code, not the stale translation
