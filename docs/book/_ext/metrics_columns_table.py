"""The directive `metrics-columns`: the table of every metrics.csv column, from the library.

    ```{metrics-columns}
    ```

renders `ppo.runs.metrics_columns` (each column's meaning, unit, healthy range and the
algorithms that log it: every run's columns, and the ones each registered algorithm
declares, ppo.trainers.registry) as a table when the book is built, so the page cannot
drift from the code. Text in backticks becomes code, as in the rest of the book.
"""

from __future__ import annotations

import importlib

from docutils import nodes
from sphinx.util.docutils import SphinxDirective

MODULE = "ppo.runs.metrics_columns"
COLUMN_WIDTHS = (16, 40, 12, 24, 8)


def cell(text: str) -> nodes.entry:
    """A table cell whose `backticked` parts are code."""
    paragraph = nodes.paragraph()
    for index, part in enumerate(text.split("`")):
        if part:
            paragraph += nodes.literal(part, part) if index % 2 else nodes.Text(part)
    entry = nodes.entry()
    entry += paragraph
    return entry


def table_row(cells) -> nodes.row:
    row = nodes.row()
    for text in cells:
        row += cell(text)
    return row


def metrics_table(header, rows) -> nodes.table:
    """A docutils table of `header` and `rows` (tuples of text)."""
    table = nodes.table(classes=["metrics-columns"])
    group = nodes.tgroup(cols=len(header))
    table += group
    for width in COLUMN_WIDTHS:
        group += nodes.colspec(colwidth=width)
    head = nodes.thead()
    head += table_row(header)
    body = nodes.tbody()
    for row in rows:
        body += table_row(row)
    group += head
    group += body
    return table


class MetricsColumns(SphinxDirective):
    """`metrics-columns`, no arguments: the table of `ppo.runs.metrics_columns`."""

    def run(self) -> list[nodes.Node]:
        module = importlib.import_module(MODULE)
        choice = importlib.import_module("ppo.trainers.choice")  # every algorithm registered
        variants = importlib.import_module("ppo.trainers.variants")
        for source in (module, variants):
            self.env.note_dependency(source.__file__)  # an edited column rebuilds the page
        return [metrics_table(module.TABLE_HEADER, module.table_rows(choice.ALGORITHMS))]


def setup(app):
    app.add_directive("metrics-columns", MetricsColumns)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
