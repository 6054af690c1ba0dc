"""Every relative link in README.md and in the notebooks' markdown points to a file that exists in the repository."""

import json
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")  # [text](target "title")
EXTERNAL = ("http://", "https://", "mailto:", "#", "data:")


def markdown_sources():
    """(path, markdown text) for the README files, CONTRIBUTING.md, every markdown file in notebooks/ (the teacher's
    guide, references, glossary) and every markdown cell of every notebook, the Chinese edition's (notebooks/zh/)
    included (checkpoints skipped)."""
    for readme in ("README.md", "README.zh.md", "CONTRIBUTING.md"):
        yield ROOT / readme, (ROOT / readme).read_text(encoding="utf-8")
    for document in sorted((ROOT / "notebooks").rglob("*.md")):
        yield document, document.read_text(encoding="utf-8")
    for notebook in sorted((ROOT / "notebooks").rglob("*.ipynb")):
        if ".ipynb_checkpoints" in notebook.parts:
            continue
        cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
        text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
        yield notebook, text


def relative_links(text: str) -> list[str]:
    """The targets of markdown links that point inside the repository."""
    return [target for target in LINK.findall(text) if not target.startswith(EXTERNAL)]


SOURCES = list(markdown_sources())


def test_the_link_pattern_finds_relative_links_only():
    text = ('see [02](../02_multi_head_attention.ipynb), [site](https://x.org/a.ipynb), [top](#setup), '
            '[code](shared) and [titled](notebooks/05_transformer_block.ipynb "The block")')
    expected = ["../02_multi_head_attention.ipynb", "shared", "notebooks/05_transformer_block.ipynb"]
    assert relative_links(text) == expected


def test_readme_links_the_notebooks():
    links = relative_links((ROOT / "README.md").read_text(encoding="utf-8"))
    assert sum(link.startswith("notebooks/") and link.endswith(".ipynb") for link in links) >= 11


@pytest.mark.parametrize("source,text", SOURCES, ids=[str(p.relative_to(ROOT)) for p, _ in SOURCES])
def test_every_relative_link_resolves(source, text):
    missing = []
    for target in relative_links(text):
        path = target.split("#", 1)[0]
        if path and not (source.parent / path).resolve().exists():
            missing.append(target)
    assert not missing, f"{source.relative_to(ROOT)} links to files that do not exist: {missing}"
