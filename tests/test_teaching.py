"""The teaching text of the English notebooks stays a lesson, not a report (issue: from report to lesson).

Outside folded `<details>` blocks a notebook carries at most two remarks about the measurement itself (machine load,
one seed or run, fast mode, nbval, CI, kernel start, "the stored run"): the one rule about numbers is stated once, in
README.md and notebook 01. No markdown cell runs over 300 words, and no self-check answer over 120.
"""

import json
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
CAVEATS = re.compile(
    r"load average|\bloaded\b|\bload on\b|\bmachine|\bone seed|\bone run\b|\bsingle seed|\bsingle runs?\b|\bseed\(s\)"
    r"|\b1 seed|fast mode|\bnbval|kernel start|stored run", flags=re.IGNORECASE)
CI = re.compile(r"\bCI\b")  # case-sensitive: "ci" inside words is not a remark about CI
DETAILS = re.compile(r"<details>.*?</details>", flags=re.DOTALL)
MAX_CAVEATS, MAX_CELL_WORDS, MAX_ANSWER_WORDS = 2, 300, 120


def markdown(path: pathlib.Path) -> list[tuple[int, str]]:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return [(i, "".join(c["source"])) for i, c in enumerate(cells) if c["cell_type"] == "markdown"]


def words(text: str) -> int:
    return len(text.split())


def caveats(text: str) -> list[str]:
    outside = DETAILS.sub("", text)
    return [m.group(0) for m in CAVEATS.finditer(outside)] + [m.group(0) for m in CI.finditer(outside)]


def test_the_caveat_counter_sees_remarks_only_outside_folds():
    assert caveats("On a loaded machine, in fast mode, CI took 3 s.") == ["loaded", "machine", "fast mode", "CI"]
    assert caveats("<details><summary>About these numbers</summary>one seed, a loaded machine</details>") == []
    assert caveats("Circles decide; the specific cipher.") == []
    assert caveats("It ended lower in both single runs.") == ["single runs"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name[:2])
def test_at_most_two_measurement_remarks_outside_folded_notes(path):
    found = [(i, hit) for i, text in markdown(path) for hit in caveats(text)]
    assert len(found) <= MAX_CAVEATS, f"{path.name}: {found}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name[:2])
def test_no_markdown_cell_runs_over_300_words(path):
    long = [(i, words(text)) for i, text in markdown(path) if words(text) > MAX_CELL_WORDS]
    assert not long, f"{path.name}: (cell, words) {long}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name[:2])
def test_self_check_answers_are_short(path):
    cells = markdown(path)
    start = next(n for n, (_, text) in enumerate(cells) if text.lstrip().startswith("## Self-check questions"))
    answers = [(i, words(a)) for i, text in cells[start:] for a in DETAILS.findall(text)]
    assert answers, f"{path.name}: no folded self-check answers"
    long = [(i, n) for i, n in answers if n > MAX_ANSWER_WORDS]
    assert not long, f"{path.name}: (cell, words) {long}"
