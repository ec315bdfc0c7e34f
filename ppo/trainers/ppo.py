"""The PPO training loop: collect a rollout, estimate advantages, update for K epochs.

    envs ← the caller's VecEnv (N copies, SAME_STEP autoreset)     (ppo.vec_env)
    for iteration = 1, 2, ..., total_timesteps / (N·T):
        α ← α₀ · (1 − (iteration − 1) / iterations)               (BaseTrainer.learning_rate_fraction)
        collect T steps from N envs with π_old                      (collect_rollout)
        Â, R ← GAE(γ, λ) over the rollout                            (ppo.algorithm.advantages.compute_gae)
        K epochs of shuffled minibatches, for each:                   (ppo.algorithm.update.run_update)
            Â ← whiten(Â) over the minibatch (norm_adv)
            L = L_policy(ε) − c_e·H + c_v·L_value                     (ppo.algorithm.losses)
            stop if approx KL(π_old ‖ π_θ) > target_kl, else:
            zero the gradients, backward, clip the global norm, Adam step
        after_update: explained variance (a variant measures and adapts here)
        log the diagnostics; checkpoint every few iterations           (ppo.trainers.base)

Each step of this loop is a named, tested function; this module only wires them up.

One class trains feed-forward and recurrent networks (`config.recurrent`, ppo.models.recurrent_networks).
What a recurrent core changes, and nothing else does:

    rollout   each env carries a state h; before o_t is read, h ← h · (1 − start_t), where
              start_t marks an episode's first observation (the first reset, and the SAME_STEP
              autoreset step). The buffer keeps start_t per step and the state each env
              enters each sequence with (ppo.algorithm.sequence_storage).
    bootstrap V(next obs) with the state the rollout ended with; V(final obs) of a truncated
              episode with the state after its last step (for every policy, computed in the rollout).
    update    each env's T steps are cut into T / L sequences of L steps (L = sequence_length,
              T by default); a minibatch is an M-th of the N·T / L sequences, each whole and
              in order, shuffled as rows; each is replayed from the state the rollout entered
              it with, with the same resets, so on the first minibatch the recomputed
              log-probs equal the stored ones (r_t = 1 up to rounding). Every one of the b·L
              steps is real: no padding, no mask. With L < T, gradients through the state
              stop at each sequence's start (truncated backpropagation through time).
    resume    the checkpoint holds every env's state and episode-start flag, so a run on the
              torch backend continues bit for bit. (Not under torchrun: refused in one line.)

A variant of PPO (ppo.trainers.variants) is a subclass that overrides a hook or two
(`policy_loss`, `after_update`) and declares its own settings (`settings`,
ppo.trainers.settings) and the numbers its rule adapts (`adapted`). Given `seeds=[...]`,
any of these classes, a user's subclass included, trains a batch of seeds as one
computation (`ppo.trainers.seed_batch`: derived from this class, no second copy). What
a process of a data-parallel run holds of it (its copies, its streams, its part of a
checkpoint) is answered by `ppo.trainers.processes`. The trainer receives its
environments (`PPO(config, envs)`): it steps whatever speaks the `VecEnv` interface and
never asks which backend it is. Read last: `ppo/parallel/optim.py`, the flat-vector Adam
that makes a step on a tiny network cheap.
"""

from __future__ import annotations

import math
from collections import deque
from pathlib import Path
from typing import Callable

import gymnasium as gym
import numpy as np
import torch

from ppo.algorithm.advantages import compute_gae, successor_values
from ppo.algorithm.losses import clipped_surrogate_loss, explained_variance, transition_loss
from ppo.algorithm.sequence_storage import SequenceRolloutBuffer
from ppo.algorithm.storage import RolloutBuffer
from ppo.algorithm.update import MinibatchLoss, run_update, update_settings
from ppo.config import ConfigError, PPOConfig, require_growing_budget
from ppo.models.encoders import ImageEncoder, resolve_encoder, split_observation, split_observation_space
from ppo.models.networks import ActorCritic, spaces_from_dict, spaces_to_dict
from ppo.models.normalize import ObservationNormalizer, RewardScaler
from ppo.models.recurrent_networks import RecurrentActorCritic
from ppo.parallel.distributed import SINGLE_PROCESS, World
from ppo.parallel.optim import FlatAdam
from ppo.runs.checkpoint import CheckpointError
from ppo.trainers.base import BaseTrainer, single_threaded
from ppo.trainers.processes import ProcessShare
from ppo.trainers.registry import register_algorithm
from ppo.trainers.settings import Setting, resolve_settings
from ppo.vec_env import VecEnv, env_state

RECENT_EPISODES = 20  # episode_return_recent averages this many finished episodes
SEQUENCE_FIELDS = ("log_probs", "values", "advantages", "returns")  # per step of a sequence, flattened for the loss


