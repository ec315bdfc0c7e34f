"""Every hyperparameter of a run, declared once, with its default, meaning and checks.

Two trainers share this vocabulary. `UpdateConfig` holds what every PPO update needs —
the K epochs of minibatches, the optimiser, GAE and the loss — and `PPOConfig` adds the
environment side (CartPole and friends); `ppo.lm.trainers.rlhf_config.RLHFConfig` adds the
language-model side. A concept has one name and one meaning on both sides:
`learning_rate`, `max_grad_norm`, `clip_coef`, `value_clip_coef`, `target_kl`, ...

The defaults of `PPOConfig` are CleanRL's for discrete actions (4 envs × 128 steps,
4 minibatches × 4 epochs, lr 2.5e-4 annealed, γ 0.99, λ 0.95, ε 0.2, ...). The commands
start from an environment's preset (`ppo/presets.py`) and apply the flags last.

Derived sizes:
    batch_size     = num_envs · num_steps            samples per rollout
    minibatch_size = batch_size / num_minibatches
    num_iterations = total_timesteps // batch_size   rollout + update cycles

Every check raises `ConfigError` with one line naming the value and what is allowed.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import dataclass, field, fields


class ConfigError(ValueError):
    """A hyperparameter value that cannot work; the message is one line for the user."""


# ---------------------------------------------------------------- the checks every config uses


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def require_finite(name: str, value) -> None:
    if not (_is_number(value) and math.isfinite(value)):
        raise ConfigError(f"{name} = {value!r} must be a finite number")


def require_positive(name: str, value) -> None:
    if not (_is_number(value) and math.isfinite(value) and value > 0):
        raise ConfigError(f"{name} = {value!r} must be a finite number > 0")


def require_clip(value) -> None:
    """ε of the clipped surrogate: 0 < ε < 1, so that the ratio's bounds 1 ± ε are both positive,
    or inf, which turns the clipping off (the plain importance-sampled surrogate)."""
    if not (_is_number(value) and value > 0 and (value < 1 or value == math.inf)):
        shown = f"; its lower bound 1 − ε = {1 - value:g} is not a ratio" if _is_number(value) and 1 <= value < math.inf else ""
        raise ConfigError(f"clip_coef = {value!r} must be in (0, 1), or inf for no clipping{shown}")


def require_non_negative(name: str, value) -> None:
    if not (_is_number(value) and math.isfinite(value) and value >= 0):
        raise ConfigError(f"{name} = {value!r} must be a finite number ≥ 0")


def require_fraction(name: str, value, upper_open: bool = False) -> None:
    """0 ≤ value ≤ 1 (or < 1 with upper_open)."""
    inside = _is_number(value) and 0 <= value and (value < 1 if upper_open else value <= 1)
    if not inside:
        raise ConfigError(f"{name} = {value!r} is outside [0, 1{')' if upper_open else ']'}")


def require_count(name: str, value, minimum: int = 1) -> None:
    """An integer ≥ minimum (1: 'a positive integer')."""
    if not (isinstance(value, int) and not isinstance(value, bool) and value >= minimum):
        allowed = "a positive integer" if minimum == 1 else f"an integer ≥ {minimum}"
        raise ConfigError(f"{name} = {value!r} must be {allowed}")


def require_one_of(name: str, value, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(f"{name} = {value!r} is not one of {', '.join(allowed)}")


def require_type(name: str, value, hint) -> None:
    """Refuse a value whose Python type cannot be the field's (a string where a number belongs)."""
    origin = typing.get_origin(hint)
    if hint is bool:
        ok = isinstance(value, bool)
    elif hint is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif hint is float:
        ok = _is_number(value)
    elif hint is str:
        ok = isinstance(value, str)
    elif origin is tuple:
        ok = isinstance(value, (tuple, list)) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    elif origin in (typing.Union, types.UnionType):
        ok = any(value is None if arg is type(None) else _matches(value, arg) for arg in typing.get_args(hint))
    else:
        ok = True
    if not ok:
        raise ConfigError(f"{name} = {value!r} has the wrong type (expected {_type_name(hint)})")


def _matches(value, hint) -> bool:
    try:
        require_type("", value, hint)
    except ConfigError:
        return False
    return True


