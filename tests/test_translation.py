"""The Chinese edition (notebooks/zh/) is built from the English notebooks and translations/zh/, and keeps up with them.

- Every translation file is complete and fresh, and notebooks/zh/ is exactly what `ci/translate.py build` writes.
- Editing one English markdown cell makes the check fail and name that cell.
- Code: each Chinese code cell equals the English one, or equals it once comments are removed (Python's tokenizer).
- Numbers: every number of an English markdown cell appears in its translation.
- Terms: the glossary's Chinese term wherever the English uses a core term; none of the glossary's words to avoid.
- README.zh.md gives README.md's two commands and links every Chinese notebook.
Nothing is executed: notebooks/zh/01 runs under nbval (conftest.py), the others are covered by the code test.
"""

import importlib.util
import json
import pathlib
import re
import shutil
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("translate", ROOT / "ci" / "translate.py")
translate = importlib.util.module_from_spec(spec)
sys.modules["translate"] = translate  # its dataclasses look their module up there
spec.loader.exec_module(translate)

TRANSLATIONS = translate.translation_files()
BUILT = sorted(translate._built_notebooks(ROOT))  # Chinese notebooks and documents
BUILT_NOTEBOOKS = [path for path in BUILT if path.suffix == ".ipynb"]
GLOSSARY = translate.glossary()
PILOT = ROOT / "notebooks" / "solutions" / "01_solutions.ipynb"  # the first translated notebook


def rel(path: pathlib.Path) -> str:
    return path.relative_to(ROOT).as_posix()


def english_of(built: pathlib.Path) -> pathlib.Path:
    return ROOT / "notebooks" / built.relative_to(ROOT / "notebooks" / "zh")