def columns(tensor: torch.Tensor) -> torch.Tensor:
    """(T, N, ...) steps × envs → (N, T, ...) one row per env sequence (and back)."""
    return tensor.transpose(0, 1)


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ConfigError(f"device = {name!r} is not a torch device (allowed: cpu, cuda, cuda:N, auto)") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device = {name!r} but CUDA is not available here; use --device cpu")
    return device


def check_spaces(observation_space: gym.Space, action_space: gym.Space, env_id: str) -> None:
    """ConfigError (one line) unless the trainer can learn with these spaces.

    Observations: a Box of any shape (1-D: the MLP; 3-D: an image, read by a CNN), or a Dict
    of a Box and an "action_mask" in the layout of ppo.models.encoders. Actions: Discrete,
    MultiDiscrete (1-D, starting at 0) or a 1-D Box; a mask goes with the categorical kinds
    and holds one entry per logit. The VecEnv interface carries no infos, so a mask must come
    in the observation.
    """
    try:
        box, mask_space = split_observation_space(observation_space)
    except ValueError as error:
        raise ConfigError(f"{env_id} has observation space {observation_space}: {error}") from None
    if not (isinstance(box, gym.spaces.Box) and box.shape):
        raise ConfigError(f"{env_id} has observation space {observation_space}; the trainer supports Box "
                          "observations (or a Dict of a Box and an 'action_mask')")
    discrete = isinstance(action_space, gym.spaces.Discrete)
    flat_box = isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1
    multi_discrete = (isinstance(action_space, gym.spaces.MultiDiscrete) and len(action_space.shape) == 1
                      and not action_space.start.any())
    if not (discrete or flat_box or multi_discrete):
        raise ConfigError(f"{env_id} has action space {action_space}; the trainer supports Discrete, "
                          "MultiDiscrete (1-D, from 0) and 1-D Box")
    if mask_space is not None:
        if flat_box:
            raise ConfigError(f"{env_id} has an action_mask but action space {action_space}; a mask goes with "
                              "Discrete and MultiDiscrete actions")
        logits = int(action_space.n) if discrete else int(action_space.nvec.sum())
        if logits != mask_space.shape[0]:
            raise ConfigError(f"{env_id}'s action_mask has {mask_space.shape[0]} entries but action space "
                              f"{action_space} needs one per action ({logits})")


def check_network(config: PPOConfig, observation_space: gym.Space, action_space: gym.Space) -> None:
    """ConfigError (one line) for an encoder, normalisation or recurrent core that cannot read these spaces."""
    box, mask_space = split_observation_space(observation_space)
    try:
        encoder = resolve_encoder(config.encoder, box)
    except ValueError as error:
        raise ConfigError(f"{config.env_id}: {error}") from None
    if config.normalize_obs and encoder != "mlp" and box.dtype == np.uint8:
        raise ConfigError(f"{config.env_id} gives uint8 images, which the CNN scales by 1/255; "
                          "normalize_obs would standardise them first: turn it off")
    flat = len(box.shape) == 1 and mask_space is None and not isinstance(action_space, gym.spaces.MultiDiscrete)
    if config.recurrent != "none" and not flat:
        raise ConfigError(f"recurrent = {config.recurrent!r} supports 1-D Box observations without an action mask "
                          f"and Discrete or Box actions; {config.env_id} has {observation_space} and {action_space}")


class StepsEnvs:
    """What a trainer that steps a VecEnv keeps of it: the envs, their spaces, the action bounds."""

    device: torch.device

    def bind_envs(self, envs: VecEnv, env_id: str) -> None:
        """Keep the envs after `check_spaces`, and after checking they live on the trainer's device and,
        where they know their env id (every VecEnv of envs.factory does), that it is the config's."""
        if torch.device(envs.device).type != self.device.type:
            raise ConfigError(f"the envs live on {envs.device} but device = {self.config.device!r}")
        theirs = getattr(envs, "env_id", None)
        if isinstance(theirs, str) and theirs.rpartition(":")[2] != env_id.rpartition(":")[2]:
            raise ConfigError(f"the envs are {theirs} but the config's env_id is {env_id!r}; make them for it "
                              "(envs.factory.make_vec_env(config.env_id, config.num_envs))")
        self.envs = envs
        observation_space, action_space = envs.single_observation_space, envs.single_action_space
        check_spaces(observation_space, action_space, env_id)
        self.observation_space, self.action_space = observation_space, action_space  # as the env gives them
        self.obs_box, self.mask_space = split_observation_space(observation_space)  # what the encoder reads
        self.continuous = isinstance(action_space, gym.spaces.Box)
        if self.continuous:
            self.action_low = torch.as_tensor(action_space.low, dtype=torch.float32, device=self.device)
            self.action_high = torch.as_tensor(action_space.high, dtype=torch.float32, device=self.device)

    def env_action(self, action: torch.Tensor) -> torch.Tensor:
        """The action sent to the env: Gaussian samples clipped to the bounds; the buffer
        keeps the unclipped sample, whose log-prob is the one the update recomputes."""
        if self.continuous:
            return torch.max(torch.min(action, self.action_high), self.action_low)
        return action


