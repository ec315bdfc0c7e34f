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

A setting that cannot take effect with the others is refused too: each config class lists
in `no_effect` the fields that do nothing while another one (or something only the trainer
meets, such as the action space) has certain values, and `ConfigBase.check_effects` refuses
such a field set away from its default:

    obs_clip = 5.0 has no effect with normalize_obs = False: only normalised observations
    are clipped; leave it at its default 10.0
"""

from __future__ import annotations

import dataclasses
import math
import os
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


MAX_THREADS = 1024  # torch takes a C int; beyond a machine's cores more threads only wait


def require_threads(value) -> None:
    """A torch thread count: an integer in [1, MAX_THREADS]."""
    if not (isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_THREADS):
        raise ConfigError(f"num_threads = {value!r} must be an integer in [1, {MAX_THREADS}]")


MAX_SEED = 2**63 - 1  # torch's generators take seeds below 2**64; a run adds offsets (copies, processes) to its seed


def require_seed(name: str, value) -> None:
    """A seed: an integer in [0, MAX_SEED]."""
    if not (isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_SEED):
        raise ConfigError(f"{name} = {value!r} must be an integer in [0, 2**63 - 1]")


EMPTY_PATH = "is an empty path, which would be the current folder; give a folder"  # what an empty path is told


def require_path(name: str, value) -> None:
    """A folder or file given as text must not be empty: Path('') is the current folder."""
    if isinstance(value, str) and not value.strip():
        raise ConfigError(f"{name} = {value!r} {EMPTY_PATH}")


def require_growing_budget(name: str, given: int, budget: int, done: int, per_iteration: int, run) -> None:
    """A resumed run's budget `name` only grows: ConfigError (one line) for `given` below the run's own
    `budget` while the run is unfinished (`done` samples, in iterations of `per_iteration`); a finished
    run's budget is refused by the check that nothing is left to train."""
    if given < budget and done + per_iteration <= budget:
        raise ConfigError(f"{name} = {given} is below the budget of run {run}, {budget} (it has done {done} steps): "
                          f"a resumed run's budget only grows; give {name} ≥ {budget}, or leave it unset")


OPEN_FILES_RESERVE = 64  # what a process opens beside its runs' files: libraries, a checkpoint or plot being written


def open_files_left() -> int | None:
    """How many more files this process may open: its soft limit (ulimit -n) less those open now and
    OPEN_FILES_RESERVE; None where the limit cannot be read."""
    try:
        import resource
    except ImportError:  # not a POSIX system
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return None
    folder = next((path for path in ("/proc/self/fd", "/dev/fd") if os.path.isdir(path)), None)
    open_now = len(os.listdir(folder)) if folder else 0
    return max(0, soft - open_now - OPEN_FILES_RESERVE)


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


@dataclass(frozen=True)
class NoEffect:
    """A setting does nothing while `on` is one of `values`: `on` is another field of the config, or
    what only the trainer meets (`action_space`, compared by its kind: "Discrete"; the `encoder`
    'auto' resolves to; the `algorithm`). `why` says why, in the refusal."""

    on: str
    values: tuple
    why: str

    def applies(self, current) -> bool:
        """True while `current`, the value of `on`, leaves the setting without effect."""
        if not isinstance(current, (bool, int, float, str, tuple, list, type(None))):
            current = type(current).__name__  # a space, by its kind
        return any(_same(current, value) for value in self.values)


def _same(value, other) -> bool:
    """value == other, with True ≠ 1 and a list equal to the tuple of its items."""
    if isinstance(value, list):
        value = tuple(value)
    return isinstance(value, bool) == isinstance(other, bool) and value == other


def _shown(value) -> str:
    return repr(list(value)) if isinstance(value, tuple) else repr(value)