def load(path: pathlib.Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def blocks_of(translation: pathlib.Path) -> list:
    return translate.parse(translation.read_text(encoding="utf-8"), rel(translation))


def english_cells(translation: pathlib.Path, root: pathlib.Path = ROOT) -> dict:
    """The English cells by id (for a markdown document, its sections, as translate.load_english makes them)."""
    return {cell["id"]: cell for cell in translate.load_english(translate.english_for(translation, root))["cells"]}


def pilot_pair() -> tuple[dict, list]:
    return load(PILOT), blocks_of(translate.translation_for(PILOT))


# ---------------------------------------------------------------------- 1. complete, fresh, and built as written


def test_the_pilot_translation_exists():
    assert translate.translation_for(PILOT) in TRANSLATIONS
    assert translate.built_for(PILOT) in BUILT


@pytest.mark.parametrize("translation", TRANSLATIONS, ids=rel)
def test_translation_is_complete_fresh_and_built(translation):
    report = translate.file_report(translate.english_for(translation), ROOT, GLOSSARY)
    assert not report.failed, "\n".join(report.lines())


def test_notebooks_zh_holds_only_built_notebooks():
    expected = {translate.built_for(translate.english_for(t)) for t in TRANSLATIONS}
    assert set(BUILT) == expected, "run python ci/translate.py build"


def test_the_check_passes_on_the_repository():
    lines, failed = translate.check()
    assert not failed, "\n".join(lines)
    # every English notebook is named: translated (a report line) or "not translated"
    for english in translate.english_notebooks():
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


def copy_of_the_edition(tmp_path: pathlib.Path) -> pathlib.Path:
    """A repository in tmp_path with the pilot's English notebook, translation, built notebook and the glossary."""
    english = translate.english_for(translate.translation_for(PILOT))
    for path in (english, translate.translation_for(PILOT), translate.built_for(PILOT),
                 ROOT / "notebooks" / "glossary.md"):
        target = tmp_path / path.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
    translate.build(tmp_path)  # links to other Chinese notebooks depend on which exist: build for this copy
    return tmp_path


def test_the_check_fails_and_names_the_cell_after_an_english_markdown_cell_changes(tmp_path):
    root = copy_of_the_edition(tmp_path)
    lines, failed = translate.check(root)
    assert not failed, "\n".join(lines)
    english = root / rel(PILOT)
    nb = load(english)
    cell = next(c for c in nb["cells"][1:] if c["cell_type"] == "markdown")
    cell["source"][-1] += " One more sentence."
    english.write_text(translate.dumps(nb), encoding="utf-8")
    lines, failed = translate.check(root)
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
    english.write_text(translate.dumps(nb), encoding="utf-8")
    lines, failed = translate.check(root)
    assert failed and any("out of date" in line for line in lines)
    assert translate.build(root) == [rel(translate.built_for(PILOT))]
    assert translate.check(root) == (translate.check(root)[0], False)
    built = load(translate.built_for(english, root))
    assert next(c for c in built["cells"] if c["id"] == cell["id"])["outputs"] == cell["outputs"]
    stray = root / "notebooks" / "zh" / "02_stray.ipynb"
    stray.write_text("{}", encoding="utf-8")
    assert translate.check(root)[1] and translate.build(root) and not stray.exists()


def test_review_names_stale_missing_and_orphan_blocks():
    nb, blocks = pilot_pair()
    markdown = [c for c in translate.translatable(nb) if c["cell_type"] == "markdown"]
    nb["cells"][nb["cells"].index(markdown[0])]["source"] = ["# 01 · Solutions, edited"]
    dropped = next(b for b in blocks if b.cell_id == markdown[1]["id"])
    blocks = [b for b in blocks if b is not dropped]
    blocks.append(translate.Block("cell", "gone1234", "0" * 12, "已删除的单元格"))
    report = translate.review(nb, blocks, GLOSSARY)
    assert [s[0] for s in report.stale] == [markdown[0]["id"]]
    assert [m[0] for m in report.missing] == [markdown[1]["id"]]
    assert [o[0] for o in report.orphan] == ["gone1234"]


def test_a_new_notebook_fails_the_check_only_once_its_chapter_is_in_the_edition(tmp_path):
    root = copy_of_the_edition(tmp_path)
    new_solutions = root / "notebooks" / "solutions" / "02_solutions.ipynb"
    shutil.copy(PILOT, new_solutions)
    lines, failed = translate.check(root)
    assert not failed and "not translated: notebooks/solutions/02_solutions.ipynb (chapter 02 is not in" in \
        "\n".join(lines)
    chapter = root / "notebooks" / "02_new_chapter.ipynb"  # the chapter's notebook is translated: 02 joins
    shutil.copy(PILOT, chapter)
    shutil.copy(translate.translation_for(PILOT), translate.translation_for(chapter, root))
    translate.build(root)
    lines, failed = translate.check(root)
    assert failed and "not translated: notebooks/solutions/02_solutions.ipynb (chapter 02 is in" in "\n".join(lines)


def test_skeleton_adds_todo_blocks_in_cell_order_and_keeps_translated_ones(tmp_path):
    root = copy_of_the_edition(tmp_path)
    english = root / rel(PILOT)
    translation = translate.translation_for(english, root)
    nb, kept = load(english), translate.parse(translation.read_text(encoding="utf-8"))[:3]
    translation.write_text(translate.render(kept, rel(PILOT)), encoding="utf-8")
    _, added = translate.skeleton(english, root=root)
    blocks = translate.parse(translation.read_text(encoding="utf-8"))
    assert blocks[:2] == [b for b in kept if b.kind == "cell"][:2] and added > 0
    order = [c["id"] for c in nb["cells"]]
    assert [b.cell_id for b in blocks] == sorted((b.cell_id for b in blocks), key=order.index)
    markdown = [c["id"] for c in translate.translatable(nb) if c["cell_type"] == "markdown"]
    assert {b.cell_id for b in blocks if b.kind == "cell"} == set(markdown)
    todo = [b for b in blocks if b.todo]
    assert all(b.text == "".join(english_cells(translation, root)[b.cell_id]["source"]) for b in todo)
    lines, failed = translate.check(root)
    assert failed and sum(line.strip().startswith("missing") for line in lines) == len(todo)
    text = translation.read_text(encoding="utf-8")
    assert translate.skeleton(english, root=root)[1] == 0 and translation.read_text(encoding="utf-8") == text
    translate.skeleton(english, code=True, root=root)  # --code: code cells with comments, the setup cell never
    code = [b for b in translate.parse(translation.read_text(encoding="utf-8")) if b.kind == "code"]
    setup = next(c for c in nb["cells"] if c["cell_type"] == "code")
    assert code and setup["id"] not in {b.cell_id for b in code}
    assert all(translate.has_comment(b.text) for b in code)


@pytest.mark.parametrize("text,message", [
    ("stray words\n<!-- cell a1 | en 000000000000 -->\nx", "before the first block marker"),
    ("<!-- cell a1 | en 000000000000 -->\nx\n<!-- cell a1 | en 000000000000 -->\ny", "second block for cell a1"),
    ("<!-- code a1 | en 000000000000 -->\nprint(1)", "fenced block"),
])
def test_malformed_translation_files_are_rejected(text, message):
    with pytest.raises(ValueError, match=message):
        translate.parse(text, "t.md")
    with pytest.raises(TypeError, match="text"):
        translate.parse(None)


def test_blocks_render_and_parse_back():
    blocks = [translate.Block("cell", "a1", "0123456789ab", "# 标题\n\n正文"),
              translate.Block("code", "b2", "ba9876543210", "x = 1  # 注释", todo=True)]
    assert translate.parse(translate.render(blocks, "notebooks/x.ipynb")) == blocks


# ------------------------------------------------------------------------------------------- 3. code identity


@pytest.mark.parametrize("built", BUILT_NOTEBOOKS, ids=rel)
def test_chinese_code_is_the_english_code(built):
    english = {c["id"]: c for c in load(english_of(built))["cells"]}
    differ = [cell["id"] for cell in load(built)["cells"] if cell["cell_type"] == "code"
              and not translate.same_code(translate.source(english[cell["id"]]), translate.source(cell))]
    assert not differ, f"{rel(built)}: code cells differ from the English beyond their comments: {differ}"


def test_the_pilot_translates_comments():
    nb = load(translate.built_for(PILOT))
    english = {c["id"]: translate.source(c) for c in load(PILOT)["cells"]}
    translated = [c["id"] for c in nb["cells"] if c["cell_type"] == "code" and translate.source(c) != english[c["id"]]]
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
    assert translate.same_code("x = torch.softmax(s, dim=-1)  # over the last axis\n", chinese) is same


def test_code_that_does_not_tokenize_must_be_identical():
    shell = "!ls data  # the files\n"
    assert translate.same_code(shell, shell)
    assert not translate.same_code(shell, "!ls data  # 文件\n")


def test_setup_templates_differ_in_comments_only():
    header = translate.notebook_header
    english, chinese = header.SETUP_TEMPLATE, header.SETUP_TEMPLATE_ZH
    assert english != chinese and translate.same_code(english, chinese)
    assert not translate.same_code(english, chinese.replace("--depth", "--depth-planted"))


def test_review_reports_a_code_block_that_changes_code():
    nb, blocks = pilot_pair()
    block = next(b for b in blocks if b.kind == "code")
    block.text = re.sub(r"dim=-(\d)", lambda m: f"dim=-{int(m.group(1)) + 1}", block.text, count=1)  # planted
    report = translate.review(nb, blocks, GLOSSARY)
    assert [p[0] for p in report.problems] == [block.cell_id]


def test_the_build_never_uses_a_stale_code_block():
    nb, blocks = pilot_pair()
    block = next(b for b in blocks if b.kind == "code")
    cell = next(c for c in nb["cells"] if c["id"] == block.cell_id)
    cell["source"] = translate._lines(translate.source(cell).replace("dim=-1", "dim=-1, dtype=None"))
    built = translate.build_notebook(PILOT, ROOT, blocks, nb)
    out = next(c for c in built["cells"] if c["id"] == block.cell_id)
    assert translate.source(out) == translate.source(cell)  # the new English code, not the stale translation


# ---------------------------------------------------------------------------------------------------- 4. numbers


def test_numbers_are_normalised():
    text = "1,115,394 characters, loss -0.138, 10 % faster, d_k=64, (1, 2) and 3.5e-4"
    assert translate.numbers(text) == {"1115394", "0.138", "10", "64", "1", "2", "3.5", "4"}
    assert translate.numbers("1115394 个字符") == translate.numbers("1,115,394 characters")


@pytest.mark.parametrize("translation", TRANSLATIONS, ids=rel)
def test_every_number_of_the_english_is_in_the_translation(translation):
    cells, lost = english_cells(translation), []
    for block in blocks_of(translation):
        if block.kind == "cell" and not block.todo and block.cell_id in cells:
            missing = translate.numbers(translate.source(cells[block.cell_id])) - translate.numbers(block.text)
            lost += [f"{block.cell_id}: {sorted(missing)}"] if missing else []
    assert not lost, f"{rel(translation)}: numbers of the English missing from the translation: {lost}"


def test_a_dropped_number_is_reported():
    nb, blocks = pilot_pair()
    block = next(b for b in blocks if b.kind == "cell" and re.search(r"\d", b.text) and "练习 1" in b.text)
    block.text = block.text.replace("练习 1", "练习一")  # planted: the digit spelled out
    report = translate.review(nb, blocks, GLOSSARY)
    assert report.problems == [(block.cell_id, "numbers of the English missing: 1")]


# ------------------------------------------------------------------------------------------------ 5. terminology

ISSUE_TERMS = {  # the terms the Chinese edition fixed once (issue 19); the glossary's 中文 column must agree
    "attention": "注意力", "scaled dot-product attention": "缩放点积注意力", "multi-head attention": "多头注意力",
    "mask": "掩码", "padding mask": "填充掩码", "causal mask": "因果掩码", "positional encoding": "位置编码",
    "residual connection": "残差连接", "layer normalization": "层归一化", "feed-forward network (FFN)": "前馈网络",
    "encoder": "编码器", "decoder": "解码器", "cross-attention": "交叉注意力", "teacher forcing": "教师强制",
    "greedy decoding": "贪心解码", "beam search": "束搜索", "exposure bias": "曝光偏差", "label smoothing": "标签平滑",
    "learning-rate warm-up": "学习率预热", "KV cache": "KV 缓存", "RoPE": "旋转位置编码",
}


def test_the_glossary_holds_the_core_terms_and_words_to_avoid():
    terms, avoid = GLOSSARY
    assert {term: terms[term] for term in translate.CORE_TERMS} == ISSUE_TERMS
    assert set(ISSUE_TERMS) == set(translate.CORE_TERMS)
    avoided = {word for word, _, _ in avoid}
    assert {"遮罩", "蒙版", "前向网络", "位置嵌入"} <= avoided
    assert not avoided & set(terms.values()), "a word to avoid is also a glossary term"


@pytest.mark.parametrize("translation", TRANSLATIONS, ids=rel)
def test_translations_use_the_glossary_terms(translation):
    cells, problems = english_cells(translation), []
    for block in blocks_of(translation):
        if block.kind == "cell" and not block.todo and block.cell_id in cells:
            english = translate.source(cells[block.cell_id])
            problems += [f"{block.cell_id}: {p}" for p in translate.term_problems(english, block.text, *GLOSSARY)]
    assert not problems, f"{rel(translation)}:\n" + "\n".join(problems)


ENGLISH = "A padding **mask** hides keys; see [the KV cache](08_char_gpt.ipynb)."


@pytest.mark.parametrize("chinese,expected", [
    ("填充掩码（padding mask）会遮住键；见 [KV 缓存](08_char_gpt.ipynb)。", []),
    ("填充掩码会遮住键；见 [KV缓存](08_char_gpt.ipynb)。", []),  # with or without the space after KV
    ("填充遮罩会遮住键；见 [KV 缓存](08_char_gpt.ipynb)。", ["'mask'", "'padding mask'", "'遮罩'"]),  # planted
    ("填充掩码会遮住键；见 [键值对缓存](08_char_gpt.ipynb)。", ["'KV cache'"]),  # planted: another word
])
def test_term_problems_name_the_missing_term_and_the_word_to_avoid(chinese, expected):
    problems = translate.term_problems(ENGLISH, chinese, *GLOSSARY)
    assert len(problems) == len(expected) and all(e in p for e, p in zip(expected, problems)), problems


def test_terms_inside_code_links_and_math_are_ignored():
    english = "Call `causal_mask(T)` or read [this](https://example.org/attention) on $\\text{mask}$."
    assert translate.term_problems(english, "调用 `causal_mask(T)`，或阅读[这篇](https://example.org/attention)。",
                                   *GLOSSARY) == []
    assert translate.term_problems("A mask.", "一个掩码，不是 `遮罩`。", *GLOSSARY) == []


def test_a_word_to_avoid_is_allowed_where_the_english_says_it():
    english = "Learned position embeddings end at max_len; a positional encoding does not."
    assert translate.term_problems(english, "可学习的位置嵌入止于 max_len，位置编码则不然。", *GLOSSARY) == []
    assert translate.term_problems("A positional encoding.", "一个位置嵌入。", *GLOSSARY)


def test_review_reports_a_planted_wrong_term():
    nb, blocks = pilot_pair()
    block = next(b for b in blocks if "键（key）" in b.text)
    block.text = block.text.replace("在键（key）上做 softmax", "对遮罩后的键（key）做 softmax")  # planted
    report = translate.review(nb, blocks, GLOSSARY)
    assert report.problems and "遮罩" in report.problems[0][1]


# ------------------------------------------------------------------------------------------- 6. links and README


def test_links_are_rewritten_for_the_chinese_folder():
    translated = {"notebooks/02_x.ipynb", "notebooks/solutions/01_solutions.ipynb"}
    text = ("[r](references.md#vaswani2017) [t](../README.md#the-notebooks) [a](02_x.ipynb) [b](03_y.ipynb) "
            "[s](solutions/01_solutions.ipynb) [w](https://example.org/a.md) [h](#top) ![f](fig.png)")
    assert translate.rewrite_links(text, "notebooks", "notebooks/zh", translated) == (
        "[r](../references.md#vaswani2017) [t](../../README.zh.md#the-notebooks) [a](02_x.ipynb) [b](../03_y.ipynb) "
        "[s](solutions/01_solutions.ipynb) [w](https://example.org/a.md) [h](#top) ![f](../fig.png)")
    assert translate.rewrite_links("[n](../02_x.ipynb) [m](../03_y.ipynb)", "notebooks/solutions",
                                   "notebooks/zh/solutions", translated) == "[n](../02_x.ipynb) [m](../../03_y.ipynb)"


def test_every_link_of_the_chinese_edition_resolves():
    """test_links.py checks every notebook's links, notebooks/zh/ and README.zh.md included; this says so."""
    spec_links = importlib.util.spec_from_file_location("test_links", ROOT / "tests" / "test_links.py")
    links = importlib.util.module_from_spec(spec_links)
    spec_links.loader.exec_module(links)
    checked = {path for path, _ in links.SOURCES}
    assert ROOT / "README.zh.md" in checked and set(BUILT) <= checked


def bash_commands(readme: str) -> list[str]:
    """The commands of the first ```bash block, without their comments."""
    block = re.search(r"```bash\n(.*?)```", (ROOT / readme).read_text(encoding="utf-8"), flags=re.DOTALL)
    return [line.split("#", 1)[0].strip() for line in block.group(1).splitlines()]


def test_readme_zh_gives_the_same_two_commands():
    assert bash_commands("README.zh.md") == bash_commands("README.md") == ["pip install -r requirements.txt", "pytest"]


def test_readme_zh_links_every_chinese_notebook_and_readme_links_it():
    text = (ROOT / "README.zh.md").read_text(encoding="utf-8")
    unlinked = [rel(path) for path in BUILT if f"]({rel(path)})" not in text]
    assert not unlinked, f"README.zh.md does not link: {unlinked}"
    top = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:5]
    assert any("](README.zh.md)" in line for line in top)
    assert '<a id="the-notebooks"></a>' in text  # English notebooks link ../README.md#the-notebooks


