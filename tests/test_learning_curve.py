"""The learning curve of a run folder (ppo.runs.plotting): what it plots, and the helper
process that draws it while a command evaluates, checked against the same curve drawn here."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from ppo.runs import curve_figure, plotting
from ppo.runs.plotting import CurveDrawer, plot_learning_curve

PNG = b"\x89PNG\r\n\x1a\n"


def write_metrics(run_dir: Path) -> Path:
    """A metrics.csv with a recent return on two of its three rows (none yet on the first)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / "metrics.csv", "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["iteration", "global_step", "episode_return_recent", "loss"])
        writer.writerows([[1, 512, "", 0.5], [2, 1024, 21.5, 0.4], [3, 1536, 40.25, 0.3]])
    return run_dir


def test_the_curve_is_the_recent_return_of_the_rows_that_have_one_against_their_steps(tmp_path):
    run_dir = write_metrics(tmp_path / "run")
    assert curve_figure.curve_points(str(run_dir / "metrics.csv")) == ([1024.0, 1536.0], [21.5, 40.25])
    path = plot_learning_curve(run_dir, "a title")
    assert path == run_dir / "learning_curve.png" and path.read_bytes().startswith(PNG)


def refuse_to_draw_here(monkeypatch):
    """Make drawing in this process fail the test: what is drawn must come from the helper."""
    def refused(*args, **kwargs):
        raise AssertionError("drawn in the test's process, not by the helper")
    monkeypatch.setattr(plotting, "plot_learning_curve", refused)


def test_the_helper_draws_the_png_this_process_draws(tmp_path, monkeypatch):
    here, there = write_metrics(tmp_path / "here"), write_metrics(tmp_path / "there")
    expected = plot_learning_curve(here, "PPO on a task").read_bytes()
    refuse_to_draw_here(monkeypatch)
    drawer = CurveDrawer(helper=True)
    assert drawer.process is not None
    path = drawer.draw(there, "PPO on a task")
    drawer.finish()
    assert path.read_bytes() == expected
    assert drawer.process is None  # ended
    assert sorted(entry.name for entry in there.iterdir()) == ["learning_curve.png", "metrics.csv"]  # no temporary


def test_files_in_the_working_folder_named_like_modules_do_not_replace_them_in_the_helper(tmp_path, monkeypatch):
    run_dir = write_metrics(tmp_path / "run")
    folder = tmp_path / "work"
    folder.mkdir()
    for name in ("signal", "runpy", "json", "csv", "matplotlib"):
        (folder / f"{name}.py").write_text("raise SystemExit('a module of the working folder ran')\n")
    monkeypatch.chdir(folder)
    refuse_to_draw_here(monkeypatch)
    with CurveDrawer(helper=True) as drawer:
        path = drawer.draw(run_dir, "t")
    assert path.read_bytes().startswith(PNG)


def test_a_curve_handed_to_a_helper_that_ends_without_answering_is_drawn_here(tmp_path, monkeypatch):
    run_dir = write_metrics(tmp_path / "run")
    (run_dir / "learning_curve.png").write_bytes(b"an earlier segment's curve")
    monkeypatch.setattr(plotting, "HELPER_CODE", "import sys; sys.stdin.readline()")  # takes the request, draws nothing
    with CurveDrawer(helper=True) as drawer:
        path = drawer.draw(run_dir, "t")
        assert drawer.handed and not path.exists()  # the earlier curve is gone: missing until drawn, never stale
    assert path.read_bytes().startswith(PNG)


def test_an_interrupted_drawing_leaves_the_earlier_png_whole_and_no_temporary(tmp_path, monkeypatch):
    run_dir = write_metrics(tmp_path / "run")
    path = plot_learning_curve(run_dir, "t")
    earlier = path.read_bytes()

    def interrupted(target, *args):
        Path(target).write_bytes(PNG)  # half a figure
        raise KeyboardInterrupt

    monkeypatch.setattr(curve_figure, "draw_curve", interrupted)
    with pytest.raises(KeyboardInterrupt):
        plot_learning_curve(run_dir, "t")
    assert path.read_bytes() == earlier
    assert sorted(entry.name for entry in run_dir.iterdir()) == ["learning_curve.png", "metrics.csv"]


def test_a_helper_gone_before_the_curve_is_handed_over_leaves_it_to_this_process(tmp_path):
    run_dir = write_metrics(tmp_path / "run")
    drawer = CurveDrawer(helper=True)
    drawer.process.kill()
    drawer.process.wait()
    path = drawer.draw(run_dir, "t")
    assert not drawer.handed and path.read_bytes().startswith(PNG)  # drawn at once, here
    drawer.finish()


def test_a_curve_that_cannot_be_drawn_raises_its_error_here(tmp_path):
    drawer = CurveDrawer(helper=True)
    drawer.draw(tmp_path / "no run", "t")
    with pytest.raises(FileNotFoundError, match="metrics.csv"):
        drawer.finish()
    assert drawer.process is None


def test_what_a_killed_drawing_leaves_is_cleared_as_a_checkpoints_leftovers_are(tmp_path):
    from ppo.runs.checkpoint import remove_stale_temporaries

    leftover = tmp_path / f".learning_curve.png.4242{curve_figure.TEMPORARY_SUFFIX}"
    leftover.write_bytes(PNG)
    assert remove_stale_temporaries(tmp_path) == [leftover]


def test_the_names_the_standalone_figure_module_repeats_are_the_projects():
    """curve_figure imports nothing of the project, so it repeats these names: they must stay the same."""
    from ppo.runs.checkpoint import TEMPORARY_SUFFIX
    from ppo.runs.metrics_columns import columns_logged_by
    from ppo.trainers.ppo import PPO

    assert curve_figure.TEMPORARY_SUFFIX == TEMPORARY_SUFFIX
    assert {curve_figure.STEP_COLUMN, curve_figure.RETURN_COLUMN} <= set(columns_logged_by(PPO))


def test_where_matplotlib_is_imported_already_the_curve_is_drawn_here(tmp_path):
    import matplotlib.figure  # noqa: F401

    drawer = CurveDrawer()
    assert drawer.process is None
    path = drawer.draw(write_metrics(tmp_path / "run"), "t")
    assert path.read_bytes().startswith(PNG)  # before finish: nothing was handed over
    drawer.finish()


def test_a_drawer_left_with_nothing_handed_over_ends_its_helper_at_once(tmp_path):
    with CurveDrawer(helper=True) as drawer:
        process = drawer.process
    assert process.poll() is not None and drawer.process is None


def test_the_helper_imports_neither_torch_nor_the_project():
    code = (f"import io, runpy, sys; runpy.run_path({curve_figure.__file__!r})['serve'](io.StringIO(), io.StringIO()); "
            "print(sorted(name for name in ('torch', 'ppo', 'envs', 'experiments', 'matplotlib') if name in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                            cwd=Path(__file__).resolve().parents[1])  # where `import ppo` would work
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['matplotlib']"  # serve imported it (and drew its throwaway curve)
