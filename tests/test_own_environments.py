"""Environments of the user's own reach the commands (`--env-id MODULE:ENV_ID`), a saved
policy refuses an env whose spaces differ from those it was trained on, and the guide's page
on them (docs/book/guide/own-environments.md) runs as written.

The commands run as the console scripts a user types (ppo-train and ppo-eval, next to the
Python running the tests) in a temporary folder that holds the env's module: a console
script's sys.path lacks the current folder, so this is the path by which a user's module is found.
The default tier checks the page's refusal lines against the commands; the full tier runs
the whole page, its two trainings of 20,000 steps included.
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from envs.factory import EnvError, make_vec_env, registered_env_id
from experiments.commands import train
from experiments.commands.run_folder import env_folder_name
from ppo.config import PPOConfig
from ppo.runs.evaluation import Policy, SpaceMismatch, evaluate_policy, same_space

REPO_ROOT = Path(__file__).resolve().parents[1]
PAGE = REPO_ROOT / "docs" / "book" / "guide" / "own-environments.md"
SCRIPTS = Path(sys.executable).parent
COMMAND_TIMEOUT_S = 300
TINY = ["--num-envs", "2", "--num-steps", "16", "--total-timesteps", "64", "--eval-episodes", "2", "--no-progress",
        "--no-tensorboard"]

WALK_MODULE = '''
import gymnasium as gym
import numpy as np


class RandomWalk(gym.Env):
    def __init__(self):
        self.observation_space = gym.spaces.Box(-20.0, 20.0, shape=({width},), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.position = 0
        return np.full({width}, self.position, dtype=np.float32), {{}}

    def step(self, action):
        self.position += 1 if self.np_random.random() < 0.5 else -1
        return np.full({width}, self.position, dtype=np.float32), float(action), False, False, {{}}


gym.register(id="RandomWalk-v0", entry_point=RandomWalk, max_episode_steps=20)
'''


def write_walk_module(folder: Path, width: int = 1) -> Path:
    """walkmod.py in `folder`: RandomWalk-v0, a 20-step random walk seen `width` times over."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "walkmod.py").write_text(WALK_MODULE.format(width=width))
    return folder


