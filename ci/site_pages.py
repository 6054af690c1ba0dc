"""Stage one edition of the course website: its pages copied into a Sphinx source folder, their links rewritten.

ci/build_site.py calls `stage(edition, folder)` for "en" and "zh". A page keeps the path its English file has in the
repository, so both editions have the same page names: `notebooks/08_char_gpt.ipynb` is the page
`notebooks/08_char_gpt.html`, and its Chinese edition `notebooks/zh/08_char_gpt.ipynb` is
`zh/notebooks/08_char_gpt.html`.
The README is each edition's home page. Pages that exist only in English (references, CONTRIBUTING, the licences) are
in both editions, so that each edition is whole and its search finds them; a Chinese notebook, teacher's guide or
glossary (notebooks/zh/glossary.md) that does not exist yet is shown in English.

What changes on the way (the repository's files are only read):
- every relative link to a course file points to its page (MyST then resolves and checks it); a link to the other
  edition (the Chinese README's "英文原版" column) becomes a plain HTML link to that page; a link to a file that is no
  page (`shared/`, the translation files) goes to GitHub when pyproject.toml names the repository, else is plain text;
- `<a id="x"></a>` anchors (references.md, the Chinese README and teacher's guide) become MyST targets `(x)=`, so that
  links to them are checked like links to headings;
- the Colab badge is rewritten from pyproject.toml (ci/notebook_header.py) as a text link: its image is external, and
  no page may need the network to display;
- the notebooks' stored widget state is dropped: the site shows each explorer's static fallback figure.
"""

from __future__ import annotations

import json
import pathlib
import posixpath
import re

from notebook_header import BADGE_TAG, badge_source, settings

ROOT = pathlib.Path(__file__).resolve().parents[1]
EDITIONS = ("en", "zh")
SOLUTIONS_INDEX = "notebooks/solutions/index"  # a page of its own, written here
CHAPTER = re.compile(r"notebooks/(\d\d)_.+")  # the page name of a chapter's notebook
TEXT = {  # the few words the site adds, per edition
    "en": {"notebooks": "Notebooks", "solutions": "Solutions", "more": "For teachers and contributors",
           "solutions_title": "Worked solutions", "solution_entry": "Solutions to {}",
           "solutions_intro": "One notebook per chapter: every exercise solved and passing its checker, and a typical "
                              "wrong answer with the feedback it gets. Try the exercises first.",
           "LICENSE": "Licence of the code (MIT)", "LICENSE-CONTENT": "Licence of the prose and figures (CC BY 4.0)"},
    "zh": {"notebooks": "笔记本", "solutions": "习题解答", "more": "教学与贡献",
           "solutions_title": "习题解答", "solution_entry": "{}：习题解答",
           "solutions_intro": "每章一个笔记本：每道练习的参考解答都通过了检查器，还有一个典型的错误答案和它得到的反馈。"
                              "请先自己完成练习。",
           "LICENSE": "代码的许可证（MIT，英文）", "LICENSE-CONTENT": "正文与插图的许可证（CC BY 4.0，英文）"},
}
LINK = re.compile(r"`[^`\n]*`"  # an inline code span, left as it is
                  r"|(?P<image>!?)\[(?P<text>(?:[^\[\]]|\[[^\]]*\])*)\]\((?P<target>[^()\s]+)\)")
ANCHOR = re.compile(r'^(?P<indent>[ \t]*)(?P<marker>(?:[-*+]|\d+\.)[ \t]+)?'  # a list item's marker, if any
                    r'<a id="(?P<id>[^"]+)"></a>[ \t]*(?P<rest>.*)$', re.M)
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
WIDGET_STATE = "widgets"
SEARCH_TERMS = "search-terms.txt"  # the Chinese edition's extra words for jieba (conf.py hands it to Sphinx's search)
CHINESE_WORD = re.compile(r"[\u4e00-\u9fff]{2,}")


