"""Links and paths as the Chinese file must read them: what the build writes and what the guard compares."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

from edition.common import CODE_SPAN, FENCED, LINK_TARGET

EXTERNAL = ("http://", "https://", "mailto:", "#", "data:")
ENGLISH_LINK = "en:"  # a translation's link to the English original on purpose: [英文原版](en:notebooks/01_x.ipynb)
REPO_PATH = re.compile(r"notebooks/[A-Za-z0-9_./-]+\.(?:ipynb|md)")


@dataclass(frozen=True)
class Links:
    """The rewriting for one Chinese file: the English file's folder, the Chinese file's folder (repository paths,
    '.' for the root) and the repository paths of the English files that have a Chinese version."""

    english_dir: str
    zh_dir: str
    translated: frozenset[str]

    def chinese(self, goal: str) -> str:
        """A repository path, to its Chinese version where one exists (README.md -> README.zh.md)."""
        if goal == "README.md":
            return "README.zh.md"
        return "notebooks/zh/" + goal.removeprefix("notebooks/") if goal in self.translated else goal

    def target(self, target: str) -> str:
        """A link target written for the English file's folder, as the Chinese file needs it: to the Chinese
        version where one exists, else to the same file; a target written `en:path` goes to the English file."""
        if target.startswith(EXTERNAL):
            return target
        english = target.startswith(ENGLISH_LINK)
        path, hash_sign, anchor = target.removeprefix(ENGLISH_LINK).partition("#")
        if not path:
            return target
        goal = posixpath.normpath(posixpath.join(self.english_dir, path))
        goal = goal if english else self.chinese(goal)
        return posixpath.relpath(goal, self.zh_dir) + hash_sign + anchor

    def span(self, span: str) -> str:
        """An inline code span: one that is the repository path of an English notebook (or document under
        notebooks/) with a Chinese version names the Chinese one ('notebooks/zh/solutions/03_solutions.ipynb')."""
        path = span.strip()
        if REPO_PATH.fullmatch(path) and path in self.translated:
            return span.replace(path, self.chinese(path))
        return span

    def text(self, markdown: str) -> str:
        """Markdown with every link target and every path code span rewritten (fenced code is left alone)."""
        out, start = [], 0
        for fence in [*FENCED.finditer(markdown), None]:
            end = fence.start() if fence else len(markdown)
            part = LINK_TARGET.sub(lambda m: m.group(1) + self.target(m.group(2)), markdown[start:end])
            out.append(CODE_SPAN.sub(lambda m: m.group(1) + self.span(m.group(2)) + m.group(1), part))
            if fence:
                out.append(fence.group(0))
                start = fence.end()
        return "".join(out)