@register_algorithm("clip", "PPO-Clip, the clipped surrogate (the default)")
class PPO(BaseTrainer, StepsEnvs, ProcessShare):
    """Proximal Policy Optimization with the clipped surrogate, on the caller's `VecEnv`.

    `PPO(config, envs, seeds=[1, 2, 3], run_dirs=...)` trains those seeds as one batch instead
    (`ppo.trainers.seed_batch.SeedBatch`: every member is the run this class makes with its seed),
    and so does every subclass.
    """

    sample_unit = "steps"
    budget_field = "total_timesteps"
    settings: dict[str, Setting] = {}  # an algorithm's own settings beyond the config (ppo.trainers.settings)
    adapted: tuple[str, ...] = ()  # numbers a rule changes between updates: logged, checkpointed, per member
    columns: tuple = ()  # metrics.csv columns beyond every run's (ppo.runs.metrics_columns.MetricsColumn)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.settings_names = tuple(cls.settings)

    def __new__(cls, *args, seeds=None, **kwargs):
        if seeds is None or getattr(cls, "is_seed_batch", False):
            return super().__new__(cls)
        from ppo.trainers.seed_batch import seed_batch_class  # the batch is derived from this class

        return super().__new__(seed_batch_class(cls))

    def __init__(self, config: PPOConfig, envs: VecEnv, run_dir: str | Path | None = None, progress: bool = True,
                 world: World = SINGLE_PROCESS, seeds: None = None, **settings):
        """`envs`: this process's copies, num_envs / K of them with K = world.size processes
        (ppo.parallel.distributed); num_envs, the batch and the minibatches are sizes of the whole run.
        `settings`: the class's own (`settings`), by name; the others keep their defaults.
        `seeds` (a list) makes the call a seed batch instead (`__new__`)."""
        if not isinstance(config, PPOConfig):
            raise ConfigError(f"config = {config!r} must be a PPOConfig")
        if not all(hasattr(envs, name) for name in ("num_envs", "single_observation_space", "step", "reset")):
            raise ConfigError(f"envs = {envs!r} must be a VecEnv (ppo.vec_env: num_envs copies with reset and step), "
                              "such as envs.factory.make_vec_env(config.env_id, config.num_envs)")
        if "run_dirs" in settings:
            raise ConfigError("run_dirs are the folders of a seed batch's members: give them with seeds=[...]")
        super().__init__(config.validate(), run_dir, progress, world)
        for name, value in self.check_settings(settings).items():
            setattr(self, name, value)
        torch.manual_seed(config.seed)  # the same initial weights in every process
        self.device = resolve_device(config.device)
        self.local_num_envs = self.local_copies(config, envs.num_envs)
        self.bind_envs(envs, config.env_id)
        observation_space, action_space = self.observation_space, self.action_space
        check_network(config, observation_space, action_space)
        config.check_effects(action_space=action_space, algorithm=self.algorithm_name,
                             encoder=resolve_encoder(config.encoder, self.obs_box))  # what the config cannot know
        self.recurrent = config.recurrent != "none"
        if self.recurrent and world.distributed:
            raise ConfigError(f"recurrent = {config.recurrent!r} is not supported under torchrun; train it in one process")

        with single_threaded():  # the initial weights do not depend on the thread count
            self.model = self.build_model(observation_space, action_space).to(self.device)
        self.optimizer = FlatAdam(self.model.parameters(), lr=config.learning_rate, eps=config.adam_eps)
        world.broadcast_(self.optimizer.flat_params)  # identical weights even if an init differed
        # the trainer's own streams: no draw elsewhere in the process moves them
        self.action_generator, self.shuffle_generator = self.own_streams(config.seed, self.device)
        obs_shape = tuple(self.obs_box.shape)
        self.obs_normalizer = (
            ObservationNormalizer(obs_shape, config.obs_clip, device=self.device, world=world)
            if config.normalize_obs
            else None
        )
        self.reward_scaler = (
            RewardScaler(self.local_num_envs, config.gamma, config.reward_clip, device=self.device, world=world)
            if config.normalize_reward
            else None
        )
        self.buffer = self.build_buffer(self.model)
        self.clip_coef = config.clip_coef  # ε; a variant may adapt it between updates

        self.global_step = 0  # environment steps of the whole run, all processes together
        self.recent_returns: deque[float] = deque(maxlen=RECENT_EPISODES)
        self._start_episodes()

    @classmethod
    def check_settings(cls, given: dict[str, object]) -> dict[str, float]:
        """Every one of the class's `settings`: the given value, checked, else its default; ConfigError
        (one line) for a name it does not take or a value it does not allow. A subclass whose settings
        constrain each other checks that here too."""
        return resolve_settings(cls.__name__, cls.settings, given)

    def build_model(self, observation_space: gym.Space, action_space: gym.Space) -> ActorCritic | RecurrentActorCritic:
        """The network of the config: an ActorCritic, or a RecurrentActorCritic when config.recurrent is a cell."""
        if self.recurrent:
            return RecurrentActorCritic.from_config(self.config, observation_space, action_space)
        return ActorCritic.from_config(self.config, observation_space, action_space)

    def build_buffer(self, network) -> RolloutBuffer:
        """The rollout buffer of every copy this trainer steps; uint8 images stay uint8 in it (the CNN
        of `network`, one run's, scales them), and an env's action masks are kept per step. A recurrent
        network's buffer keeps episode starts and the state (K, S_w) each sequence is entered with."""
        config, copies = self.config, self.envs.num_envs
        obs_shape, action_shape = tuple(self.obs_box.shape), tuple(self.action_space.shape)
        action_dtype = torch.float32 if self.continuous else torch.int64
        if self.recurrent:
            return SequenceRolloutBuffer(config.num_steps, copies, obs_shape, action_shape, action_dtype, self.device,
                                         (network.num_cores, network.state_width), config.sequence_length)
        images = isinstance(network.actor_body, ImageEncoder) and self.obs_box.dtype == np.uint8
        obs_dtype = torch.uint8 if images and self.obs_normalizer is None else torch.float32
        mask_size = None if self.mask_space is None else self.mask_space.shape[0]
        return RolloutBuffer(config.num_steps, copies, obs_shape, action_shape, action_dtype, self.device,
                             obs_dtype=obs_dtype, mask_size=mask_size)

    @property
    def total_iterations(self) -> int:
        return self.config.num_iterations

    @property
    def samples_seen(self) -> int:
        return self.global_step

    @property
    def total_samples(self) -> int:
        return self.config.num_iterations * self.config.batch_size

    # ------------------------------------------------------------------ observation
    def _observe(self, raw_obs: torch.Tensor, update_statistics: bool = True) -> torch.Tensor:
        """What the network sees: raw observations (a Dict's Box part), normalised if configured
        (with statistics that, when `update_statistics`, have merged `raw_obs` first)."""
        raw_obs, _ = split_observation(raw_obs)
        if self.obs_normalizer is None:
            return raw_obs
        return self.obs_normalizer(raw_obs) if update_statistics else self.obs_normalizer.normalize(raw_obs)

    def _action_mask(self, raw_obs) -> torch.Tensor | None:
        """(N, logits) bool, the valid actions of a raw observation (None without a mask);
        ValueError naming the copies whose mask allows no action at all."""
        _, mask = split_observation(raw_obs)
        if mask is not None and not bool(mask.any(dim=-1).all()):
            copies = torch.nonzero(~mask.any(dim=-1)).flatten().tolist()
            raise ValueError(f"{self.config.env_id}'s action_mask allows no action in copies {copies[:5]}; "
                             "every observation must leave at least one action valid")
        return mask

    def _start_episodes(self) -> None:
        """Reset every copy, observe the first observations with the current statistics, and
        start the episode counters, the discounted returns and a recurrent state from zero.
        Process k's copies are seeded as copies k·N/K ... of one process with N copies would be."""
        copies = self.envs.num_envs
        self.episode_return = torch.zeros(copies, device=self.device)  # (N,) raw reward so far
        self.episode_length = torch.zeros(copies, dtype=torch.int64, device=self.device)
        self.episode_start = torch.ones(copies, dtype=torch.bool, device=self.device)  # (N,) o_t begins an episode
        self.recurrent_state = self.model.initial_state(copies, self.device) if self.recurrent else None  # (N, K, S)
        if self.reward_scaler is not None:
            self.reward_scaler.restart()
        raw_obs = self.envs.reset(seed=self.reset_seed())
        self.next_obs, self.next_action_mask = self._observe(raw_obs), self._action_mask(raw_obs)

    def reset_seed(self) -> int | list[int]:
        """What `envs.reset(seed=...)` starts the episodes with: the run's seed, offset by the copies of the
        processes before this one."""
        return self.first_copy_seed(self.config.seed, self.local_num_envs)

    # ------------------------------------------------------------------ rollout
    @torch.inference_mode()
    def collect_rollout(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Fill the buffer with T steps from N envs; return the finished episodes' (returns,
        lengths), two 1-D tensors in the order the episodes ended, per run (one here)."""
        config, buffer = self.config, self.buffer
        buffer.reset()
        ended_return = torch.zeros(config.num_steps, self.envs.num_envs, device=self.device)  # (T, N) where ended
        ended_length = torch.zeros(config.num_steps, self.envs.num_envs, dtype=torch.int64, device=self.device)
        ended = torch.zeros(config.num_steps, self.envs.num_envs, dtype=torch.bool, device=self.device)
        while not buffer.full:
            t, obs = buffer.step, self.next_obs
            action, log_prob, value = self.act(obs)
            result = self.envs.step(self.env_action(action))
            dones = result.terminated | result.truncated

            self.episode_return += result.reward
            self.episode_length += 1
            ended_return[t], ended_length[t], ended[t] = self.episode_return, self.episode_length, dones
            self.episode_return = self.episode_return.masked_fill(dones, 0.0)
            self.episode_length = self.episode_length.masked_fill(dones, 0)

            reward = result.reward if self.reward_scaler is None else self.reward_scaler(result.reward, dones)
            if config.bootstrap_truncated:
                terminated, truncated = result.terminated, result.truncated
            else:  # the classic mistake, kept as an option for the lectures: cut = terminal
                terminated, truncated = dones, torch.zeros_like(dones)
            buffer.add(obs, action, log_prob, value, reward, terminated, truncated, self.next_action_mask)
            self.after_step(result.final_obs, truncated, dones)
            self.next_obs, self.next_action_mask = self._observe(result.obs), self._action_mask(result.obs)
            self.global_step += config.num_envs
        return [(returns[where], lengths[where]) for returns, lengths, where in
                zip(self.by_run(ended_return), self.by_run(ended_length), self.by_run(ended))]

    def by_run(self, columns: torch.Tensor) -> list[torch.Tensor]:
        """A (T, copies) rollout tensor cut into each run's columns: here the one run's, whole."""
        return [columns]

    def act(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(a ~ π(· | s), log π(a | s), V(s)) for one rollout step of every env (under its action mask);
        a recurrent state advances, and the buffer keeps what the update replays from."""
        if not self.recurrent:
            return self.model.act(obs, self.next_action_mask, self.action_generator)
        self.buffer.episode_starts[self.buffer.step] = self.episode_start
        self.buffer.keep_state(self.recurrent_state)
        action, log_prob, value, self.recurrent_state = self.model.act(obs, self.recurrent_state, self.episode_start,
                                                                       self.action_generator)
        return action, log_prob, value

    def step_values(self, obs: torch.Tensor, episode_start: torch.Tensor) -> torch.Tensor:
        """V of one step of every env (N,), a recurrent one read with the state the envs hold now."""
        if not self.recurrent:
            return self.model.value(obs)
        return self.model.value(obs, self.recurrent_state, episode_start)

    def after_step(self, raw_final_obs: torch.Tensor, truncated: torch.Tensor, dones: torch.Tensor) -> None:
        """After a stored step: the final observation of the episodes a time limit cut at this step
        (a recurrent policy reads its value now, with the state the episode ended with), and which
        envs start an episode next."""
        if truncated.any():
            final_obs = self._observe(raw_final_obs, update_statistics=False)
            t = self.buffer.step - 1
            if self.recurrent:
                values = self.step_values(final_obs, torch.zeros_like(truncated))
                self.buffer.final_values[t] = torch.where(truncated, values, 0.0)
            else:
                self.buffer.final_obs[t] = final_obs
        self.episode_start = dones

    def bootstrap_values(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(V(next obs) (N,), V(final obs) (T, N) where truncated, else 0): the values GAE bootstraps from.
        A feed-forward policy reads every step's final observations in one call, copies-major (copy
        n's T steps together), so each run of a seed batch gets its own block of copies."""
        buffer = self.buffer
        if not self.recurrent and bool(buffer.truncated.any()):
            final_obs = buffer.final_obs.transpose(0, 1)  # (N, T, ...)
            values = self.model.value(final_obs.reshape(-1, *final_obs.shape[2:])).view(final_obs.shape[:2])
            buffer.final_values.copy_(torch.where(buffer.truncated, values.transpose(0, 1), 0.0))
        return self.step_values(self.next_obs, self.episode_start), buffer.final_values

    @torch.inference_mode()
    def compute_advantages(self) -> tuple[torch.Tensor, torch.Tensor]:
        """GAE over the buffer, bootstrapping the rollout's end from V(next obs)."""
        buffer, config = self.buffer, self.config
        last_value, final_values = self.bootstrap_values()
        next_values = successor_values(buffer.values, last_value, buffer.truncated, final_values)
        return compute_gae(
            buffer.rewards,
            buffer.values,
            next_values,
            buffer.terminated,
            buffer.terminated | buffer.truncated,
            config.gamma,
            config.gae_lambda,
        )

    # ------------------------------------------------------------------ update
    def policy_loss(self, new_log_probs: torch.Tensor, old_log_probs: torch.Tensor, advantages: torch.Tensor) -> torch.Tensor:
        """PPO-Clip's L_policy. Variants (PPO-Penalty, adaptive clipping, dual-clip) override this."""
        return clipped_surrogate_loss(new_log_probs, old_log_probs, advantages, self.clip_coef)

    def policy_diagnostics(self, new_log_probs: torch.Tensor, old_log_probs: torch.Tensor,
                           advantages: torch.Tensor) -> dict[str, torch.Tensor]:
        """Extra scalars of the policy loss to log (each averaged over the update's minibatches): none here."""
        return {}

    def minibatch_loss(self, minibatch: dict[str, torch.Tensor]) -> MinibatchLoss:
        """L = L_policy − c_e·H + c_v·L_value on a minibatch, with log π_θ, H, V recomputed."""
        new_log_probs, entropy, new_values, transitions = self.evaluate_samples(minibatch)
        return self.transitions_loss(new_log_probs, entropy, new_values, transitions)

    def evaluate_samples(self, samples: dict[str, torch.Tensor]):
        """(log π_θ, H, V, the stored per-transition fields), each flat over the samples' b transitions:
        the samples themselves, or b sequences of L steps replayed from the states they were entered with."""
        if not self.recurrent:
            new_log_probs, entropy, new_values = self.model.evaluate_actions(samples["obs"], samples["actions"],
                                                                             samples.get("action_masks"))
            return new_log_probs, entropy, new_values, samples
        new_log_probs, entropy, new_values = self.model.evaluate_actions(
            columns(samples["obs"]), columns(samples["actions"]), samples["initial_state"],
            columns(samples["episode_starts"]))  # each (L, b)
        transitions = {name: columns(samples[name]).reshape(-1) for name in SEQUENCE_FIELDS if name in samples}
        return new_log_probs.reshape(-1), entropy.reshape(-1), new_values.reshape(-1), transitions

    def transitions_loss(self, new_log_probs: torch.Tensor, entropy: torch.Tensor, new_values: torch.Tensor,
                         minibatch: dict[str, torch.Tensor]) -> MinibatchLoss:
        """L and log r_t(θ) from log π_θ, H and V recomputed for the minibatch's b transitions (b,)."""
        advantages = minibatch["advantages"]
        if self.config.norm_adv:  # over the whole minibatch, all processes' shares together
            advantages = self.world.whiten(advantages)
        loss, terms = transition_loss(new_log_probs, entropy, new_values, minibatch, advantages, self.policy_loss,
                                      self.config)
        terms.update(self.policy_diagnostics(new_log_probs, minibatch["log_probs"], advantages))
        return MinibatchLoss(loss=loss, log_ratio=new_log_probs.detach() - minibatch["log_probs"], terms=terms)

    def update(self, advantages: torch.Tensor, returns: torch.Tensor) -> dict[str, float]:
        """K epochs of shuffled minibatch steps on the loss (ppo.algorithm.update), then `after_update`."""
        samples = self.update_samples(advantages, returns)
        metrics = run_update(samples, self.minibatch_loss, self.optimizer, generator=self.shuffle_generator,
                             world=self.world, **update_settings(self.config, self.clip_coef))
        metrics.update(self.adapted_values())  # the values this update used (a variant's β or ε)
        metrics.update(self.after_update(samples))
        return metrics

    def after_update(self, samples: dict[str, torch.Tensor]) -> dict[str, float]:
        """What a run measures, or adapts, once its update is done; its metrics. Here the critic's
        explained variance on the rollout; a variant adds its KL rule. A seed batch calls it once
        per member, on the member's own run."""
        return {"explained_variance": self.world.mean_of(explained_variance(samples["values"], samples["returns"]))}

    def adapted_values(self) -> dict[str, float]:
        """{name: value} of the numbers in `adapted`, as they stand."""
        return {name: float(getattr(self, name)) for name in self.adapted}

    def update_samples(self, advantages: torch.Tensor, returns: torch.Tensor) -> dict[str, torch.Tensor]:
        """What run_update shuffles and cuts into minibatches: (B, ...) the rollout's T·N transitions,
        t-major; or, for a recurrent policy, (N·T / L, L, ...) one row per sequence (so whole
        sequences are shuffled and cut), with the state (N·T / L, K, S) the rollout entered each with."""
        buffer = self.buffer
        if self.recurrent:
            return {
                "obs": buffer.sequences(buffer.obs),
                "actions": buffer.sequences(buffer.actions),
                "log_probs": buffer.sequences(buffer.log_probs),
                "values": buffer.sequences(buffer.values),
                "advantages": buffer.sequences(advantages),
                "returns": buffer.sequences(returns),
                "episode_starts": buffer.sequences(buffer.episode_starts),
                "initial_state": buffer.sequence_states.flatten(0, 1),
            }
        batch = self.config.num_steps * self.local_num_envs  # this process's share of the batch
        samples = {
            "obs": buffer.obs.reshape(batch, *buffer.obs.shape[2:]),
            "actions": buffer.actions.reshape(batch, *buffer.actions.shape[2:]),
            "log_probs": buffer.log_probs.reshape(batch),
            "values": buffer.values.reshape(batch),
            "advantages": advantages.reshape(batch),
            "returns": returns.reshape(batch),
        }
        if buffer.action_masks is not None:  # the masks the actions were drawn under
            samples["action_masks"] = buffer.action_masks.reshape(batch, -1)
        return samples

    # ------------------------------------------------------------------ one iteration
    def run_iteration(self) -> dict[str, float]:
        """One rollout, its advantages and one update; the metrics of the update and of the
        episodes that ended (per run: a dict here, a list of S in a seed batch)."""
        config = self.config
        if config.anneal_lr:
            self.optimizer.lr = config.learning_rate * self.learning_rate_fraction()
        episodes = [self.world.concatenate(run) for run in self.collect_rollout()]  # all processes' episodes
        advantages, returns = self.compute_advantages()
        metrics = self.update(advantages, returns)
        for row, (episode_returns, episode_lengths), recent in zip(self.member_rows(metrics), episodes,
                                                                   self.recent_returns_by_run()):
            recent.extend(episode_returns.tolist())
            row.update(
                episodes=int(episode_returns.numel()),
                episode_return_mean=float(episode_returns.mean()) if episode_returns.numel() else math.nan,
                episode_length_mean=float(episode_lengths.float().mean()) if episode_lengths.numel() else math.nan,
                episode_return_recent=_mean(recent),
                learning_rate=self.optimizer.lr,
            )
        return metrics

    def recent_returns_by_run(self) -> list[deque[float]]:
        """The last RECENT_EPISODES returns, per run (one here)."""
        return [self.recent_returns]

    def recent_return(self) -> float:
        """Mean return of the last RECENT_EPISODES finished episodes (NaN before the first)."""
        return _mean(self.recent_returns)

    def progress_text(self, metrics: dict[str, float]) -> str:
        return f"return {metrics['episode_return_recent']:.1f}"

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict:
        """Everything a resumed run needs to continue as if never stopped (envs permitting).

        With several processes, each one's own part (`process_state`) is gathered into
        "processes"; the top-level copy is process 0's.
        """
        state = {
            **super().state_dict(),
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "spaces": spaces_to_dict(self.observation_space, self.action_space),
            "global_step": self.global_step,
            "obs_normalizer": self.obs_normalizer.state_dict() if self.obs_normalizer else None,
            "reward_scaler": self.reward_scaler.state_dict() if self.reward_scaler else None,
            "recent_returns": list(self.recent_returns),
        }
        if self.adapted:
            state["adapted"] = self.adapted_values()
        return self.with_processes(state, self.process_state())

    def process_state(self) -> dict:
        """What differs between the processes of a run: random streams and the episodes in progress."""
        state = {
            "torch_rng": self.action_generator.get_state() if self.device.type == "cpu" else torch.get_rng_state(),
            "cuda_rng": self.action_generator.get_state() if self.device.type == "cuda" else None,
            "shuffle_rng": self.shuffle_generator.get_state(),
            "envs": env_state(self.envs),
            "next_obs": self.next_obs,
            "next_action_mask": self.next_action_mask,
            "episode_return": self.episode_return,
            "episode_length": self.episode_length,
            "return_accumulator": self.reward_scaler.returns if self.reward_scaler else None,
        }
        if self.recurrent:
            state.update(recurrent_state=self.recurrent_state, episode_start=self.episode_start)
        return state

    REQUIRED_STATE = ("model", "optimizer", "spaces", "global_step", "torch_rng", "shuffle_rng")

    def load_state_dict(self, state: dict) -> None:
        """Restore a `state_dict()` (for resuming); CheckpointError if it does not fit.

        Envs that can be checkpointed continue their episodes; others (gymnasium's) start
        fresh ones (`_start_episodes`), whose first observation is normalised with the
        loaded statistics, and the episode counters restart too. So do the processes of a
        run resumed with another number of processes, each drawing a fresh random stream.
        """
        missing = [key for key in self.REQUIRED_STATE if key not in state]
        if missing:
            raise CheckpointError(f"checkpoint lacks {', '.join(missing)}")
        if state["spaces"] != spaces_to_dict(self.observation_space, self.action_space):
            try:
                saved = " and ".join(" ".join(str(space).split()) for space in spaces_from_dict(state["spaces"]))
            except ValueError:
                saved = "spaces it cannot name"
            ours = " and ".join(" ".join(str(space).split()) for space in (self.observation_space, self.action_space))
            raise CheckpointError(f"the checkpoint was trained on {saved}, but these envs have {ours}")
        try:
            self.model.load_state_dict(state["model"])
            self.optimizer.load_state_dict(state["optimizer"])
            super().load_state_dict(state)
            self.global_step = int(state["global_step"])
            if self.obs_normalizer is not None and state.get("obs_normalizer"):
                self.obs_normalizer.load_state_dict(state["obs_normalizer"])
            if self.reward_scaler is not None and state.get("reward_scaler"):
                self.reward_scaler.load_state_dict(state["reward_scaler"])
            self.recent_returns.clear()
            self.recent_returns.extend(float(value) for value in state.get("recent_returns", []))
            adapted = state.get("adapted", {})
            for name in self.adapted:
                if name in adapted:
                    setattr(self, name, float(adapted[name]))
            own = self.own_process_state(state)
            if own is None:  # written by another number of processes
                self.restart_streams(self.config.seed, self.iteration, self.action_generator, self.shuffle_generator)
                self._start_episodes()
                return
            self.load_process_state(own)
        except (RuntimeError, ValueError, KeyError, TypeError, AttributeError, IndexError) as error:
            raise CheckpointError(f"checkpoint does not match this run ({str(error).splitlines()[0][:160]})") from None

    def load_process_state(self, own: dict) -> None:
        if self.device.type == "cpu":
            self.action_generator.set_state(own["torch_rng"])
        elif own.get("cuda_rng") is not None:
            self.action_generator.set_state(own["cuda_rng"])
        self.shuffle_generator.set_state(own["shuffle_rng"])
        if self.continues_episodes(own):
            self.envs.load_state_dict(own["envs"])
            self.next_obs = own["next_obs"].to(self.device)
            mask = own.get("next_action_mask")
            self.next_action_mask = None if mask is None else mask.to(self.device)
            self.episode_return = own["episode_return"].to(self.device)
            self.episode_length = own["episode_length"].to(self.device)
            if self.reward_scaler is not None and own.get("return_accumulator") is not None:
                self.reward_scaler.returns = own["return_accumulator"].to(self.device, torch.float64).clone()
            if self.recurrent:
                self.recurrent_state = own["recurrent_state"].to(self.device)
                self.episode_start = own["episode_start"].to(self.device)
        else:
            self._start_episodes()  # normalised with the loaded statistics, not the constructor's fresh ones

    def continues_episodes(self, own: dict) -> bool:
        """Whether a checkpoint's episodes go on here: its envs were saved and these envs can load them."""
        return own.get("envs") is not None and callable(getattr(self.envs, "load_state_dict", None))

    @classmethod
    def resume(
        cls,
        run_dir: str | Path,
        make_envs: Callable[[PPOConfig], VecEnv],
        total_timesteps: int | None = None,
        progress: bool = True,
        world: World = SINGLE_PROCESS,
    ) -> "PPO":
        """Continue a run from its checkpoint; `make_envs(config)` builds the environments.

        Envs that can be checkpointed (the batched torch ones) continue their episodes, and
        the run goes on bit for bit as if never stopped; gymnasium's restart theirs.
        `total_timesteps` changes the budget; the learning rate then continues its line
        from where it stands (ppo.trainers.base). A list of run folders (the members of a
        seed batch) is continued as one batch (`ppo.trainers.seed_batch.SeedBatch.resume`;
        `make_envs(config, S)` then builds the S runs' copies).
        """
        if isinstance(run_dir, (list, tuple)):
            from ppo.trainers.seed_batch import seed_batch_class

            return seed_batch_class(cls).resume(run_dir, make_envs, total_timesteps, progress=progress)
        state, config = cls.load_run(run_dir, PPOConfig, required_keys=cls.REQUIRED_STATE)
        if total_timesteps is not None:
            require_growing_budget("total_timesteps", total_timesteps, config.total_timesteps, int(state["global_step"]),
                                   config.batch_size, run_dir)
            config = config.replace(total_timesteps=total_timesteps).validate()
        settings = cls.saved_settings(state, run_dir)  # a variant's own settings (ppo.trainers.variants)
        trainer = cls(config, make_envs(config), run_dir=run_dir, progress=progress, world=world, **settings)
        trainer.load_state_dict(state)
        return trainer


def _mean(values) -> float:
    return sum(values) / len(values) if values else math.nan
