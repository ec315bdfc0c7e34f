"""Run by torchrun from tests/test_distributed.py; writes what it measured to OUT/rank<k>.json.

    torchrun --nproc-per-node 2 tests/_distributed_worker.py equivalence OUT
    torchrun --nproc-per-node 2 tests/_distributed_worker.py train OUT
"""

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments.train import training_envs  # noqa: E402
from ppo.config import PPOConfig  # noqa: E402
from ppo.distributed import SINGLE_PROCESS, close_world, init_world  # noqa: E402
from ppo.trainer import PPO  # noqa: E402
from ppo.update import run_update  # noqa: E402

CONFIG = PPOConfig(env_id="CartPole-v1", env_backend="torch", num_envs=8, num_steps=32, num_minibatches=1,
                   update_epochs=3, learning_rate=3e-3, total_timesteps=8 * 32 * 6, tensorboard=False, seed=4)


def equivalence(world) -> dict:
    """One update on K shares of a batch vs one process on the whole batch, same start."""
    torch.set_num_threads(1)
    ours = PPO(CONFIG, training_envs(CONFIG, world), progress=False, world=world)
    single = PPO(CONFIG, training_envs(CONFIG), progress=False)
    start = single.optimizer.flat_params.clone()
    assert torch.equal(ours.optimizer.flat_params, start)
    generator = torch.Generator().manual_seed(0)
    batch = CONFIG.batch_size
    obs = torch.randn(batch, 4, generator=generator)
    actions = torch.randint(0, 2, (batch,), generator=generator)
    with torch.no_grad():
        log_probs, _, values = single.model.evaluate_actions(obs, actions)
    samples = {"obs": obs, "actions": actions, "log_probs": log_probs + 0.01 * torch.randn(batch, generator=generator),
               "values": values, "advantages": 3 + 2 * torch.randn(batch, generator=generator),
               "returns": torch.randn(batch, generator=generator)}
    share = batch // world.size
    mine = {name: tensor[world.rank * share : (world.rank + 1) * share] for name, tensor in samples.items()}
    settings = dict(update_epochs=CONFIG.update_epochs, num_minibatches=1, max_grad_norm=0.5, target_kl=None,
                    clip_coef=0.2)
    ours_metrics = run_update(mine, ours.minibatch_loss, ours.optimizer, generator=torch.Generator(), world=world,
                              **settings)
    single_metrics = run_update(samples, single.minibatch_loss, single.optimizer, generator=torch.Generator(),
                                world=SINGLE_PROCESS, **settings)
    difference = float((ours.optimizer.flat_params - single.optimizer.flat_params).abs().max())
    moved = float((single.optimizer.flat_params - start).abs().max())
    return {"max_difference": difference, "moved": moved,
            "loss_difference": abs(ours_metrics["policy_loss"] - single_metrics["policy_loss"])}


def train(world) -> dict:
    torch.set_num_threads(1)
    trainer = PPO(CONFIG.replace(num_minibatches=2), training_envs(CONFIG, world), progress=False, world=world)
    trainer.train()
    return {"parameters": trainer.optimizer.flat_params.tolist(), "steps": trainer.global_step}


if __name__ == "__main__":
    mode, out = sys.argv[1], Path(sys.argv[2])
    world = init_world("cpu")
    try:
        result = {"equivalence": equivalence, "train": train}[mode](world)
    finally:
        close_world(world)
    (out / f"rank{world.rank}.json").write_text(json.dumps(result))
