"""How long each lecture takes to read, measured from its words, its code and its printed output.

    python -m experiments.tools.reading_times            # the table: words, code, output, reading and run time
    python -m experiments.tools.reading_times --write    # rewrite the reading and run-time columns of the two pages
    python -m experiments.tools.reading_times --check    # the pages' columns equal the measurement (exit 1 if not)

What a reader reads, per lecture:

- **prose**: the words of the markdown cells of `lectures/NN_name.py` (read with jupytext),
  at 200 words a minute. Brysbaert (2019, "How many words do we read per minute?", Journal
  of Memory and Language 109) puts silent reading of English non-fiction at about 238 words a
  minute; text with equations reads slower, so this project takes 200.
- **code**: the non-blank lines of its code cells, at 10 lines a minute;
- **printed output**: the non-blank lines of text its shipped notebook (`lectures/NN_name.ipynb`)
  printed, tables included, at 20 lines a minute; `wrote: PATH` lines are not counted;
- **figures**: half a minute each.

The code, output and figure rates are this project's assumptions, not measurements. Cells
tagged `claims` are folded on the page (the claims boxes) and not counted. A lecture's
reading time is the sum, rounded to the nearest minute; a track's is the sum of its lectures'.

A lecture's run time is its shipped notebook's full run as that run recorded it: from the
first code cell's start to the last one's reply, in the timestamps the notebook executor
writes into each cell's metadata (the kernel's start-up not counted). So the pages give the
run whose outputs a reader sees, on the machine that made it.

The pages that show the times: the syllabus's table in `lectures/README.md` (columns `full`
and `reading`) and both tables of `docs/book/start-here.md` (columns `run` and `read`), each
with a total row. The syllabus's `--quick` column is written by hand.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import re
import sys
from pathlib import Path

import jupytext

REPO_ROOT = Path(__file__).resolve().parents[2]
LECTURES = REPO_ROOT / "lectures"
SYLLABUS = LECTURES / "README.md"
START_HERE = REPO_ROOT / "docs" / "book" / "start-here.md"

PROSE_WORDS_PER_MINUTE = 200
CODE_LINES_PER_MINUTE = 10
OUTPUT_LINES_PER_MINUTE = 20
MINUTES_PER_FIGURE = 0.5
FOLDED_TAG = "claims"
SHORT_TRACK = (1, 3, 5, 6, 7, 14)

WORD = re.compile(r"\w[\w'’.-]*")
SYLLABUS_ROW = re.compile(r"^\| (\d+) \| ")
START_HERE_ROW = re.compile(r"^\| \[(\d+) — ")


@dataclasses.dataclass(frozen=True)
class Lecture:
    """What one lecture gives a reader to read, and how long its full run takes."""

    number: int
    name: str
    words: int
    code_lines: int
    output_lines: int
    figures: int
    run_seconds: int

    @property
    def reading_minutes(self) -> int:
        minutes = (self.words / PROSE_WORDS_PER_MINUTE + self.code_lines / CODE_LINES_PER_MINUTE
                   + self.output_lines / OUTPUT_LINES_PER_MINUTE + self.figures * MINUTES_PER_FIGURE)
        return max(1, round(minutes))


def lecture_scripts() -> list[Path]:
    """lectures/NN_name.py, in order."""
    return sorted(LECTURES.glob("[0-9][0-9]_*.py"))


def is_folded(cell) -> bool:
    return FOLDED_TAG in cell.get("metadata", {}).get("tags", [])


def count_text(script: Path) -> tuple[int, int]:
    """(words of the markdown cells, non-blank lines of the code cells) of a lecture script."""
    notebook = jupytext.read(script)
    words = code_lines = 0
    for cell in notebook.cells:
        if is_folded(cell):
            continue
        if cell.cell_type == "markdown":
            words += len(WORD.findall(cell.source))
        elif cell.cell_type == "code":
            code_lines += sum(1 for line in cell.source.splitlines() if line.strip())
    return words, code_lines


def count_outputs(notebook_path: Path) -> tuple[int, int]:
    """(non-blank printed lines, figures) of a shipped notebook's unfolded cells; (0, 0) without one."""
    if not notebook_path.is_file():
        return 0, 0
    cells = json.loads(notebook_path.read_text(encoding="utf-8"))["cells"]
    lines = figures = 0
    for cell in cells:
        if cell["cell_type"] != "code" or is_folded(cell):
            continue
        for output in cell.get("outputs", []):
            if output["output_type"] == "stream" and output.get("name") == "stdout":
                text = "".join(output["text"])
                lines += sum(1 for line in text.splitlines() if line.strip() and not line.startswith("wrote: "))
            elif "image/png" in output.get("data", {}):
                figures += 1
    return lines, figures


