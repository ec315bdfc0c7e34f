"""A trainer's share of a data-parallel run: what each of its K processes holds.

torchrun starts K processes of one run (`ppo.parallel.distributed.World`). Each steps
num_envs / K of the copies, draws from its own random streams and keeps its own episodes;
the gradients, the normalisers' statistics, the advantage whitening and the diagnostics
are combined across the processes where they are computed. A trainer that mixes this
class in asks it the few questions whose answer depends on the process:

    how many copies it steps, and from which seed     local_copies, first_copy_seed
    its random streams                                own_streams, restart_streams
    its part of a checkpoint                          with_processes, own_process_state

With one process (the default) every answer is the single run's.
"""

from __future__ import annotations

import torch

from ppo.config import ConfigError, PPOConfig
from ppo.parallel.distributed import World
from ppo.trainers.base import continue_global_stream


class ProcessShare:
    """The answers of the module docstring for a trainer with a `world`."""

    world: World

    def local_copies(self, config: PPOConfig, copies: int) -> int:
        """num_envs / K, the copies this process steps; ConfigError (one line) when the run's sizes
        do not divide among the processes or the envs have another number of copies."""
        world = self.world
        local = world.share(config.num_envs, "num_envs")
        world.share(config.minibatch_size, "the minibatch size num_envs * num_steps / num_minibatches")
        if copies != local:
            raise ConfigError(f"the envs have {copies} copies but this process needs "
                              f"num_envs = {config.num_envs} / {world.size} processes = {local}")
        return local

    def first_copy_seed(self, seed: int, local_copies: int) -> int:
        """The reset seed of this process's first copy: the copies of one process with num_envs copies, split."""
        return seed + self.world.rank * local_copies

    def own_streams(self, seed: int, device: torch.device) -> tuple[torch.Generator, torch.Generator]:
        """(actions, minibatch shuffles): this process's own random streams. Called right after the
        network's initialisation, a single process's action stream continues the global one from
        there (`continue_global_stream`), so a run draws what it always has."""
        world = self.world
        actions = (torch.Generator(device=device).manual_seed(world.seed(seed)) if world.distributed
                   else continue_global_stream(device, seed))
        return actions, torch.Generator(device=device).manual_seed(world.seed(seed))

    def restart_streams(self, seed: int, iteration: int, *generators: torch.Generator) -> None:
        """Fresh streams for a run resumed with another number of processes (its saved ones no longer fit)."""
        for generator in generators:
            generator.manual_seed(self.world.seed(seed) + iteration)

    def with_processes(self, state: dict, own: dict) -> dict:
        """A checkpoint: `state`, every process's `own` part gathered into "processes", and process 0's on top."""
        world = self.world
        return {**state, "world_size": world.size, "processes": world.gather(own) if world.distributed else None,
                **own}

    def own_process_state(self, state: dict) -> dict | None:
        """This process's part of a checkpoint; None when another number of processes wrote it."""
        world = self.world
        if int(state.get("world_size", 1)) != world.size:
            return None
        return state["processes"][world.rank] if world.distributed else state
