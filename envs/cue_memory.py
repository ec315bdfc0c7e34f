"""CueMemory-v0: remember a cue shown at the start, answer with it at the end.

One episode lasts delay + 2 steps. With C cues (`num_cues`) and D blank steps (`delay`),
the observation o_t has C + 1 entries, (one-hot cue | answer flag):

    t = 0              o_0     = (e_c, 0)    the cue c ~ Uniform{0, …, C−1}
    t = 1 … D          o_t     = (0,   0)    blank: the delay
    t = D + 1          o_{D+1} = (0,   1)    the question: answer now

The action space is Discrete(C). The action at t = D + 1 is the answer: reward 1 if it
equals c, else 0, and the episode terminates. Actions before it change nothing and earn 0.
So the return of an episode is 1 if the answer was right and 0 otherwise, and the mean
return is the success rate. No time limit: the episode always ends by termination.

The answer flag tells the policy when to answer. Without it a memory-based policy would
also have to count D steps, a second memory task mixed into the first; with it, the cue
is the only thing the policy must carry across time.

Why a memoryless policy gets exactly 1/C. A feed-forward policy π(a | o_t) acts on the
current observation alone. At the answer step o_{D+1} = (0, 1) whatever the cue, so the
answer is drawn from one and the same distribution p(a) = π(a | (0, 1)) for every cue,
and nothing it did earlier changed the env. The cue is uniform and independent of that
draw, so

    P(answer = c) = Σ_c (1/C) · p(c) = 1/C,

whatever π is. The same holds for a stack of the last F observations with F ≤ D + 1: the
stack at the answer step is (o_{D+2−F}, …, o_{D+1}), all cue-free, identical for every cue.
The default D = 8 puts the cue out of reach of any stack of up to 9 frames (4 is usual).
A policy with memory can reach 1: it stores c at t = 0 and answers it.

Two implementations: `TorchCueMemory` (N copies as tensor code, on the classic envs'
base: seed groups, autoreset, checkpoints) and `CueMemoryEnv` (one gymnasium env,
registered as CueMemory-v0 when `envs` is imported; `gymnasium.make("CueMemory-v0",
delay=16, num_cues=2)` changes the task).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces

from envs.classic.base import TorchClassicEnv

ENV_ID = "CueMemory-v0"
DEFAULT_DELAY = 8
DEFAULT_NUM_CUES = 4


def check_task(delay, num_cues) -> None:
    """ValueError unless delay ≥ 0 and num_cues ≥ 2 are integers."""
    if isinstance(delay, bool) or not isinstance(delay, int) or delay < 0:
        raise ValueError(f"delay = {delay!r} must be an integer ≥ 0")
    if isinstance(num_cues, bool) or not isinstance(num_cues, int) or num_cues < 2:
        raise ValueError(f"num_cues = {num_cues!r} must be an integer ≥ 2")


def cue_observation_space(num_cues: int) -> spaces.Box:
    return spaces.Box(0.0, 1.0, shape=(num_cues + 1,), dtype=np.float32)


class TorchCueMemory(TorchClassicEnv):
    """N copies of CueMemory-v0. State rows: (cue c, step t), stored in `dtype` (exact integers)."""

    env_id = ENV_ID
    state_dim = 2
    # The episode ends by termination after delay + 2 steps; there is no time limit.
    max_episode_steps = torch.iinfo(torch.int64).max

    def __init__(self, num_envs: int, device="cpu", seed: int | None = None, dtype=torch.float64, groups: int = 1,
                 delay: int = DEFAULT_DELAY, num_cues: int = DEFAULT_NUM_CUES):
        check_task(delay, num_cues)
        super().__init__(num_envs, device, seed, dtype, groups)
        self.delay, self.num_cues = delay, num_cues
        self.single_observation_space = cue_observation_space(num_cues)
        self.single_action_space = spaces.Discrete(num_cues)
        self._cue_values = torch.arange(num_cues, dtype=dtype, device=self.device).unsqueeze(1)  # (C, 1)

    def _initial_state(self, n: int) -> torch.Tensor:
        cue = torch.randint(self.num_cues, (n,), generator=self.generator, device=self.device)
        return torch.stack((cue.to(self.dtype), torch.zeros(n, dtype=self.dtype, device=self.device)))  # (2, n)

    def _transition(self, state, actions):
        cue, step = state.unbind(0)  # each (N,)
        answering = step == self.delay + 1  # the action now is the answer
        correct = actions.reshape(-1).to(self.dtype) == cue
        reward = (answering & correct).to(torch.float32)  # 1 for the right answer, 0 otherwise
        next_state = torch.stack((cue, step + 1))
        return next_state, reward, answering

    def _observe(self, state):
        cue, step = state.unbind(0)
        shows_cue = (self._cue_values == cue) & (step == 0)  # (C, n): e_c at t = 0, zeros after
        asks = (step == self.delay + 1).unsqueeze(0)  # (1, n) the answer flag
        return self._rows_to_observation(torch.cat((shows_cue, asks)))  # (n, C + 1)

    def state_dict(self) -> dict:
        return {**super().state_dict(), "delay": self.delay, "num_cues": self.num_cues}

    def load_state_dict(self, state: dict) -> None:
        if (state.get("delay"), state.get("num_cues")) != (self.delay, self.num_cues):
            raise ValueError(f"env state of delay {state.get('delay')}, {state.get('num_cues')} cues does not fit "
                             f"delay {self.delay}, {self.num_cues} cues")
        super().load_state_dict(state)

    def group_state_dict(self, group: int) -> dict:
        return {**super().group_state_dict(group), "delay": self.delay, "num_cues": self.num_cues}

    member_state_dict = group_state_dict


class CueMemoryEnv(gym.Env):
    """One copy of CueMemory-v0 as a gymnasium env (the rules are in the module docstring)."""

    metadata = {"render_modes": []}

    def __init__(self, delay: int = DEFAULT_DELAY, num_cues: int = DEFAULT_NUM_CUES, render_mode: str | None = None):
        check_task(delay, num_cues)
        self.delay, self.num_cues = delay, num_cues
        self.observation_space = cue_observation_space(num_cues)
        self.action_space = spaces.Discrete(num_cues)
        self.render_mode = render_mode
        self.cue, self.step_count = 0, 0

    def _observation(self) -> np.ndarray:
        observation = np.zeros(self.num_cues + 1, dtype=np.float32)
        if self.step_count == 0:
            observation[self.cue] = 1.0
        if self.step_count == self.delay + 1:
            observation[-1] = 1.0
        return observation

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.cue, self.step_count = int(self.np_random.integers(self.num_cues)), 0
        return self._observation(), {}

    def step(self, action):
        answering = self.step_count == self.delay + 1
        reward = float(answering and int(action) == self.cue)
        self.step_count += 1
        return self._observation(), reward, answering, False, {}


def register_with_gymnasium() -> None:
    """Register CueMemory-v0 (kwargs delay and num_cues; no TimeLimit: episodes end by termination)."""
    if ENV_ID not in gym.registry:
        gym.register(id=ENV_ID, entry_point=f"{__name__}:CueMemoryEnv")
