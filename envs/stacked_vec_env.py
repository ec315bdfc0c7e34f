"""S VecEnvs of N copies each, stepped as one VecEnv of S·N copies (one per member of a seed batch).

Copies s·N … (s+1)·N − 1 are member s's own VecEnv, built and seeded exactly as a single
run with that member's seed builds and seeds its envs, so member s sees the episodes its
own run would see. `reset(seed=[seed_1, …, seed_S])` seeds each member's envs with its
own seed; a single int seeds them all alike. Dict observations (an image and an action
mask, say) are joined key by key.
"""

from __future__ import annotations

from typing import Sequence

import torch

from ppo.vec_env import StepResult, VecEnv, env_state


def join(blocks: list):
    """The members' blocks of copies as one: tensors concatenated, dicts of tensors key by key."""
    if isinstance(blocks[0], dict):
        return {key: torch.cat([block[key] for block in blocks]) for key in blocks[0]}
    return torch.cat(blocks)


class StackedVecEnv:
    """The `ppo.vec_env.VecEnv` interface over S member VecEnvs; member s owns a block of N copies."""

    def __init__(self, members: Sequence[VecEnv]):
        if not members:
            raise ValueError("StackedVecEnv needs at least one member")
        first = members[0]
        for member in members[1:]:
            if (member.num_envs != first.num_envs or member.single_observation_space != first.single_observation_space
                    or member.single_action_space != first.single_action_space):
                raise ValueError("the members of a StackedVecEnv must have equal sizes and spaces")
        self.members = list(members)
        self.num_members = len(members)
        self.member_num_envs = first.num_envs
        self.num_envs = self.num_members * first.num_envs
        self.single_observation_space = first.single_observation_space
        self.single_action_space = first.single_action_space
        self.device = first.device
        self.env_id = getattr(first, "env_id", None)

    def reset(self, seed: int | Sequence[int] | None = None) -> torch.Tensor:
        seeds = seed if isinstance(seed, Sequence) else [seed] * self.num_members
        if len(seeds) != self.num_members:
            raise ValueError(f"reset got {len(seeds)} seeds for {self.num_members} members")
        return join([member.reset(seed=member_seed) for member, member_seed in zip(self.members, seeds)])

    def step(self, actions: torch.Tensor) -> StepResult:
        blocks = actions.reshape(self.num_members, self.member_num_envs, *actions.shape[1:])
        results = [member.step(block) for member, block in zip(self.members, blocks)]
        return StepResult(*(join([getattr(result, name) for result in results])
                            for name in ("obs", "reward", "terminated", "truncated", "final_obs")))

    def member_state_dict(self, member: int) -> dict | None:
        """Member `member`'s env state as its own run would checkpoint it (None if it cannot be saved)."""
        return env_state(self.members[member])

    def load_member_state_dict(self, member: int, state: dict) -> None:
        """Continue member `member`'s envs from what `member_state_dict` gave."""
        self.members[member].load_state_dict(state)

    def close(self) -> None:
        for member in self.members:
            member.close()
