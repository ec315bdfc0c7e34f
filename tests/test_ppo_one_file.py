"""lectures/ppo_one_file.py is the library's PPO: held equal to `ppo.PPO` on the same settings.

The one-file script imports nothing of the library, so its defaults must be the CartPole
preset's and its arithmetic the trainer's; both are checked here. Where the two do the
same operations on the same numbers (the network, the Gumbel-max sampling from the same
stream, GAE, the minibatch order, the clipped loss) the weights agree to float32 rounding:
Adam and the gradient clipping run per tensor there and on one flat vector here.
"""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import ppo
from envs.factory import make_vec_env

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "lectures" / "ppo_one_file.py"


def one_file():
    spec = importlib.util.spec_from_file_location("ppo_one_file", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def library_trainer(config, iterations: int):
    trainer = ppo.PPO(config, make_vec_env(config.env_id, config.num_envs, "gymnasium"), progress=False)
    for _ in range(iterations):
        trainer.train_iteration()
    return trainer


def test_the_one_file_defaults_are_the_cartpole_preset():
    args = one_file().parse_args([])
    config = ppo.preset_config("CartPole-v1")
    shared = [name for name in vars(args) if hasattr(config, name)]
    assert len(shared) >= 18
    assert {name: getattr(args, name) for name in shared} == {name: getattr(config, name) for name in shared}
    assert config.hidden_sizes == (64, 64) and config.activation == "tanh" and not config.shared_network
    assert config.ortho_init and not config.normalize_obs and not config.normalize_reward


@pytest.mark.parametrize("seed, flags", [(1, []), (7, ["--norm-adv", "--ent-coef", "0.01", "--value-clip-coef", "0.2",
                                                       "--target-kl", "0.01"])])
def test_one_file_ppo_equals_the_library_trainer_after_three_iterations(seed, flags):
    module = one_file()
    args = module.parse_args(["--seed", str(seed), *flags])
    agent = module.train(args, iterations=3, log_every=10**9)
    values = {"norm_adv": args.norm_adv, "ent_coef": args.ent_coef, "value_clip_coef": args.value_clip_coef,
              "target_kl": args.target_kl}
    trainer = library_trainer(ppo.preset_config("CartPole-v1", seed=seed, env_backend="gymnasium", **values), 3)
    ours, theirs = list(agent.parameters()), list(trainer.model.parameters())
    assert [p.shape for p in ours] == [p.shape for p in theirs]
    difference = max(float((a - b).detach().abs().max()) for a, b in zip(ours, theirs))
    print(f"largest weight difference after three iterations: {difference:.2e}")
    assert difference < 1e-5, f"the one-file PPO departs from ppo.PPO by {difference:.2e} after three iterations"
    moved = max(float((a - b).detach().abs().max()) for a, b in zip(ours, one_file().Agent(4, 2).parameters()))
    assert moved > 1e-2  # three iterations did train


def test_the_initial_weights_are_the_library_trainers_bit_for_bit():
    module = one_file()
    args = module.parse_args(["--seed", "3"])
    agent = module.train(args, iterations=0)
    trainer = library_trainer(ppo.preset_config("CartPole-v1", seed=3, env_backend="gymnasium"), 0)
    assert all(torch.equal(a, b) for a, b in zip(agent.parameters(), trainer.model.parameters()))


@pytest.mark.slow
def test_the_one_file_script_solves_cartpole_and_prints_the_greedy_mean_last():
    result = subprocess.run([sys.executable, str(SCRIPT), "--seed", "4"], capture_output=True, text=True, timeout=600,
                            check=True)
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith("greedy mean return over 100 episodes: ")
    assert float(last.split(": ")[1].split()[0]) >= 475


def test_the_one_file_imports_only_torch_numpy_gymnasium_and_the_standard_library():
    imported = {line.split()[1].split(".")[0] for line in SCRIPT.read_text().splitlines()
                if line.startswith(("import ", "from "))}
    assert imported - set(sys.stdlib_module_names) - {"__future__"} == {"torch", "numpy", "gymnasium"}
    assert sum(1 for line in SCRIPT.read_text().splitlines() if line.strip()) <= 300
