"""Many seeds at once: S independent PPO runs trained as one batched computation.

Member s is the run `PPO(config with seed = seeds[s])` would make, and draws what that
run would draw: its initial weights (torch.manual_seed(seed) before the network is
built), its own action stream (a generator left where the weights' initialisation left
the global one), its own minibatch shuffles and its own environment copies
(`envs.stacked_vec_env.StackedVecEnv`: member s owns copies s·N … (s+1)·N − 1). What is
shared is the arithmetic:

    θ: (S, P), one row per member             (ppo.models.stacked_networks, ppo.parallel.optim.StackedAdam)
    for iteration = 1, 2, ...:
        α ← α₀ · (1 − (iteration − 1) / iterations)
        T steps of all S·N copies, one network call per step            (collect_rollout)
        Â, R ← GAE(γ, λ) over the (T, S·N) rollout: columns are independent
        K epochs; each member shuffles its own B = T·N samples; per minibatch
            L = Σ_s L_s(θ_s), L_s each member's own PPO loss (ppo.algorithm.losses.transition_loss)
            target_kl: member s stops when its own KL̂ exceeds it (before its step)
            backward; each member's gradient clipped to its own norm; Adam step per member
        per member: a metrics.csv row, and every few iterations a checkpoint

Since the members' parameters are disjoint, ∂L/∂θ_s = ∂L_s/∂θ_s: summing the losses
couples nothing. The update is `ppo.algorithm.update`'s own loop, run for the stack: a member whose
update has stopped draws no more permutations, as its run, which has left the loop.

What holds, then: member s draws what run s draws (the same weights, the same action and
shuffle streams, the same numbers from them while its decisions match its run's), and
its arithmetic differs only in rounding: batched matrix products round differently from
one run's. Started from the same θ, m, v, an iteration of member s lands within a few
float32 roundings of its run's, with the same target_kl decision and step count
(tests/test_seed_batch.py). Over many iterations the difference grows, as any rounding
does in this chaotic system, until the runs part: the members end as good as their runs,
not equal to them. How far apart, and when, is measured by the guide's block
`seed-batch-rounding` (its record: docs/figures/seed-batch-rounding.json).

A member whose losses, gradient norm or parameters turn non-finite stops alone
(`stop_member`): its θ goes back to its last finite values and stays, its folder keeps
its last good checkpoint and gets DIVERGED_NAME; the other members go on bit for bit as
they would have. A member's folder is an ordinary run folder (config.json,
metrics.csv, TensorBoard events, checkpoint.pt in `PPO`'s format), so `ppo-eval` reads
it and `ppo-train --resume` continues it as a single run. On a CPU the batched
arithmetic takes as long per member as a run's own; what the batch saves is the Python
overhead of S separate loops, their start-up, and (with `num_threads` > 1) idle cores;
on a GPU it fills the device (`experiments/benchmarks/seeds.py`). Recurrent policies
(config.recurrent) are not batched: `check_batchable` refuses them, and
`stacking_obstacle` says what else a batch cannot stack (images, masks, the PPO
variants); `ppo-train --seeds` trains those seeds one after another instead.
"""

from __future__ import annotations

import json
import math
import time
from collections import deque
from pathlib import Path
from typing import Callable, Sequence

import torch
from torch.func import vmap

from ppo.algorithm.advantages import compute_gae, successor_values
from ppo.trainers.base import CHECKPOINT_NAME, GUARDED_METRICS, continue_global_stream
from ppo.runs.checkpoint import remove_stale_temporaries, save_checkpoint
from ppo.config import ConfigError, PPOConfig
from ppo.algorithm.losses import clipped_surrogate_loss, explained_variance, normalize_advantages, transition_loss
from ppo.models.networks import ActorCritic, spaces_to_dict
from ppo.models.normalize import ObservationNormalizer, RewardScaler
from ppo.parallel.optim import StackedAdam, linear_annealing
from ppo.models.stacked_networks import StackedActorCritic
from ppo.algorithm.storage import RolloutBuffer
from ppo.trainers.ppo import RECENT_EPISODES, StepsEnvs, check_spaces, resolve_device
from ppo.algorithm.update import MinibatchLoss, run_member_update, update_settings

