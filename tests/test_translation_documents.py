"""The edition's links, and its markdown documents (notebooks/TEACHING.md, README.md), translated section by section.

- Links and code spans naming an English notebook are rewritten to the Chinese version; `en:` links stay English.
- A document's sections are its headings; an English edit makes its Chinese section stale; `extra` blocks hold what
  only the Chinese edition says. README.zh.md is built from README.md and translations/zh/README.md, so a changed
  number in README.md fails the check even after the marker is bumped.
"""

import importlib.util
import pathlib
import re
import shutil

from shared import shakespeare

from .translation_helpers import (
    GLOSSARY,
    ROOT,
    build,
    bump,
    bump_markers,
    check,
    common,
    copy_of_the_edition,
    links,
    rel,
    skeleton,
)

README = ROOT / "README.md"
BUILT = sorted(common.zh_folder_files(ROOT))


# ----------------------------------------------------------------------------------------------------- links


def test_links_are_rewritten_for_the_chinese_folder():
    translated = {"notebooks/02_x.ipynb", "notebooks/solutions/01_solutions.ipynb"}
    text = ("[r](references.md#vaswani2017) [t](../README.md#the-notebooks) [a](02_x.ipynb) [b](03_y.ipynb) "
            "[s](solutions/01_solutions.ipynb) [w](https://example.org/a.md) [h](#top) ![f](fig.png) "
            "[e](en:02_x.ipynb)")
    assert build.rewrite_links(text, "notebooks", "notebooks/zh", translated) == (
        "[r](../references.md#vaswani2017) [t](../../README.zh.md#the-notebooks) [a](02_x.ipynb) [b](../03_y.ipynb) "
        "[s](solutions/01_solutions.ipynb) [w](https://example.org/a.md) [h](#top) ![f](../fig.png) "
        "[e](../02_x.ipynb)")
    assert build.rewrite_links("[n](../02_x.ipynb) [m](../03_y.ipynb)", "notebooks/solutions",
                               "notebooks/zh/solutions", translated) == "[n](../02_x.ipynb) [m](../../03_y.ipynb)"
    assert build.rewrite_links("[n](notebooks/02_x.ipynb) [e](en:README.md)", ".", ".", translated) == \
        "[n](notebooks/zh/02_x.ipynb) [e](README.md)"


def test_code_spans_naming_an_english_notebook_name_the_chinese_one():
    translated = {"notebooks/solutions/03_solutions.ipynb"}
    text = ("[`notebooks/solutions/03_solutions.ipynb`](solutions/03_solutions.ipynb), "
            "`notebooks/solutions/04_solutions.ipynb`, `pytest notebooks/solutions/03_solutions.ipynb`\n\n"
            "```bash\njupyter lab `notebooks/solutions/03_solutions.ipynb`\n```\n")
    assert build.rewrite_links(text, "notebooks", "notebooks/zh", translated) == (
        "[`notebooks/zh/solutions/03_solutions.ipynb`](solutions/03_solutions.ipynb), "
        "`notebooks/solutions/04_solutions.ipynb`, `pytest notebooks/solutions/03_solutions.ipynb`\n\n"
        "```bash\njupyter lab `notebooks/solutions/03_solutions.ipynb`\n```\n")  # no Chinese 04; a command; a fence


def test_no_chinese_notebook_shows_an_english_notebook_path_that_has_a_chinese_version():
    translated = common.translated_paths()
    shown = re.compile(r"`(notebooks/[A-Za-z0-9_./-]+\.(?:ipynb|md))`")
    found = [f"{rel(built)}: {path}" for built in BUILT
             for path in shown.findall(built.read_text(encoding="utf-8")) if path in translated]
    assert not found, found


def test_every_link_of_the_chinese_edition_resolves():
    """test_links.py checks every notebook's links, notebooks/zh/ and README.zh.md included; this says so."""
    spec_links = importlib.util.spec_from_file_location("test_links", ROOT / "tests" / "test_links.py")
    module = importlib.util.module_from_spec(spec_links)
    spec_links.loader.exec_module(module)
    checked = {path for path, _ in module.SOURCES}
    assert ROOT / "README.zh.md" in checked and set(BUILT) <= checked


