"""Every hyperparameter of a PPO run, in one dataclass, with its default and meaning.

The defaults are CleanRL's for discrete actions (4 envs × 128 steps, 4 minibatches ×
4 epochs, lr 2.5e-4 annealed, γ 0.99, λ 0.95, ε 0.2, ...). Per-environment presets
(`ppo.presets`) adjust them; explicit command-line flags override both.

Derived sizes:
    batch_size     = num_envs · num_steps            transitions per rollout
    minibatch_size = batch_size / num_minibatches
    num_iterations = total_timesteps // batch_size   rollout + update cycles
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field, fields


class ConfigError(ValueError):
    """A hyperparameter value that cannot work; the message is one line for the user."""


ENV_BACKENDS = ("auto", "gymnasium", "torch")
ACTIVATIONS = ("tanh", "relu")


@dataclass
class PPOConfig:
    # --- environment -------------------------------------------------------------------
    env_id: str = field(default="CartPole-v1", metadata={"help": "gymnasium environment id"})
    env_backend: str = field(
        default="auto",
        metadata={
            "help": "who steps the training envs: 'gymnasium' (SyncVectorEnv), 'torch' "
            "(batched tensor envs in envs/, classic control only) or 'auto' (torch when the "
            "env id has a batched version, else gymnasium); evaluation always uses gymnasium"
        },
    )
    num_envs: int = field(default=4, metadata={"help": "parallel environment copies N"})
    seed: int = field(default=1, metadata={"help": "seed for torch, the envs and evaluation"})
    total_timesteps: int = field(default=500_000, metadata={"help": "environment steps to train for"})
    device: str = field(default="cpu", metadata={"help": "torch device: cpu, cuda, cuda:1, ... or auto"})
    num_threads: int = field(
        default=1,
        metadata={"help": "torch CPU threads; small networks run fastest on 1 (more threads spin against each other)"},
    )

    # --- rollout and update sizes --------------------------------------------------------
    num_steps: int = field(default=128, metadata={"help": "steps T per env per rollout"})
    num_minibatches: int = field(default=4, metadata={"help": "minibatches per epoch"})
    update_epochs: int = field(default=4, metadata={"help": "epochs K over each rollout"})

    # --- optimisation ----------------------------------------------------------------
    learning_rate: float = field(default=2.5e-4, metadata={"help": "Adam learning rate"})
    anneal_lr: bool = field(default=True, metadata={"help": "anneal the learning rate linearly to 0"})
    adam_eps: float = field(default=1e-5, metadata={"help": "Adam epsilon"})
    max_grad_norm: float = field(default=0.5, metadata={"help": "global gradient-norm clip"})
    target_kl: float | None = field(
        default=None,
        metadata={"help": "stop the epochs of an update once approx KL (k3) exceeds this; none = off"},
    )

    # --- advantage estimation ------------------------------------------------------------
    gamma: float = field(default=0.99, metadata={"help": "discount γ"})
    gae_lambda: float = field(default=0.95, metadata={"help": "GAE λ"})
    bootstrap_truncated: bool = field(
        default=True,
        metadata={"help": "bootstrap V(final obs) after a time-limit truncation (off = treat as termination)"},
    )
    norm_adv: bool = field(default=True, metadata={"help": "whiten advantages per minibatch"})

    # --- loss -------------------------------------------------------------------------
    clip_coef: float = field(default=0.2, metadata={"help": "surrogate clip ε"})
    clip_vloss: bool = field(
        default=True,
        metadata={"help": "clip the value loss with ε as well (ε is then in units of the returns: "
                  "it throttles the critic when returns are large and rewards are not scaled)"},
    )
    ent_coef: float = field(default=0.01, metadata={"help": "entropy coefficient c_e"})
    vf_coef: float = field(default=0.5, metadata={"help": "value-loss coefficient c_v"})

    # --- network ----------------------------------------------------------------------
    hidden_sizes: tuple[int, ...] = field(default=(64, 64), metadata={"help": "hidden layer widths"})
    activation: str = field(default="tanh", metadata={"help": "hidden activation: tanh or relu"})
    shared_network: bool = field(
        default=False,
        metadata={"help": "one shared trunk with policy and value heads (off = separate actor and critic)"},
    )
    ortho_init: bool = field(default=True, metadata={"help": "orthogonal init (√2 hidden, 0.01 policy, 1 value)"})
    log_std_init: float = field(default=0.0, metadata={"help": "initial log σ of a Gaussian policy"})

    # --- normalisation ----------------------------------------------------------------
    normalize_obs: bool = field(default=False, metadata={"help": "running mean/std observation normalisation"})
    normalize_reward: bool = field(
        default=False, metadata={"help": "scale rewards by the running std of the discounted return"}
    )
    obs_clip: float = field(default=10.0, metadata={"help": "clip normalised observations to ±this"})
    reward_clip: float = field(default=10.0, metadata={"help": "clip scaled rewards to ±this"})

    # --- bookkeeping ------------------------------------------------------------------
    checkpoint_every: int = field(default=25, metadata={"help": "save a checkpoint every this many iterations; 0 = only at the end"})
    tensorboard: bool = field(default=True, metadata={"help": "write TensorBoard event files"})

    # Derived sizes -----------------------------------------------------------------------
    @property
    def batch_size(self) -> int:
        return self.num_envs * self.num_steps

    @property
    def minibatch_size(self) -> int:
        return self.batch_size // self.num_minibatches

    @property
    def num_iterations(self) -> int:
        return self.total_timesteps // self.batch_size

    def replace(self, **changes) -> "PPOConfig":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        data = dataclasses.asdict(self)
        data["hidden_sizes"] = list(self.hidden_sizes)
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "PPOConfig":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown config field(s) {', '.join(unknown)}")
        data = dict(data)
        if "hidden_sizes" in data:
            data["hidden_sizes"] = tuple(data["hidden_sizes"])
        return cls(**data)

    def validate(self) -> "PPOConfig":
        """Raise ConfigError naming the first impossible value; return self when all is well."""
        require_positive("learning_rate", self.learning_rate)
        require_positive("clip_coef", self.clip_coef)
        require_positive("adam_eps", self.adam_eps)
        require_positive("max_grad_norm", self.max_grad_norm)
        require_positive("obs_clip", self.obs_clip)
        require_positive("reward_clip", self.reward_clip)
        for name in ("num_envs", "num_steps", "num_minibatches", "update_epochs", "total_timesteps"):
            _positive_int(name, getattr(self, name))
        for name in ("gamma", "gae_lambda"):
            value = getattr(self, name)
            if not (0.0 <= value <= 1.0):
                raise ConfigError(f"{name} = {value} is outside [0, 1]")
        for name in ("ent_coef", "vf_coef"):
            value = getattr(self, name)
            if not (value >= 0 and math.isfinite(value)):
                raise ConfigError(f"{name} = {value} must be a finite number ≥ 0")
        if self.target_kl is not None:
            require_positive("target_kl", self.target_kl)
        _positive_int("num_threads", self.num_threads)
        if self.checkpoint_every < 0:
            raise ConfigError(f"checkpoint_every = {self.checkpoint_every} must be ≥ 0 (0 = only at the end)")
        if self.batch_size % self.num_minibatches != 0:
            raise ConfigError(
                f"num_envs * num_steps = {self.batch_size} is not divisible by "
                f"num_minibatches = {self.num_minibatches}"
            )
        if self.total_timesteps < self.batch_size:
            raise ConfigError(
                f"total_timesteps = {self.total_timesteps} is less than one rollout "
                f"(num_envs * num_steps = {self.batch_size})"
            )
        if self.env_backend not in ENV_BACKENDS:
            raise ConfigError(f"env_backend = {self.env_backend!r} is not one of {', '.join(ENV_BACKENDS)}")
        if self.activation not in ACTIVATIONS:
            raise ConfigError(f"activation = {self.activation!r} is not one of {', '.join(ACTIVATIONS)}")
        if not self.hidden_sizes or any(width <= 0 for width in self.hidden_sizes):
            raise ConfigError(f"hidden_sizes = {list(self.hidden_sizes)} must be one or more positive widths")
        return self


def require_positive(name: str, value: float) -> None:
    if not (value > 0 and math.isfinite(value)):
        raise ConfigError(f"{name} = {value} must be a finite number > 0")


def _positive_int(name: str, value: int) -> None:
    if not (isinstance(value, int) and value > 0):
        raise ConfigError(f"{name} = {value} must be a positive integer")