MemberCallback = Callable[["SeedBatchPPO", list], "bool | None"]

DIVERGED_NAME = "diverged.json"  # in the folder of a member that diverged: its seed, iteration, quantity, value


def parse_seeds(text: str) -> list[int]:
    """'1-4,9' -> [1, 2, 3, 4, 9]; ConfigError naming the bad part otherwise."""
    seeds: list[int] = []
    for part in text.split(","):
        first, dash, last = part.strip().partition("-")
        try:
            low = int(first)
            high = int(last) if dash else low
        except ValueError:
            raise ConfigError(f"seeds = {text!r}: {part!r} is not a seed or a range like 1-16") from None
        if low < 0 or high < low:
            raise ConfigError(f"seeds = {text!r}: {part!r} must be a seed ≥ 0 or a range low-high with low ≤ high")
        seeds.extend(range(low, high + 1))
    if len(set(seeds)) != len(seeds):
        raise ConfigError(f"seeds = {text!r} names a seed twice")
    return seeds


def stacking_obstacle(config: PPOConfig, observation_space, action_space, algorithm: str = "clip") -> str | None:
    """Why a seed batch cannot stack these runs (a phrase), or None when it can: it trains
    PPO-Clip with a feed-forward network on 1-D Box observations and Discrete or 1-D Box actions."""
    if algorithm != "clip":
        return f"algorithm {algorithm}"
    if config.recurrent != "none":
        return f"a {config.recurrent} network"
    try:
        check_spaces(observation_space, action_space, config.env_id, shaped=False)
    except ConfigError:
        return f"observation space {observation_space}, action space {action_space}"
    return None


def check_batchable(config: PPOConfig) -> None:
    """ConfigError (one line) for a config a seed batch cannot train: a recurrent network."""
    if config.recurrent != "none":
        raise ConfigError(f"recurrent = {config.recurrent!r}: a seed batch supports feed-forward networks only; "
                          "`ppo-train --seeds` trains such seeds one after another")


