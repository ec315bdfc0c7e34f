"""The README's "Python API" examples run as written, each block on its own, in order.

The blocks share one working folder, as a reader's session would: the first trains into
runs/cartpole-api, the next two load it, the last trains and loads the language model.
The SFT model's cache goes to a temporary folder, so the test does not depend on (or
fill) the reader's cache; the small model there trains in seconds.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
EXAMPLE_TIMEOUT_S = 600  # seconds of work each, but CI machines are slow and shared


def python_api_examples() -> list[str]:
    readme = (REPO_ROOT / "README.md").read_text()
    section = readme.split("\n## Python API\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)


def test_the_readme_has_a_python_api_section_with_examples():
    assert len(python_api_examples()) >= 4


def test_the_python_api_examples_run(tmp_path: Path):
    environment = {**os.environ, "PPO_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(REPO_ROOT)}
    outputs = []
    for number, example in enumerate(python_api_examples(), start=1):
        result = subprocess.run([sys.executable, "-c", example], cwd=tmp_path, env=environment,
                                capture_output=True, text=True, timeout=EXAMPLE_TIMEOUT_S)
        assert result.returncode == 0, f"README example {number} failed:\n{example}\n{result.stderr[-3000:]}"
        outputs.append(result.stdout)
    trained, batched, acted, evaluated, language_model = outputs
    assert "stopped after" in trained
    assert "mean of the last 20 episodes per seed:" in batched
    assert all((tmp_path / "runs" / "cartpole-batch" / f"seed{seed}" / "checkpoint.pt").is_file() for seed in (1, 2, 3, 4))
    assert (tmp_path / "runs" / "cartpole-api" / "checkpoint.pt").is_file()
    assert "one greedy episode: return" in acted
    assert "greedy evaluation:" in evaluated
    assert "iteration 8:" in language_model and "samples:" in language_model and "KL to SFT" in language_model