def run(program: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    """The console script `program` with `args`, in `cwd`, with no PYTHONPATH to find the module by."""
    environment = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    return subprocess.run([str(SCRIPTS / program), *args], cwd=cwd, env=environment, capture_output=True, text=True,
                          timeout=COMMAND_TIMEOUT_S)


def one_line_refusal(result: subprocess.CompletedProcess, program: str) -> str:
    """The one line on stderr of a command refused with exit code 2 (no traceback)."""
    assert result.returncode == 2, result.stderr[-3000:]
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(f"{program}: error: "), result.stderr
    return result.stderr.strip()


@pytest.fixture(scope="module")
def walk_run(tmp_path_factory) -> Path:
    """A run folder trained by `ppo-train --env-id walkmod:RandomWalk-v0` on the 1-wide walk."""
    folder = write_walk_module(tmp_path_factory.mktemp("walk"))
    result = run("ppo-train", "--env-id", "walkmod:RandomWalk-v0", *TINY, cwd=folder)
    assert result.returncode == 0, result.stderr[-3000:]
    (run_dir,) = (folder / "runs").iterdir()
    return run_dir


# ---------------------------------------------------------------------------------- MODULE:ENV_ID


def test_a_module_env_trains_evaluates_and_resumes_through_the_console_scripts(walk_run):
    assert walk_run.name.startswith("RandomWalk-v0__") and ":" not in walk_run.name
    assert json.loads((walk_run / "config.json").read_text())["env_id"] == "walkmod:RandomWalk-v0"
    folder = walk_run.parents[1]
    evaluated = run("ppo-eval", str(walk_run.relative_to(folder)), "--episodes", "3", cwd=folder)
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    result = json.loads((walk_run / "eval.json").read_text())
    assert result["env_id"] == "walkmod:RandomWalk-v0" and result["episodes"] == 3
    assert result["max_episode_steps"] == 20
    resumed = run("ppo-train", "--resume", str(walk_run), "--total-timesteps", "128", cwd=folder)
    assert resumed.returncode == 0, resumed.stderr[-3000:]


BROKEN_MODULE = "import a_package_nobody_installed  # noqa: F401\n"
REFUSALS = [
    ("nowalk:RandomWalk-v0", "env_id = 'nowalk:RandomWalk-v0': module 'nowalk' cannot be imported (No module named "
     "'nowalk'); run the command in the folder that holds it, or put that folder on PYTHONPATH"),
    ("walkbroken:RandomWalk-v0", "env_id = 'walkbroken:RandomWalk-v0': module 'walkbroken' cannot be imported (No "
     "module named 'a_package_nobody_installed')"),
    ("walkmod:RandomWalk-v9", "env_id = 'walkmod:RandomWalk-v9': module 'walkmod' imported but did not register "
     "'RandomWalk-v9' (it registers RandomWalk-v0)"),
    ("RandomWalk-v0", "env_id = 'RandomWalk-v0' is not a registered gymnasium environment (for example CartPole-v1, "
     "Acrobot-v1, Pendulum-v1, LunarLander-v3, HalfCheetah-v5); to train an environment of your own, register it in "
     "a module and pass MODULE:ENV_ID"),
]


@pytest.mark.parametrize("env_id, message", REFUSALS)
def test_an_env_id_that_names_no_env_is_refused_in_one_line_and_leaves_no_folder(tmp_path, env_id, message):
    folder = write_walk_module(tmp_path)
    (folder / "walkbroken.py").write_text(BROKEN_MODULE)
    before = sorted(path.name for path in folder.iterdir())
    refusal = one_line_refusal(run("ppo-train", "--env-id", env_id, *TINY, cwd=folder), "ppo-train")
    assert refusal == f"ppo-train: error: {message}"
    assert sorted(path.name for path in folder.iterdir() if path.name != "__pycache__") == before


@pytest.fixture
def in_folder(tmp_path, monkeypatch):
    """The current folder is tmp_path, which sys.path lacks, as under a console script; sys.path,
    gymnasium's registry and the modules imported from tmp_path are as before after the test."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [entry for entry in sys.path if entry not in ("", str(tmp_path))])
    registry = dict(gym.registry)
    yield tmp_path
    gym.registry.clear()
    gym.registry.update(registry)
    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", None) or "").startswith(str(tmp_path)):
            del sys.modules[name]


def test_a_module_in_the_current_folder_is_imported_when_sys_path_lacks_that_folder(in_folder):
    (in_folder / "walkhere.py").write_text(WALK_MODULE.format(width=2).replace("RandomWalk-v0", "WalkHere-v0"))
    assert registered_env_id("walkhere:WalkHere-v0") == "WalkHere-v0"
    assert sys.path[-1] == str(in_folder)  # kept, for the module's own imports of its neighbours
    envs = make_vec_env("walkhere:WalkHere-v0", 3)
    assert envs.single_observation_space.shape == (2,) and envs.reset(seed=0).shape == (3, 2)
    envs.close()


def test_gymnasiums_own_module_form_is_accepted_and_a_module_without_the_id_is_named():
    assert registered_env_id("gymnasium.envs.classic_control:CartPole-v1") == "CartPole-v1"
    with pytest.raises(EnvError, match=r"did not register 'Nope-v0' \(it registers Acrobot-v1, CartPole-v0, .*, \.\.\.\)$"):
        registered_env_id("gymnasium.envs.classic_control:Nope-v0")
    with pytest.raises(EnvError, match="'..x' before ':' is not a module name"):
        registered_env_id("..x:Nope-v0")


def test_a_module_env_names_its_folder_by_its_id():
    assert env_folder_name("walkmod:RandomWalk-v0") == "RandomWalk-v0"
    assert env_folder_name("MinAtar/Breakout-v1") == "MinAtar_Breakout-v1"
    assert env_folder_name("CartPole-v1") == "CartPole-v1"


# ---------------------------------------------------------------------------------- the spaces


WIDER_ENV_REFUSAL = ("ppo-eval: error: the env has observation space Box(-20.0, 20.0, (3,), float32), but the policy "
                     "was trained on walkmod:RandomWalk-v0 with observation space Box(-20.0, 20.0, (1,), float32)")


def test_a_checkpoint_is_refused_an_env_with_another_observation_width_in_one_line(walk_run, tmp_path):
    folder = write_walk_module(tmp_path, width=3)
    run_dir = shutil.copytree(walk_run, folder / "runs" / walk_run.name)
    before = (run_dir / "eval.json").read_text()
    refusal = one_line_refusal(run("ppo-eval", str(run_dir), "--episodes", "2", cwd=folder), "ppo-eval")
    assert refusal == WIDER_ENV_REFUSAL
    assert (run_dir / "eval.json").read_text() == before


def box(shape=(3,), low=-1.0, high=1.0, dtype=np.float32):
    return gym.spaces.Box(low, high, shape=shape, dtype=dtype)


def test_spaces_are_compared_by_type_shape_size_and_dtype_and_action_bounds():
    assert same_space(box(), box(low=-5.0, high=5.0))  # an observation's bounds do not matter
    assert not same_space(box(), box(low=-5.0, high=5.0), bounds=True)  # an action's do: actions are clipped to them
    assert same_space(box(), box(), bounds=True)
    assert not same_space(box(), box(shape=(4,)))
    assert not same_space(box(), box(shape=(1, 3)))
    assert not same_space(box(), box(dtype=np.float64))
    assert same_space(gym.spaces.Discrete(3), gym.spaces.Discrete(3))
    assert not same_space(gym.spaces.Discrete(3), gym.spaces.Discrete(4))
    assert not same_space(gym.spaces.Discrete(3), gym.spaces.MultiDiscrete([3]))
    assert not same_space(gym.spaces.MultiDiscrete([3, 2]), gym.spaces.MultiDiscrete([3, 3]))
    assert not same_space(gym.spaces.MultiBinary(4), gym.spaces.MultiBinary(5))
    masked = gym.spaces.Dict({"observation": box(), "action_mask": gym.spaces.MultiBinary(3)})
    assert same_space(masked, gym.spaces.Dict({"observation": box(), "action_mask": gym.spaces.MultiBinary(3)}))
    assert not same_space(masked, gym.spaces.Dict({"observation": box(shape=(2,)),
                                                   "action_mask": gym.spaces.MultiBinary(3)}))
    assert not same_space(masked, box())


def test_evaluate_policy_refuses_an_env_with_other_spaces_before_it_acts():
    policy = Policy(None, PPOConfig(env_id="Pendulum-v1"), None, observation_space=box(),
                    action_space=box(shape=(1,), low=-1.0, high=1.0))  # Pendulum's actions lie in [-2, 2]
    with pytest.raises(SpaceMismatch) as refusal:
        evaluate_policy(policy, lambda: gym.make("Pendulum-v1"), episodes=1)
    assert str(refusal.value) == ("the env has action space Box(-2.0, 2.0, (1,), float32), but the policy was "
                                  "trained on Pendulum-v1 with action space Box(-1.0, 1.0, (1,), float32)")


# ---------------------------------------------------------------------------------- the guide's page


def page_blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", PAGE.read_text(), flags=re.DOTALL)


def test_the_guide_pages_refusals_are_what_the_commands_print(in_folder, capsys):
    module, _ = page_blocks("python")
    (in_folder / "walkmod.py").write_text(module)
    mistakes, mismatch = (block.splitlines() for block in page_blocks("text"))
    for shown in mistakes:
        env_id = re.search(r"env_id = '([^']+)'", shown).group(1)
        assert train.main(["--env-id", env_id]) == 2
        assert capsys.readouterr().err == shown + "\n"
    assert mismatch == [WIDER_ENV_REFUSAL]  # what the test above sees on the same spaces
    assert not (in_folder / "runs").exists()


@pytest.mark.slow  # full tier: two trainings of 20,000 steps and five commands, about 30 s
def test_the_guide_page_runs_as_written(tmp_path):
    module, script = page_blocks("python")
    (tmp_path / "walkmod.py").write_text(module)
    for line in page_blocks("bash")[0].splitlines():
        program, *args = line.split("  #")[0].split()
        result = run(program, *args, cwd=tmp_path)
        assert result.returncode == 0, f"{line}:\n{result.stderr[-3000:]}"
    assert json.loads((tmp_path / "runs" / "RandomWalk-v0__budget20000__seed1" / "eval.json").read_text())[
        "mean_return"] >= 0.9  # a trained walker reaches +5 in nearly every episode
    trained = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True,
                             timeout=COMMAND_TIMEOUT_S)
    assert trained.returncode == 0, trained.stderr[-3000:]
    assert re.fullmatch(r"greedy evaluation: (0\.9\d|1\.00) ± \d\.\d\d over 20 episodes\n", trained.stdout)
    (tmp_path / "walkmod.py").write_text(module.replace("shape=(1,)", "shape=(3,)"))
    evaluated = run("ppo-eval", "runs/RandomWalk-v0__budget20000__seed1", cwd=tmp_path)
    assert [one_line_refusal(evaluated, "ppo-eval")] == page_blocks("text")[1].splitlines()
