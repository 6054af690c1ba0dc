"""The glossary's choices for three terms the Chinese edition once said in several ways hold in every translation file.

- n-gram is n 元语法 (d2l-zh's word, and the course's own 二元语法), never n 元组 (a tuple): the glossary's words to
  avoid hold that in prose; here it is held in code comments too.
- dropout is 暂退法: the English word stands in Chinese prose only as the first use's gloss, 暂退法（dropout）, once per
  file at most.
- learned position embedding has one name, 可学习的位置嵌入 (its table may be called 可学习的位置表), never
  可学习的位置编码, 可学习位置 or a bare 可学习的位置.
A gloss in brackets is never inside another bracket (（…（English）…）).
The words are looked for in each translation file's markdown (without code, math and links: guard.prose), and n 元组
and the learned-position names in its code blocks' comments and translated docstrings too (a comment may name the
attribute `dropout`).
"""

import re

import pytest

from .translation_helpers import GLOSSARY, ROOT, common, guard, rel, terms

TRANSLATIONS = common.translation_files()
N_TUPLE = re.compile(r"(?<![A-Za-z])[nN0-9]\s*元组")  # 'n 元组', 'n元组', '4 元组'; 二元组 (a pair) is a tuple
DROPOUT = re.compile(r"(?<![A-Za-z_])dropout(?![A-Za-z_])", flags=re.IGNORECASE)
DROPOUT_GLOSS = re.compile(r"暂退法\s*[（(]\s*dropout\s*[）)]", flags=re.IGNORECASE)
LEARNED_POSITION = re.compile(r"可学习的?\s*位置(?!\s*嵌入|\s*表)")


def texts(translation, comments=True):
    """(cell id, what a reader reads) for every translated block: the prose of a markdown block, the comments and
    docstrings of a code block (unless `comments` is False); a todo block is still English and is left out."""
    for block in common.parse(translation.read_text(encoding="utf-8"), translation.name):
        if block.todo or (block.kind == "code" and not comments):
            continue
        if block.kind == "code":
            yield block.cell_id, guard.comments(block.text, with_docstrings=True)
        else:  # a word a guard-skip line exempts is named, not used (the glossary's table of words to avoid)
            skipped, _ = guard.exemptions(block.text)
            prose = guard.prose(common.published(block.text))
            for word in sorted(skipped, key=len, reverse=True):
                prose = prose.replace(word, " ")
            yield block.cell_id, prose


def n_tuples(text):
    return N_TUPLE.findall(text)


def bare_dropouts(text):
    """The English word dropout outside the gloss 暂退法（dropout）."""
    return DROPOUT.findall(DROPOUT_GLOSS.sub(" ", text))


def learned_position_names(text):
    return [match.group(0) for match in LEARNED_POSITION.finditer(text)]


def test_the_glossary_holds_the_choices():
    rows, avoid = GLOSSARY
    assert terms.chinese_term(rows["no-repeat n-gram"]) == "禁止重复 n 元语法"
    assert rows["dropout"] == "暂退法（dropout）"
    assert terms.chinese_term(rows["learned position embedding"]) == "可学习的位置嵌入"
    assert terms.chinese_term(rows["batch normalization"]) == "批量归一化"
    assert "d2l-zh 译作批量规范化" in rows["batch normalization"]
    avoided = {word for word, _, _ in avoid}
    assert {"n 元组", "n元组", "可学习的位置编码", "可学习位置", "采样旋钮", "采样游乐场"} <= avoided


@pytest.mark.parametrize("translation", TRANSLATIONS, ids=lambda p: rel(p))
def test_no_n_tuple_for_n_gram(translation):
    found = [(cell_id, hit) for cell_id, text in texts(translation) for hit in n_tuples(text)]
    assert not found, f"{rel(translation)}: n-gram is n 元语法 (glossary), not {found}"


@pytest.mark.parametrize("translation", TRANSLATIONS, ids=lambda p: rel(p))
def test_dropout_is_said_as_zan_tui_fa(translation):
    prose = list(texts(translation, comments=False))
    bare = [cell_id for cell_id, text in prose if bare_dropouts(text)]
    assert not bare, f"{rel(translation)}: 'dropout' outside 暂退法（dropout） in blocks {bare}"
    glossed = [cell_id for cell_id, text in prose for _ in DROPOUT_GLOSS.finditer(text)]
    assert len(glossed) <= 1, f"{rel(translation)}: 暂退法（dropout） glossed in {glossed}: at its first use only"


