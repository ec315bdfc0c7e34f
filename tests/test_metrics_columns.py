"""The table of metrics.csv columns (ppo.runs.metrics_columns) is what the trainers log, and what the book shows.

Each algorithm ppo-train offers trains one iteration of a tiny CartPole run: the header of
its metrics.csv is exactly the columns the table gives that algorithm. The book's run-folder
page renders the table with the `metrics-columns` directive, whose cells are the table's text.
"""

from __future__ import annotations

import csv
import re
import sys
from pathlib import Path

import pytest

from envs.factory import make_vec_env
from ppo.config import PPOConfig
from ppo.runs.logger import UPDATE_DIAGNOSTICS
from ppo.runs.metrics_columns import COLUMNS, TABLE_HEADER, column, columns_logged_by, own_columns, table_rows
from ppo.trainers.choice import ALGORITHMS

REPO_ROOT = Path(__file__).resolve().parents[1]
BOOK_SOURCES = REPO_ROOT / "docs" / "book"
ONE_ITERATION = dict(env_id="CartPole-v1", env_backend="torch", num_envs=4, num_steps=32, total_timesteps=128,
                     tensorboard=False)


def logged_columns(trainer_class, run_dir: Path) -> list[str]:
    config = PPOConfig(**ONE_ITERATION).validate()
    trainer = trainer_class(config, make_vec_env(config.env_id, config.num_envs, config.env_backend),
                            run_dir=run_dir, progress=False)
    trainer.train()
    with open(run_dir / "metrics.csv", newline="") as file:
        return next(csv.reader(file))


@pytest.mark.parametrize("algorithm", list(ALGORITHMS))
def test_a_run_logs_exactly_the_columns_the_table_gives_its_algorithm(algorithm, tmp_path):
    logged = logged_columns(ALGORITHMS[algorithm], tmp_path)
    assert sorted(logged) == sorted(columns_logged_by(ALGORITHMS[algorithm]))  # each described, each one it says


def test_the_variants_columns_are_marked_as_theirs():
    logged_by = {row[0].strip("`"): row[4] for row in table_rows(ALGORITHMS)}
    assert logged_by["beta"] == "penalty only" and logged_by["clip_coef"] == "adaptive-clip only"
    assert logged_by["kl_after_update"] == "penalty and adaptive-clip only"
    assert logged_by["dual_clip_fraction"] == "dual-clip only" and logged_by["approx_kl"] == "every run"
    assert "dual_clip_fraction" not in columns_logged_by(ALGORITHMS["clip"])
    assert "beta" not in columns_logged_by(ALGORITHMS["dual-clip"])


def test_every_column_has_one_sentence_of_meaning_and_a_unique_name():
    entries = [*COLUMNS, *(entry for trainer in ALGORITHMS.values() for entry in own_columns(trainer))]
    names = [entry.name for entry in COLUMNS] + sorted({entry.name for entry in entries[len(COLUMNS):]})
    assert len(names) == len(set(names))
    for entry in entries:
        assert entry.meaning.endswith(".") and ". " not in entry.meaning, entry.name


def test_tensorboard_s_losses_group_holds_only_described_columns():
    described = {row[0].strip("`") for row in table_rows(ALGORITHMS)}
    assert sorted(UPDATE_DIAGNOSTICS - described) == []


def test_an_unknown_column_is_refused_naming_what_exists():
    with pytest.raises(KeyError, match="'approx_k1' is not a metrics.csv column; the columns are global_step"):
        column("approx_k1")
    assert column("beta", ALGORITHMS).unit == "> 0"


def test_the_run_folder_page_renders_the_table_from_the_library():
    page = (BOOK_SOURCES / "guide" / "run-folder.md").read_text()
    assert "```{metrics-columns}\n```" in page
    assert re.search(r'"metrics_columns_table"', (BOOK_SOURCES / "conf.py").read_text())
    assert "guide/run-folder.md#every-column-of-metricscsv" in (BOOK_SOURCES / "cheat-sheet.md").read_text()


def test_the_directive_s_table_holds_the_table_s_text():
    sys.path.insert(0, str(BOOK_SOURCES / "_ext"))
    try:
        import metrics_columns_table
    finally:
        sys.path.remove(str(BOOK_SOURCES / "_ext"))
    table = metrics_columns_table.metrics_table(TABLE_HEADER, table_rows(ALGORITHMS))
    (group,) = table.children
    (head,) = [node for node in group.children if node.tagname == "thead"]
    (body,) = [node for node in group.children if node.tagname == "tbody"]
    assert [entry.astext() for entry in head.children[0].children] == list(TABLE_HEADER)
    rendered = [[entry.astext() for entry in row.children] for row in body.children]
    assert rendered == [[text.replace("`", "") for text in row] for row in table_rows(ALGORITHMS)]
    assert body.children[0].children[0].children[0].children[0].tagname == "literal"  # the column's name is code