def _type_name(hint) -> str:
    if typing.get_origin(hint) is tuple:
        return "a list of integers"
    args = typing.get_args(hint)
    if args:
        return " or ".join("none" if arg is type(None) else arg.__name__ for arg in args)
    return hint.__name__


# ---------------------------------------------------------------- shared by every dataclass config


class ConfigBase:
    """to_dict / from_dict / replace for a config dataclass, and type checks from its annotations."""

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        data = dataclasses.asdict(self)
        return {name: list(value) if isinstance(value, tuple) else value for name, value in data.items()}

    @classmethod
    def from_dict(cls, data: dict):
        """The config stored as `to_dict()`; ConfigError for an unknown field or a value of the wrong type."""
        if not isinstance(data, dict):
            raise ConfigError(f"a {cls.__name__} must be a mapping of field names to values, not {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown config field(s) {', '.join(unknown)}")
        hints = typing.get_type_hints(cls)
        values = {}
        for name, value in data.items():
            require_type(name, value, hints[name])
            values[name] = tuple(value) if typing.get_origin(hints[name]) is tuple else value
        return cls(**values)

    def check_types(self) -> None:
        hints = typing.get_type_hints(type(self))
        for f in fields(self):
            require_type(f.name, getattr(self, f.name), hints[f.name])


def field_help(cls, name: str) -> str:
    """The help text of field `name`: its own, or the one it has in a base class."""
    for klass in cls.__mro__:
        for f in fields(klass) if dataclasses.is_dataclass(klass) else ():
            if f.name == name and f.metadata.get("help"):
                return f.metadata["help"]
    return ""


@dataclass
class UpdateConfig(ConfigBase):
    """What every PPO update needs: epochs, minibatches, optimiser, GAE and the loss.

    A subclass redeclares a field to change its default; the meaning (and the help text,
    see `field_help`) stays the one given here. It also provides `batch_size`, the number
    of samples (transitions, completions) one rollout collects.
    """

    # --- the K epochs of minibatches ------------------------------------------------------
    update_epochs: int = field(default=4, metadata={"help": "epochs K over each rollout"})
    num_minibatches: int = field(default=4, metadata={"help": "minibatches per epoch"})
    target_kl: float | None = field(
        default=None,
        metadata={"help": "end the update at the first minibatch whose approx KL(π_old ‖ π_θ) (k3, measured "
                  "before its gradient step) exceeds this; that minibatch takes no step; none = off"},
    )

    # --- optimisation ---------------------------------------------------------------------
    learning_rate: float = field(default=2.5e-4, metadata={"help": "Adam learning rate α₀"})
    anneal_lr: bool = field(
        default=True,
        metadata={"help": "anneal the learning rate linearly to 0: α = α₀ · (1 − iterations done / iterations)"},
    )
    adam_eps: float = field(default=1e-5, metadata={"help": "Adam epsilon"})
    max_grad_norm: float | None = field(
        default=0.5, metadata={"help": "clip the global gradient norm (of every trained parameter) to this; none = off"}
    )

    # --- advantage estimation ---------------------------------------------------------------
    gamma: float = field(default=0.99, metadata={"help": "discount γ"})
    gae_lambda: float = field(default=0.95, metadata={"help": "GAE λ"})
    norm_adv: bool = field(default=True, metadata={"help": "whiten the advantages (zero mean, unit std)"})

    # --- the loss L = L_policy − c_e·H + c_v·L_value -------------------------------------------
    clip_coef: float = field(default=0.2, metadata={"help": "surrogate clip ε, in (0, 1); inf = no clipping"})
    value_clip_coef: float | None = field(
        default=0.2,
        metadata={"help": "value clip ε_v: V may move at most ε_v from V_old per update (in units of the "
                  "returns: it throttles the critic when returns are large and unscaled); none = unclipped"},
    )
    ent_coef: float = field(default=0.01, metadata={"help": "entropy coefficient c_e"})
    vf_coef: float = field(default=0.5, metadata={"help": "value-loss coefficient c_v"})

    # --- bookkeeping ------------------------------------------------------------------------
    seed: int = field(default=1, metadata={"help": "seed of the weights, the sampling and the minibatch order"})
    num_threads: int = field(
        default=1,
        metadata={"help": "torch CPU threads, set by the command (small networks run fastest on 1; more threads "
                  "spin against each other)"},
    )
    checkpoint_every: int = field(
        default=25, metadata={"help": "save a checkpoint every this many iterations; 0 = only at the end"}
    )
    tensorboard: bool = field(default=True, metadata={"help": "write TensorBoard event files"})

    # What `batch_size` is called in the messages (PPOConfig: "num_envs * num_steps").
    batch_size_name = "batch_size"

    @property
    def minibatch_size(self) -> int:
        return self.batch_size // self.num_minibatches

    def validate(self):
        """Raise ConfigError naming the first impossible value; return self when all is well."""
        self.check_types()
        for name in ("learning_rate", "adam_eps"):
            require_positive(name, getattr(self, name))
        require_clip(self.clip_coef)
        for name in ("max_grad_norm", "value_clip_coef", "target_kl"):
            if getattr(self, name) is not None:
                require_positive(name, getattr(self, name))
        for name in ("gamma", "gae_lambda"):
            require_fraction(name, getattr(self, name))
        for name in ("ent_coef", "vf_coef"):
            require_non_negative(name, getattr(self, name))
        for name in ("update_epochs", "num_minibatches", "num_threads"):
            require_count(name, getattr(self, name))
        require_count("checkpoint_every", self.checkpoint_every, minimum=0)
        if self.batch_size % self.num_minibatches != 0:
            raise ConfigError(
                f"{self.batch_size_name} = {self.batch_size} is not divisible by num_minibatches = {self.num_minibatches}"
            )
        return self


