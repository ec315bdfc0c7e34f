"""Many seeds at once: S independent PPO runs trained as one batched computation.

`SeedBatchPPO` is `PPO` with a member axis. Its rollout (`PPO.collect_rollout`), its
advantages, its iteration (`PPO.run_iteration`) and its lifecycle (`BaseTrainer.train`,
save, resume) are PPO's own; what it changes is where the members live:

    θ: (S, P), one row per member             (ppo.models.stacked_networks, ppo.parallel.optim.StackedAdam)
    the envs: S·N copies, member s's are copies s·N … (s+1)·N − 1   (envs.stacked_vec_env, seed groups)
    for iteration = 1, 2, ...:
        α ← α₀ · (1 − (iteration − 1) / iterations)
        T steps of all S·N copies, one network call per step (act: each member draws from its own stream)
        Â, R ← GAE(γ, λ) over the (T, S·N) rollout: columns are independent (bootstrap_values: own critics)
        K epochs; each member shuffles its own B = T·N samples; per minibatch
            L = Σ_s L_s(θ_s), L_s each member's own PPO loss (ppo.algorithm.losses.transition_loss)
            target_kl: member s stops when its own KL̂ exceeds it (before its step)
            backward; each member's gradient clipped to its own norm; Adam step per member
        per member: a metrics.csv row, and every few iterations a checkpoint

Member s is the run `PPO(config with seed = seeds[s])` would make, and draws what that
run would draw: its initial weights (torch.manual_seed(seed) before the network is
built), its own action stream (a generator left where the weights' initialisation left
the global one), its own minibatch shuffles and its own environment copies. Since the
members' parameters are disjoint, ∂L/∂θ_s = ∂L_s/∂θ_s: summing the losses couples
nothing. The update is `ppo.algorithm.update`'s own loop, run for the stack: a member
whose update has stopped draws no more permutations, as its run, which has left the loop.

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
they would have. A member's folder is an ordinary run folder (config.json, metrics.csv,
TensorBoard events, checkpoint.pt in `PPO`'s format), so `ppo-eval` reads it and
`ppo-train --resume` continues it as a single run; `SeedBatchPPO.resume(folders, ...)`
continues the members together, bit for bit where the envs can be checkpointed. On a
CPU the batched arithmetic takes as long per member as a run's own; what the batch saves
is the Python overhead of S separate loops, their start-up, and (with `num_threads` > 1)
idle cores; on a GPU it fills the device (`experiments/benchmarks/seeds.py`). The stack
holds any network a single run trains (`ppo.models.stacked_networks`: MLPs layer by
layer, CNNs, masks and MultiDiscrete heads by vmap; `ppo.models.stacked_recurrent`: GRU
and LSTM cores), and the other trainers are this class with what they change: the PPO
variants' loss and rule (`ppo.trainers.variants`), recurrent PPO's state and sequences
(`ppo.trainers.recurrent.SeedBatchRecurrent`). `ppo.trainers.choice.build_seed_batch`
picks the one a config and an algorithm need.
"""

from __future__ import annotations

import json
import math
from collections import deque
from pathlib import Path
from typing import Callable, Sequence

import torch
from torch.func import vmap

from ppo.algorithm.losses import clipped_surrogate_loss, explained_variance, normalize_advantages, transition_loss
from ppo.algorithm.update import MinibatchLoss, run_member_update, update_settings
from ppo.config import ConfigError, PPOConfig
from ppo.models.networks import ActorCritic, spaces_to_dict
from ppo.models.normalize import ObservationNormalizer, PerRun, RewardScaler
from ppo.models.stacked_networks import stack_networks
from ppo.parallel.optim import StackedAdam
from ppo.runs.checkpoint import CheckpointError, remove_stale_temporaries, save_checkpoint
from ppo.trainers.base import CHECKPOINT_NAME, GUARDED_METRICS, BaseTrainer, continue_global_stream
from ppo.trainers.ppo import PPO, RECENT_EPISODES, check_network, resolve_device

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