def sources(edition: str) -> dict[str, str]:
    """The edition's pages: {page name: repository path of the file it is built from}, in reading order."""
    zh = edition == "zh"
    pages = {"index": "README.zh.md" if zh else "README.md"}
    for folder in ("notebooks", "notebooks/solutions"):
        for path in sorted((ROOT / folder).glob("[0-9][0-9]_*.ipynb")):
            pages[f"{folder}/{path.stem}"] = _chinese_if_there(f"{folder}/{path.name}", zh)
    for name in ("notebooks/TEACHING.md", "notebooks/glossary.md"):
        pages[name.removesuffix(".md")] = _chinese_if_there(name, zh)
    for name in ("notebooks/references.md", "CONTRIBUTING.md", "LICENSE", "LICENSE-CONTENT"):
        pages[name.removesuffix(".md")] = name
    return pages


def _chinese_if_there(english: str, zh: bool) -> str:
    chinese = english.replace("notebooks/", "notebooks/zh/", 1)
    return chinese if zh and (ROOT / chinese).exists() else english


def lookup(edition: str) -> dict[str, str]:
    """{repository path: page name} for every file and folder that a link can name and that has a page here."""
    found = {path: page for page, path in sources(edition).items()}
    home = "notebooks/zh" if edition == "zh" else "notebooks"
    found.update({home: "index", f"{home}/solutions": SOLUTIONS_INDEX})
    return found


def stage(edition: str, folder: pathlib.Path) -> list[str]:
    """Write the edition's Sphinx source files into `folder`; return the page names."""
    pages = sources(edition)
    url, ref = settings()
    for page, repo_path in pages.items():
        text = (ROOT / repo_path).read_text(encoding="utf-8")
        links = Links(edition, page, repo_path, url, ref)
        if repo_path.endswith(".ipynb"):
            target, text = folder / f"{page}.ipynb", _notebook(json.loads(text), repo_path, links, url, ref)
        elif repo_path.startswith("LICENSE"):
            target, text = folder / f"{page}.md", _licence(TEXT[edition][page], text)
        else:
            target, text = folder / f"{page}.md", links.markdown(text)
            if page == "index":
                text += _toctrees(edition, pages)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    if edition == "zh":
        (folder / SEARCH_TERMS).write_text("".join(f"{word}\n" for word in search_terms()), encoding="utf-8")
    chapters = {m.group(1): _title(ROOT / path) for page, path in pages.items() if (m := CHAPTER.fullmatch(page))}
    solutions = [p.removeprefix("notebooks/solutions/") for p in pages if p.startswith("notebooks/solutions/")]
    words = TEXT[edition]
    entry = words["solution_entry"]  # named after its chapter, and not the same as the chapter's own entry
    (folder / f"{SOLUTIONS_INDEX}.md").write_text(
        f"# {words['solutions_title']}\n\n{words['solutions_intro']}\n\n"
        + _toctree([f"{entry.format(chapters.get(name[:2], name))} <{name}>" for name in solutions], maxdepth=1),
        encoding="utf-8")
    return [*pages, SOLUTIONS_INDEX]


def _title(notebook: pathlib.Path) -> str:
    """The notebook's title: the first level-1 heading of its markdown cells."""
    for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
        for line in "".join(cell["source"]).splitlines() if cell["cell_type"] == "markdown" else ():
            if line.startswith("# "):
                return line[2:].strip()
    return notebook.stem


def search_terms() -> list[str]:
    """The Chinese terms of the glossary's 中文 column. jieba then keeps each one a word (位置编码, not 位置 + 编码),
    so that a search for a course term finds it: the browser does not segment what a reader types."""
    terms = set()
    for line in (ROOT / "notebooks" / "glossary.md").read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) >= 5:
            terms.update(CHINESE_WORD.findall(cells[-1]))
    return sorted(terms)


