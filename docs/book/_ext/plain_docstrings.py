"""Read the library's plain-text docstrings as reStructuredText that shows them as written.

The docstrings are plain text, not reStructuredText. They set equations and tables apart
as indented blocks, with or without a blank line before them:

    Â_t = δ_t + γ · λ · (1 − done_t) · Â_{t+1}

and their prose uses `*`, `|` and `_` as mathematics does (π(a | s), r_t, x * y).
Each docstring is rewritten before it is parsed:

* every indented block becomes a literal block, shown line for line in a fixed-width font,
  unless it is a list;
* a list gets the blank lines around it that reStructuredText needs;
* outside `code` spans, the characters reStructuredText would read as markup are escaped.
"""

from __future__ import annotations

import re

LIST_ITEM = re.compile(r"^(\s*)([*+-]|\d+[.)]) ")
TRAILING_UNDERSCORE = re.compile(r"(?<=\w)_(?!\w)")  # `name_` would be a link target reference


def indent_of(line: str) -> int:
    return len(line) - len(line.lstrip())


def list_text_indent(line: str) -> int | None:
    """Where the text of a list item starts (its continuation lines' indent), None if not an item."""
    match = LIST_ITEM.match(line)
    return match.end() if match else None


def escape_prose(text: str, in_code: bool) -> tuple[str, bool]:
    """Escape backslash, '*', '|' and a word's trailing '_' outside `code` spans.

    Returns the escaped text and whether a code span is still open at its end.
    """
    pieces = text.split("`")
    for index, piece in enumerate(pieces):
        if (index % 2 == 0) != in_code:  # outside a code span
            piece = piece.replace("\\", "\\\\").replace("*", "\\*").replace("|", "\\|")
            pieces[index] = TRAILING_UNDERSCORE.sub(r"\\_", piece)
    return "`".join(pieces), in_code != (len(pieces) % 2 == 0)


def prose_line(line: str, in_code: bool) -> tuple[str, bool]:
    marker_end = list_text_indent(line) or 0
    text, in_code = escape_prose(line[marker_end:], in_code)
    return line[:marker_end] + text, in_code


def restructured(lines: list[str]) -> list[str]:
    """The docstring's lines as reStructuredText (see the module's docstring)."""
    out: list[str] = []
    base = 0  # the indent of the prose the lines are read against
    items: list[tuple[int, int]] = []  # the open list items, outermost first: (marker's indent, text's indent)
    in_code = False
    index = 0
    while index < len(lines):
        line = lines[index]
        if not line.strip():
            out.append("")
            in_code = False
            index += 1
            continue
        indent = indent_of(line)
        text_indent = list_text_indent(line)
        continues = [item for item in items if item[1] == indent]
        if indent > base and text_indent is None and not continues:
            end = index
            while end < len(lines) and (not lines[end].strip() or indent_of(lines[end]) > base):
                end += 1
            while not lines[end - 1].strip():
                end -= 1
            out += ["", " " * base + "::", "", *lines[index:end], ""]
            items, in_code, index = [], False, end
            continue
        if text_indent is not None:  # a list item: a list, nested or set in, is set apart by blank lines
            sibling = bool(items) and items[-1][0] == indent
            items = [item for item in items if item[0] < indent] + [(indent, text_indent)]
            if not sibling and out and out[-1].strip():
                out.append("")
        elif continues:  # a list item's text goes on, after any list nested in it
            if items[-1][1] != indent and out and out[-1].strip():
                out.append("")
            items = items[: items.index(continues[0]) + 1]
        else:
            if items and out and out[-1].strip():
                out.append("")  # a list ends with a blank line
            items, base = [], indent
        text, in_code = prose_line(line, in_code)
        out.append(text)
        index += 1
    return out


def process_docstring(app, what, name, obj, options, lines: list[str]) -> None:
    lines[:] = restructured(lines)


def setup(app):
    app.connect("autodoc-process-docstring", process_docstring)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