# ------------------------------------------------------------------------- 7. markdown documents (TEACHING.md)

GUIDE = """# Teaching with this course

Intro with 2 schedules.

## Two schedules

```bash
# not a heading: inside a code fence
pytest
```

### 01 · Attention

[Notebook](01_scaled_dot_product_attention.ipynb) · run time about 10 s.

### 01 · Attention

A second section with the same heading.
"""


def test_a_document_splits_into_sections_at_headings_outside_code_fences():
    nb = translate.document_cells(GUIDE)
    ids = [cell["id"] for cell in nb["cells"]]
    assert ids == ["teaching-with-this-course", "two-schedules", "01-attention", "01-attention-2"]
    assert "# not a heading" in translate.source(nb["cells"][1])
    assert "\n\n".join(translate.source(cell) for cell in nb["cells"]) + "\n" == GUIDE


def guide_edition(tmp_path: pathlib.Path) -> pathlib.Path:
    """A repository in tmp_path holding GUIDE as notebooks/TEACHING.md, translated and built, and the glossary."""
    (tmp_path / "notebooks").mkdir()
    shutil.copy(ROOT / "notebooks" / "glossary.md", tmp_path / "notebooks" / "glossary.md")
    english = tmp_path / "notebooks" / "TEACHING.md"
    english.write_text(GUIDE, encoding="utf-8")
    target, added = translate.skeleton(english, root=tmp_path)
    assert added == 4 and target == tmp_path / "translations" / "zh" / "TEACHING.md"
    chinese = {"teaching-with-this-course": "# 用本课程教学\n\n介绍 2 种课程安排。",
               "two-schedules": "## 两种课程安排\n\n```bash\n# 不是标题：在代码块里\npytest\n```",
               "01-attention": ("### 01 · 注意力\n\n[笔记本](01_scaled_dot_product_attention.ipynb) · "
                                "运行时间约 10 秒。"),
               "01-attention-2": "### 01 · 注意力\n\n同一标题的第二节。"}
    blocks = translate.parse(target.read_text(encoding="utf-8"))
    for block in blocks:
        block.text, block.todo = chinese[block.cell_id], False
    target.write_text(translate.render(blocks, "notebooks/TEACHING.md"), encoding="utf-8")
    assert translate.build(tmp_path) == ["notebooks/zh/TEACHING.md"]
    return tmp_path


