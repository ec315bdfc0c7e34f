"""The reading times the course's pages give are what experiments/tools/reading_times.py measures
from the lectures as they are now; the measurement follows its stated rule."""

import json

import pytest

from experiments.tools import reading_times


@pytest.fixture(scope="module")
def lectures():
    return reading_times.measure()


@pytest.mark.parametrize("page", sorted(reading_times.PAGE_TABLES), ids=lambda page: page.name)
def test_a_pages_reading_times_equal_the_measurement_of_the_lectures(lectures, page):
    """When this fails, a lecture's text changed: `python -m experiments.tools.reading_times --write`."""
    text = page.read_text(encoding="utf-8")
    _, differences = reading_times.rewrite_page(text, lectures, reading_times.PAGE_TABLES[page])
    assert differences == []


def test_every_lecture_and_each_track_has_its_reading_time_beside_its_run_time(lectures):
    assert [lecture.number for lecture in lectures] == list(range(1, 17))
    assert all(lecture.reading_minutes >= 1 and lecture.run_seconds > 0 for lecture in lectures)
    for page, tables in reading_times.PAGE_TABLES.items():
        text = page.read_text(encoding="utf-8")
        for first_cells, row_pattern, _, _, _, totals in tables:
            ((start, end),) = reading_times.page_tables(text, first_cells)
            rows = text.splitlines()[start + 2:end]
            numbers = [int(row_pattern.match(row).group(1)) for row in rows if row_pattern.match(row)]
            assert numbers == (list(reading_times.SHORT_TRACK) if "why this one" in first_cells else list(range(1, 17)))
            labels = [next(cell for cell in reading_times.split_row(row) if cell) for row in rows if not row_pattern.match(row)]
            assert labels == list(totals)


def write_lecture(folder, words: int, code_lines: int, output_lines: int, figures: int):
    """A lecture script and its shipped notebook with the given counts, plus a folded claims cell
    and a `wrote:` line that must not count."""
    prose = " ".join(["word"] * words)
    code = "\n".join(f"x{i} = {i}" for i in range(code_lines))
    script = folder / "01_tiny.py"
    script.write_text(f'# %% [markdown]\n"""\n{prose}\n"""\n\n# %%\n{code}\n\n'
                      '# %% tags=["claims"]\nlecture.claim("folded", True)\nmore = 1\n', encoding="utf-8")
    printed = "".join(f"row {i}\n" for i in range(output_lines)) + "wrote: lecture_outputs/x.png\n\n"
    outputs = [{"output_type": "stream", "name": "stdout", "text": printed}]
    outputs += [{"output_type": "display_data", "data": {"image/png": "", "text/plain": "<Figure>"}, "metadata": {}}
                for _ in range(figures)]
    cells = [{"cell_type": "code", "metadata": {}, "source": code, "outputs": outputs},
             {"cell_type": "code", "metadata": {"tags": ["claims", "hide-cell"]}, "source": "",
              "outputs": [{"output_type": "stream", "name": "stdout", "text": "claim checked: folded\n" * 50}]}]
    script.with_suffix(".ipynb").write_text(json.dumps({"cells": cells}), encoding="utf-8")
    return script


def test_reading_time_is_prose_at_200_words_code_at_10_lines_output_at_20_lines_and_half_a_minute_a_figure(tmp_path):
    script = write_lecture(tmp_path, words=400, code_lines=20, output_lines=40, figures=2)
    assert reading_times.count_text(script) == (400, 20)
    assert reading_times.count_outputs(script.with_suffix(".ipynb")) == (40, 2)
    lecture = reading_times.Lecture(1, script.stem, 400, 20, 40, 2, run_seconds=23)
    assert lecture.reading_minutes == 2 + 2 + 2 + 1


def test_a_changed_lecture_makes_the_page_stale_and_write_brings_it_back(lectures):
    text = reading_times.START_HERE.read_text(encoding="utf-8")
    longer = [reading_times.Lecture(**{**lecture.__dict__, "words": lecture.words + 2000}) if lecture.number == 3
              else lecture for lecture in lectures]
    tables = reading_times.PAGE_TABLES[reading_times.START_HERE]
    rewritten, differences = reading_times.rewrite_page(text, longer, tables)
    three = next(lecture for lecture in longer if lecture.number == 3)
    assert any(f"measured '{three.reading_minutes} min'" in difference for difference in differences)
    assert any(difference.startswith("**short track**") for difference in differences)
    assert reading_times.rewrite_page(rewritten, longer, tables)[1] == []


def test_a_lectures_run_time_is_its_notebooks_run_from_the_first_cells_start_to_the_last_ones_reply(tmp_path):
    def cell(start, reply):
        return {"cell_type": "code", "source": "", "outputs": [], "metadata": {"execution": {
            "iopub.execute_input": f"2026-01-01T10:{start}Z", "shell.execute_reply": f"2026-01-01T10:{reply}Z"}}}

    notebook = tmp_path / "01_tiny.ipynb"
    cells = [cell("00:01.200000", "00:05.000000"), {"cell_type": "markdown", "source": "", "metadata": {}},
             cell("00:05.100000", "01:30.900000")]
    notebook.write_text(json.dumps({"cells": cells}), encoding="utf-8")
    assert reading_times.notebook_run_seconds(notebook) == 90  # 10:00:01.2 to 10:01:30.9
    notebook.write_text(json.dumps({"cells": [{"cell_type": "code", "source": "", "outputs": [], "metadata": {}}]}))
    with pytest.raises(ValueError, match="01_tiny.ipynb records no execution times"):
        reading_times.notebook_run_seconds(notebook)


def test_a_notebooks_new_run_time_makes_the_run_columns_and_totals_stale_and_keeps_footnote_marks(lectures):
    text = reading_times.SYLLABUS.read_text(encoding="utf-8")
    slower = [reading_times.Lecture(**{**lecture.__dict__, "run_seconds": lecture.run_seconds + 60})
              if lecture.number == 12 else lecture for lecture in lectures]
    tables = reading_times.PAGE_TABLES[reading_times.SYLLABUS]
    rewritten, differences = reading_times.rewrite_page(text, slower, tables)
    twelve = next(lecture for lecture in slower if lecture.number == 12)
    assert any(difference.startswith("12: full") and
               f"measured '{reading_times.format_duration(twelve.run_seconds)}¹'" in difference
               for difference in differences)
    total = sum(lecture.run_seconds for lecture in slower)
    assert f"**{total:,} s ({reading_times.format_duration(total)})**" in rewritten
    assert reading_times.rewrite_page(rewritten, slower, tables)[1] == []


@pytest.mark.parametrize("seconds, text", [(23, "23 s"), (98, "1 min 38 s"), (180, "3 min 0 s")])
def test_run_times_are_written_in_minutes_and_seconds(seconds, text):
    assert reading_times.format_duration(seconds) == text
