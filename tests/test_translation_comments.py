"""The Chinese edition's code comments are Chinese: a learner reads them while running the cell.

Comments that only name shapes, types or identifiers (`# (B, T, d)`, `# x (..., d), eps: float -> (..., d)`) stay
as they are; a comment with three or more English words and no Chinese is an untranslated explanation.
"""

import json
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
ZH = sorted((ROOT / "notebooks" / "zh").glob("**/*.ipynb"))
CJK = re.compile(r"[\u4e00-\u9fff]")
WORD = re.compile(r"\b[a-z]{3,}\b")  # lowercase words: prose, not identifiers such as d_model or (B, T)


def english_comments(nb: dict) -> list[tuple[str, str]]:
    found = []
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        for line in "".join(cell["source"]).splitlines():
            comment = re.search(r"#\s(.*)$", line)
            if not comment or CJK.search(comment.group(1)) or "->" in comment.group(1):  # "->": a signature
                continue
            prose = re.sub(r"`[^`]*`|'[^']*'|\"[^\"]*\"|\S*/\S*", "", comment.group(1))  # not code, strings, paths
            words = WORD.findall(prose)
            if len(words) >= 3:
                found.append((cell.get("id", "?"), comment.group(1)))
    return found


def test_the_counter_sees_explanations_only():
    nb = {"cells": [{"cell_type": "code", "source": [
        "x = y  # the mean over the last dimension\n", "z = w  # (B, T, d_model)\n", "a = 1  # 最后一维的均值\n",
        "def f(x, eps):  # x (..., d), eps: float -> (..., d)\n", "# [/path/to/gloo/.../pair.cc:553]\n"]}]}
    assert english_comments(nb) == [("?", "the mean over the last dimension")]


def test_every_chinese_notebook_explains_in_chinese():
    untranslated = {path.relative_to(ROOT).as_posix(): english_comments(json.loads(path.read_text(encoding="utf-8")))
                    for path in ZH}
    assert {k: v for k, v in untranslated.items() if v} == {}
