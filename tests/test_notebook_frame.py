"""Every course notebook has the same frame, so that a new notebook cannot skip it.

At the top: learning goals, what the notebook assumes (earlier notebooks, Python and PyTorch versions) and a study
time. Then a "you are here" map of the whole architecture. At the bottom: a summary cell, the self-check questions
(a '## Self-check questions' cell, and optionally one cell per question after it) whose answers are hidden in
`<details>` blocks and each point to where the notebook shows it, and a "Next:" link as the last cell. Notebook 12
set the conventions; the last test plants defects in it to show that each is caught.
"""

from __future__ import annotations

import copy
import json
import pathlib
import re
import tomllib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
FOLDER = ROOT / "notebooks"
NOTEBOOKS = sorted(FOLDER.glob("[0-9][0-9]_*.ipynb"))  # not notebooks/zh/, solutions/ or .ipynb_checkpoints/
MAP_EXEMPT = {"12_putting_it_together"}  # the capstone draws the whole map in its synthesis section instead
MAP_WITHIN = 8  # the map comes right after the title, setup and imports cells
QUESTIONS = range(4, 7)  # 4-6 self-check questions
BOTTOM = ("## Summary", "## Self-check questions", "**Next:**")  # in this order at the bottom (see bottom_cells)
LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")  # [text](target "title")
QUESTION_START = re.compile(r"^\*\*(\d+)\. ", re.M)
QUESTION = re.compile(  # one question with its answer, in the layout GitHub and JupyterLab both render
    r"\*\*(?P<n>\d+)\. (?P<question>(?:(?!\*\*).)+)\*\*\n\n"
    r"<details><summary>(?P<summary>[^<\n]+)</summary>\n\n"
    r"(?P<answer>(?:(?!</?details>).)+?)\n\n"
    r"</details>\s*", re.S)


