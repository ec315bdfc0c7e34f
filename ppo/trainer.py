"""The PPO training loop: collect a rollout, estimate advantages, update for K epochs.

    for iteration = 1, 2, ..., total_timesteps / (N·T):
        anneal the learning rate:  α ← α₀ · (1 − (iteration − 1) / num_iterations)
        collect T steps from N envs with π_old            (collect_rollout)
        Â, R ← GAE(γ, λ) over the rollout                  (ppo.advantages.compute_gae)
        for epoch = 1 .. K:                                 (update)
            shuffle the N·T samples into minibatches
            for each minibatch:
                L = L_policy(ε) − c_e·H + c_v·L_value        (ppo.losses)
                one Adam step on L, gradient norm clipped
            stop early if approx KL > target_kl (optional)
        log the diagnostics; checkpoint every few iterations

Each step of this loop is a named, tested function; this module only wires them up.
"""

from __future__ import annotations

import math
import time
from collections import deque
from pathlib import Path
from typing import Callable

import gymnasium as gym
import torch

from ppo.advantages import compute_gae, successor_values
from ppo.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from ppo.config import ConfigError, PPOConfig
from ppo.losses import (
    clip_fraction,
    clipped_surrogate_loss,
    entropy_bonus,
    explained_variance,
    kl_estimate,
    normalize_advantages,
    value_loss,
)
from ppo.malloc import keep_freed_memory
from ppo.networks import ActorCritic
from ppo.normalize import ObservationNormalizer, RewardScaler
from ppo.optim import FlatAdam
from ppo.storage import RolloutBuffer
from ppo.vec_env import VecEnv

RECENT_EPISODES = 20  # episode_return_recent averages this many finished episodes


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
    if not (isinstance(observation_space, gym.spaces.Box) and observation_space.shape):
        raise ConfigError(f"{env_id} has observation space {observation_space}; the trainer supports Box observations")
    discrete = isinstance(action_space, gym.spaces.Discrete)
    flat_box = isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1
    if not (discrete or flat_box):
        raise ConfigError(f"{env_id} has action space {action_space}; the trainer supports Discrete and 1-D Box")