def test_links_rewrite_targets_one_at_a_time():
    rewrite = links.Links(".", ".", frozenset({"notebooks/01_x.ipynb"}))
    assert rewrite.target("notebooks/01_x.ipynb#setup") == "notebooks/zh/01_x.ipynb#setup"
    assert rewrite.target("en:notebooks/01_x.ipynb") == "notebooks/01_x.ipynb"
    assert rewrite.target("README.md#data") == "README.zh.md#data"
    assert rewrite.span("notebooks/01_x.ipynb") == "notebooks/zh/01_x.ipynb" and rewrite.span("shared/") == "shared/"


# ---------------------------------------------------------------------------------------------------- README


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
    top = README.read_text(encoding="utf-8").splitlines()[:5]
    assert any("](README.zh.md)" in line for line in top)
    assert '<a id="the-notebooks"></a>' in text  # English notebooks link ../README.md#the-notebooks


def test_readme_zh_is_built_from_every_section_of_readme():
    translation = common.translation_for(README)
    assert translation == ROOT / "translations" / "zh" / "README.md"
    assert common.built_for(README) == ROOT / "README.zh.md"
    blocks = {b.cell_id for b in common.read_blocks(README) if b.kind == "cell"}
    assert blocks == {cell["id"] for cell in common.load_english(README)["cells"]}
    assert (ROOT / "README.zh.md").read_text(encoding="utf-8") == build.built_text(README)


def test_readme_zh_tells_learners_in_mainland_china_how_to_get_what_is_blocked():
    text = (ROOT / "README.zh.md").read_text(encoding="utf-8")
    assert "pip config set global.index-url" in text and " -i " in text
    assert shakespeare.SHA256 in text and f"data/{shakespeare.FILE_NAME}" in text and shakespeare.PATH_ENV in text
    assert shakespeare.URL.split("/")[2] in text  # the host that is often unreachable
    corpus = ROOT / "data" / shakespeare.FILE_NAME
    if corpus.exists() and shakespeare.sha256_of(corpus) == shakespeare.SHA256:
        assert f"{corpus.stat().st_size:,}" in text
    assert "JupyterHub" in text and "jupyter lab notebooks/" in text


def test_a_changed_readme_number_fails_the_check_after_only_the_marker_is_bumped(tmp_path):
    root = copy_of_the_edition(tmp_path, README)
    english = root / "README.md"
    bump_markers(root, english)  # a copy fresh to begin with, whatever the translators are doing meanwhile
    before = [line for line in check.check(root)[0] if line.startswith("  problem")]
    english.write_text(english.read_text(encoding="utf-8").replace("(about 1 MB)", "(about 6 MB)"), encoding="utf-8")
    lines, failed = check.check(root)
    assert failed and any(line.strip().startswith("stale    data:") for line in lines), "\n".join(lines)
    assert bump_markers(root, english) == 1
    lines, failed = check.check(root)
    new = [line for line in lines if line.startswith("  problem") and line not in before]
    assert failed and new == ["  problem  data: the English number 6 is missing"], "\n".join(lines)


# ----------------------------------------------------------------------------------- a document, in general

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
    nb = common.document_cells(GUIDE)
    ids = [cell["id"] for cell in nb["cells"]]
    assert ids == ["teaching-with-this-course", "two-schedules", "01-attention", "01-attention-2"]
    assert "# not a heading" in common.source(nb["cells"][1])
    assert "\n\n".join(common.source(cell) for cell in nb["cells"]) + "\n" == GUIDE