@dataclass
class PPOConfig(UpdateConfig):
    """A PPO run on an environment: the update's settings plus the environment side."""

    # --- environment -----------------------------------------------------------------------
    env_id: str = field(default="CartPole-v1", metadata={"help": "gymnasium environment id"})
    env_backend: str = field(
        default="auto",
        metadata={
            "help": "who steps the training envs: 'gymnasium' (SyncVectorEnv), 'torch' "
            "(batched tensor envs in envs/, classic control only) or 'auto' (torch when the "
            "env id has a batched version, else gymnasium); evaluation always uses gymnasium"
        },
    )
    num_envs: int = field(
        default=4,
        metadata={"help": "parallel environment copies N (of the whole run: under torchrun each of K processes "
                  "steps N/K)"},
    )
    frame_stack: int = field(
        default=1,
        metadata={"help": "the network sees the last K observations of each env, concatenated oldest first "
                  "(envs/frame_stack.py; a short memory for a feed-forward policy on a partially observable env; "
                  "evaluation stacks them too); 1 = off"},
    )
    num_steps: int = field(default=128, metadata={"help": "steps T per env per rollout"})
    total_timesteps: int = field(default=500_000, metadata={"help": "environment steps to train for, rounded down to whole iterations of num_envs × num_steps (100000 with 64 × 32 trains 98304)"})
    device: str = field(default="cpu", metadata={"help": "torch device: cpu, cuda, cuda:1, ... or auto"})
    bootstrap_truncated: bool = field(
        default=True,
        metadata={"help": "bootstrap V(final obs) after a time-limit truncation (off = treat as termination)"},
    )

    # --- network ----------------------------------------------------------------------
    hidden_sizes: tuple[int, ...] = field(default=(64, 64), metadata={"help": "hidden layer widths"})
    activation: str = field(default="tanh", metadata={"help": "hidden activation: tanh or relu"})
    encoder: str = field(
        default="auto",
        metadata={"help": "what reads the observation: 'mlp', 'nature-cnn' (images ≥ 36×36), 'minatar-cnn' "
                  "(small images such as MinAtar's 10×10), or 'auto' (a CNN for a 3-D Box, by its size; "
                  "else the MLP) (ppo.models.encoders)"},
    )
    shared_network: bool = field(
        default=False,
        metadata={"help": "one shared trunk with policy and value heads (off = separate actor and critic)"},
    )
    ortho_init: bool = field(default=True, metadata={"help": "orthogonal init (√2 hidden, 0.01 policy, 1 value)"})
    log_std_init: float = field(default=0.0, metadata={"help": "initial log σ of a Gaussian policy"})
    recurrent: str = field(
        default="none",
        metadata={"help": "a recurrent core after the hidden layers: 'gru', 'lstm' or 'none' (feed-forward); "
                  "recurrent runs minibatch whole sequences (sequence_length), so their number must be divisible "
                  "by num_minibatches (ppo.trainers.recurrent)"},
    )
    recurrent_hidden_size: int = field(default=64, metadata={"help": "width of the GRU / LSTM state"})
    sequence_length: int | None = field(
        default=None,
        metadata={"help": "steps L of the sequences a recurrent update replays: each env's rollout is cut into "
                  "num_steps / L sequences, each replayed from the state the rollout entered it with, so "
                  "backpropagation through time stops at its start; none = the whole rollout (L = num_steps)"},
    )

    # --- normalisation ----------------------------------------------------------------
    normalize_obs: bool = field(default=False, metadata={"help": "running mean/std observation normalisation"})
    normalize_reward: bool = field(
        default=False, metadata={"help": "scale rewards by the running std of the discounted return"}
    )
    obs_clip: float = field(default=10.0, metadata={"help": "clip normalised observations to ±this"})
    reward_clip: float = field(default=10.0, metadata={"help": "clip scaled rewards to ±this"})

    batch_size_name = "num_envs * num_steps"

    @property
    def batch_size(self) -> int:
        return self.num_envs * self.num_steps

    @property
    def num_iterations(self) -> int:
        return self.total_timesteps // self.batch_size

    def validate(self) -> PPOConfig:
        self.check_types()
        for name in ("num_envs", "num_steps", "total_timesteps", "frame_stack"):
            require_count(name, getattr(self, name))
        super().validate()
        for name in ("obs_clip", "reward_clip"):
            require_positive(name, getattr(self, name))
        require_finite("log_std_init", self.log_std_init)
        if not -20 <= self.log_std_init <= 5:
            raise ConfigError(f"log_std_init = {self.log_std_init} is outside [-20, 5] (σ = e^log_std_init)")
        if self.total_timesteps < self.batch_size:
            raise ConfigError(
                f"total_timesteps = {self.total_timesteps} is less than one rollout "
                f"(num_envs * num_steps = {self.batch_size})"
            )
        require_one_of("activation", self.activation, ACTIVATIONS)
        require_one_of("encoder", self.encoder, ENCODERS)
        if not self.hidden_sizes or any(width <= 0 for width in self.hidden_sizes):
            raise ConfigError(f"hidden_sizes = {list(self.hidden_sizes)} must be one or more positive widths")
        require_one_of("recurrent", self.recurrent, RECURRENT_CORES)
        require_count("recurrent_hidden_size", self.recurrent_hidden_size)
        self._check_sequences()
        return self

    def _check_sequences(self) -> None:
        """A recurrent update cuts num_envs · num_steps / L sequences into num_minibatches equal parts."""
        length = self.sequence_length
        if length is not None:
            if self.recurrent == "none":
                raise ConfigError(f"sequence_length = {length} needs a recurrent core (recurrent = 'none'); "
                                  "leave it none")
            require_count("sequence_length", length)
            if self.num_steps % length != 0:
                raise ConfigError(f"num_steps = {self.num_steps} is not divisible by sequence_length = {length}")
        if self.recurrent == "none":
            return
        if length is None or length == self.num_steps:
            if self.num_envs % self.num_minibatches != 0:
                raise ConfigError(f"num_envs = {self.num_envs} is not divisible by num_minibatches = "
                                  f"{self.num_minibatches} (recurrent = {self.recurrent!r} minibatches whole env "
                                  "sequences)")
            return
        sequences = self.num_envs * (self.num_steps // length)
        if sequences % self.num_minibatches != 0:
            raise ConfigError(f"num_envs · num_steps / sequence_length = {sequences} sequences is not divisible by "
                              f"num_minibatches = {self.num_minibatches}")


ACTIVATIONS = ("tanh", "relu")
ENCODERS = ("auto", "mlp", "nature-cnn", "minatar-cnn")
RECURRENT_CORES = ("none", "gru", "lstm")