def _versions() -> str:
    """The sentence every notebook uses for the versions it needs, from pyproject.toml."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    python = project["requires-python"].removeprefix(">=")
    torch = next(d for d in project["dependencies"] if d.startswith("torch>=")).removeprefix("torch>=")
    return f"Python {python} or newer and PyTorch {torch} or newer"


VERSIONS = _versions()


def _source(cell: dict) -> str:
    return "".join(cell["source"])


def _flat(text: str) -> str:
    """Whitespace, line breaks included, as single spaces: sentences may wrap anywhere."""
    return " ".join(text.split())


def _headings(cells: list[dict]) -> list[str]:
    return [line.lstrip("#").strip() for cell in cells if cell["cell_type"] == "markdown"
            for line in _source(cell).splitlines() if re.match(r"#{1,6} ", line)]


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def _goal_bullets(top: str) -> int:
    start = top.find("**Learning goals**")
    if start < 0:
        return 0
    count = 0
    for line in top[start:].splitlines()[1:]:
        if line.startswith("- "):
            count += 1
        elif line.strip() and not line.startswith("  "):  # the next paragraph
            break
    return count


def top_problems(cells: list[dict]) -> list[str]:
    """Learning goals, assumptions and study time, in the markdown cells before the first code cell."""
    first_code = next((i for i, c in enumerate(cells) if c["cell_type"] == "code"), len(cells))
    top = "\n\n".join(_source(c) for c in cells[:first_code] if c["cell_type"] == "markdown")
    problems = []
    goals = _goal_bullets(top)
    if goals < 3:
        problems.append(f"'**Learning goals**' needs at least 3 bullets before the setup cell, found {goals}")
    if "**What this notebook assumes.**" not in top:
        problems.append("no '**What this notebook assumes.**' paragraph before the setup cell")
    elif VERSIONS not in _flat(top):
        problems.append(f"the assumptions do not say '{VERSIONS}' (from pyproject.toml)")
    if not re.search(r"\*\*Study time:\*\* about \d+ minutes", _flat(top)):
        problems.append("no '**Study time:** about N minutes ...' line before the setup cell")
    return problems


def map_problems(cells: list[dict]) -> list[str]:
    """The "you are here" map: a code cell calling plot_architecture near the top, with its figure stored."""
    for cell in cells[:MAP_WITHIN]:
        if cell["cell_type"] == "code" and "plot_architecture(" in _source(cell):
            if any("image/png" in output.get("data", {}) for output in cell.get("outputs", [])):
                return []
            return [f"the map cell {cell.get('id')} has no stored figure (image/png output)"]
    return [f"no code cell calling plot_architecture( among the first {MAP_WITHIN} cells"]


def answer_problems(answer: str, cells: list[dict], k: int) -> list[str]:
    """An answer must point to where the notebook shows it, and every pointer must exist."""
    sections = {m for cell in cells if cell["cell_type"] == "markdown"
                for m in re.findall(r"^## (\d+)\.", _source(cell), re.M)}
    numbers = {p.name[:2] for p in NOTEBOOKS}
    text = _flat(answer)
    named_sections = re.findall(r"\bsections? (\d+)", text, re.I)
    named_notebooks = re.findall(r"\bnotebooks? (\d{2})\b", text, re.I)
    quoted = re.findall(r"\"([^\"]+)\"|“([^”]+)”", text)
    headings = [_flat(h) for h in _headings(cells)]
    named_headings = [q for pair in quoted for q in pair if q and any(h.startswith(q) for h in headings)]
    problems = [f"question {k}: its answer names section {n}, which has no '## {n}.' heading"
                for n in named_sections if n not in sections]
    problems += [f"question {k}: its answer names notebook {n}, which does not exist"
                 for n in named_notebooks if n not in numbers]
    if not (named_sections or named_notebooks or named_headings):
        problems.append(f"question {k}: its answer names no section ('section N'), quoted heading or notebook "
                        "('notebook NN') where the notebook shows it")
    return problems


def selfcheck_problems(text: str, cells: list[dict]) -> list[str]:
    """4-6 bold numbered questions, each followed by exactly one well-formed <details> block."""
    numbers = [int(n) for n in QUESTION_START.findall(text)]
    problems = []
    if numbers != list(range(1, len(numbers) + 1)):
        problems.append(f"self-check questions must be numbered 1, 2, 3, ... in order ('**1. ...?**'), found {numbers}")
    if len(numbers) not in QUESTIONS:
        problems.append(f"{len(numbers)} self-check questions; {QUESTIONS.start}-{QUESTIONS.stop - 1} are needed")
    opened, closed = text.count("<details>"), text.count("</details>")
    if not opened == closed == len(numbers):
        problems.append(f"each question needs exactly one <details> ... </details> block: {len(numbers)} questions, "
                        f"{opened} <details>, {closed} </details>")
    starts = [m.start() for m in QUESTION_START.finditer(text)]
    for k, (start, end) in enumerate(zip(starts, starts[1:] + [len(text)]), 1):
        block = QUESTION.fullmatch(text, start, end)
        if block is None:
            problems.append(f"question {k}: expected '**{k}. question**', a blank line, "
                            "'<details><summary>...</summary>', a blank line, the answer, a blank line and "
                            "'</details>' (the blank lines let the markdown inside render on GitHub and in JupyterLab)")
        else:
            problems += answer_problems(block["answer"], cells, k)
    return problems


def next_problems(text: str, path: pathlib.Path) -> list[str]:
    """The Next cell links to the next notebook (the last one back to the README's table); every link resolves."""
    targets = LINK.findall(text)
    if not targets:
        return ["the '**Next:**' cell has no link"]
    problems = []
    for target in targets:
        if target.startswith(("http://", "https://")):
            continue
        file, _, anchor = target.partition("#")
        linked = (path.parent / file).resolve()
        if not linked.is_file():
            problems.append(f"the '**Next:**' link {target} points to a file that does not exist")
        elif anchor and linked.suffix == ".md" and anchor not in {_slug(line.lstrip("#").strip()) for line in
                                                                  linked.read_text(encoding="utf-8").splitlines()
                                                                  if re.match(r"#{1,6} ", line)}:
            problems.append(f"the '**Next:**' link {target}: {file} has no heading with the anchor #{anchor}")
    later = [p for p in NOTEBOOKS if p.name > path.name]
    wanted = later[0].name if later else "../README.md#the-notebooks"
    if not any(target == wanted or pathlib.PurePosixPath(target).name == wanted for target in targets):
        problems.append(f"the '**Next:**' cell does not link to {wanted}")
    return problems


def bottom_cells(cells: list[dict]) -> list[dict]:
    """The summary, the self-check block and the Next cell: the self-check block is its heading cell plus any
    question cells ('**k. ...') between it and Next, joined into one cell so one check reads both layouts."""
    end = len(cells) - 1
    start = end - 1
    while start > 0 and _source(cells[start]).lstrip().startswith("**") and QUESTION_START.match(
            _source(cells[start]).lstrip()) and cells[start]["cell_type"] == "markdown":
        start -= 1
    if start < 1 or start == end - 1:
        return cells[-3:]
    joined = dict(cells[start], source="\n\n".join(_source(c).strip() for c in cells[start:end]) + "\n")
    return [cells[start - 1], joined, cells[end]]


def bottom_problems(cells: list[dict], path: pathlib.Path) -> list[str]:
    """At the bottom: '## Summary', '## Self-check questions' (and its question cells), '**Next:**'; no other Next."""
    if len(cells) < 3:
        return ["the notebook needs a summary, self-check questions and a Next cell as its last three cells"]
    texts = [_source(c).lstrip() if c["cell_type"] == "markdown" else "" for c in bottom_cells(cells)]
    places = ("the cell before the self-check questions", "the self-check questions", "the last cell")
    problems = [f"{place} must be a markdown cell starting with '{start}'"
                for text, start, place in zip(texts, BOTTOM, places) if not text.startswith(start)]
    if texts[1].startswith(BOTTOM[1]):
        problems += selfcheck_problems(texts[1], cells)
    if texts[2].startswith(BOTTOM[2]):
        problems += next_problems(texts[2], path)
    others = [c.get("id") for c in cells[:-1] if c["cell_type"] == "markdown" and "**Next:**" in _source(c)]
    if others:
        problems.append(f"'**Next:**' belongs in the last cell only, also found in cells {others}")
    return problems


def frame_problems(nb: dict, path: pathlib.Path) -> list[str]:
    """Everything the notebook's frame lacks, as readable sentences (empty when the frame is complete)."""
    cells = nb["cells"]
    problems = top_problems(cells) + bottom_problems(cells, path)
    if path.stem not in MAP_EXEMPT:
        problems += map_problems(cells)
    return problems


def _load(path: pathlib.Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def test_the_course_notebooks_are_found():
    names = [p.name for p in NOTEBOOKS]
    assert len(names) >= 12 and names[0].startswith("01_") and "12_putting_it_together.ipynb" in names
    assert not any("checkpoint" in name for name in names)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_has_the_frame(path):
    problems = frame_problems(_load(path), path)
    assert not problems, f"{path.name}:\n- " + "\n- ".join(problems)


REFERENCE = FOLDER / "12_putting_it_together.ipynb"
MAPPED = FOLDER / "01_scaled_dot_product_attention.ipynb"


def _cell(cells: list[dict], start: str) -> dict:
    return next(c for c in cells if _source(c).lstrip().startswith(start))


def _edit(cells: list[dict], start: str, old: str, new: str, count: int = 1) -> None:
    """Replace `old` in the first cell, from the one starting with `start` on, that holds it."""
    first = cells.index(_cell(cells, start))
    cell = next(c for c in cells[first:] if old in _source(c))
    cell["source"] = _source(cell).replace(old, new, count)


def _question_cells(cells: list[dict]) -> list[dict]:
    """The cells that hold self-check questions (the heading cell, or the per-question cells after it)."""
    first = cells.index(_cell(cells, "## Self-check questions"))
    return [c for c in cells[first:] if QUESTION_START.search(_source(c))]


def _three_questions(cells: list[dict]) -> None:
    holders = _question_cells(cells)
    if len(holders) == 1:
        cell = holders[0]
        blocks = list(QUESTION.finditer(_source(cell)))
        cell["source"] = _source(cell)[:blocks[0].start()] + "".join(block.group(0) for block in blocks[:3])
    else:
        for cell in holders[3:]:
            cells.remove(cell)


def _answer_pointing_nowhere(cells: list[dict]) -> None:
    fifth_cell = next(c for c in _question_cells(cells) if "**5. " in _source(c))
    fifth = next(m for m in QUESTION.finditer(_source(fifth_cell)) if m["n"] == "5")
    start, end = fifth.span("answer")
    fifth_cell["source"] = (_source(fifth_cell)[:start] + "Because long carry chains are rare."
                            + _source(fifth_cell)[end:])


PLANTS = {
    "one </details> removed": (REFERENCE, lambda cells: _edit(cells, "## Self-check", "</details>", ""),
                               "exactly one <details>"),
    "no blank line before </details>": (REFERENCE, lambda cells: _edit(cells, "## Self-check", "\n\n</details>",
                                                                       "\n</details>"), "question 1: expected"),
    "the Next cell dropped": (REFERENCE, lambda cells: cells.pop(),
                              "the last cell must be a markdown cell starting with '**Next:**'"),
    "3 questions": (REFERENCE, _three_questions, "3 self-check questions"),
    "7 questions": (REFERENCE, lambda cells: _edit(cells, "## Self-check", "**6. A review",
                                                   "**6. Why?**\n\n<details><summary>Answer</summary>\n\nSection 1."
                                                   "\n\n</details>\n\n**7. A review"), "7 self-check questions"),
    "a question number skipped": (REFERENCE, lambda cells: _edit(cells, "## Self-check", "**2. ", "**3. "),
                                  "numbered 1, 2, 3"),
    "an answer pointing to a missing section": (REFERENCE, lambda cells: _edit(cells, "## Self-check", "(section 4,",
                                                                               "(section 9,"), "section 9"),
    "an answer pointing nowhere": (REFERENCE, _answer_pointing_nowhere, "question 5: its answer names no"),
    "a Next link to a missing file": (REFERENCE, lambda cells: _edit(cells, "**Next:**", "../README.md#",
                                                                     "../READ_ME.md#"), "does not exist"),
    "a Next link to a missing anchor": (REFERENCE, lambda cells: _edit(cells, "**Next:**", "#the-notebooks",
                                                                       "#notebooks"), "anchor #notebooks"),
    "a second Next": (REFERENCE, lambda cells: _edit(cells, "## 7. Where next", "**Papers**",
                                                     "**Next:** notebook 13.\n\n**Papers**"), "last cell only"),
    "the Summary moved up": (REFERENCE, lambda cells: cells.insert(3, cells.pop(cells.index(_cell(cells, "## Summ")))),
                             "starting with '## Summary'"),
    "no study time": (REFERENCE, lambda cells: _edit(cells, "# 12", "**Study time:**", "Study time:"), "Study time"),
    "the versions left out": (REFERENCE, lambda cells: _edit(cells, "# 12", "Python 3.", "Python 2."), "pyproject"),
    "two learning goals": (REFERENCE, lambda cells: _edit(cells, "# 12", "\n- ", "\n  ", 2), "at least 3 bullets"),
    "the map's figure not stored": (MAPPED, lambda cells: next(c for c in cells if "plot_architecture(" in _source(c))
                                    .update(outputs=[]), "no stored figure"),
    "the map moved down": (MAPPED, lambda cells: cells.insert(12, cells.pop(next(
        i for i, c in enumerate(cells) if "plot_architecture(" in _source(c)))), "among the first 8 cells"),
}


@pytest.mark.parametrize("plant", PLANTS)
def test_the_frame_check_catches_a_planted_defect(plant):
    path, edit, expected = PLANTS[plant]
    nb = _load(path)
    assert frame_problems(nb, path) == [], f"{path.name} must pass before a defect is planted in it"
    planted = copy.deepcopy(nb)
    edit(planted["cells"])
    problems = frame_problems(planted, path)
    assert any(expected in problem for problem in problems), problems