def guide_edition(tmp_path: pathlib.Path) -> pathlib.Path:
    """A repository in tmp_path holding GUIDE as notebooks/TEACHING.md, translated and built, and the glossary."""
    (tmp_path / "notebooks").mkdir()
    shutil.copy(ROOT / "notebooks" / "glossary.md", tmp_path / "notebooks" / "glossary.md")
    english = tmp_path / "notebooks" / "TEACHING.md"
    english.write_text(GUIDE, encoding="utf-8")
    target, added = skeleton.skeleton(english, root=tmp_path)
    assert added == 4 and target == tmp_path / "translations" / "zh" / "TEACHING.md"
    chinese = {"teaching-with-this-course": "# 用本课程教学\n\n介绍 2 种课程安排。",
               "two-schedules": "## 两种课程安排\n\n```bash\n# 不是标题：在代码块里\npytest\n```",
               "01-attention": ("### 01 · 注意力\n\n[笔记本](01_scaled_dot_product_attention.ipynb) · "
                                "运行时间约 10 秒。"),
               "01-attention-2": "### 01 · 注意力\n\n同一标题的第二节。"}
    blocks = common.parse(target.read_text(encoding="utf-8"))
    for block in blocks:
        block.text, block.todo = chinese[block.cell_id], False
    blocks.insert(2, common.Block("extra", "zh-note", "", "## 只在中文版中\n\n[回到开头](#top)"))
    target.write_text(common.render(blocks, "notebooks/TEACHING.md"), encoding="utf-8")
    bump.bump(english, [], all_fresh=True, root=tmp_path)  # a new translation's English is stored
    assert build.build(tmp_path) == ["notebooks/zh/TEACHING.md"]
    return tmp_path


def test_a_document_is_built_translated_with_links_for_the_chinese_folder(tmp_path):
    root = guide_edition(tmp_path)
    built = (root / "notebooks" / "zh" / "TEACHING.md").read_text(encoding="utf-8")
    assert "# 用本课程教学" in built and "同一标题的第二节。" in built and "Teaching with" not in built
    assert "[笔记本](../01_scaled_dot_product_attention.ipynb)" in built  # 01 has no Chinese version here
    assert built.index("## 两种课程安排") < built.index("## 只在中文版中") < built.index("### 01 · 注意力")
    lines, failed = check.check(root)
    assert not failed, "\n".join(lines)
    assert any(line.strip().startswith("extra    zh-note") for line in lines)


def test_editing_a_document_section_makes_the_check_name_it(tmp_path):
    root = guide_edition(tmp_path)
    english = root / "notebooks" / "TEACHING.md"
    english.write_text(GUIDE.replace("about 10 s", "about 12 s"), encoding="utf-8")
    lines, failed = check.check(root)
    stale = [line for line in lines if line.strip().startswith("stale")]
    assert failed and len(stale) == 1 and "01-attention:" in stale[0], "\n".join(lines)
    english.write_text(GUIDE + "\n## A new section\n\nMore.\n", encoding="utf-8")
    lines, failed = check.check(root)
    assert failed and any("missing  a-new-section" in line for line in lines), "\n".join(lines)
    skeleton.skeleton(english, root=root)  # the extra block keeps its place after the block before it
    ids = [b.cell_id for b in common.read_blocks(english, root)]
    assert ids.index("zh-note") == ids.index("two-schedules") + 1 and ids[-1] == "a-new-section"


def test_an_extra_block_belongs_in_a_document_only():
    nb = common.document_cells("# Title\n")
    blocks = [common.Block("cell", "title", common.cell_hash("# Title"), "# 标题"),
              common.Block("extra", "note", "", "附注")]
    assert check.review(nb, blocks, GLOSSARY, document=True).extra == ["note"]
    assert check.review(nb, blocks, GLOSSARY).orphan == [("note", "an extra block belongs in a document, not a "
                                                                  "notebook")]


def test_a_document_without_a_translation_is_named_but_does_not_fail(tmp_path):
    (tmp_path / "notebooks").mkdir()
    shutil.copy(ROOT / "notebooks" / "glossary.md", tmp_path / "notebooks" / "glossary.md")
    (tmp_path / "notebooks" / "TEACHING.md").write_text(GUIDE, encoding="utf-8")
    lines, failed = check.check(tmp_path)
    assert not failed and "not translated: notebooks/TEACHING.md (a document joins the edition" in "\n".join(lines)