class ConfigBase:
    """to_dict / from_dict / replace for a config dataclass, type checks from its annotations, and
    the refusal of settings that cannot take effect (`no_effect`, `check_effects`)."""

    # field → the conditions under which it does nothing (NoEffect), checked in order
    no_effect: typing.ClassVar[dict[str, tuple[NoEffect, ...]]] = {}

    def replace(self, **changes):
        changed = dataclasses.replace(self, **changes)
        if getattr(self, "_read_back", False):  # a saved run's config stays one when changed (a new budget)
            object.__setattr__(changed, "_read_back", True)
        return changed

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
        config = cls(**values)
        # A config read back keeps the settings its run trained with: no_effect refuses new runs only.
        object.__setattr__(config, "_read_back", True)
        return config

    def check_types(self) -> None:
        hints = typing.get_type_hints(type(self))
        for f in fields(self):
            require_type(f.name, getattr(self, f.name), hints[f.name])

    @classmethod
    def defaults(cls) -> dict:
        """{field name: its default in this class}."""
        return {f.name: f.default if f.default is not dataclasses.MISSING else f.default_factory() for f in fields(cls)}

    def check_effects(self, **context) -> None:
        """ConfigError (one line) for a field set away from its default while one of its `no_effect`
        conditions holds. `context` gives what the config alone cannot know (the trainer passes the
        action space, the resolved encoder and its algorithm); a condition on something neither a
        field nor in `context` waits for the trainer. A config read back from a saved run (`from_dict`)
        is not refused: its run trained with these settings."""
        if getattr(self, "_read_back", False):
            return
        defaults = self.defaults()
        for name, conditions in self.no_effect.items():
            value = getattr(self, name)
            if _same(value, defaults[name]):
                continue
            for condition in conditions:
                if condition.on not in context and condition.on not in defaults:
                    continue
                current = context[condition.on] if condition.on in context else getattr(self, condition.on)
                if condition.applies(current):
                    raise ConfigError(f"{name} = {_shown(value)} has no effect with {condition.on} = "
                                      f"{_shown(current)}: {condition.why}; leave it at its default "
                                      f"{_shown(defaults[name])}")


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
        self.check_effects()
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
        for name in ("update_epochs", "num_minibatches"):
            require_count(name, getattr(self, name))
        require_threads(self.num_threads)
        require_count("checkpoint_every", self.checkpoint_every, minimum=0)
        require_seed("seed", self.seed)
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

    # The trainer adds what the config cannot know (check_effects): the action space, the encoder
    # 'auto' resolves to, and the algorithm (ppo.trainers.registry).
    no_effect = {
        "clip_coef": (NoEffect("algorithm", ("penalty",), "PPO-Penalty's surrogate is unclipped (β·KL holds "
                               "the step)"),),
        "log_std_init": (NoEffect("action_space", ("Discrete", "MultiDiscrete"), "only a Gaussian policy (Box "
                                  "actions) has a log σ"),),
        "hidden_sizes": (NoEffect("encoder", ("nature-cnn", "minatar-cnn"), "they shape the MLP, and a CNN ends "
                                  "in its own linear layer ('auto' picks a CNN for images)"),),
        "activation": (NoEffect("encoder", ("nature-cnn", "minatar-cnn"), "it is the MLP's, and a CNN uses ReLU "
                                "('auto' picks a CNN for images)"),),
        "recurrent_hidden_size": (NoEffect("recurrent", ("none",), "it is the width of a GRU / LSTM state"),),
        "sequence_length": (NoEffect("recurrent", ("none",), "only a recurrent core replays sequences"),),
        "obs_clip": (NoEffect("normalize_obs", (False,), "only normalised observations are clipped"),),
        "reward_clip": (NoEffect("normalize_reward", (False,), "only scaled rewards are clipped"),),
    }

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
        if self.recurrent == "none":  # a sequence_length is refused by check_effects
            return
        if length is not None:
            require_count("sequence_length", length)
            if self.num_steps % length != 0:
                raise ConfigError(f"num_steps = {self.num_steps} is not divisible by sequence_length = {length}")
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
