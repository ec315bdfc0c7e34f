"""Bring the shipped lecture notebooks into the book's sources, as `lectures/NN_name.ipynb`.

Before Sphinx looks for its pages, every `lectures/NN_name.ipynb` of the repository is
copied into `docs/book/lectures/` (ignored by git) when its copy is missing or differs,
and a copy whose lecture is gone is removed. The notebooks are not executed: the book
shows the outputs of the runs that shipped them. A copy rather than a link, because
Sphinx resolves links to their target, outside the book's sources, where a page's
relative links (`lectures/06_ppo_cartpole.ipynb`) would no longer find it.

The Markdown pages link to the notebooks where they are in the repository (from
`docs/book/start-here.md`, `../../lectures/06_ppo_cartpole.ipynb`), so that the links work
where the sources are read as they are (on GitHub, say); while the book is built, each such
link is pointed at the copy (`lectures/06_ppo_cartpole.ipynb`).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

LECTURE_NOTEBOOKS = "[0-9][0-9]_*.ipynb"


def sync_lectures(repository_lectures: Path, book_lectures: Path) -> list[str]:
    """Copy the lecture notebooks that changed; return the names of the pages now present."""
    book_lectures.mkdir(exist_ok=True)
    shipped = {path.name: path for path in sorted(repository_lectures.glob(LECTURE_NOTEBOOKS))}
    for stale in book_lectures.glob(LECTURE_NOTEBOOKS):
        if stale.name not in shipped:
            stale.unlink()
    for name, source in shipped.items():
        copy = book_lectures / name
        if not copy.exists() or copy.read_bytes() != source.read_bytes():
            partial = book_lectures / f".{name}.partial"  # a build running beside this one never reads half a copy
            shutil.copyfile(source, partial)
            os.replace(partial, copy)
    return sorted(shipped)


def book_links(source: str, depth: int) -> str:
    """`source` of a page `depth` folders below the book's root, its links to the repository's
    lectures/ pointed at the book's copy: ](../../lectures/X) → ](lectures/X) at depth 0."""
    return source.replace("](" + "../" * (depth + 2) + "lectures/", "](" + "../" * depth + "lectures/")


def on_source_read(app, docname: str, source: list[str]) -> None:
    if not docname.startswith("lectures/"):
        source[0] = book_links(source[0], docname.count("/"))


def on_config_inited(app, config) -> None:
    book = Path(app.srcdir)
    sync_lectures(book.parents[1] / "lectures", book / "lectures")


def setup(app):
    app.connect("config-inited", on_config_inited)
    app.connect("source-read", on_source_read)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