@pytest.mark.parametrize("translation", TRANSLATIONS, ids=lambda p: rel(p))
def test_learned_position_embedding_has_one_name(translation):
    found = [(cell_id, name) for cell_id, text in texts(translation) for name in learned_position_names(text)]
    assert not found, f"{rel(translation)}: learned positions are 可学习的位置嵌入 (glossary), not {found}"


def nested_brackets(text):
    """The places where a full-width bracket opens inside another: （…（English）…）, an aside inside an aside."""
    found, depth = [], 0
    for index, char in enumerate(text):
        if char == "\n":
            depth = 0
        elif char == "（":
            depth += 1
            if depth == 2:
                found.append(text[max(0, index - 20):index + 20])
        elif char == "）":
            depth = max(0, depth - 1)
    return found


@pytest.mark.parametrize("translation", TRANSLATIONS, ids=lambda p: rel(p))
def test_no_brackets_inside_brackets(translation):
    """A term's English gloss is in brackets, so the sentence around it keeps its asides out of brackets."""
    found = [(cell_id, place) for cell_id, text in texts(translation, comments=False)
             for place in nested_brackets(text)]
    assert not found, f"{rel(translation)}: brackets inside brackets in {found}"


def test_the_bracket_rule_catches_the_old_text_of_notebook_08():
    old = "用课程中的模块组装出一个 GPT（前置层归一化（Pre-LN）块、GELU、可学习的位置、权重绑定（weight tying））。"
    assert len(nested_brackets(old)) == 2
    assert not nested_brackets("用课程中的模块组装出一个 GPT：前置层归一化（Pre-LN）块、权重绑定（weight tying）。")


@pytest.mark.parametrize("text, n_tuple, dropout, learned", [
    ("禁止重复 n 元组（no-repeat n-gram）", 1, 0, 0),  # the old text of 08 and TEACHING
    ("一个 4 元组只有四个字符", 1, 0, 0),
    ("返回二元组 `(out, weights)`；禁止重复 n 元语法", 0, 0, 0),
    ("GPU 规模（dropout 为 0.2）", 0, 1, 0),  # the old text of 08 section 11
    ("对这个和施加暂退法（dropout），CPU 运行时概率为 0", 0, 0, 0),
    ("暂退法 (Dropout) 与 DropoutLayer", 0, 0, 0),
    ("可学习的位置编码（learned positional embedding，04）", 0, 0, 1),  # the old text of 08 cell 1
    ("GELU、可学习的位置、权重绑定", 0, 0, 1),
    ("使用可学习位置的仅解码器 GPT", 0, 0, 1),
    ("可学习的位置嵌入（04），可学习的位置表的第 26 行", 0, 0, 0),
])
def test_the_rules_catch_the_old_wording(text, n_tuple, dropout, learned):
    assert len(n_tuples(text)) == n_tuple
    assert len(bare_dropouts(text)) == dropout
    assert len(learned_position_names(text)) == learned


def test_the_tests_fail_on_the_old_text_of_notebook_08(tmp_path):
    """The rules read a real translation file: 08 with its old wording planted back fails each of them."""
    source = ROOT / "translations" / "zh" / "08_char_gpt.md"
    text = source.read_text(encoding="utf-8")
    planted = (text.replace("禁止重复 n 元语法（no-repeat n-gram）", "禁止重复 n 元组（no-repeat n-gram）", 1)
               .replace("**CPU 运行不用暂退法。**", "**CPU 运行不用 dropout。**", 1)
               .replace("可学习的位置嵌入（learned positions）", "可学习的位置（learned positions）", 1))
    assert planted != text
    copy = tmp_path / source.name
    copy.write_text(planted, encoding="utf-8")
    for path, failing in ((copy, True), (source, False)):
        prose = "\n".join(text for _, text in texts(path, comments=False))
        assert bool(n_tuples(prose)) is bool(bare_dropouts(prose)) is bool(learned_position_names(prose)) is failing


def test_the_rules_read_translated_docstrings(tmp_path):
    """A translated docstring is prose a reader reads: a word the rules reject there fails as in a comment."""
    translation = tmp_path / "99_x.md"
    code = 'def f(x):\n    """返回 x 的 n 元组和可学习的位置编码。"""\n    return x  # 注释\n'
    translation.write_text(f"<!-- code c1 | en 000000000000 -->\n```python\n{code}```\n", encoding="utf-8")
    [(cell_id, text)] = texts(translation)
    assert cell_id == "c1" and "# 注释" in text
    assert n_tuples(text) == ["n 元组"] and learned_position_names(text) == ["可学习的位置"]