class Links:
    """Rewrites the links of one page's markdown (see the module docstring)."""

    def __init__(self, edition: str, page: str, repo_path: str, url: str | None, ref: str):
        self.edition, self.page, self.repo_path, self.url, self.ref = edition, page, repo_path, url, ref
        self.own = lookup(edition)
        self.other = lookup("en" if edition == "zh" else "zh")
        self.suffix = {p: ".ipynb" if path.endswith(".ipynb") else ".md" for p, path in sources(edition).items()}
        self.suffix[SOLUTIONS_INDEX] = ".md"

    def markdown(self, text: str) -> str:
        """The markdown with its links rewritten and its HTML anchors turned into MyST targets (code left alone)."""
        out, chunk, fence = [], [], None
        for line in text.splitlines(keepends=True):
            opening = FENCE.match(line)
            if fence is None and opening:
                out.append(self._prose("".join(chunk)))
                chunk, fence = [], opening.group(1)[0]
            elif fence is not None and opening and opening.group(1)[0] == fence:
                fence = None
                out.append(line)
                continue
            (chunk if fence is None else out).append(line)
        return "".join(out) + self._prose("".join(chunk))

    def _prose(self, text: str) -> str:
        text = ANCHOR.sub(_target, text)
        return LINK.sub(self._link, text)

    def _link(self, match: re.Match) -> str:
        if match.group("target") is None:  # a code span
            return match.group(0)
        text, target = LINK.sub(self._link, match.group("text")), match.group("target")
        if SCHEME.match(target):
            return text if match.group("image") else f"[{text}]({target})"  # an external image would need the network
        path, _, fragment = target.partition("#")
        if not path or match.group("image"):
            return f"{match.group('image')}[{text}]({target})"
        anchor = f"#{fragment}" if fragment else ""
        repo = posixpath.normpath(posixpath.join(posixpath.dirname(self.repo_path), path)).rstrip("/")
        if repo in self.own:
            page = self.own[repo]
            relative = posixpath.relpath(page + self.suffix[page], posixpath.dirname(self.page) or ".")
            return f"[{text}]({relative}{anchor})"
        if repo in self.other:
            return f'<a href="{self._other_edition(self.other[repo])}{anchor}">{text}</a>'
        if (ROOT / repo).exists():
            kind = "tree" if (ROOT / repo).is_dir() else "blob"
            return f"[{text}]({self.url}/{kind}/{self.ref}/{repo}{anchor})" if self.url else text
        return match.group(0)  # a file that does not exist: Sphinx reports it

    def _other_edition(self, page: str) -> str:
        """The relative URL from this page to `page` of the other edition (the Chinese one lives under zh/)."""
        up = "../" * self.page.count("/")
        return f"{up}zh/{page}.html" if self.edition == "en" else f"../{up}{page}.html"


def _target(match: re.Match) -> str:
    """`- <a id="x"></a>**Text**` -> a MyST target line `(x)=` with the text under it, at the same indentation."""
    indent, marker, rest = match.group("indent"), match.group("marker") or "", match.group("rest")
    inner = indent + " " * len(marker)
    return f"{indent}{marker}({match.group('id')})=" + (f"\n{inner}{rest}" if rest else "")


def _notebook(nb: dict, repo_path: str, links: Links, url: str | None, ref: str) -> str:
    """The notebook as the site shows it: badge rewritten, markdown links rewritten, widget state dropped."""
    nb["metadata"].pop(WIDGET_STATE, None)
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        source = "".join(cell["source"])
        if BADGE_TAG in cell.get("metadata", {}).get("tags", []):
            source = badge_source(pathlib.Path(repo_path), url, ref)
        cell["source"] = links.markdown(source)
    return json.dumps(nb, ensure_ascii=False)


def _licence(title: str, text: str) -> str:
    """A licence file as a page: its title, then the text exactly as written (wrapped by the site's stylesheet)."""
    return f"# {title}\n\n````{{container}} licence-text\n```text\n{text.rstrip()}\n```\n````\n"


def _toctree(entries: list[str], caption: str | None = None, hidden: bool = False, maxdepth: int = 2) -> str:
    options = (f":caption: {caption}\n" if caption else "") + (":hidden:\n" if hidden else "")
    return f"\n```{{toctree}}\n{options}:maxdepth: {maxdepth}\n\n" + "\n".join(entries) + "\n```\n"


def _toctrees(edition: str, pages: dict[str, str]) -> str:
    """The home page's hidden tables of contents: the site's navigation, in reading order."""
    words = TEXT[edition]
    notebooks = [p for p in pages if CHAPTER.fullmatch(p)]
    more = ["notebooks/TEACHING", "notebooks/references", "notebooks/glossary", "CONTRIBUTING", "LICENSE",
            "LICENSE-CONTENT"]
    return (_toctree(notebooks, words["notebooks"], hidden=True, maxdepth=1)
            + _toctree([SOLUTIONS_INDEX], words["solutions"], hidden=True)
            + _toctree(more, words["more"], hidden=True, maxdepth=1))
