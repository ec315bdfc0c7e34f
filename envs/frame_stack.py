"""Frame stacking: a feed-forward policy sees the last K observations, not only the last.

`FrameStackVecEnv(envs, K)` wraps any `ppo.vec_env.VecEnv` whose observations are flat
vectors o_t ∈ R^d. Copy i's observation becomes the concatenation, oldest first,

    ō_t = (o_{t−K+1}, …, o_{t−1}, o_t) ∈ R^{K·d},

of its last K observations within the current episode. At an episode's first observation
there is no history: the stack holds K copies of o_0, so ō_0 = (o_0, …, o_0), and the
next steps push the older copies out one by one. This is gymnasium's
`FrameStackObservation(env, K, padding_type="reset")` followed by `FlattenObservation`,
which is how evaluation stacks a single gymnasium env (`envs.factory.gymnasium_env_factory`),
so a policy sees the same input in training and evaluation.

Autoreset (SAME_STEP, `ppo.vec_env`): when copy i's episode ends at a step, its
`final_obs` is the finished episode's stack (the K − 1 previous observations, then the
final one) and its `obs` is a fresh stack of K copies of the new episode's o_0. A stack
never mixes two episodes.

With K frames a policy can read velocities (differences of positions) and anything seen
in the last K − 1 steps; what lies further back stays out of reach, which is why frame
stacking is the baseline that a recurrent policy is compared with.
"""

from __future__ import annotations

from typing import Sequence

import gymnasium as gym
import numpy as np
import torch

from ppo.vec_env import StepResult, VecEnv, env_state


def stacked_space(space: gym.Space, num_frames: int) -> gym.spaces.Box:
    """The Box of K stacked copies of a flat Box observation; ValueError for any other space."""
    if not (isinstance(space, gym.spaces.Box) and len(space.shape) == 1):
        raise ValueError(f"frame stacking needs flat Box observations (vectors), not {space}")
    return gym.spaces.Box(np.tile(space.low, num_frames), np.tile(space.high, num_frames), dtype=space.dtype)


class FrameStackVecEnv:
    """The `ppo.vec_env.VecEnv` interface over `envs`, each observation the last K of its copy.

    `member_num_envs`: the copies per member when `envs` is the envs of a seed batch
    (`ppo.trainers.seed_batch`; member s owns copies s·n … (s+1)·n − 1), for `member_state_dict`.
    """

    def __init__(self, envs: VecEnv, num_frames: int, member_num_envs: int | None = None):
        if isinstance(num_frames, bool) or not isinstance(num_frames, int) or num_frames < 1:
            raise ValueError(f"frame_stack = {num_frames!r} must be a positive integer")
        self.envs, self.num_frames = envs, num_frames
        self.num_envs, self.device = envs.num_envs, envs.device
        self.env_id = getattr(envs, "env_id", None)
        self.member_num_envs = member_num_envs or envs.num_envs
        self.single_observation_space = stacked_space(envs.single_observation_space, num_frames)
        self.single_action_space = envs.single_action_space
        self._frames: torch.Tensor | None = None  # (N, K, d), oldest first, once reset

    def _fresh_stacks(self, obs: torch.Tensor) -> torch.Tensor:
        """(n, d) first observations -> (n, K, d) stacks of K copies of each."""
        return obs.unsqueeze(1).expand(-1, self.num_frames, -1)

    def reset(self, seed: int | Sequence[int] | None = None) -> torch.Tensor:
        self._frames = self._fresh_stacks(self.envs.reset(seed=seed)).clone()
        return self._frames.flatten(1)  # (N, K·d)

    def step(self, actions: torch.Tensor) -> StepResult:
        if self._frames is None:
            raise RuntimeError(f"{self!r}: call reset() before step()")
        result = self.envs.step(actions)
        older = self._frames[:, 1:]  # (N, K−1, d) all but the oldest
        final = torch.cat((older, result.final_obs.unsqueeze(1)), dim=1)  # (N, K, d) ends in s_{t+1}
        done = (result.terminated | result.truncated).view(-1, 1, 1)
        # Where no episode ended, obs is final_obs (the VecEnv contract), so `final` is also the next stack.
        self._frames = torch.where(done, self._fresh_stacks(result.obs), final)
        return StepResult(self._frames.flatten(1), result.reward, result.terminated, result.truncated,
                          final.flatten(1))

    def close(self) -> None:
        self.envs.close()

    # ----- checkpoints: the wrapped envs' state and the stacks -------------------------

    def state_dict(self) -> dict | None:
        """The wrapped envs' `state_dict()` and the stacks; None if the envs cannot be saved."""
        return self._state(env_state(self.envs), self._frames)

    def member_state_dict(self, member: int) -> dict | None:
        """Member `member`'s part, as the `state_dict()` of its own run's FrameStackVecEnv."""
        rows = slice(member * self.member_num_envs, (member + 1) * self.member_num_envs)
        frames = None if self._frames is None else self._frames[rows]
        return self._state(self.envs.member_state_dict(member), frames)

    def load_member_state_dict(self, member: int, state: dict) -> None:
        """Continue member `member`'s copies from a `member_state_dict()`."""
        rows = slice(member * self.member_num_envs, (member + 1) * self.member_num_envs)
        if state.get("num_frames") != self.num_frames:
            raise ValueError(f"env state of {state.get('num_frames')} stacked frames does not fit "
                             f"frame_stack = {self.num_frames}")
        self.envs.load_member_state_dict(member, state["envs"])
        if state.get("frames") is not None:
            self._frames[rows] = state["frames"].to(self.device)

    def _state(self, envs_state: dict | None, frames: torch.Tensor | None) -> dict | None:
        if envs_state is None:
            return None
        return {"envs": envs_state, "num_frames": self.num_frames,
                "frames": None if frames is None else frames.clone()}

    def load_state_dict(self, state: dict) -> None:
        """Continue from a `state_dict()`; ValueError if it was saved with another K or size."""
        frames = state.get("frames")
        if state.get("num_frames") != self.num_frames or (frames is not None and len(frames) != self.num_envs):
            raise ValueError(f"env state of {state.get('num_frames')} stacked frames does not fit "
                             f"frame_stack = {self.num_frames} × {self.num_envs} copies")
        self.envs.load_state_dict(state["envs"])
        self._frames = None if frames is None else frames.to(self.device).clone()

    def __repr__(self) -> str:
        return f"FrameStackVecEnv({self.envs!r}, num_frames={self.num_frames})"