class PPO:
    """Proximal Policy Optimization with the clipped surrogate, for a `VecEnv`."""

    def __init__(
        self,
        config: PPOConfig,
        envs: VecEnv | None = None,
        run_dir: str | Path | None = None,
        progress: bool = True,
    ):
        self.config = config.validate()
        torch.set_num_threads(config.num_threads)
        keep_freed_memory()  # reuse autograd's buffers instead of page-faulting them in each step
        torch.manual_seed(config.seed)
        self.device = resolve_device(config.device)
        if envs is None:
            from envs.factory import make_vec_env

            envs = make_vec_env(config.env_id, config.num_envs, config.env_backend, self.device)
        if envs.num_envs != config.num_envs:
            raise ConfigError(f"the envs have {envs.num_envs} copies but num_envs = {config.num_envs}")
        self.envs = envs
        observation_space, action_space = envs.single_observation_space, envs.single_action_space
        check_spaces(observation_space, action_space, config.env_id)
        self.continuous = isinstance(action_space, gym.spaces.Box)
        if self.continuous:
            self.action_low = torch.as_tensor(action_space.low, dtype=torch.float32, device=self.device)
            self.action_high = torch.as_tensor(action_space.high, dtype=torch.float32, device=self.device)

        self.model = ActorCritic(
            observation_space,
            action_space,
            hidden_sizes=tuple(config.hidden_sizes),
            activation=config.activation,
            shared=config.shared_network,
            ortho_init=config.ortho_init,
            log_std_init=config.log_std_init,
        ).to(self.device)
        # Adam with global grad-norm clipping over one flat parameter vector (ppo/optim.py)
        self.optimizer = FlatAdam(
            self.model.parameters(), lr=config.learning_rate, eps=config.adam_eps, max_grad_norm=config.max_grad_norm
        )
        obs_shape = tuple(observation_space.shape)
        self.obs_normalizer = (
            ObservationNormalizer(obs_shape, config.obs_clip, device=self.device) if config.normalize_obs else None
        )
        self.reward_scaler = (
            RewardScaler(config.num_envs, config.gamma, config.reward_clip, device=self.device)
            if config.normalize_reward
            else None
        )
        self.buffer = RolloutBuffer(
            config.num_steps,
            config.num_envs,
            obs_shape,
            tuple(action_space.shape),
            torch.float32 if self.continuous else torch.int64,
            self.device,
        )
        self.clip_coef = config.clip_coef  # ε; a variant may adapt it between updates
        self.shuffle_generator = torch.Generator(device=self.device).manual_seed(config.seed)

        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.progress = progress
        self.global_step = 0
        self.iteration = 0
        self.train_seconds = 0.0
        self.recent_returns: deque[float] = deque(maxlen=RECENT_EPISODES)
        self.episode_return = torch.zeros(config.num_envs, device=self.device)  # (N,) raw reward so far
        self.episode_length = torch.zeros(config.num_envs, dtype=torch.int64, device=self.device)
        self.next_obs = self._observe(envs.reset(seed=config.seed))

    # ------------------------------------------------------------------ observation
    def _observe(self, raw_obs: torch.Tensor, update_statistics: bool = True) -> torch.Tensor:
        """What the network sees: raw observations, normalised if configured."""
        if self.obs_normalizer is None:
            return raw_obs
        return self.obs_normalizer(raw_obs) if update_statistics else self.obs_normalizer.normalize(raw_obs)

    def env_action(self, action: torch.Tensor) -> torch.Tensor:
        """The action sent to the env: Gaussian samples clipped to the bounds; the buffer
        keeps the unclipped sample, whose log-prob is the one the update recomputes."""
        if self.continuous:
            return torch.max(torch.min(action, self.action_high), self.action_low)
        return action

    # ------------------------------------------------------------------ rollout
    @torch.inference_mode()
    def collect_rollout(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Fill the buffer with T steps from N envs; return the finished episodes'
        (returns, lengths) as two 1-D tensors."""
        config, buffer = self.config, self.buffer
        buffer.reset()
        finished_returns, finished_lengths = [], []
        while not buffer.full:
            obs = self.next_obs
            action, log_prob, value = self.model.act(obs)
            result = self.envs.step(self.env_action(action))
            dones = result.terminated | result.truncated

            self.episode_return += result.reward
            self.episode_length += 1
            finished_returns.append(self.episode_return[dones])
            finished_lengths.append(self.episode_length[dones])
            self.episode_return = self.episode_return.masked_fill(dones, 0.0)
            self.episode_length = self.episode_length.masked_fill(dones, 0)

            reward = result.reward if self.reward_scaler is None else self.reward_scaler(result.reward, dones)
            if config.bootstrap_truncated:
                terminated, truncated = result.terminated, result.truncated
            else:  # the classic mistake, kept as an option for the lectures: cut = terminal
                terminated, truncated = dones, torch.zeros_like(dones)
            final_obs = self._observe(result.final_obs, update_statistics=False)
            buffer.add(obs, action, log_prob, value, reward, terminated, truncated, final_obs)
            self.next_obs = self._observe(result.obs)
            self.global_step += config.num_envs
        return torch.cat(finished_returns), torch.cat(finished_lengths)

    @torch.inference_mode()
    def compute_advantages(self) -> tuple[torch.Tensor, torch.Tensor]:
        """GAE over the buffer, bootstrapping the rollout's end from V(next obs)."""
        buffer, config = self.buffer, self.config
        last_value = self.model.value(self.next_obs)
        final_values = torch.zeros_like(buffer.values)  # (T, N) V(final obs), needed where truncated
        final_values[buffer.truncated] = self.model.value(buffer.final_obs[buffer.truncated])
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
        """PPO-Clip's L_policy. Variants (PPO-Penalty, adaptive clipping) override this."""
        return clipped_surrogate_loss(new_log_probs, old_log_probs, advantages, self.clip_coef)

    def update(self, advantages: torch.Tensor, returns: torch.Tensor) -> dict[str, float]:
        """K epochs of shuffled minibatch steps on the clipped-surrogate loss."""
        config, buffer = self.config, self.buffer
        batch = config.batch_size
        obs = buffer.obs.reshape(batch, *buffer.obs.shape[2:])
        actions = buffer.actions.reshape(batch, *buffer.actions.shape[2:])
        old_log_probs = buffer.log_probs.reshape(batch)
        old_values = buffer.values.reshape(batch)
        advantages, returns = advantages.reshape(batch), returns.reshape(batch)

        losses, new_log_prob_list, old_log_prob_list = [], [], []  # per minibatch, summarised at the end
        first_ratio_error = None
        stop = False
        for epoch in range(config.update_epochs):
            order = torch.randperm(batch, generator=self.shuffle_generator, device=self.device)
            # One gather per tensor per epoch; each minibatch is then a contiguous slice of it.
            shuffled = [x[order] for x in (obs, actions, old_log_probs, old_values, advantages, returns)]
            for start in range(0, batch, config.minibatch_size):
                mb_obs, mb_actions, mb_old_log_probs, mb_old_values, mb_advantages, mb_returns = (
                    x[start : start + config.minibatch_size] for x in shuffled
                )
                new_log_probs, entropy, new_values = self.model.evaluate_actions(mb_obs, mb_actions)
                if config.norm_adv:
                    mb_advantages = normalize_advantages(mb_advantages)

                policy_loss = self.policy_loss(new_log_probs, mb_old_log_probs, mb_advantages)
                critic_loss = value_loss(
                    new_values, mb_old_values, mb_returns, config.clip_coef if config.clip_vloss else None
                )
                entropy_mean = entropy_bonus(entropy)
                loss = policy_loss + config.vf_coef * critic_loss
                if config.ent_coef:  # with c_e = 0 the entropy is only logged: no backward through it
                    loss = loss - config.ent_coef * entropy_mean

                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()  # clips the global gradient norm to max_grad_norm first

                losses.append(torch.stack([policy_loss.detach(), critic_loss.detach(), entropy_mean.detach()]))
                new_log_prob_list.append(new_log_probs.detach())
                old_log_prob_list.append(mb_old_log_probs)
                log_ratio = new_log_probs.detach() - mb_old_log_probs
                if first_ratio_error is None:  # π_θ = π_old here, so this is ~1e-7 unless something is wrong
                    first_ratio_error = log_ratio.exp().sub(1).abs().max()
                if config.target_kl is not None and float(kl_estimate(log_ratio, "k3")) > config.target_kl:
                    stop = True
                    break
            if stop:
                break

        # Minibatches are equal-sized, so means over all samples are means of minibatch means.
        new_log_probs, old_log_probs = torch.cat(new_log_prob_list), torch.cat(old_log_prob_list)
        log_ratio = new_log_probs - old_log_probs
        policy_loss, critic_loss, entropy_mean = torch.stack(losses).mean(dim=0).tolist()
        metrics = {
            "policy_loss": policy_loss,
            "value_loss": critic_loss,
            "entropy": entropy_mean,
            "old_approx_kl": float(kl_estimate(log_ratio, "k1")),
            "approx_kl": float(kl_estimate(log_ratio, "k3")),
            "clip_fraction": float(clip_fraction(new_log_probs, old_log_probs, self.clip_coef)),
            "explained_variance": explained_variance(old_values, returns),
            "first_minibatch_ratio_error": float(first_ratio_error),
            "minibatch_updates": len(losses),
        }
        return metrics

    # ------------------------------------------------------------------ loop
    def train(self, callback: Callable[["PPO", dict], bool | None] | None = None) -> dict[str, float]:
        """Run until total_timesteps; `callback(ppo, metrics)` after each iteration may
        return True to stop early. Returns the last iteration's metrics."""
        from ppo.logger import MetricsLogger

        config = self.config
        logger = None
        if self.run_dir is not None:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            (self.run_dir / "config.json").write_text(_json(config.to_dict()))
            logger = MetricsLogger(
                self.run_dir, config.tensorboard, config.total_timesteps, self.progress, resume_from_step=self.global_step
            )
        metrics: dict[str, float] = {}
        try:
            while self.iteration < config.num_iterations:
                started = time.perf_counter()
                self.iteration += 1
                if config.anneal_lr:
                    fraction = 1.0 - (self.iteration - 1.0) / config.num_iterations
                    self.optimizer.lr = fraction * config.learning_rate
                episode_returns, episode_lengths = self.collect_rollout()
                advantages, returns = self.compute_advantages()
                metrics = self.update(advantages, returns)
                self.train_seconds += time.perf_counter() - started

                self.recent_returns.extend(episode_returns.tolist())
                metrics.update(
                    iteration=self.iteration,
                    time_s=self.train_seconds,
                    episodes=int(episode_returns.numel()),
                    episode_return_mean=float(episode_returns.mean()) if episode_returns.numel() else math.nan,
                    episode_length_mean=float(episode_lengths.float().mean()) if episode_lengths.numel() else math.nan,
                    episode_return_recent=_mean(self.recent_returns),
                    learning_rate=self.optimizer.lr,
                    steps_per_second=self.global_step / max(self.train_seconds, 1e-9),
                )
                if logger is not None:
                    logger.log(self.global_step, metrics)
                    logger.progress(self.global_step, f"return {metrics['episode_return_recent']:.1f}")
                    if config.checkpoint_every and self.iteration % config.checkpoint_every == 0:
                        self.save(self.run_dir / "checkpoint.pt")
                if callback is not None and callback(self, metrics):
                    break
        finally:
            if logger is not None:
                logger.close()
        if self.run_dir is not None:
            self.save(self.run_dir / "checkpoint.pt")
        return metrics

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict:
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "config": self.config.to_dict(),
            "global_step": self.global_step,
            "iteration": self.iteration,
            "train_seconds": self.train_seconds,
            "obs_normalizer": self.obs_normalizer.state_dict() if self.obs_normalizer else None,
            "reward_scaler": self.reward_scaler.state_dict() if self.reward_scaler else None,
            "torch_rng": torch.get_rng_state(),
            "shuffle_rng": self.shuffle_generator.get_state(),
        }

    def save(self, path: str | Path) -> None:
        save_checkpoint(self.state_dict(), path)

    def load_state(self, state: dict) -> None:
        """Restore a `state_dict()` (for resuming); CheckpointError if it does not fit."""
        try:
            self.model.load_state_dict(state["model"])
            self.optimizer.load_state_dict(state["optimizer"])
        except (RuntimeError, ValueError, KeyError) as error:
            raise CheckpointError(f"checkpoint does not match this model ({str(error).splitlines()[0][:120]})") from None
        self.global_step, self.iteration = int(state["global_step"]), int(state["iteration"])
        self.train_seconds = float(state.get("train_seconds", 0.0))
        if self.obs_normalizer is not None and state.get("obs_normalizer"):
            self.obs_normalizer.load_state_dict(state["obs_normalizer"])
        if self.reward_scaler is not None and state.get("reward_scaler"):
            self.reward_scaler.load_state_dict(state["reward_scaler"])
        torch.set_rng_state(state["torch_rng"])
        self.shuffle_generator.set_state(state["shuffle_rng"])

    @classmethod
    def resume(cls, run_dir: str | Path, total_timesteps: int | None = None, progress: bool = True) -> "PPO":
        """Continue a run from its checkpoint (the environments restart their episodes)."""
        state = load_checkpoint(Path(run_dir) / "checkpoint.pt", required_keys=("model", "optimizer", "config"))
        config = PPOConfig.from_dict(state["config"])
        if total_timesteps is not None:
            config = config.replace(total_timesteps=total_timesteps)
        trainer = cls(config, run_dir=run_dir, progress=progress)
        trainer.load_state(state)
        return trainer


def _mean(values) -> float:
    return sum(values) / len(values) if values else math.nan


def _json(data: dict) -> str:
    import json

    return json.dumps(data, indent=2) + "\n"
