"""Run by torchrun from tests/test_distributed.py; writes what it measured to OUT/rank<k>.json.

    torchrun --nproc-per-node 2 tests/_distributed_worker.py equivalence OUT
    torchrun --nproc-per-node 2 tests/_distributed_worker.py train OUT
    torchrun --nproc-per-node 2 tests/_distributed_worker.py collectives OUT BACKEND DEVICE [DEVICE ...]
    torchrun --nproc-per-node 2 tests/_distributed_worker.py peer-exits OUT
"""

import dataclasses
import datetime
import json
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments.commands.train import training_envs  # noqa: E402
from ppo.config import PPOConfig  # noqa: E402
from ppo.parallel.distributed import SINGLE_PROCESS, PeerFailure, World, close_world, init_world  # noqa: E402
from ppo.algorithm.losses import normalize_advantages  # noqa: E402
from ppo.models.normalize import RunningMeanStd  # noqa: E402
from ppo.trainers.ppo import PPO  # noqa: E402
from ppo.algorithm.update import run_update  # noqa: E402

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


def outcome(call) -> dict:
    """What a collective returned, or which error it raised (and whether it was called a peer failure)."""
    try:
        return {"value": call()}
    except Exception as error:  # noqa: BLE001 - the test reads which one
        return {"error": type(error).__name__, "message": str(error).splitlines()[0] if str(error) else "",
                "peer_failure": isinstance(error, PeerFailure)}


def every_collective(world: World) -> dict:
    """Each World collective once, on inputs that differ by rank, as the trainers call them.

    Tensors on the CPU (statistics, metrics built from Python numbers) and on world.device
    (gradients, parameters, advantages) alike; process 0 has rank 0, process 1 rank 1.
    """
    rank, device = world.rank, world.device
    share = torch.arange(4, dtype=torch.float64) * 3 + 10 * rank  # this process's advantages, (4,)
    everyone = torch.cat([torch.arange(4, dtype=torch.float64) * 3 + 10 * k for k in range(world.size)])

    def normaliser_mean() -> list:
        stats = RunningMeanStd((2,), world=world, epsilon=0.0)
        stats.update(torch.tensor([[1.0 + rank, -2.0 * rank]] * (rank + 1)))  # 1 sample on process 0, 2 on 1
        return stats.mean.tolist()

    calls = {
        "sum_ cpu": lambda: world.sum_(torch.tensor([1.0, rank])).tolist(),
        "average_ cpu": lambda: world.average_(torch.tensor([float(rank)], dtype=torch.float64)).tolist(),
        "average_ device": lambda: world.average_(torch.full((3,), float(rank), device=device)).tolist(),
        "broadcast_ cpu": lambda: world.broadcast_(torch.tensor([rank + 1.0])).tolist(),
        "broadcast_ device": lambda: world.broadcast_(torch.full((2,), rank + 1.0, device=device)).tolist(),
        "any one": lambda: world.any(rank == 1),
        "any none": lambda: world.any(False),
        "mean_of": lambda: world.mean_of(float(rank)),
        "whiten": lambda: float((world.whiten(share.to(device)).cpu()
                                 - normalize_advantages(everyone)[4 * rank : 4 * rank + 4]).abs().max()),
        "normaliser": normaliser_mean,
        "gather episodes": lambda: [(r.tolist(), n.tolist()) for r, n in world.gather(
            (torch.tensor([rank + 0.5]), torch.tensor([rank + 7])))],
    }
    return {name: outcome(call) for name, call in calls.items()}


def collectives(world: World, devices: list[str]) -> dict:
    """every_collective once per device given to the World (the group is the one __main__ started)."""
    results = {}
    for name in devices:
        device = torch.device(name)
        if device.type == "cuda" and device.index is None:  # this process's GPU; both on GPU 0 if only one
            device = torch.device("cuda", world.local_rank if torch.cuda.device_count() > world.local_rank else 0)
            if torch.cuda.is_available():
                torch.cuda.set_device(device)  # object collectives pickle through the current GPU
        results[name] = every_collective(dataclasses.replace(world, device=device))
    return results


def peer_exits(world: World) -> dict:
    """Process 1 leaves after one collective; process 0's next collective must say a peer stopped."""
    world.mean_of(1.0)
    if world.rank == 1:
        os._exit(0)  # exit code 0, so torchrun lets process 0 finish and report
    return outcome(lambda: world.mean_of(1.0))


if __name__ == "__main__":
    mode, out = sys.argv[1], Path(sys.argv[2])
    if mode == "collectives":  # a group of the given backend, e.g. "cuda:gloo", which serves CUDA tensors only
        dist.init_process_group(sys.argv[3], timeout=datetime.timedelta(seconds=60))
    world = init_world("cpu")
    try:
        if mode == "collectives":
            result = collectives(world, sys.argv[4:])
        else:
            result = {"equivalence": equivalence, "train": train, "peer-exits": peer_exits}[mode](world)
    finally:
        close_world(world)
    (out / f"rank{world.rank}.json").write_text(json.dumps(result))
