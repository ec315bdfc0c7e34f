"""Every numbered lecture runs with --quick and writes the files it announces.

The convention (lectures/README.md): a lecture `lectures/NN_name.py` writes into one folder
named NN_name (under $LECTURE_OUTPUTS, default lecture_outputs/), prints `wrote: PATH` for
each file, and ends its output with the line `outputs: FOLDER`. Lectures added later are
picked up by the glob below without editing this file.
"""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

REPO_ROOT = Path(__file__).resolve().parents[1]
LECTURES = sorted(REPO_ROOT.glob("lectures/[0-9][0-9]_*.py"))
QUICK_RUN_TIMEOUT_S = 300  # generous: the quick runs take seconds, but CI machines are slow and shared


def resolve(printed: str) -> Path:
    """A path printed by a lecture: absolute, or relative to the repository root (its working directory)."""
    path = Path(printed)
    return path if path.is_absolute() else REPO_ROOT / path


def test_lectures_are_present():
    assert LECTURES, "no lectures/NN_*.py files found"


@pytest.mark.slow  # full tier: every lecture's quick run
@pytest.mark.parametrize("script", LECTURES, ids=[script.stem for script in LECTURES])
def test_lecture_runs_quick_and_writes_its_outputs(script: Path, tmp_path: Path):
    started = time.time()
    environment = {**os.environ, "LECTURE_OUTPUTS": str(tmp_path), "MPLBACKEND": "Agg"}
    result = subprocess.run(
        [sys.executable, str(script), "--quick"],
        cwd=REPO_ROOT, env=environment, capture_output=True, text=True, timeout=QUICK_RUN_TIMEOUT_S,
    )
    assert result.returncode == 0, f"{script.name} --quick failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"

    lines = result.stdout.strip().splitlines()
    assert lines and lines[-1].startswith("outputs: "), f"{script.name} must end with 'outputs: <folder>'; last line: {lines[-1:]}"
    folder = resolve(lines[-1].removeprefix("outputs: ").strip())
    assert folder.name == script.stem, f"outputs go into a folder named {script.stem}, not {folder.name}"
    assert folder.resolve().is_relative_to(tmp_path.resolve()), "outputs must go under $LECTURE_OUTPUTS"
    assert folder.is_dir()
    assert any(line.endswith(" checked") or " checked; " in line for line in lines), "finish() reports its claims"
    assert any(folder.rglob("*.png")), f"{script.name} wrote no PNG into {folder}"

    announced = [resolve(line.removeprefix("wrote: ").strip()) for line in lines if line.startswith("wrote: ")]
    assert announced, f"{script.name} announced no files with 'wrote: <path>'"
    for path in announced:
        assert path.is_file(), f"{script.name} announced {path} but it does not exist"
        assert path.stat().st_mtime >= started - 1, f"{path} was not written by this run"
        assert path.resolve().is_relative_to(folder.resolve()), f"{path} lies outside the lecture's folder {folder}"


# The claim checks of lectures/_common.py: a sentence of a lecture's prose checked on its own run.

sys.path.insert(0, str(REPO_ROOT / "lectures"))
import _common  # noqa: E402


def make_lecture(monkeypatch, tmp_path: Path, quick: bool, keep_going: bool = False) -> "_common.Lecture":
    monkeypatch.setattr(sys, "argv", ["NN_claims.py"] + (["--quick"] if quick else []))
    monkeypatch.setenv("LECTURE_OUTPUTS", str(tmp_path))
    monkeypatch.setenv("LECTURE_QUICK", "0")
    monkeypatch.setenv("LECTURE_KEEP_GOING", "1" if keep_going else "0")
    return _common.Lecture("NN_claims")


def test_a_claim_that_holds_is_counted_and_printed_with_its_measurement(monkeypatch, tmp_path, capsys):
    lecture = make_lecture(monkeypatch, tmp_path, quick=False)
    assert lecture.claim("the ratio is above 1", 2.5 > 1, measured="ratio 2.50")
    assert lecture.claim("the curve falls", torch.tensor(True), measured="slope -0.3")
    lecture.finish()
    lines = capsys.readouterr().out.splitlines()
    assert "claim checked: the ratio is above 1 [measured: ratio 2.50]" in lines
    assert "2 claims checked" in lines
    assert lines[-1].startswith("outputs: ")


def test_a_contradicted_claim_ends_the_lecture_quoting_the_sentence_and_the_measurement(monkeypatch, tmp_path):
    lecture = make_lecture(monkeypatch, tmp_path, quick=False)
    with pytest.raises(_common.ClaimContradicted,
                       match=r'contradicts the claim "the ratio is above 1" \(measured: ratio 0.80\)'):
        lecture.claim("the ratio is above 1", 0.8 > 1, measured="ratio 0.80")


def test_a_claim_the_quick_run_cannot_show_is_reported_as_not_checked(monkeypatch, tmp_path, capsys):
    lecture = make_lecture(monkeypatch, tmp_path, quick=True)
    assert lecture.claim("all seeds reach 500", False, measured="best 37", quick=False)  # skipped: not checked
    lecture.claim("the loss is finite", True, measured="loss 0.1")
    lecture.finish()
    out = capsys.readouterr().out
    assert "claim not checked in a quick run: all seeds reach 500" in out
    assert "1 claim checked; 1 more need the full run and were not checked" in out
    # the same claim in a full run is checked, and fails
    lecture = make_lecture(monkeypatch, tmp_path, quick=False)
    with pytest.raises(_common.ClaimContradicted, match="all seeds reach 500"):
        lecture.claim("all seeds reach 500", False, measured="best 37", quick=False)


def test_keep_going_reports_every_contradicted_claim_and_fails_at_the_end(monkeypatch, tmp_path, capsys):
    lecture = make_lecture(monkeypatch, tmp_path, quick=False, keep_going=True)
    assert not lecture.claim("first", False, measured="a")
    assert lecture.claim("second", True, measured="b")
    assert not lecture.claim("third", False, measured="c")
    with pytest.raises(_common.ClaimContradicted, match=r'2 of 3 claims contradicted:\n.*"first".*\n.*"third"'):
        lecture.finish()
    assert "outputs: " not in capsys.readouterr().out


@pytest.mark.parametrize("outcome", ["ratio > 1", [False], 0.0, torch.tensor([True, False])])
def test_a_claim_whose_outcome_is_not_a_truth_value_is_refused(monkeypatch, tmp_path, outcome):
    lecture = make_lecture(monkeypatch, tmp_path, quick=False)
    with pytest.raises(TypeError, match="must be a bool"):
        lecture.claim("a sentence", outcome, measured="x")


def test_a_failing_claim_fails_the_script_with_its_sentence(tmp_path: Path):
    script = tmp_path / "99_claims.py"
    script.write_text("import sys\nsys.path.insert(0, %r)\nfrom _common import Lecture\n"
                      "lecture = Lecture('99_claims')\n"
                      "lecture.claim('two is less than one', 2 < 1, measured='2 and 1')\n"
                      "lecture.finish()\n" % str(REPO_ROOT / "lectures"))
    environment = {**os.environ, "LECTURE_OUTPUTS": str(tmp_path), "MPLBACKEND": "Agg", "LECTURE_KEEP_GOING": "0"}
    result = subprocess.run([sys.executable, str(script)], env=environment, capture_output=True, text=True,
                            timeout=QUICK_RUN_TIMEOUT_S)
    assert result.returncode != 0
    assert 'contradicts the claim "two is less than one" (measured: 2 and 1)' in result.stderr
    assert "outputs: " not in result.stdout