class SeedBatchPPO(PPO):
    """S runs of PPO-Clip on one config, differing only in their seeds: `PPO` with a member axis.

    The rollout, the advantages, the iteration and the lifecycle (train, save, resume) are
    `PPO`'s and `ppo.trainers.base`'s own; what this class changes is where the member axis
    lives: the S networks stacked, one random stream per member, each member's normalisers,
    the update's layout, and a run folder, a log and a checkpoint per member.
    """

    single_run: type[PPO] = PPO  # the trainer of each member's run (its checkpoint's class)

    def __init__(self, config: PPOConfig, seeds: Sequence[int], envs, run_dirs: Sequence[str | Path] | None = None,
                 progress: bool = True):
        """`envs`: S·N copies with `reset(seed=[...])` (a `StackedVecEnv` of each member's own envs)."""
        # PPO.__init__ builds one network from one seed; a batch builds S and stacks them
        BaseTrainer.__init__(self, config.validate(), run_dir=None, progress=progress)
        config = self.config
        self.check_network_kind(config)
        self.seeds = list(seeds)
        self.num_members = S = len(self.seeds)
        if S == 0:
            raise ConfigError("a seed batch needs at least one seed")
        if run_dirs is not None and len(run_dirs) != S:
            raise ConfigError(f"{len(run_dirs)} run folders for {S} seeds")
        self.configs = [config.replace(seed=seed).validate() for seed in self.seeds]
        self.run_dirs = None if run_dirs is None else [Path(folder) for folder in run_dirs]
        self.device = resolve_device(config.device)
        if envs.num_envs != S * config.num_envs:
            raise ConfigError(f"the envs have {envs.num_envs} copies but {S} seeds × num_envs = {config.num_envs} "
                              f"need {S * config.num_envs}")
        self.bind_envs(envs, config.env_id)
        self.member_envs = self.local_num_envs = N = config.num_envs
        observation_space, action_space = self.observation_space, self.action_space
        check_network(config, observation_space, action_space)

        members, self.action_generators = [], []
        for seed in self.seeds:  # as PPO.__init__ does: the seed, then the weights, then the actions
            torch.manual_seed(seed)
            members.append(self.member_network(observation_space, action_space))
            self.action_generators.append(continue_global_stream(self.device, seed))
        self.model = self.stack(members).to(self.device)
        self.optimizer = StackedAdam(self.model.parameters_in_member_order(), lr=config.learning_rate,
                                     eps=config.adam_eps)
        self.shuffle_generators = [torch.Generator(device=self.device).manual_seed(seed) for seed in self.seeds]
        obs_shape = tuple(self.obs_box.shape)
        self.obs_normalizer = (PerRun([ObservationNormalizer(obs_shape, config.obs_clip, device=self.device)
                                       for _ in range(S)], N) if config.normalize_obs else None)
        self.reward_scaler = (PerRun([RewardScaler(N, config.gamma, config.reward_clip, device=self.device)
                                      for _ in range(S)], N) if config.normalize_reward else None)
        self.buffer = self.build_buffer(obs_shape, tuple(action_space.shape),
                                        torch.float32 if self.continuous else torch.int64, members[0])
        self.clip_coef = config.clip_coef
        self._member_losses = vmap(self._member_loss)

        self.global_step = 0  # environment steps of each member
        self.recent_returns = [deque(maxlen=RECENT_EPISODES) for _ in range(S)]
        self.diverged: dict[int, dict] = {}  # member -> when and why it stopped (stop_member)
        self._start_episodes()

    def check_network_kind(self, config: PPOConfig) -> None:
        """ConfigError (one line) for a recurrent config: `ppo.trainers.recurrent.SeedBatchRecurrent` stacks those."""
        if config.recurrent != "none":
            raise ConfigError(f"recurrent = {config.recurrent!r}: SeedBatchPPO stacks feed-forward networks; use "
                              "ppo.trainers.recurrent.SeedBatchRecurrent (ppo.trainers.choice.build_seed_batch picks it)")

    def member_network(self, observation_space, action_space) -> ActorCritic:
        """One member's network, as its single run builds it (drawn from the global stream, seeded just before)."""
        return ActorCritic.from_config(self.config, observation_space, action_space)

    def stack(self, members: list) -> torch.nn.Module:
        """The members as one batched network (ppo.models.stacked_networks)."""
        return stack_networks(members)

    # ------------------------------------------------------------------ the member axis
    def reset_seed(self) -> list[int]:
        return self.seeds  # copy block s starts from seed s, as in member s's run

    def by_run(self, columns: torch.Tensor) -> list[torch.Tensor]:
        """(T, S·N) -> S tensors (T, N): member s's columns."""
        return list(columns.split(self.member_envs, dim=1))

    def member_rows(self, metrics: list[dict[str, float]]) -> list[dict[str, float]]:
        return metrics

    def recent_returns_by_run(self) -> list[deque[float]]:
        return self.recent_returns

    def _by_member(self, tensor: torch.Tensor) -> torch.Tensor:
        """(S·N, ...) -> (S, N, ...), member s's copies in row s (a view)."""
        return tensor.reshape(self.num_members, self.member_envs, *tensor.shape[1:])

    def _member_major(self, tensor: torch.Tensor) -> torch.Tensor:
        """(T, S·N, ...) rollout tensor -> (S, T·N, ...): member s's samples in its run's order (t-major)."""
        T = tensor.shape[0]
        split = tensor.reshape(T, self.num_members, self.member_envs, *tensor.shape[2:])
        return split.transpose(0, 1).reshape(self.num_members, T * self.member_envs, *tensor.shape[2:])

    # ------------------------------------------------------------------ rollout
    def act(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Every member's step on its own copies, each drawing from its own action stream."""
        mask = None if self.next_action_mask is None else self._by_member(self.next_action_mask)
        action, log_prob, value = self.model.act(self._by_member(obs), self.action_generators, mask)
        return action.flatten(0, 1), log_prob.flatten(), value.flatten()

    def bootstrap_values(self) -> tuple[torch.Tensor, torch.Tensor]:
        """PPO's bootstrap values, each member's critic on its own copies."""
        buffer, config = self.buffer, self.config
        last_value = self.model.value(self._by_member(self.next_obs)).flatten()
        final_values = torch.zeros_like(buffer.values)
        if bool(buffer.truncated.any()):  # V(final obs) of every step, each member's critic on its own copies
            T = config.num_steps
            values = self.model.value(self._member_major(buffer.final_obs))  # (S, T·N)
            values = values.view(self.num_members, T, self.member_envs).transpose(0, 1).reshape(T, -1)
            final_values = torch.where(buffer.truncated, values, final_values)
        return last_value, final_values

    # ------------------------------------------------------------------ update
    def _member_loss(self, new_log_probs, entropy, new_values, minibatch):
        """One member's L on its b transitions (vmapped over the members): PPO.minibatch_loss's terms."""
        advantages = minibatch["advantages"]
        if self.config.norm_adv:
            advantages = normalize_advantages(advantages)
        return transition_loss(new_log_probs, entropy, new_values, minibatch, advantages,
                               lambda new, old, adv: self.member_policy_loss(new, old, adv, minibatch), self.config)

    def member_policy_loss(self, new_log_probs, old_log_probs, advantages, minibatch) -> torch.Tensor:
        """One member's L_policy: PPO-Clip's (the variants of ppo.trainers.variants read their member's
        adapted coefficient from the minibatch)."""
        return clipped_surrogate_loss(new_log_probs, old_log_probs, advantages, self.config.clip_coef)

    def minibatch_loss(self, minibatch: dict[str, torch.Tensor]) -> MinibatchLoss:
        """Every member's L_s on its own minibatch: loss (S,), log_ratio (S, b), terms (S,) each."""
        new_log_probs, entropy, new_values = self.model.evaluate_actions(minibatch["obs"], minibatch["actions"],
                                                                         minibatch.get("action_masks"))
        losses, terms = self._member_losses(new_log_probs, entropy, new_values, minibatch)
        return MinibatchLoss(loss=losses, log_ratio=new_log_probs.detach() - minibatch["log_probs"], terms=terms)

    def update(self, advantages: torch.Tensor, returns: torch.Tensor) -> list[dict[str, float]]:
        """PPO's update for every member at once (ppo.algorithm.update.run_member_update): one row each."""
        samples = self.update_samples(advantages, returns)
        metrics = run_member_update(samples, self.minibatch_loss, self.optimizer, generators=self.shuffle_generators,
                                    frozen=list(self.diverged), **update_settings(self.config, self.member_clip_coefs()))
        for member, row in enumerate(metrics):
            row["explained_variance"] = explained_variance(samples["values"][member].reshape(-1),
                                                           samples["returns"][member].reshape(-1))
        return metrics

    def update_samples(self, advantages: torch.Tensor, returns: torch.Tensor) -> dict[str, torch.Tensor]:
        """What run_member_update shuffles, member-major: (S, T·N, ...), member s's samples in its run's order."""
        return {**self.member_samples(), "values": self._member_major(self.buffer.values),
                "advantages": self._member_major(advantages), "returns": self._member_major(returns)}

    def member_clip_coefs(self) -> float | torch.Tensor:
        """The ε each member's clip fraction is counted against: the config's (adaptive clipping: (S, 1), its own)."""
        return self.config.clip_coef

    def member_samples(self) -> dict[str, torch.Tensor]:
        """The rollout's observations, actions (their masks) and log π_old, member-major: (S, T·N, ...)."""
        buffer = self.buffer
        samples = {name: self._member_major(getattr(buffer, name)) for name in ("obs", "actions", "log_probs")}
        if buffer.action_masks is not None:
            samples["action_masks"] = self._member_major(buffer.action_masks)
        return samples

    # ------------------------------------------------------------------ the loop's hooks
    def train_iteration(self) -> list[dict[str, float]]:
        """One iteration of every member; a member whose losses, gradient norm or parameters turn
        non-finite in it is stopped (`stop_member`) and takes no part in the iterations after."""
        last_good = self.optimizer.flat_params.clone()  # (S, P) θ before this iteration's update
        metrics = super().train_iteration()
        for member, (quantity, value) in self.find_divergence(metrics).items():
            self.stop_member(member, quantity, value, last_good[member])
        return metrics

    def check_finite(self, metrics: list[dict[str, float]]) -> None:
        """Nothing to raise: `train_iteration` has stopped the members that diverged, and only them."""

    def still_training(self) -> bool:
        return len(self.diverged) < self.num_members

    def keeps_checkpoints(self) -> bool:
        return self.run_dirs is not None

    def open_logs(self) -> list:
        """Each member's run folder prepared as a single run's, with its own log (member 0 shows the progress bar)."""
        from ppo.runs.logger import MetricsLogger

        if self.run_dirs is None:
            return []
        logs = []
        for member, (folder, config) in enumerate(zip(self.run_dirs, self.configs)):
            folder.mkdir(parents=True, exist_ok=True)
            remove_stale_temporaries(folder)
            record = {"trainer": self.member_record(member)} if self.settings_names else {}
            (folder / "config.json").write_text(json.dumps({**config.to_dict(), **record}, indent=2) + "\n")
            logs.append(MetricsLogger(folder, config.tensorboard, self.total_samples, self.progress and member == 0,
                                      resume_from_step=self.samples_seen))
        return logs

    def log(self, logs: list, metrics: list[dict[str, float]]) -> None:
        for member, (logger, row) in enumerate(zip(logs, metrics)):
            if member not in self.diverged:  # a diverged member's folder ends at its last good iteration
                logger.log(self.global_step, row)
        if logs:
            logs[0].progress(self.global_step, self.progress_text(metrics))

    def progress_text(self, metrics: list[dict[str, float]]) -> str:
        returns = sorted(row["episode_return_recent"] for member, row in enumerate(metrics)
                         if member not in self.diverged) or [math.nan]
        diverged = f" ({len(self.diverged)} diverged)" if self.diverged else ""
        return f"{self.num_members} seeds{diverged}, median return {returns[len(returns) // 2]:.1f}"

    # ------------------------------------------------------------------ members that diverge
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

    def recent_return(self) -> float:
        raise TypeError("a seed batch has one recent return per member: recent_returns_by_member()")

    def recent_returns_by_member(self) -> list[float]:
        """Each member's mean return of its last training episodes; NaN for a member that diverged."""
        return [math.nan if member in self.diverged else _mean(recent)
                for member, recent in enumerate(self.recent_returns)]

    # ------------------------------------------------------------------ checkpoints
    def member_state_dict(self, member: int) -> dict:
        """Member `member`'s checkpoint, in `PPO.state_dict()`'s format: its own run's."""
        columns = slice(member * self.member_envs, (member + 1) * self.member_envs)
        generator = self.action_generators[member]
        return {
            "trainer": self.member_record(member),
            "config": self.configs[member].to_dict(),
            "iteration": self.iteration,
            "train_seconds": self.train_seconds,
            "total_iterations": self.total_iterations,
            "schedule_origin": list(self.schedule_origin),
            "model": self.model.member_state_dict(member),
            "optimizer": self.optimizer.member_state_dict(member),
            "spaces": spaces_to_dict(self.observation_space, self.action_space),
            "global_step": self.global_step,
            "obs_normalizer": self.obs_normalizer[member].state_dict() if self.obs_normalizer else None,
            "reward_scaler": self.reward_scaler[member].state_dict() if self.reward_scaler else None,
            "recent_returns": list(self.recent_returns[member]),
            "world_size": 1,
            "processes": None,
            "torch_rng": generator.get_state() if self.device.type == "cpu" else torch.get_rng_state(),
            "cuda_rng": generator.get_state() if self.device.type == "cuda" else None,
            "shuffle_rng": self.shuffle_generators[member].get_state(),
            "envs": self.envs.member_state_dict(member),
            "next_obs": self.next_obs[columns].clone(),
            "next_action_mask": None if self.next_action_mask is None else self.next_action_mask[columns].clone(),
            "episode_return": self.episode_return[columns].clone(),
            "episode_length": self.episode_length[columns].clone(),
            "return_accumulator": self.reward_scaler[member].returns.clone() if self.reward_scaler else None,
        }

    def state_dict(self) -> dict:
        raise TypeError("a seed batch has one checkpoint per member: member_state_dict(member), or save()")

    def load_state_dict(self, state: dict) -> None:
        raise TypeError("a seed batch loads one checkpoint per member: load_member_states(states), or resume()")

    def member_record(self, member: int) -> dict:
        """Member `member`'s trainer record, as its single run's (`BaseTrainer.trainer_record`) is."""
        return {"class": self.single_run.__name__, **{name: getattr(self, name) for name in self.settings_names}}

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

    def load_member_states(self, states: Sequence[dict]) -> None:
        """Continue from the members' checkpoints (`member_state_dict`, one per member, all of one
        iteration); CheckpointError if they do not fit. Envs that can load a member's state continue
        its episodes, bit for bit; others start fresh ones, as a single run's would."""
        try:
            BaseTrainer.load_state_dict(self, states[0])  # the counters and the learning-rate line
            self.global_step = int(states[0]["global_step"])
            for member, state in enumerate(states):
                self.model.load_member_state_dict(member, state["model"])
                self.optimizer.load_member_state_dict(member, state["optimizer"])
                if self.obs_normalizer is not None and state.get("obs_normalizer"):
                    self.obs_normalizer[member].load_state_dict(state["obs_normalizer"])
                if self.reward_scaler is not None and state.get("reward_scaler"):
                    self.reward_scaler[member].load_state_dict(state["reward_scaler"])
                self.recent_returns[member].clear()
                self.recent_returns[member].extend(float(value) for value in state.get("recent_returns", []))
                rng = state["torch_rng"] if self.device.type == "cpu" else state.get("cuda_rng")
                if rng is not None:
                    self.action_generators[member].set_state(rng)
                self.shuffle_generators[member].set_state(state["shuffle_rng"])
            if not self.continues_member_episodes(states):
                self._start_episodes()  # normalised with the loaded statistics
                return
            for member, state in enumerate(states):
                columns = slice(member * self.member_envs, (member + 1) * self.member_envs)
                self.envs.load_member_state_dict(member, state["envs"])
                self.next_obs[columns] = state["next_obs"].to(self.device)
                if self.next_action_mask is not None:
                    self.next_action_mask[columns] = state["next_action_mask"].to(self.device)
                self.episode_return[columns] = state["episode_return"].to(self.device)
                self.episode_length[columns] = state["episode_length"].to(self.device)
                if self.reward_scaler is not None and state.get("return_accumulator") is not None:
                    self.reward_scaler[member].returns = state["return_accumulator"].to(self.device, torch.float64).clone()
        except (RuntimeError, ValueError, KeyError, TypeError, AttributeError, IndexError) as error:
            raise CheckpointError(f"checkpoint does not match this seed batch ({str(error).splitlines()[0][:160]})") \
                from None

    def continues_member_episodes(self, states: Sequence[dict]) -> bool:
        """Whether the members' episodes go on here: every one's envs were saved and these envs load them."""
        return all(state.get("envs") is not None for state in states) and callable(
            getattr(self.envs, "load_member_state_dict", None))

    @classmethod
    def saved_member_settings(cls, state: dict, path) -> dict:
        """A member's own settings from its checkpoint (none for PPO-Clip); CheckpointError if another trainer wrote it."""
        return cls.single_run.saved_settings(state, path)

    @classmethod
    def resume(cls, run_dirs: Sequence[str | Path], make_envs: Callable[[PPOConfig, int], object],
               total_timesteps: int | None = None, progress: bool = True) -> "SeedBatchPPO":
        """Continue a seed batch from its members' folders; `make_envs(config, S)` builds the S·N copies.

        The members must have been saved together (one config but the seed, one iteration), and
        none may have diverged; a member that diverged, or was trained on alone, is resumed on its
        own (`ppo.trainers.choice.resume_run`, ppo-train --resume).
        `total_timesteps` changes the budget as for a single run (ppo.trainers.base).
        """
        loaded = [PPO.load_run(folder, PPOConfig, required_keys=PPO.REQUIRED_STATE) for folder in run_dirs]
        if not loaded:
            raise ConfigError("a seed batch needs at least one run folder")
        states, configs = [state for state, _ in loaded], [config for _, config in loaded]
        first = configs[0].to_dict()
        for folder, config, state in zip(run_dirs, configs, states):
            if (Path(folder) / DIVERGED_NAME).is_file():
                raise CheckpointError(f"{folder} diverged ({DIVERGED_NAME}): resume the other runs, "
                                      "or this one alone (ppo-train --resume)")
            differing = [name for name, value in config.to_dict().items() if name != "seed" and value != first[name]]
            if differing:
                raise CheckpointError(f"{folder} differs from {run_dirs[0]} in {', '.join(differing[:3])}: "
                                      "a seed batch resumes runs of one config")
            if state["iteration"] != states[0]["iteration"]:
                raise CheckpointError(f"{folder} stands at iteration {state['iteration']}, {run_dirs[0]} at "
                                      f"{states[0]['iteration']}: resume each alone (ppo-train --resume)")
        config = configs[0]
        if total_timesteps is not None:
            config = config.replace(total_timesteps=total_timesteps).validate()
        seeds = [member.seed for member in configs]
        settings = [cls.saved_member_settings(state, folder) for state, folder in zip(states, run_dirs)]
        if any(member != settings[0] for member in settings):
            raise CheckpointError(f"the runs in {run_dirs[0]} … were trained with different settings {settings}; "
                                  "resume each alone (ppo-train --resume)")
        batch = cls(config, seeds, make_envs(config, len(seeds)), run_dirs, progress=progress, **settings[0])
        batch.load_member_states(states)
        return batch


def _mean(values) -> float:
    return sum(values) / len(values) if values else math.nan