class SeedBatchPPO(StepsEnvs):
    """S runs of PPO-Clip on one config, differing only in their seeds (see the module docstring)."""

    sample_unit = "steps"

    def __init__(self, config: PPOConfig, seeds: Sequence[int], envs, run_dirs: Sequence[str | Path] | None = None,
                 progress: bool = True):
        """`envs`: S·N copies with `reset(seed=[...])` (a `StackedVecEnv` of each member's own envs)."""
        config = config.validate()
        check_batchable(config)
        self.seeds = list(seeds)
        self.num_members = S = len(self.seeds)
        if S == 0:
            raise ConfigError("a seed batch needs at least one seed")
        if run_dirs is not None and len(run_dirs) != S:
            raise ConfigError(f"{len(run_dirs)} run folders for {S} seeds")
        self.configs = [config.replace(seed=seed).validate() for seed in self.seeds]
        self.config = config
        self.run_dirs = None if run_dirs is None else [Path(folder) for folder in run_dirs]
        self.progress = progress
        self.device = resolve_device(config.device)
        if envs.num_envs != S * config.num_envs:
            raise ConfigError(f"the envs have {envs.num_envs} copies but {S} seeds × num_envs = {config.num_envs} "
                              f"need {S * config.num_envs}")
        self.bind_envs(envs, config.env_id)
        self.member_envs = N = config.num_envs
        observation_space, action_space = self.observation_space, self.action_space

        members, self.action_generators = [], []
        for seed in self.seeds:  # as PPO.__init__ does: the seed, then the weights, then the actions
            torch.manual_seed(seed)
            members.append(ActorCritic.from_config(config, observation_space, action_space))
            self.action_generators.append(continue_global_stream(self.device, seed))
        self.model = StackedActorCritic(members).to(self.device)
        self.optimizer = StackedAdam(self.model.parameters_in_member_order(), lr=config.learning_rate,
                                     eps=config.adam_eps)
        self.shuffle_generators = [torch.Generator(device=self.device).manual_seed(seed) for seed in self.seeds]
        obs_shape = self.obs_shape = tuple(observation_space.shape)
        self.obs_normalizers = ([ObservationNormalizer(obs_shape, config.obs_clip, device=self.device)
                                 for _ in range(S)] if config.normalize_obs else None)
        self.reward_scalers = ([RewardScaler(N, config.gamma, config.reward_clip, device=self.device)
                                for _ in range(S)] if config.normalize_reward else None)
        self.buffer = RolloutBuffer(config.num_steps, S * N, obs_shape, tuple(action_space.shape),
                                    torch.float32 if self.continuous else torch.int64, self.device)
        self._member_losses = vmap(self._member_loss)

        self.iteration = 0
        self.train_seconds = 0.0
        self.global_step = 0  # environment steps of each member
        self.recent_returns = [deque(maxlen=RECENT_EPISODES) for _ in range(S)]
        self.episode_return = torch.zeros(S * N, device=self.device)
        self.episode_length = torch.zeros(S * N, dtype=torch.int64, device=self.device)
        self.history: list[list[dict[str, float]]] = []
        self.diverged: dict[int, dict] = {}  # member -> when and why it stopped (stop_member)
        self.next_obs = self._observe(envs.reset(seed=self.seeds))

    @property
    def total_iterations(self) -> int:
        return self.config.num_iterations

    @property
    def total_samples(self) -> int:
        return self.config.num_iterations * self.config.batch_size

    # ------------------------------------------------------------------ layout helpers
    def _by_member(self, tensor: torch.Tensor) -> torch.Tensor:
        """(S·N, ...) -> (S, N, ...), member s's copies in row s (a view)."""
        return tensor.reshape(self.num_members, self.member_envs, *tensor.shape[1:])

    def _member_major(self, tensor: torch.Tensor) -> torch.Tensor:
        """(T, S·N, ...) rollout tensor -> (S, T·N, ...): member s's samples in its run's order (t-major)."""
        T = tensor.shape[0]
        split = tensor.reshape(T, self.num_members, self.member_envs, *tensor.shape[2:])
        return split.transpose(0, 1).reshape(self.num_members, T * self.member_envs, *tensor.shape[2:])

    def _observe(self, raw_obs: torch.Tensor, update_statistics: bool = True) -> torch.Tensor:
        if self.obs_normalizers is None:
            return raw_obs
        blocks = self._by_member(raw_obs)
        return torch.cat([normalizer(block) if update_statistics else normalizer.normalize(block)
                          for normalizer, block in zip(self.obs_normalizers, blocks)])

    def _scale_rewards(self, reward: torch.Tensor, dones: torch.Tensor) -> torch.Tensor:
        if self.reward_scalers is None:
            return reward
        return torch.cat([scaler(block, done) for scaler, block, done in
                          zip(self.reward_scalers, self._by_member(reward), self._by_member(dones))])

    # ------------------------------------------------------------------ rollout
    @torch.inference_mode()
    def collect_rollout(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Fill the buffer with T steps of all S·N copies; per member, its finished episodes' (returns, lengths)."""
        config, buffer = self.config, self.buffer
        buffer.reset()
        T, columns = config.num_steps, self.num_members * self.member_envs
        finished_return = torch.zeros(T, columns, device=self.device)
        finished_length = torch.zeros(T, columns, dtype=torch.int64, device=self.device)
        finished = torch.zeros(T, columns, dtype=torch.bool, device=self.device)
        while not buffer.full:
            t, obs = buffer.step, self.next_obs
            action, log_prob, value = self.model.act(self._by_member(obs), self.action_generators)
            action, log_prob, value = action.flatten(0, 1), log_prob.flatten(), value.flatten()
            result = self.envs.step(self.env_action(action))
            dones = result.terminated | result.truncated
            self.episode_return += result.reward
            self.episode_length += 1
            finished_return[t], finished_length[t], finished[t] = self.episode_return, self.episode_length, dones
            self.episode_return = self.episode_return.masked_fill(dones, 0.0)
            self.episode_length = self.episode_length.masked_fill(dones, 0)
            reward = self._scale_rewards(result.reward, dones)
            if config.bootstrap_truncated:
                terminated, truncated = result.terminated, result.truncated
            else:
                terminated, truncated = dones, torch.zeros_like(dones)
            final_obs = self._observe(result.final_obs, update_statistics=False)
            buffer.add(obs, action, log_prob, value, reward, terminated, truncated, final_obs)
            self.next_obs = self._observe(result.obs)
            self.global_step += config.num_envs
        return [(self._member_block(finished_return, s)[self._member_block(finished, s)],
                 self._member_block(finished_length, s)[self._member_block(finished, s)])
                for s in range(self.num_members)]

    def _member_block(self, tensor: torch.Tensor, member: int) -> torch.Tensor:
        """Member `member`'s columns of a (T, S·N) tensor: (T, N)."""
        return tensor[:, member * self.member_envs:(member + 1) * self.member_envs]

    @torch.inference_mode()
    def compute_advantages(self) -> tuple[torch.Tensor, torch.Tensor]:
        """GAE over the (T, S·N) buffer, each member bootstrapping from its own critic."""
        buffer, config = self.buffer, self.config
        last_value = self.model.value(self._by_member(self.next_obs)).flatten()
        final_values = torch.zeros_like(buffer.values)
        if bool(buffer.truncated.any()):  # V(final obs) of every step, each member's critic on its own copies
            T = config.num_steps
            values = self.model.value(self._member_major(buffer.final_obs))  # (S, T·N)
            values = values.view(self.num_members, T, self.member_envs).transpose(0, 1).reshape(T, -1)
            final_values = torch.where(buffer.truncated, values, final_values)
        next_values = successor_values(buffer.values, last_value, buffer.truncated, final_values)
        return compute_gae(buffer.rewards, buffer.values, next_values, buffer.terminated,
                           buffer.terminated | buffer.truncated, config.gamma, config.gae_lambda)

    # ------------------------------------------------------------------ update
    def _member_loss(self, new_log_probs, entropy, new_values, minibatch):
        """One member's L on its b transitions (vmapped over the members): PPO.minibatch_loss's terms."""
        advantages = minibatch["advantages"]
        if self.config.norm_adv:
            advantages = normalize_advantages(advantages)
        clip_coef = self.config.clip_coef
        return transition_loss(new_log_probs, entropy, new_values, minibatch, advantages,
                               lambda new, old, adv: clipped_surrogate_loss(new, old, adv, clip_coef), self.config)

    def minibatch_loss(self, minibatch: dict[str, torch.Tensor]) -> MinibatchLoss:
        """Every member's L_s on its own minibatch: loss (S,), log_ratio (S, b), terms (S,) each."""
        new_log_probs, entropy, new_values = self.model.evaluate_actions(minibatch["obs"], minibatch["actions"])
        losses, terms = self._member_losses(new_log_probs, entropy, new_values, minibatch)
        return MinibatchLoss(loss=losses, log_ratio=new_log_probs.detach() - minibatch["log_probs"], terms=terms)

    def update(self, advantages: torch.Tensor, returns: torch.Tensor) -> list[dict[str, float]]:
        buffer = self.buffer
        samples = {
            "obs": self._member_major(buffer.obs),
            "actions": self._member_major(buffer.actions),
            "log_probs": self._member_major(buffer.log_probs),
            "values": self._member_major(buffer.values),
            "advantages": self._member_major(advantages),
            "returns": self._member_major(returns),
        }
        metrics = run_member_update(samples, self.minibatch_loss, self.optimizer, generators=self.shuffle_generators,
                                    frozen=list(self.diverged), **update_settings(self.config))
        for member, row in enumerate(metrics):
            row["explained_variance"] = explained_variance(samples["values"][member], samples["returns"][member])
        return metrics

    # ------------------------------------------------------------------ the loop
    def run_iteration(self) -> list[dict[str, float]]:
        config = self.config
        if config.anneal_lr:
            self.optimizer.lr = config.learning_rate * linear_annealing(1.0, self.iteration, self.total_iterations)
        episodes = self.collect_rollout()
        advantages, returns = self.compute_advantages()
        metrics = self.update(advantages, returns)
        for row, (episode_returns, episode_lengths), recent in zip(metrics, episodes, self.recent_returns):
            recent.extend(episode_returns.tolist())
            row.update(
                episodes=int(episode_returns.numel()),
                episode_return_mean=float(episode_returns.mean()) if episode_returns.numel() else math.nan,
                episode_length_mean=float(episode_lengths.float().mean()) if episode_lengths.numel() else math.nan,
                episode_return_recent=_mean(recent),
                learning_rate=self.optimizer.lr,
            )
        return metrics

    def train_iteration(self) -> list[dict[str, float]]:
        """One iteration of every member; a member whose losses, gradient norm or parameters turn
        non-finite in it is stopped (`stop_member`) and takes no part in the iterations after."""
        last_good = self.optimizer.flat_params.clone()  # (S, P) θ before this iteration's update
        started = time.perf_counter()
        metrics = self.run_iteration()
        self.train_seconds += time.perf_counter() - started
        self.iteration += 1
        for row in metrics:
            row.update(iteration=self.iteration, time_s=self.train_seconds,
                       steps_per_second=self.global_step / max(self.train_seconds, 1e-9))
        for member, (quantity, value) in self.find_divergence(metrics).items():
            self.stop_member(member, quantity, value, last_good[member])
        self.history.append(metrics)
        return metrics

    def train(self, callback: MemberCallback | None = None) -> list[dict[str, float]]:
        """Iterate until the budget is spent (or `callback(batch, metrics)` returns True); each
        member's folder gets what a single run's gets. Returns the last metrics, one row per member."""
        from ppo.runs.logger import MetricsLogger

        loggers = []
        if self.run_dirs is not None:
            for member, (folder, config) in enumerate(zip(self.run_dirs, self.configs)):
                folder.mkdir(parents=True, exist_ok=True)
                remove_stale_temporaries(folder)
                (folder / "config.json").write_text(json.dumps(config.to_dict(), indent=2) + "\n")
                loggers.append(MetricsLogger(folder, config.tensorboard, self.total_samples,
                                             self.progress and member == 0))
        metrics: list[dict[str, float]] = []
        try:
            while self.iteration < self.total_iterations and len(self.diverged) < self.num_members:
                metrics = self.train_iteration()
                for member, (logger, row) in enumerate(zip(loggers, metrics)):
                    if member not in self.diverged:  # a diverged member's folder ends at its last good iteration
                        logger.log(self.global_step, row)
                if loggers:
                    returns = sorted(row["episode_return_recent"] for member, row in enumerate(metrics)
                                     if member not in self.diverged) or [math.nan]
                    diverged = f" ({len(self.diverged)} diverged)" if self.diverged else ""
                    loggers[0].progress(self.global_step, f"{self.num_members} seeds{diverged}, median return "
                                                          f"{returns[len(returns) // 2]:.1f}")
                if self.run_dirs is not None and self.config.checkpoint_every \
                        and self.iteration % self.config.checkpoint_every == 0:
                    self.save()
                if callback is not None and callback(self, metrics):
                    break
        finally:
            for logger in loggers:
                logger.close()
        if self.run_dirs is not None:
            self.save()
        return metrics

    def find_divergence(self, metrics: list[dict[str, float]]) -> dict[int, tuple[str, float]]:
        """{member: (quantity, value)} for each member not stopped yet whose losses, gradient norm
        (GUARDED_METRICS) or parameters are not finite after this iteration."""
        finite_parameters = torch.isfinite(self.optimizer.flat_params).all(dim=1).tolist()
        found = {}
        for member, row in enumerate(metrics):
            if member in self.diverged:
                continue
            bad = [(name, row[name]) for name in GUARDED_METRICS if name in row and not math.isfinite(row[name])]
            if not finite_parameters[member]:
                bad.append(("parameters", math.nan))
            if bad:
                found[member] = bad[0]
        return found

    def stop_member(self, member: int, quantity: str, value: float, last_good: torch.Tensor) -> None:
        """Member `member` diverged: its θ goes back to `last_good` (its values before the iteration)
        and stays there, it takes no more steps, logs nothing more and saves no more checkpoints
        (its folder keeps its last good one), and DIVERGED_NAME in its folder says when and why.
        The other members go on exactly as they would have: nothing couples them to it."""
        self.diverged[member] = {"seed": self.seeds[member], "iteration": self.iteration, "quantity": quantity,
                                 "value": str(value)}
        self.optimizer.flat_params[member] = last_good
        if self.run_dirs is not None:
            self.run_dirs[member].mkdir(parents=True, exist_ok=True)
            (self.run_dirs[member] / DIVERGED_NAME).write_text(json.dumps(self.diverged[member], indent=2) + "\n")

    def recent_returns_by_member(self) -> list[float]:
        """Each member's mean return of its last training episodes; NaN for a member that diverged."""
        return [math.nan if member in self.diverged else _mean(recent)
                for member, recent in enumerate(self.recent_returns)]

    # ------------------------------------------------------------------ checkpoints
    def member_state_dict(self, member: int) -> dict:
        """Member `member`'s checkpoint, in `PPO.state_dict()`'s format: its own run's."""
        columns = slice(member * self.member_envs, (member + 1) * self.member_envs)
        generator = self.action_generators[member]
        config = self.configs[member]
        return {
            "config": config.to_dict(),
            "iteration": self.iteration,
            "train_seconds": self.train_seconds,
            "total_iterations": self.total_iterations,
            "schedule_origin": [0, 1.0],
            "model": self.model.member_state_dict(member),
            "optimizer": self.optimizer.member_state_dict(member),
            "spaces": spaces_to_dict(self.observation_space, self.action_space),
            "global_step": self.global_step,
            "obs_normalizer": self.obs_normalizers[member].state_dict() if self.obs_normalizers else None,
            "reward_scaler": self.reward_scalers[member].state_dict() if self.reward_scalers else None,
            "recent_returns": list(self.recent_returns[member]),
            "world_size": 1,
            "processes": None,
            "torch_rng": generator.get_state() if self.device.type == "cpu" else torch.get_rng_state(),
            "cuda_rng": generator.get_state() if self.device.type == "cuda" else None,
            "shuffle_rng": self.shuffle_generators[member].get_state(),
            "envs": self.envs.member_state_dict(member),
            "next_obs": self.next_obs[columns].clone(),
            "episode_return": self.episode_return[columns].clone(),
            "episode_length": self.episode_length[columns].clone(),
            "return_accumulator": self.reward_scalers[member].returns.clone() if self.reward_scalers else None,
        }

    def save(self) -> list[Path]:
        """Write every member's checkpoint into its run folder (atomically, one file each), diverged members' excepted."""
        if self.run_dirs is None:
            raise ValueError("save() needs the run folders")
        paths = []
        for member, folder in enumerate(self.run_dirs):
            if member in self.diverged:
                continue
            save_checkpoint(self.member_state_dict(member), folder / CHECKPOINT_NAME)
            paths.append(folder / CHECKPOINT_NAME)
        return paths


def _mean(values) -> float:
    return sum(values) / len(values) if values else math.nan
