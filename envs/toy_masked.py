"""A toy task with many invalid actions, for invalid-action masking (batched torch, N copies).

Every step, `num_valid` of the `num_actions` actions are valid, drawn afresh for each copy,
and one of them is the target, shown to the agent as a one-hot vector. Choosing the target
earns 1, another valid action 0; an episode is `episode_length` steps and then terminates.
A uniformly random policy over the valid actions earns episode_length / num_valid per
episode; the best policy earns episode_length.

Two ways to handle the invalid actions (`invalid`):

    "mask"     the observation is Dict({"observation": target one-hot (K,), "action_mask": (K,)}),
               gymnasium's layout, which the trainer masks with (ppo.models.encoders); an invalid
               action reaching the env is an error (RuntimeError).
    "penalty"  the observation is the Box [target one-hot, valid indicator] (2K,), and an
               invalid action earns −`penalty` (and nothing happens): the agent must learn
               which actions are valid from the reward (the baseline of Huang & Ontañón 2022).

The VecEnv contract of ppo.vec_env: SAME_STEP autoreset, `final_obs` as the finished
episode's last observation. One generator drives all copies, seeded by `reset(seed)`.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch

from ppo.vec_env import StepResult

INVALID_HANDLING = ("mask", "penalty")


class MaskedChoiceVecEnv:
    """N copies of the toy task; see the module docstring."""

    def __init__(self, num_envs: int, num_actions: int = 16, num_valid: int = 3, episode_length: int = 8,
                 invalid: str = "mask", penalty: float = 0.1, device: str | torch.device = "cpu"):
        if invalid not in INVALID_HANDLING:
            raise ValueError(f"invalid = {invalid!r} is not one of {', '.join(INVALID_HANDLING)}")
        if not 1 <= num_valid <= num_actions:
            raise ValueError(f"num_valid = {num_valid} must be between 1 and num_actions = {num_actions}")
        self.num_envs, self.num_actions, self.num_valid = num_envs, num_actions, num_valid
        self.episode_length, self.invalid, self.penalty = episode_length, invalid, penalty
        self.device = torch.device(device)
        one_hot = gym.spaces.Box(0.0, 1.0, (num_actions,), dtype=np.float32)
        if invalid == "mask":
            self.single_observation_space = gym.spaces.Dict(
                {"observation": one_hot, "action_mask": gym.spaces.MultiBinary(num_actions)})
        else:
            self.single_observation_space = gym.spaces.Box(0.0, 1.0, (2 * num_actions,), dtype=np.float32)
        self.single_action_space = gym.spaces.Discrete(num_actions)
        self.generator = torch.Generator(device=self.device).manual_seed(0)
        self.steps = torch.zeros(num_envs, dtype=torch.int64, device=self.device)
        self._draw_all()

    def _draw(self, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(mask (rows, K) bool with num_valid set, target (rows,) one of them), uniformly at random."""
        scores = torch.rand(rows, self.num_actions, generator=self.generator, device=self.device)
        chosen = scores.topk(self.num_valid, dim=1).indices  # (rows, m), the first has the top score
        mask = torch.zeros(rows, self.num_actions, dtype=torch.bool, device=self.device)
        return mask.scatter_(1, chosen, True), chosen[:, 0]

    def _draw_all(self) -> None:
        self.mask, self.target = self._draw(self.num_envs)

    def _observation(self, mask: torch.Tensor, target: torch.Tensor):
        one_hot = torch.nn.functional.one_hot(target, self.num_actions).to(torch.float32)
        if self.invalid == "mask":
            return {"observation": one_hot, "action_mask": mask.clone()}
        return torch.cat([one_hot, mask.to(torch.float32)], dim=1)

    def reset(self, seed: int | None = None):
        if seed is not None:
            self.generator.manual_seed(seed)
        self.steps.zero_()
        self._draw_all()
        return self._observation(self.mask, self.target)

    def step(self, actions: torch.Tensor) -> StepResult:
        actions = actions.to(self.device).long()
        valid = self.mask.gather(1, actions.unsqueeze(1)).squeeze(1)  # (N,)
        if self.invalid == "mask" and not bool(valid.all()):
            raise RuntimeError(f"invalid actions reached a masked env in copies {torch.nonzero(~valid).flatten().tolist()}")
        reward = (actions == self.target).to(torch.float32) - self.penalty * (~valid).to(torch.float32)
        self.steps += 1
        terminated = self.steps >= self.episode_length
        self._draw_all()  # the next step's valid actions and target (a new episode's first, where one ended)
        self.steps = self.steps.masked_fill(terminated, 0)
        obs = self._observation(self.mask, self.target)
        # the last observation of a finished episode is never acted on; the next one stands in for it
        return StepResult(obs=obs, reward=reward, terminated=terminated, truncated=torch.zeros_like(terminated),
                          final_obs=obs)

    def close(self) -> None:
        pass