def notebook_run_seconds(notebook_path: Path) -> int:
    """Seconds from the first code cell's start to the last one's reply, as the notebook's run recorded them."""
    cells = json.loads(notebook_path.read_text(encoding="utf-8"))["cells"]
    times = [cell.get("metadata", {}).get("execution", {}) for cell in cells if cell["cell_type"] == "code"]
    starts = [stamp["iopub.execute_input"] for stamp in times if "iopub.execute_input" in stamp]
    ends = [stamp["shell.execute_reply"] for stamp in times if "shell.execute_reply" in stamp]
    if not starts or not ends:
        raise ValueError(f"{notebook_path.name} records no execution times: execute it (lectures/_notebooks.py)")
    first, last = (datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")) for stamp in (min(starts), max(ends)))
    return round((last - first).total_seconds())


def format_duration(seconds: int) -> str:
    minutes, seconds = divmod(seconds, 60)
    return f"{minutes} min {seconds} s" if minutes else f"{seconds} s"


def format_minutes(minutes: int) -> str:
    hours, rest = divmod(minutes, 60)
    return f"{minutes} min ({hours} h {rest} min)" if hours else f"{minutes} min"


def split_row(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def join_row(cells: list[str]) -> str:
    return "|" + "|".join(f" {cell} " if cell else " " for cell in cells) + "|"


def measure() -> list[Lecture]:
    """Every lecture's counts and reading time, with its shipped notebook's run time."""
    lectures = []
    for script in lecture_scripts():
        number = int(script.name[:2])
        words, code_lines = count_text(script)
        notebook = script.with_suffix(".ipynb")
        output_lines, figures = count_outputs(notebook)
        lectures.append(Lecture(number, script.stem, words, code_lines, output_lines, figures,
                                notebook_run_seconds(notebook)))
    return lectures


def total_minutes(lectures: list[Lecture], numbers=None) -> int:
    return sum(lecture.reading_minutes for lecture in lectures if numbers is None or lecture.number in numbers)


def total_run_seconds(lectures: list[Lecture], numbers=None) -> int:
    return sum(lecture.run_seconds for lecture in lectures if numbers is None or lecture.number in numbers)


def print_table(lectures: list[Lecture]) -> None:
    header = ("lecture", "words", "code lines", "output lines", "figures", "reading", "run")
    rows = [(lecture.name, lecture.words, lecture.code_lines, lecture.output_lines, lecture.figures,
             f"{lecture.reading_minutes} min", format_duration(lecture.run_seconds)) for lecture in lectures]
    rows.append(("short track", "", "", "", "", format_minutes(total_minutes(lectures, SHORT_TRACK)),
                 format_duration(total_run_seconds(lectures, SHORT_TRACK))))
    rows.append(("all sixteen", "", "", "", "", format_minutes(total_minutes(lectures)),
                 format_duration(total_run_seconds(lectures))))
    widths = [max(len(str(row[i])) for row in (header, *rows)) for i in range(len(header))]
    for row in (header, tuple("-" * width for width in widths), *rows):
        print("  ".join(str(cell).rjust(width) if i else str(cell).ljust(width) for i, (cell, width)
                        in enumerate(zip(row, widths))))


# --- the pages' columns --------------------------------------------------------------------

def format_total_seconds(seconds: int) -> str:
    """The syllabus's total run time: '1,159 s (19 min 19 s)'."""
    return f"{seconds:,} s ({format_duration(seconds)})"


# page → (header's first cells, row pattern, reading column, run column, how a total run time is written,
#         total row's label → lectures counted)
PAGE_TABLES = {
    SYLLABUS: [(("#", "lecture"), SYLLABUS_ROW, "reading", "full", format_total_seconds, {"**all sixteen**": None})],
    START_HERE: [(("lecture", "run", "read", "why this one"), START_HERE_ROW, "read", "run", format_duration,
                  {"**short track**": SHORT_TRACK}),
                 (("lecture", "run", "read", "builds on"), START_HERE_ROW, "read", "run", format_duration,
                  {"**full track**": None})],
}
FOOTNOTE_MARKS = "¹²³"  # kept after a run time they follow ("1 min 30 s¹")


def expected_cells(lectures: list[Lecture], total_rows: dict) -> tuple[dict[int, str], dict[str, str]]:
    """The reading column's cells a table should hold: per lecture, and per total row."""
    per_lecture = {lecture.number: f"{lecture.reading_minutes} min" for lecture in lectures}
    totals = {label: f"**{format_minutes(total_minutes(lectures, numbers))}**" for label, numbers in total_rows.items()}
    return per_lecture, totals


def expected_run_cells(lectures: list[Lecture], total_rows: dict, total_format) -> tuple[dict[int, str], dict[str, str]]:
    """The run column's cells a table should hold: per lecture, and per total row."""
    per_lecture = {lecture.number: format_duration(lecture.run_seconds) for lecture in lectures}
    totals = {label: f"**{total_format(total_run_seconds(lectures, numbers))}**" for label, numbers in total_rows.items()}
    return per_lecture, totals


def total_cell(cells: list[str], totals: dict[str, str]) -> str | None:
    """The reading cell a total row should hold, found by its label in any of its cells."""
    return next((totals[cell] for cell in cells if cell in totals), None)


def page_tables(text: str, first_cells: tuple) -> list[tuple[int, int]]:
    """(header line index, end line index) of each table whose header starts with first_cells."""
    lines, found = text.splitlines(), []
    for index, line in enumerate(lines):
        if line.startswith("|") and tuple(split_row(line)[:len(first_cells)]) == first_cells:
            end = index
            while end < len(lines) and lines[end].startswith("|"):
                end += 1
            found.append((index, end))
    return found


def rewrite_page(text: str, lectures: list[Lecture], tables) -> tuple[str, list[str]]:
    """The page with its reading and run columns set to the measurement, and the cells that differed."""
    lines, differences = text.splitlines(), []
    for first_cells, row_pattern, reading_column, run_column, total_format, total_rows in tables:
        spans = page_tables(text, first_cells)
        if len(spans) != 1:
            raise ValueError(f"expected one table with header {' | '.join(first_cells)}, found {len(spans)}")
        start, end = spans[0]
        header = split_row(lines[start])
        for column_name, (per_lecture, totals) in ((reading_column, expected_cells(lectures, total_rows)),
                                                   (run_column, expected_run_cells(lectures, total_rows,
                                                                                   total_format))):
            column = header.index(column_name)
            for index in range(start + 2, end):
                cells = split_row(lines[index])
                match = row_pattern.match(lines[index])
                wanted = per_lecture.get(int(match.group(1))) if match else total_cell(cells, totals)
                if wanted is None:
                    continue
                marks = cells[column][len(cells[column].rstrip(FOOTNOTE_MARKS)):]
                if cells[column] != wanted + marks:
                    label = next(cell for cell in cells if cell)
                    differences.append(f"{label[:40]}: {column_name} {cells[column]!r}, measured {wanted + marks!r}")
                    cells[column] = wanted + marks
                    lines[index] = join_row(cells)
    return "\n".join(lines) + ("\n" if text.endswith("\n") else ""), differences


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="reading_times", description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="rewrite the reading and run columns of the pages")
    mode.add_argument("--check", action="store_true", help="exit 1 if a page's reading or run column differs")
    arguments = parser.parse_args(argv)
    lectures = measure()
    if not (arguments.write or arguments.check):
        print_table(lectures)
        return 0
    stale = False
    for page, tables in PAGE_TABLES.items():
        text = page.read_text(encoding="utf-8")
        rewritten, differences = rewrite_page(text, lectures, tables)
        for difference in differences:
            print(f"{page.relative_to(REPO_ROOT)}: {difference}")
        stale = stale or bool(differences)
        if arguments.write and rewritten != text:
            page.write_text(rewritten, encoding="utf-8")
    return 1 if stale and arguments.check else 0


if __name__ == "__main__":
    sys.exit(main())
