"""What every batched classic-control environment shares: the episode bookkeeping.

A subclass writes only the physics of one step for N copies at once:

* `_initial_state(n)`            -> (state_dim, n) start states drawn with `self.generator`
* `_transition(state, actions)`  -> (next_state, reward, terminated)
* `_observe(state)`              -> (n, obs_dim) float32 observations

and this class does the rest, once for all of them: the per-copy step counter, the
time-limit truncation that `gymnasium.make` adds with its `TimeLimit` wrapper, and the
SAME_STEP autoreset of `ppo.vec_env` (copy i ends at this step -> `final_obs[i]` is its
last observation and `obs[i]` is already the first observation of a fresh episode).

State layout: component-major, (state_dim, N). Row k holds state variable k (say, the
pole angle) of all N copies as one contiguous vector, so `x, x_dot, theta, theta_dot =
state` unpacks it into plain (N,) vectors and every physics operation runs on contiguous
memory. The `state` property shows it the usual way round, (N, state_dim).

Autoreset comes in two flavours that give the same distribution of episodes:

* by index (the default on CPU): find the copies that ended, draw start states for just
  those and write them in with `index_copy_`. Drawing random numbers is among the
  dearest parts of a CPU step, and finding the rows costs no device sync on CPU.
* by mask (the default elsewhere, e.g. CUDA): draw a start state for every copy and
  keep it where the episode ended, with `torch.where`. Nothing waits on the device;
  finding the finished rows would need their count on the host, a sync every step.

Seed groups (`groups=S`): the copies form S consecutive blocks of N = num_envs / S, each
with its own generator, so block s draws exactly what an N-copy env seeded alone would
(`reset(seed=[seed_1, …, seed_S])`). The physics is still one call for all S·N copies;
only the start states are drawn block by block. This is how a batch of seeds
(`ppo.trainers.seed_batch`) gives every member its own environment stream.

Either way there is no Python loop over copies and no `.item()` in `step`. On CPU a
step in which no episode ended skips the restart altogether; `obs` is then the very
tensor `final_obs` (as gymnasium's wrapper in `ppo.vec_env` may also share them).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Sequence

import gymnasium as gym
import torch

from ppo.vec_env import StepResult


class TorchClassicEnv(ABC):
    """N copies of one classic-control environment, stepped as tensor code.

    Implements the `ppo.vec_env.VecEnv` protocol. One `torch.Generator` on `device`
    draws every start state: `reset(seed)` reseeds it, `reset()` continues its stream,
    so the same seed and the same actions give the same trajectories. (Unlike
    gymnasium's vector envs, copy i is not seeded with seed + i: the copies share one
    stream.) `dtype` is the dtype the physics runs in; observations are always float32.
    """

    env_id: str
    max_episode_steps: int  # the TimeLimit that gymnasium.make(env_id) adds
    state_dim: int
    # True where the observation is the state itself, only converted to float32 (CartPole,
    # MountainCar): after a restart, observing the whole new state is then cheaper than
    # copying final_obs and writing the fresh rows into it.
    observation_is_state: bool = False
    single_observation_space: gym.spaces.Box
    single_action_space: gym.Space

    def __init__(
        self,
        num_envs: int,
        device: str | torch.device = "cpu",
        seed: int | None = None,
        dtype: torch.dtype = torch.float64,
        groups: int = 1,
    ):
        if groups < 1 or num_envs % groups:
            raise ValueError(f"groups = {groups} must be a positive divisor of num_envs = {num_envs}")
        self.num_envs = num_envs
        self.device = torch.device(device)
        self.dtype = dtype
        self.groups = groups
        self.group_size = num_envs // groups
        self.generators = [torch.Generator(device=self.device) for _ in range(groups)]
        for index, generator in enumerate(self.generators):
            if seed is None:
                generator.seed()  # nondeterministic
            else:
                generator.manual_seed(seed + index)
        self.generator = self.generators[0]  # the one `_initial_state` draws with (see _draw_initial_states)
        self.reset_by_index = self.device.type == "cpu"  # see the module docstring
        self.elapsed_steps = torch.zeros(num_envs, dtype=torch.int64, device=self.device)
        self._state: torch.Tensor | None = None  # (state_dim, N) once reset

    # ----- what each environment defines -------------------------------------------

    @abstractmethod
    def _initial_state(self, n: int) -> torch.Tensor:
        """Draw n start states with `self.generator`: (state_dim, n) in `self.dtype`."""

    @abstractmethod
    def _transition(
        self, state: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One step of the dynamics of all copies, from state (state_dim, N).

        Returns next_state, a new (state_dim, N) tensor; reward (N,) float32;
        terminated (N,) bool.
        """

    @abstractmethod
    def _observe(self, state: torch.Tensor) -> torch.Tensor:
        """(state_dim, n) state -> (n, obs_dim) float32 observation (`_rows_to_observation`)."""

    # ----- the VecEnv interface ------------------------------------------------------

    def reset(self, seed: int | Sequence[int] | None = None) -> torch.Tensor:
        """Start a fresh episode in every copy; returns obs (N, obs_dim) float32.

        With seed groups, `seed` may list one seed per group (an int seeds group g with seed + g).
        """
        if seed is not None:
            seeds = list(seed) if isinstance(seed, Sequence) else [seed + index for index in range(self.groups)]
            if len(seeds) != self.groups:
                raise ValueError(f"reset got {len(seeds)} seeds for {self.groups} seed groups")
            for generator, group_seed in zip(self.generators, seeds):
                generator.manual_seed(group_seed)
        self._state = self._draw_initial_states([self.group_size] * self.groups)
        self.elapsed_steps.zero_()
        return self._observe(self._state)

    def _draw_initial_states(self, counts: list[int]) -> torch.Tensor:
        """Start states for counts[g] copies of each group g, each drawn with its group's generator."""
        if self.groups == 1:
            return self._initial_state(counts[0])
        parts = []
        for generator, count in zip(self.generators, counts):
            if count:
                self.generator = generator
                parts.append(self._initial_state(count))
        self.generator = self.generators[0]
        return torch.cat(parts, dim=1)

    def step(self, actions: torch.Tensor) -> StepResult:
        if self._state is None:
            raise RuntimeError(f"{self!r}: call reset() before step()")
        next_state, reward, terminated = self._transition(self._state, actions)
        self.elapsed_steps += 1
        truncated = self.elapsed_steps >= self.max_episode_steps  # (N,)
        done = terminated | truncated  # (N,)
        final_obs = self._observe(next_state)  # (N, obs_dim)
        if self.reset_by_index:
            obs = self._restart_by_index(next_state, final_obs, done)
        else:
            obs = self._restart_by_mask(next_state, final_obs, done)
        return StepResult(obs, reward, terminated, truncated, final_obs)

    def close(self) -> None:
        pass

    # ----- autoreset: sets self._state and the step counters, returns obs ------------

    def _restart_by_index(self, next_state, final_obs, done) -> torch.Tensor:
        rows = done.nonzero().squeeze(1)  # (k,) the copies whose episode ended
        self._state = next_state
        if rows.numel() == 0:  # nothing ended: obs is final_obs (a CPU tensor's size costs no sync)
            return final_obs
        if self.groups == 1:
            fresh = self._initial_state(rows.numel())  # (state_dim, k)
        else:  # rows are sorted, so each group's rows come together, in order
            counts = torch.bincount(rows // self.group_size, minlength=self.groups).tolist()
            fresh = self._draw_initial_states(counts)
        self._state.index_copy_(1, rows, fresh)  # next_state is ours to overwrite
        self.elapsed_steps.index_fill_(0, rows, 0)
        if self.observation_is_state:  # one dtype pass over the state beats patching a copy
            return self._observe(self._state)
        return final_obs.index_copy(0, rows, self._observe(fresh))  # (N, obs_dim)

    def _restart_by_mask(self, next_state, final_obs, done) -> torch.Tensor:
        fresh = self._draw_initial_states([self.group_size] * self.groups)  # (state_dim, N)
        self._state = torch.where(done, fresh, next_state)  # done (N,) broadcasts over the rows
        self.elapsed_steps.masked_fill_(done, 0)
        ended = done.view(-1, *[1] * (final_obs.dim() - 1))  # (N, 1, ...): one flag per observation, any shape
        return torch.where(ended, self._observe(fresh), final_obs)

    # ----- state access, for tests and debugging -------------------------------------

    @property
    def state(self) -> torch.Tensor:
        """(N, state_dim) view of the state; row i is gymnasium's `env.unwrapped.state` of copy i."""
        return self._state.T

    def set_state(self, state: torch.Tensor, elapsed_steps: torch.Tensor | None = None) -> None:
        """Overwrite the state, given as (N, state_dim), and optionally the step counters (N,)."""
        state = torch.as_tensor(state, dtype=self.dtype, device=self.device)
        self._state = state.T.clone(memory_format=torch.contiguous_format)
        if elapsed_steps is not None:
            self.elapsed_steps.copy_(torch.as_tensor(elapsed_steps))

    # ----- checkpoints: everything a resumed run needs to continue bit for bit -------

    def state_dict(self) -> dict:
        """The state of every copy, the step counters and the random generator."""
        return {
            "env_id": self.env_id,
            "num_envs": self.num_envs,
            "state": None if self._state is None else self._state.clone(),  # (state_dim, N)
            "elapsed_steps": self.elapsed_steps.clone(),  # (N,)
            "generator": self.generators[0].get_state(),
            **({"group_generators": [generator.get_state() for generator in self.generators]}
               if self.groups > 1 else {}),
        }

    def group_state_dict(self, group: int) -> dict:
        """Group `group`'s copies as the `state_dict()` of an env of group_size copies seeded alone."""
        columns = slice(group * self.group_size, (group + 1) * self.group_size)
        return {
            "env_id": self.env_id,
            "num_envs": self.group_size,
            "state": None if self._state is None else self._state[:, columns].clone(),
            "elapsed_steps": self.elapsed_steps[columns].clone(),
            "generator": self.generators[group].get_state(),
        }

    member_state_dict = group_state_dict  # the name a seed batch asks for (ppo.trainers.seed_batch)

    def load_group_state_dict(self, group: int, state: dict) -> None:
        """Continue group `group`'s copies from a `group_state_dict()` (a run of group_size copies)."""
        if state.get("env_id") != self.env_id or state.get("num_envs") != self.group_size:
            raise ValueError(f"env state of {state.get('env_id')!r} × {state.get('num_envs')} does not fit "
                             f"{self.env_id!r} × {self.group_size}")
        columns = slice(group * self.group_size, (group + 1) * self.group_size)
        if state["state"] is not None:
            if self._state is None:
                raise ValueError("the envs must be reset before a group's state is loaded")
            self._state[:, columns] = state["state"].to(self.device, self.dtype)
        self.elapsed_steps[columns] = state["elapsed_steps"].to(self.elapsed_steps.device)
        self.generators[group].set_state(state["generator"])

    load_member_state_dict = load_group_state_dict

    def load_state_dict(self, state: dict) -> None:
        """Continue from a `state_dict()`; ValueError if it belongs to another env or size."""
        if state.get("env_id") != self.env_id or state.get("num_envs") != self.num_envs:
            raise ValueError(f"env state of {state.get('env_id')!r} × {state.get('num_envs')} does not fit "
                             f"{self.env_id!r} × {self.num_envs}")
        saved = state["state"]
        self._state = None if saved is None else saved.to(self.device, self.dtype).clone()
        self.elapsed_steps.copy_(state["elapsed_steps"])
        for generator, generator_state in zip(self.generators, state.get("group_generators", [state["generator"]])):
            generator.set_state(generator_state)

    # ----- helpers for subclasses ----------------------------------------------------

    def _uniform(self, low: float, high: float, shape: tuple[int, ...], dtype: torch.dtype | None = None):
        """Samples uniform in [low, high) from the env's generator."""
        sample = torch.empty(shape, dtype=dtype or self.dtype, device=self.device)
        return sample.uniform_(low, high, generator=self.generator)

    @staticmethod
    def _rows_to_observation(rows: torch.Tensor) -> torch.Tensor:
        """(obs_dim, n) component rows -> (n, obs_dim) float32 observation, always a copy.

        The result keeps the rows' memory order (column-major, strides (1, n)): converting
        the dtype is then one pass over contiguous memory, where a row-major copy would
        be a transposing gather costing more than the physics at n = 4096. Every torch
        operation (and `.numpy()`) takes it as it is; `.contiguous()` gives row-major.
        """
        return rows.T.to(torch.float32, copy=True)  # copy: float32 physics must not alias the state

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.env_id!r}, num_envs={self.num_envs}, device={self.device})"
