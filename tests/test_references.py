"""The bibliography and the glossary hold together.

- Every author-year citation in a notebook's markdown is a link to its entry in notebooks/references.md, and every
  link to references.md names an anchor that exists there (and the entry of the cited first author and year).
- Every entry of references.md has an anchor of its own and a link (arXiv abstract, DOI or https page).
- Every row of notebooks/glossary.md names the notebook that teaches it, and that notebook exists.
"""

import importlib.util
import json
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
REFERENCES = NOTEBOOKS / "references.md"
GLOSSARY = NOTEBOOKS / "glossary.md"

spec = importlib.util.spec_from_file_location("link_citations", ROOT / "ci" / "link_citations.py")
linker = importlib.util.module_from_spec(spec)
spec.loader.exec_module(linker)

REF_LINK = re.compile(r"\[([^\]]*)\]\(\s*<?([^)\s>#]*references\.md)#([^)\s>]*)>?\s*\)")
ENTRY = re.compile(r'^- <a id="([^"]+)"></a>')
URL = re.compile(r"https://[^\s<>)]+")
ARXIV = re.compile(r"^https://arxiv\.org/abs/\d{4}\.\d{4,5}$")
DOI = re.compile(r"^https://doi\.org/10\.\d{4,9}/\S+$")
NOTEBOOK_LINK = re.compile(r"\]\(((?:\.\./)?\d\d_[a-z0-9_]+\.ipynb)\)")


def anchors() -> set[str]:
    return linker.known_anchors(REFERENCES)


def entries() -> dict[str, str]:
    """anchor -> the entry's text (its first line and the indented lines after it)."""
    found, current = {}, None
    for line in REFERENCES.read_text(encoding="utf-8").splitlines():
        match = ENTRY.match(line)
        if match:
            current = match.group(1)
            assert current not in found, f"references.md has the anchor {current!r} twice"
            found[current] = line
        elif current and line.startswith("  "):
            found[current] += "\n" + line
        else:
            current = None
    return found


def notebooks() -> list[pathlib.Path]:
    """The English notebooks and solutions, and the Chinese edition's (notebooks/zh/): their links go to the same
    references.md."""
    paths = sorted(NOTEBOOKS.glob("*.ipynb")) + sorted((NOTEBOOKS / "solutions").glob("*.ipynb"))
    paths += sorted((NOTEBOOKS / "zh").rglob("*.ipynb"))
    return [p for p in paths if ".ipynb_checkpoints" not in p.parts]


def markdown(path: pathlib.Path) -> list[tuple[int, str]]:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return [(i, "".join(c["source"])) for i, c in enumerate(cells) if c["cell_type"] == "markdown"]


def citation_problems(text: str, source: pathlib.Path, known: set[str]) -> list[str]:
    """What is wrong with the citations and references.md links of one markdown text found in `source`."""
    problems = [f"unlinked citation {cited!r} (run python ci/link_citations.py {source.relative_to(ROOT)})"
                for _, _, cited, _ in linker.citations(text)]
    for shown, target, anchor in REF_LINK.findall(text):
        if (source.parent / target).resolve() != REFERENCES.resolve():
            problems.append(f"[{shown}]({target}#{anchor}) does not lead to notebooks/references.md")
        if anchor not in known:
            problems.append(f"[{shown}]({target}#{anchor}): references.md has no anchor {anchor!r}")
        cited = linker.citations(shown, linked=False)
        if len(cited) == 1 and cited[0][2] == shown and cited[0][3] != anchor:
            problems.append(f"[{shown}] links to #{anchor}, but its first author and year give #{cited[0][3]}")
    return problems


def test_the_citation_pattern_finds_author_year_forms_only():
    text = ("Xiong et al. (2020) analyse; RoPE (Su et al. 2021); (GLU; Dauphin et al., 2017); Zhang & Sennrich "
            "(2019); Shazeer (2020) tried; (Shazeer, 2019); McLeish et al. 2024; Delétang et al. 2023. Not these: "
            "Post-LN (2017), GPT-2 (2019), Llama 2 (2023), In 2017, `Foo (2020)`, Press et al. alone.")
    found = [(cited, anchor) for _, _, cited, anchor in linker.citations(text)]
    assert found == [("Xiong et al. (2020)", "xiong2020"), ("Su et al. 2021", "su2021"),
                     ("Dauphin et al., 2017", "dauphin2017"), ("Zhang & Sennrich (2019)", "zhang2019"),
                     ("Shazeer (2020)", "shazeer2020"), ("Shazeer, 2019", "shazeer2019"),
                     ("McLeish et al. 2024", "mcleish2024"), ("Delétang et al. 2023", "deletang2023")]


