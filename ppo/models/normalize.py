"""Running statistics for observation normalisation and reward scaling.

`RunningMeanStd` merges batch moments into running ones with the parallel-variance rule
(Chan et al.): for running (μ_a, σ²_a, n_a) and a batch (μ_b, σ²_b, n_b), n = n_a + n_b,

    δ   = μ_b − μ_a
    μ   = μ_a + δ · n_b / n
    σ²  = (σ²_a n_a + σ²_b n_b + δ² n_a n_b / n) / n

which equals the mean and (population) variance of all samples seen, in any batch sizes.

* ObservationNormalizer:  ŝ = clip((s − μ_s) / sqrt(σ²_s + ε), −c, c)
* RewardScaler keeps the discounted return G_t = γ G_{t−1} (1 − done_{t−1}) + r_t per env
  and divides the reward by its running std:  r̂_t = clip(r_t / sqrt(Var[G] + ε), −c, c).
  The mean is not subtracted, so the sign of rewards survives.

Both can be frozen (`training = False`): statistics stop updating, as at evaluation.
Their `state_dict()` holds only tensors and floats, so it goes in a weights_only checkpoint.
"""

from __future__ import annotations

import torch

from ppo.parallel.distributed import SINGLE_PROCESS, World


class RunningMeanStd:
    """Mean and population variance of every sample seen, merged batch by batch."""

    def __init__(self, shape: tuple[int, ...] = (), device: torch.device | str = "cpu", epsilon: float = 1e-4,
                 world: World = SINGLE_PROCESS):
        self.mean = torch.zeros(shape, dtype=torch.float64, device=device)
        self.var = torch.ones(shape, dtype=torch.float64, device=device)
        self.count = epsilon  # a tiny prior count keeps the first merge well defined
        self.world = world  # with several processes, each batch is merged from all of theirs

    def update(self, batch: torch.Tensor) -> None:
        """Merge a batch whose first dimension indexes samples (all processes' batches together)."""
        batch = batch.to(torch.float64)
        if not self.world.distributed:
            self.merge(batch.mean(dim=0), batch.var(dim=0, unbiased=False), batch.shape[0])
            return
        # Σx, Σx², n summed over the processes give the moments of their union.
        count = torch.full_like(batch[0], float(batch.shape[0]))
        moments = self.world.sum_(torch.stack([batch.sum(dim=0), (batch * batch).sum(dim=0), count]))
        mean = moments[0] / moments[2]
        variance = (moments[1] / moments[2] - mean * mean).clamp(min=0.0)
        self.merge(mean, variance, int(moments[2].reshape(-1)[0].item()))

    def merge(self, batch_mean: torch.Tensor, batch_var: torch.Tensor, batch_count: int) -> None:
        total = self.count + batch_count
        delta = batch_mean - self.mean
        self.mean = self.mean + delta * batch_count / total
        self.var = (self.var * self.count + batch_var * batch_count + delta**2 * self.count * batch_count / total) / total
        self.count = total

    def state_dict(self) -> dict:
        return {"mean": self.mean.clone(), "var": self.var.clone(), "count": float(self.count)}

    def load_state_dict(self, state: dict) -> None:
        self.mean = state["mean"].to(self.mean.device, torch.float64)
        self.var = state["var"].to(self.var.device, torch.float64)
        self.count = float(state["count"])


class ObservationNormalizer:
    """ŝ = clip((s − μ) / sqrt(σ² + ε), −clip, clip) with running μ, σ²."""

    def __init__(self, shape: tuple[int, ...], clip: float = 10.0, epsilon: float = 1e-8, device="cpu",
                 world: World = SINGLE_PROCESS):
        self.stats = RunningMeanStd(shape, device, world=world)
        self.clip = clip
        self.epsilon = epsilon
        self.training = True

    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        """Normalise a batch (N, *shape); update the statistics first when training."""
        if self.training:
            self.stats.update(obs)
        return self.normalize(obs)

    def normalize(self, obs: torch.Tensor) -> torch.Tensor:
        scaled = (obs - self.stats.mean) / torch.sqrt(self.stats.var + self.epsilon)
        return scaled.clamp(-self.clip, self.clip).to(obs.dtype)

    def state_dict(self) -> dict:
        return {"stats": self.stats.state_dict(), "clip": self.clip, "epsilon": self.epsilon}

    def load_state_dict(self, state: dict) -> None:
        self.stats.load_state_dict(state["stats"])
        self.clip, self.epsilon = state["clip"], state["epsilon"]


class RewardScaler:
    """r̂_t = clip(r_t / sqrt(Var[G] + ε), −clip, clip), G the running discounted return."""

    def __init__(self, num_envs: int, gamma: float, clip: float = 10.0, epsilon: float = 1e-8, device="cpu",
                 world: World = SINGLE_PROCESS):
        self.stats = RunningMeanStd((), device, world=world)
        self.returns = torch.zeros(num_envs, dtype=torch.float64, device=device)  # (N,) G per env
        self.gamma = gamma
        self.clip = clip
        self.epsilon = epsilon
        self.training = True

    def __call__(self, reward: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
        """Scale one step's rewards (N,); `done` (N,) resets G after this step."""
        if self.training:
            self.returns = self.returns * self.gamma + reward.to(torch.float64)
            self.stats.update(self.returns)
            self.returns = self.returns * (~done).to(torch.float64)
        return self.scale(reward)

    def restart(self) -> None:
        """Every env starts a new episode: G ← 0."""
        self.returns.zero_()

    def scale(self, reward: torch.Tensor) -> torch.Tensor:
        scaled = reward / torch.sqrt(self.stats.var + self.epsilon)
        return scaled.clamp(-self.clip, self.clip).to(reward.dtype)

    def state_dict(self) -> dict:
        """The statistics; each env's running return G belongs to the episodes in progress and is
        checkpointed with them (PPO.process_state)."""
        return {"stats": self.stats.state_dict(), "gamma": self.gamma, "clip": self.clip, "epsilon": self.epsilon}

    def load_state_dict(self, state: dict) -> None:
        self.stats.load_state_dict(state["stats"])
        self.gamma, self.clip, self.epsilon = state["gamma"], state["clip"], state["epsilon"]


class PerRun:
    """One normaliser per run of a seed batch, each applied to its run's block of copies.

    The envs of S runs are S·N copies, run s's in rows s·N … (s+1)·N − 1; `PerRun(parts, N)`
    is called as one normaliser would be and cuts its tensor arguments into those blocks,
    so each run's statistics see its own copies only, as in its single run.
    """

    def __init__(self, parts: list, copies_per_run: int):
        self.parts, self.copies_per_run = list(parts), copies_per_run

    def _blocks(self, tensor: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tensor.split(self.copies_per_run)

    def __call__(self, *tensors: torch.Tensor) -> torch.Tensor:
        return torch.cat([part(*blocks) for part, *blocks in zip(self.parts, *map(self._blocks, tensors))])

    def normalize(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.cat([part.normalize(block) for part, block in zip(self.parts, self._blocks(obs))])

    def restart(self) -> None:
        for part in self.parts:
            part.restart()

    def __getitem__(self, run: int):
        return self.parts[run]
