"""Make the metrics files of the mystery_runs.py exercise: four CartPole runs, three of them broken.

    python lectures/exercises/make_mystery_runs.py      # rewrites lectures/exercises/mystery_metrics/run_*.csv

Each run is the library's PPO with the CartPole preset (lecture 6) for 65,536 steps on
seed 31 (outside the seeds the preset was tuned on), with one thing broken:

* "wrong advantage sign": the clipped surrogate is fed −Â, so every update pushes the
  policy away from the actions that did better than expected;
* "old log-prob recomputed each minibatch": the "old" log-probabilities are recomputed
  from the current network at every minibatch, instead of the rollout's log π_old (a loss that never clips, and
  diagnostics measured against the same wrong reference);
* "learning rate too large": Adam at 0.1 instead of the preset's rate;
* "healthy": nothing broken.

Which file holds which run is the exercise's answer (test_mystery_runs.py has it); the
files keep only the columns the exercise reads, rounded to 4 significant digits.
"""

from __future__ import annotations

import csv
import sys
import tempfile
from pathlib import Path

import torch

EXERCISES_DIR = Path(__file__).resolve().parent
if str(EXERCISES_DIR.parents[1]) not in sys.path:
    sys.path.insert(0, str(EXERCISES_DIR.parents[1]))

from envs.factory import make_vec_env  # noqa: E402  (found through the path above)
from experiments.commands.presets import build_config  # noqa: E402
from ppo.algorithm.losses import clipped_surrogate_loss  # noqa: E402
from ppo.trainers.ppo import PPO  # noqa: E402

OUTPUT_DIR = EXERCISES_DIR / "mystery_metrics"
SEED, STEPS = 31, 65_536
COLUMNS = ("global_step", "episode_return_recent", "approx_kl", "clip_fraction", "entropy", "value_loss",
           "explained_variance", "grad_norm")


class WrongSign(PPO):
    def policy_loss(self, new_log_probs, old_log_probs, advantages):
        return clipped_surrogate_loss(new_log_probs, old_log_probs, -advantages, self.clip_coef)


class RecomputedOldLogProb(PPO):
    def minibatch_loss(self, minibatch):
        current, _, _ = self.model.evaluate_actions(minibatch["obs"], minibatch["actions"])
        return super().minibatch_loss({**minibatch, "log_probs": current.detach()})


# file name → (label, trainer class, changed settings); the order of the files is not the order of the labels
RUNS = {
    "run_1.csv": ("learning rate too large", PPO, {"learning_rate": 0.1}),
    "run_2.csv": ("healthy", PPO, {}),
    "run_3.csv": ("old log-prob recomputed each minibatch", RecomputedOldLogProb, {}),
    "run_4.csv": ("wrong advantage sign", WrongSign, {}),
}


def significant(value: str) -> str:
    return value if value in ("", "nan") else f"{float(value):.4g}"


def make_run(trainer_class, changes: dict, destination: Path) -> None:
    config = build_config({"env_id": "CartPole-v1", "seed": SEED, "total_timesteps": STEPS, "tensorboard": False,
                           "checkpoint_every": 0, **changes})
    with tempfile.TemporaryDirectory() as run_dir:
        trainer = trainer_class(config, make_vec_env(config.env_id, config.num_envs, config.env_backend),
                                run_dir=run_dir, progress=False)
        trainer.train()
        with open(Path(run_dir) / "metrics.csv", newline="") as file:
            rows = list(csv.DictReader(file))
    with open(destination, "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(COLUMNS)
        writer.writerows([[significant(row[column]) for column in COLUMNS] for row in rows])


if __name__ == "__main__":
    torch.set_num_threads(1)
    OUTPUT_DIR.mkdir(exist_ok=True)
    for name, (label, trainer_class, changes) in RUNS.items():
        make_run(trainer_class, changes, OUTPUT_DIR / name)
        print(f"wrote {name}")