def test_linking_is_idempotent_and_keeps_the_citation_text():
    known = {"xiong2020", "su2021"}
    text = "As Xiong et al. (2020) found (and Su et al. 2021 too)."
    once, count, missing = linker.link_text(text, "../", known)
    assert (count, missing) == (2, [])
    assert once == ("As [Xiong et al. (2020)](../references.md#xiong2020) found "
                    "(and [Su et al. 2021](../references.md#su2021) too).")
    assert linker.link_text(once, "../", known) == (once, 0, [])
    unknown = linker.link_text("Nobody et al. 2020", "", known)
    assert unknown == ("Nobody et al. 2020", 0, ["Nobody et al. 2020 (no 'nobody2020' in references.md)"])


def test_the_checks_catch_unlinked_citations_and_broken_or_wrong_anchors():
    source = NOTEBOOKS / "05_transformer_block.ipynb"
    known = anchors()
    assert citation_problems("[Xiong et al. (2020)](references.md#xiong2020)", source, known) == []
    assert citation_problems("Xiong et al. (2020) analyse", source, known)  # not linked
    assert citation_problems("[Xiong et al. (2020)](references.md#xiong2021)", source, known)  # no such anchor
    assert citation_problems("[Xiong et al. (2020)](references.md#vaswani2017)", source, known)  # another entry
    assert citation_problems("[Xiong et al. (2020)](../references.md#xiong2020)", source, known)  # wrong folder


def test_every_reference_has_one_anchor_and_a_link():
    found = entries()
    assert len(found) == len(anchors()) >= 40  # every anchor opens an entry, none stands alone
    for anchor, text in found.items():
        assert re.fullmatch(r"[a-z0-9-]+", anchor), anchor
        urls = [url.rstrip(".,;") for url in URL.findall(text)]
        assert urls, f"references.md#{anchor} has no https link"
        for url in urls:
            if "arxiv.org" in url:
                assert ARXIV.match(url), f"references.md#{anchor}: {url} is not an arXiv abstract page"
            if "doi.org" in url:
                assert DOI.match(url), f"references.md#{anchor}: {url} is not a DOI link"


def test_author_year_anchors_match_their_entries():
    """An entry anchored surname + year names that author and shows that year on its first line."""
    for anchor, text in entries().items():
        match = re.fullmatch(r"([a-z]+)((?:19|20)\d\d)[ab]?", anchor)
        if match:
            surname, year = match.groups()
            assert year in text.splitlines()[0], f"references.md#{anchor}: its first line shows another year"
            assert surname in linker.anchor_for(text.replace(" ", ""), ""), f"references.md#{anchor}: no {surname}"


@pytest.mark.parametrize("path", notebooks(), ids=lambda p: str(p.relative_to(NOTEBOOKS)))
def test_every_citation_in_a_notebook_links_to_an_existing_reference(path):
    known = anchors()
    problems = [f"cell {i}: {problem}"
                for i, text in markdown(path) for problem in citation_problems(text, path, known)]
    assert not problems, f"{path.relative_to(ROOT)}:\n" + "\n".join(problems)


@pytest.mark.parametrize("name", ["notebooks/glossary.md", "notebooks/TEACHING.md", "notebooks/references.md",
                                  "README.md", "CONTRIBUTING.md"])
def test_every_references_link_in_the_docs_resolves(name):
    path = ROOT / name
    if not path.exists():
        pytest.skip(f"{name} does not exist")
    text = path.read_text(encoding="utf-8")
    problems = [p for p in citation_problems(text, path, anchors()) if not p.startswith("unlinked")]
    assert not problems, f"{name}:\n" + "\n".join(problems)


def test_every_glossary_row_names_an_existing_notebook():
    rows, header, current = [], None, None
    for line in GLOSSARY.read_text(encoding="utf-8").splitlines():
        if not line.startswith("|") or re.match(r"^\|[-| :]+\|$", line):
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if cells[0] in ("term", "avoid"):  # a term table, or the words to avoid (checked in test_translation.py)
            current = cells[0]
            header = cells if current == "term" else header
            continue
        if current == "term":
            rows.append(cells)
    assert header is not None and header[2] == "taught in" and header[-1] == "中文"
    assert len(rows) >= 60
    terms = [cells[0] for cells in rows]
    assert len(terms) == len(set(terms)), "a glossary term appears twice"
    for cells in rows:
        assert len(cells) == len(header), f"glossary row {cells[0]!r} has {len(cells)} columns, not {len(header)}"
        term, taught, chinese = cells[0], cells[2], cells[-1]
        linked = NOTEBOOK_LINK.findall(taught)
        assert linked, f"glossary row {term!r} names no notebook"
        for target in linked:
            assert (GLOSSARY.parent / target).exists(), f"glossary row {term!r} links to {target}, which does not exist"
        assert chinese and re.search(r"[\u4e00-\u9fff]", chinese), f"glossary row {term!r} has no Chinese term"