def test_a_document_is_built_translated_with_links_for_the_chinese_folder(tmp_path):
    root = guide_edition(tmp_path)
    built = (root / "notebooks" / "zh" / "TEACHING.md").read_text(encoding="utf-8")
    assert "# 用本课程教学" in built and "同一标题的第二节。" in built and "Teaching with" not in built
    assert "[笔记本](../01_scaled_dot_product_attention.ipynb)" in built  # 01 has no Chinese version here
    lines, failed = translate.check(root)
    assert not failed, "\n".join(lines)


def test_editing_a_document_section_makes_the_check_name_it(tmp_path):
    root = guide_edition(tmp_path)
    english = root / "notebooks" / "TEACHING.md"
    english.write_text(GUIDE.replace("about 10 s", "about 12 s"), encoding="utf-8")
    lines, failed = translate.check(root)
    stale = [line for line in lines if line.strip().startswith("stale")]
    assert failed and len(stale) == 1 and "01-attention:" in stale[0], "\n".join(lines)
    english.write_text(GUIDE + "\n## A new section\n\nMore.\n", encoding="utf-8")
    lines, failed = translate.check(root)
    assert failed and any("missing  a-new-section" in line for line in lines), "\n".join(lines)


def test_a_document_without_a_translation_is_named_but_does_not_fail(tmp_path):
    (tmp_path / "notebooks").mkdir()
    shutil.copy(ROOT / "notebooks" / "glossary.md", tmp_path / "notebooks" / "glossary.md")
    (tmp_path / "notebooks" / "TEACHING.md").write_text(GUIDE, encoding="utf-8")
    lines, failed = translate.check(tmp_path)
    assert not failed and "not translated: notebooks/TEACHING.md (a document joins the edition" in "\n".join(lines)
