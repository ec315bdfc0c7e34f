"""Many seeds at once: S runs of one trainer class trained as one batched computation, derived from the class.

    batch = PPO(config, envs, seeds=[1, 2, 3], run_dirs=[...])         # any trainer class, a user's too
    batch = PPOPenalty(config, envs, seeds=[1, 2, 3], kl_target=0.02)   # with the class's own settings
    batch.train()                                                     # BaseTrainer's lifecycle

An algorithm is written once, for one run (ppo.trainers.ppo, ppo.trainers.variants);
this module derives its batch of seeds from that one definition, as PureJaxRL maps one
seed's `train` over many. Member s is the run the class makes with seed s: the batch
builds each member with the class's own constructor (its network drawn after
`torch.manual_seed(seed)`, its own action and shuffle streams, normalisers and settings),
and then runs every part of an iteration from the class's own code, in one of three ways:

    once over every member's copies    the rollout and GAE (collect_rollout, act, after_step,
                                       bootstrap_values, compute_advantages, update_samples):
                                       the class's code on S·N copies, its network calls made
                                       for every member at once (ppo.models.member_networks:
                                       vmap of the network's own methods)
    mapped over the members            the loss (minibatch_loss, evaluate_samples,
                                       transitions_loss, policy_loss, policy_diagnostics):
                                       torch.func.vmap of the class's own minibatch_loss, with
                                       member s's parameters and its adapted numbers (`adapted`)
    on each member's own run           the rule after the update (after_update: explained
                                       variance, a variant's KL rule), the checkpoint
                                       (state_dict, load_state_dict), the run folder's record

and the update loop is `ppo.algorithm.update`'s own, with the member layout (each member
shuffles with its own generator, stops at its own KL, clips its own gradient and steps
its own Adam: `run_member_update`). Nothing of an algorithm is written a second time, so
a subclass that overrides one hook changes a batch of seeds exactly as it changes one
run. What the batch replaces (`REPLACED`: the update's layout, the per-member logging and
checkpoints) a subclass may not override: the batch refuses it in one line rather than
ignore it. Hooks of the first kind must treat the copies independently, as PPO's do.

What holds: member s draws what run s draws (the same weights, the same action and
shuffle streams, the same numbers from them while its decisions match its run's), and
its arithmetic differs only in rounding: batched matrix products round differently from
one run's. Started from the same θ, m, v, an iteration of member s lands within a few
float32 roundings of its run's, with the same target_kl decision and step count
(tests/test_seed_batch.py). Over many iterations the difference grows, as any rounding
does in this chaotic system, until the runs part: the members end as good as their runs,
not equal to them (the guide's block `seed-batch-rounding`).

A member whose losses, gradient norm or parameters turn non-finite stops alone
(`stop_member`): its θ goes back to its last finite values and stays, its folder keeps
its last good checkpoint and gets DIVERGED_NAME; the other members go on bit for bit as
they would have. A member's folder is an ordinary run folder, written by the member's
own `state_dict` and `run_settings`, so `ppo-eval` reads it and `ppo-train --resume`
continues it as a single run; `SeedBatch.resume(folders, make_envs)` (or the class's own
`resume` given the list of folders) continues the members together, bit for bit where
the envs can be checkpointed. On a CPU the batched arithmetic takes about as long per
member as a run's own; what the batch saves is the Python overhead of S separate loops
and their start-up; on a GPU it fills the device (`experiments/benchmarks/seeds.py`).
"""

from __future__ import annotations

import contextlib
import json
import math
from collections import deque
from pathlib import Path
from typing import Callable, Sequence

import torch
from torch import nn

from ppo.algorithm.update import MinibatchLoss, run_member_update, update_settings
from ppo.config import ConfigError, PPOConfig
from ppo.models.member_networks import MemberNetworks, stacked_parameters
from ppo.models.normalize import PerRun
from ppo.parallel.distributed import SINGLE_PROCESS
from ppo.parallel.optim import StackedAdam
from ppo.runs.checkpoint import (CheckpointError, check_run_folder, check_writable_run_dir, remove_stale_temporaries,
                                 save_checkpoint, write_run_file)
from ppo.trainers.base import CHECKPOINT_NAME, GUARDED_METRICS, BaseTrainer
from ppo.trainers.ppo import PPO, _mean
from ppo.trainers.registry import TRAINERS

DIVERGED_NAME = "diverged.json"  # in the folder of a member that diverged: its seed, iteration, quantity, value

# What the batch keeps of each member: its own objects (never compared), its copies' state
# (a block of the batch's S·N columns), and the counters all members share (the batch's).
PER_RUN = ("model", "optimizer", "action_generator", "shuffle_generator", "obs_normalizer", "reward_scaler",
           "recent_returns", "envs", "local_num_envs", "config", "run_dir", "buffer", "progress", "history")
COPY_STATE = ("next_obs", "next_action_mask", "episode_return", "episode_length", "episode_start", "recurrent_state")
COUNTERS = ("iteration", "train_seconds", "schedule_origin", "global_step")

# The methods a batch runs its own way: a single-run class that overrides one is refused.
REPLACED = ("update", "run_iteration", "train_iteration", "reset_seed", "by_run", "member_rows",
            "recent_returns_by_run", "recent_return", "check_finite", "still_training", "keeps_checkpoints",
            "open_logs", "log", "save", "resume")

_BATCH_CLASSES: dict[type, type] = {}


def seed_batch_class(trainer: type[PPO]) -> type:
    """The batch of `trainer`: the class `SeedBatch` + `trainer`, made once per class."""
    if getattr(trainer, "is_seed_batch", False):
        return trainer
    if trainer not in _BATCH_CLASSES:
        _BATCH_CLASSES[trainer] = type(f"SeedBatch[{trainer.__name__}]", (SeedBatch, trainer),
                                       {"single_run": trainer, "__module__": __name__,
                                        "__doc__": f"A batch of seeds of {trainer.__name__} (ppo.trainers.seed_batch)."})
    return _BATCH_CLASSES[trainer]


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
    return check_seeds(seeds)


def check_seeds(seeds) -> list[int]:
    """`seeds` as a list of distinct integers ≥ 0; ConfigError (one line) otherwise."""
    try:
        values = list(seeds)
    except TypeError:
        raise ConfigError(f"seeds = {seeds!r} must be a list of seeds, e.g. [1, 2, 3]") from None
    if not values:
        raise ConfigError("a seed batch needs at least one seed")
    for seed in values:
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ConfigError(f"seeds = {values!r}: {seed!r} is not a seed (an integer ≥ 0)")
    if len(set(values)) != len(values):
        raise ConfigError(f"seeds = {values!r} names a seed twice")
    return values


def refuse_replaced_hooks(trainer: type[PPO]) -> None:
    """ConfigError (one line) if `trainer`, or a class between it and PPO, overrides a method the batch
    replaces (REPLACED)."""
    for name in REPLACED:
        owner = next(cls for cls in trainer.__mro__ if name in vars(cls))
        if owner is not PPO and issubclass(owner, PPO):
            raise ConfigError(f"{owner.__name__} overrides {name}, which a seed batch runs its own way for all "
                              "members; put what a run adds after its update in after_update (run per member), "
                              "and the loss in policy_loss or minibatch_loss (mapped over the members)")


def _same(first, other) -> bool:
    if isinstance(first, torch.Tensor) or isinstance(other, torch.Tensor):
        return (isinstance(first, torch.Tensor) and isinstance(other, torch.Tensor)
                and first.shape == other.shape and bool(torch.equal(first, other)))
    try:
        return first is other or bool(first == other)
    except (TypeError, ValueError, RuntimeError):
        return False


class JointReset:
    """The envs of a seed batch reset once for all members: the first member that resets starts a round
    (`envs.reset(seed=[each member's seed])`), and every member takes its own block from it."""

    def __init__(self, envs, seeds: list[int], copies_per_member: int):
        self.envs, self.seeds, self.copies = envs, seeds, copies_per_member
        self.pending: dict[int, object] = {}

    def block(self, member: int, seed) -> torch.Tensor:
        if seed != self.seeds[member]:
            raise ValueError(f"member {member} of a seed batch resets with seed {seed}, not its own {self.seeds[member]}")
        if not self.pending:
            obs = self.envs.reset(seed=list(self.seeds))
            self.pending = {s: _rows(obs, slice(s * self.copies, (s + 1) * self.copies))
                            for s in range(len(self.seeds))}
        if member not in self.pending:
            raise ValueError(f"member {member} of a seed batch reset twice in one round of resets")
        return self.pending.pop(member)


def _rows(obs, rows: slice):
    return {key: value[rows] for key, value in obs.items()} if isinstance(obs, dict) else obs[rows]


class MemberEnvs:
    """Member s's block of a seed batch's envs, as its own run sees them: N copies, the spaces, the
    device, its resets (`JointReset`) and its part of the envs' checkpoint. The batch steps them."""

    def __init__(self, envs, member: int, joint: JointReset):
        self.envs, self.member, self.joint = envs, member, joint
        self.num_envs = joint.copies
        self.single_observation_space = envs.single_observation_space
        self.single_action_space = envs.single_action_space
        self.device = envs.device
        self.env_id = getattr(envs, "env_id", None)

    def reset(self, seed=None) -> torch.Tensor:
        return self.joint.block(self.member, seed)

    def step(self, actions: torch.Tensor):
        raise RuntimeError("a seed batch steps its members' envs together (ppo.trainers.seed_batch)")

    def state_dict(self) -> dict | None:
        save = getattr(self.envs, "member_state_dict", None)
        return save(self.member) if callable(save) else None

    def load_state_dict(self, state: dict) -> None:
        self.envs.load_member_state_dict(self.member, state)

    def close(self) -> None:
        """The batch closes the envs it was given."""


def member_envs(envs, seeds: list[int], copies_per_member: int) -> list[MemberEnvs]:
    """Each member's block of `envs` (S·N copies, member s's N in rows s·N … (s+1)·N − 1, resettable with
    one seed per member: `envs.stacked_vec_env.StackedVecEnv`, or a batched torch env in seed groups)."""
    S = len(seeds)
    copies = getattr(envs, "num_envs", None)
    if copies != S * copies_per_member:
        raise ConfigError(f"the envs have {copies} copies but {S} seeds × num_envs = {copies_per_member} need "
                          f"{S * copies_per_member} (envs.factory.make_seed_batch_env builds them)")
    joint = JointReset(envs, seeds, copies_per_member)
    return [MemberEnvs(envs, member, joint) for member in range(S)]


def member_columns(buffer, member: int, copies: int):
    """Member `member`'s view of a rollout buffer of S·N copies: every (T, S·N, ...) tensor's columns
    s·N … (s+1)·N − 1, written where the batch writes them."""
    view = object.__new__(type(buffer))
    columns = slice(member * copies, (member + 1) * copies)
    for name, value in vars(buffer).items():
        if isinstance(value, torch.Tensor) and value.dim() > 1 and value.shape[1] == buffer.obs.shape[1]:
            value = value[:, columns]
        setattr(view, name, value)
    return view


class SeedBatch:
    """The member axis of any trainer class (see the module docstring); `seed_batch_class(C)` is C's batch.

    `members[s]` is member s's own trainer (an instance of C); `member(s)` brings it up to date with
    the batch (its counters and its copies' state) and returns it.
    """

    single_run: type[PPO] = PPO
    is_seed_batch = True

    def __init__(self, config: PPOConfig, envs, *, seeds: Sequence[int], run_dirs: Sequence[str | Path] | None = None,
                 progress: bool = True, world=SINGLE_PROCESS, run_dir=None, **settings):
        """`envs`: the S·N copies of every member (`envs.factory.make_seed_batch_env`); `settings`: the
        class's own, by name, for every member alike."""
        single = self.single_run
        if world is not SINGLE_PROCESS and world.distributed:
            raise ConfigError("a seed batch runs in one process; start it without torchrun")
        if run_dir is not None:
            raise ConfigError("a seed batch writes one folder per member: give run_dirs=[...], one per seed")
        refuse_replaced_hooks(single)
        if not isinstance(config, PPOConfig):
            raise ConfigError(f"config = {config!r} must be a PPOConfig")
        seeds = check_seeds(seeds)
        S, N = len(seeds), config.validate().num_envs
        folders = None if run_dirs is None else [check_writable_run_dir(folder) for folder in run_dirs]
        if folders is not None:
            if len(folders) != S:
                raise ConfigError(f"{len(folders)} run folders for {S} seeds")
            if len({folder.resolve() for folder in folders}) != S:
                raise ConfigError(f"run_dirs name one folder twice ({', '.join(map(str, folders))}); each member "
                                  "writes its own")
        members = [single(config.replace(seed=seed).validate(), member_env, progress=False, **settings)
                   for seed, member_env in zip(seeds, member_envs(envs, seeds, N))]
        self._assemble(config.validate(), envs, members, folders, progress)

    def _assemble(self, config: PPOConfig, envs, members: list[PPO], run_dirs: list[Path] | None,
                  progress: bool) -> None:
        """The batch from its members: their shared attributes, and their own objects side by side."""
        first = members[0]
        self._networks = [name for name, value in vars(first).items()
                          if isinstance(value, nn.Module) and name not in PER_RUN]  # a frozen reference, say
        for name, value in vars(first).items():
            if name in PER_RUN or name in COPY_STATE or name in self.adapted or name in self._networks:
                continue
            for member in members[1:]:
                if not _same(value, vars(member).get(name)):
                    raise ConfigError(f"{type(first).__name__} gives seed {member.config.seed} its own self.{name} "
                                      f"({type(value).__name__}); a seed batch shares one value among its members: "
                                      f"name it in {type(first).__name__}.adapted if it is a number each run adapts")
        vars(self).update(vars(first))
        S, N = len(members), first.local_num_envs
        self.members, self.seeds, self.num_members, self.member_envs = members, [m.config.seed for m in members], S, N
        self.config, self.configs = config, [member.config for member in members]
        self.envs, self.local_num_envs = envs, S * N
        self.progress, self.history, self.run_dir, self.run_dirs = progress, [], None, run_dirs
        self.optimizer = StackedAdam([member.optimizer for member in members])
        self.model = MemberNetworks([member.model for member in members],
                                    stacked_parameters(first.model, [self.optimizer]))
        self.action_generator = [member.action_generator for member in members]
        self.shuffle_generator = [member.shuffle_generator for member in members]
        self.obs_normalizer = None if first.obs_normalizer is None else PerRun([m.obs_normalizer for m in members], N)
        self.reward_scaler = None if first.reward_scaler is None else PerRun([m.reward_scaler for m in members], N)
        self.recent_returns = [member.recent_returns for member in members]
        self.buffer = self.build_buffer(first.model)
        for index, member in enumerate(members):
            member.buffer = member_columns(self.buffer, index, N)
        self._gather_copy_state()
        self._gather_adapted()
        self._stack_networks()
        self.diverged: dict[int, dict] = {}  # member -> when and why it stopped (stop_member)

    # ------------------------------------------------------------------ the members' own runs
    def member(self, index: int) -> PPO:
        """Member `index`'s own trainer, brought up to date: the batch's counters and its block of the copies' state."""
        member = self.members[index]
        columns = self._columns(index)
        for name in COUNTERS:
            setattr(member, name, getattr(self, name))
        for name in COPY_STATE:
            value = getattr(self, name, None)
            setattr(member, name, None if value is None else value[columns])
        member.buffer.step = self.buffer.step
        return member

    def member_state_dict(self, index: int) -> dict:
        """Member `index`'s checkpoint: its own trainer's `state_dict()`, an ordinary run's."""
        return self.member(index).state_dict()

    def _columns(self, index: int) -> slice:
        return slice(index * self.member_envs, (index + 1) * self.member_envs)

    def _gather_copy_state(self) -> None:
        """The copies' state of the batch, joined from its members' blocks."""
        for name in COPY_STATE:
            blocks = [getattr(member, name, None) for member in self.members]
            setattr(self, name, None if blocks[0] is None else torch.cat(blocks))

    def _gather_adapted(self) -> None:
        """Each number of `adapted` as (S,) float32, member s's in row s (what the mapped loss reads)."""
        for name in self.adapted:
            setattr(self, name, torch.tensor([float(getattr(member, name)) for member in self.members],
                                             dtype=torch.float32, device=self.device))

    def _stack_networks(self) -> None:
        """Every other network a run keeps (besides `model`: a frozen reference, a target network) as
        MemberNetworks of the members' own, their parameters stacked as they stand now: the batch's
        loss reads member s's, and a call on all S·N copies gives each member's block its own."""
        for name in self._networks:
            networks = [getattr(member, name) for member in self.members]
            names = [parameter for parameter, _ in networks[0].named_parameters()]
            stacked = {parameter: torch.stack([dict(network.named_parameters())[parameter].detach()
                                               for network in networks]) for parameter in names}
            setattr(self, name, MemberNetworks(networks, stacked))

    def _run_each(self, method: str, arguments: list[tuple]) -> list:
        """member(s).method(*arguments[s]) for every member still training; refused (one line) when it
        changes an attribute the batch shares among the members differently for each."""
        before = [dict(vars(member)) for member in self.members]
        results = [None if index in self.diverged else getattr(self.member(index), method)(*arguments[index])
                   for index in range(self.num_members)]
        known = {*PER_RUN, *COPY_STATE, *COUNTERS, *self.adapted, *self._networks}
        changed = {name for member, old in zip(self.members, before) for name, value in vars(member).items()
                   if name not in known and (name not in old or old[name] is not value)}
        for name in sorted(changed):
            values = [getattr(member, name) for index, member in enumerate(self.members) if index not in self.diverged]
            if not all(_same(values[0], value) for value in values[1:]):
                owner = type(self.members[0]).__name__
                raise ConfigError(f"{owner}.{method} sets self.{name} differently for each seed; a seed batch's loss "
                                  f"reads one value for all members: name it in {owner}.adapted if it is a number "
                                  "each run adapts")
            setattr(self, name, values[0])
        self._gather_adapted()
        return results

    # ------------------------------------------------------------------ the member axis of the loop
    def reset_seed(self) -> list[int]:
        return self.seeds  # copy block s starts from seed s, as in member s's run

    def by_run(self, columns: torch.Tensor) -> list[torch.Tensor]:
        """(T, S·N) -> S tensors (T, N): member s's columns."""
        return list(columns.split(self.member_envs, dim=1))

    def member_rows(self, metrics: list[dict[str, float]]) -> list[dict[str, float]]:
        return metrics

    def recent_returns_by_run(self) -> list[deque[float]]:
        return self.recent_returns

    def member_major(self, samples: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """What `update_samples` gives for all S·N copies, rows (chunks × S·N, ...) with the copies
        innermost, as (S, chunks × N, ...): member s's samples in its own run's order."""
        S, N = self.num_members, self.member_envs
        arranged = {}
        for name, tensor in samples.items():
            if tensor.shape[0] % (S * N):
                raise ValueError(f"update_samples gave {name} with {tensor.shape[0]} rows; a seed batch needs rows "
                                 f"in blocks of its {S}·{N} copies")
            split = tensor.reshape(-1, S, N, *tensor.shape[1:]).transpose(0, 1)
            arranged[name] = split.reshape(S, -1, *tensor.shape[1:])
        return arranged

    def member_losses(self, minibatch: dict[str, torch.Tensor]) -> MinibatchLoss:
        """Every member's L_s on its own minibatch (S, b, ...), by the class's own `minibatch_loss`
        mapped over the members: loss (S,), log_ratio (S, b), terms (S,) each. Inside, the run's
        network is member s's, and so are its adapted numbers and any other network it keeps.

        Where the class keeps PPO's own `minibatch_loss` (its `evaluate_samples`, then
        `transitions_loss`) on a feed-forward network, the two parts run apart, as that definition
        composes them: the members' networks evaluate every member's samples in one call
        (`ppo.models.member_networks`), then the class's `transitions_loss` is mapped over the members."""
        adapted = {name: getattr(self, name) for name in self.adapted}  # (S,) each
        others = {name: getattr(self, name) for name in self._networks}
        other_parameters = {name: networks._stacked for name, networks in others.items()}
        if self._loss_in_two_parts():
            S, b = minibatch["log_probs"].shape[:2]
            flat = {name: tensor.flatten(0, 1) for name, tensor in minibatch.items()}  # (S·b, ...) member-major
            evaluated = [tensor.view(S, b) for tensor in
                         self.model.evaluate_actions(flat["obs"], flat["actions"], flat.get("action_masks"))]

            def member_loss(network, values, parameters, member_minibatch, new_log_probs, entropy, new_values):
                with self._member_view(others, parameters, {"model": network, **values}):
                    result = self.transitions_loss(new_log_probs, entropy, new_values, member_minibatch)
                return result.loss, result.log_ratio, result.terms

            loss, log_ratio, terms = self.model.map(member_loss, adapted, other_parameters, minibatch, *evaluated)
        else:
            def member_loss(network, values, parameters, member_minibatch):
                with self._member_view(others, parameters, {"model": network, **values}):
                    result = self.minibatch_loss(member_minibatch)
                return result.loss, result.log_ratio, result.terms

            loss, log_ratio, terms = self.model.map(member_loss, adapted, other_parameters, minibatch)
        return MinibatchLoss(loss=loss, log_ratio=log_ratio, terms=terms)

    def _loss_in_two_parts(self) -> bool:
        cls = type(self)
        return (not self.recurrent and cls.minibatch_loss is PPO.minibatch_loss
                and cls.evaluate_samples is PPO.evaluate_samples)

    @contextlib.contextmanager
    def _member_view(self, others: dict, parameters: dict, attributes: dict):
        """Inside the mapped loss: the batch's attributes as one member's run sees them, its other networks
        with that member's parameters."""
        with contextlib.ExitStack() as stack:
            swapped = {name: stack.enter_context(others[name].as_member(theta)) for name, theta in parameters.items()}
            stack.enter_context(self._as_one_run({**attributes, **swapped}))
            yield

    @contextlib.contextmanager
    def _as_one_run(self, attributes: dict):
        """The batch's attributes as one member's run sees them, inside `member_losses` (restored after)."""
        saved = {name: getattr(self, name) for name in attributes}
        vars(self).update(attributes)
        try:
            yield
        finally:
            vars(self).update(saved)

    def update(self, advantages: torch.Tensor, returns: torch.Tensor) -> list[dict[str, float]]:
        """The class's update for every member at once (ppo.algorithm.update.run_member_update), then each
        member's `after_update` on its own run: one row each."""
        samples = self.member_major(self.update_samples(advantages, returns))
        self._stack_networks()  # as the members' own stand now (a rule may have moved them)
        clip_coef = self.clip_coef.view(-1, 1) if isinstance(self.clip_coef, torch.Tensor) else self.clip_coef
        rows = run_member_update(samples, self.member_losses, self.optimizer, generators=self.shuffle_generator,
                                 frozen=list(self.diverged), **update_settings(self.config, clip_coef))
        for row, member in zip(rows, self.members):
            row.update(member.adapted_values())  # the values this update used
        member_samples = [({name: tensor[index] for name, tensor in samples.items()},) for index in range(len(rows))]
        for row, measured in zip(rows, self._run_each("after_update", member_samples)):
            row.update(measured or {})
        return rows

    # ------------------------------------------------------------------ the loop's hooks
    def train_iteration(self) -> list[dict[str, float]]:
        """One iteration of every member; a member whose losses, gradient norm or parameters turn
        non-finite in it is stopped (`stop_member`) and takes no part in the iterations after."""
        last_good = self.optimizer.flat_params.clone()  # (S, P) θ before this iteration's update
        metrics = BaseTrainer.train_iteration(self)
        for index, (quantity, value) in self.find_divergence(metrics).items():
            self.stop_member(index, quantity, value, last_good[index])
        return metrics

    def check_finite(self, metrics: list[dict[str, float]]) -> None:
        """Nothing to raise: `train_iteration` has stopped the members that diverged, and only them."""

    def still_training(self) -> bool:
        return len(self.diverged) < self.num_members

    def keeps_checkpoints(self) -> bool:
        return self.run_dirs is not None

    def open_logs(self) -> list:
        """Each member's run folder prepared as its own run's (its config.json), with its own log
        (member 0 shows the progress bar)."""
        from ppo.runs.logger import MetricsLogger

        if self.run_dirs is None:
            return []
        logs = []
        for folder in self.run_dirs:  # every member folder follows the rule before any is written
            check_run_folder(folder, self.iteration, resume_with=f"{type(self).__name__}.resume([...])", instead="other run_dirs")
        for index, folder in enumerate(self.run_dirs):
            folder.mkdir(parents=True, exist_ok=True)
            remove_stale_temporaries(folder)
            member = self.member(index)
            write_run_file(folder / "config.json", json.dumps(member.run_settings(), indent=2) + "\n")
            logs.append(MetricsLogger(folder, member.config.tensorboard, self.total_samples,
                                      self.progress and index == 0, resume_from_step=self.samples_seen))
        return logs

    def log(self, logs: list, metrics: list[dict[str, float]]) -> None:
        for index, (logger, row) in enumerate(zip(logs, metrics)):
            if index not in self.diverged:  # a diverged member's folder ends at its last good iteration
                logger.log(self.global_step, row)
        if logs:
            logs[0].progress(self.global_step, self.progress_text(metrics))

    def progress_text(self, metrics: list[dict[str, float]]) -> str:
        returns = sorted(row["episode_return_recent"] for index, row in enumerate(metrics)
                         if index not in self.diverged) or [math.nan]
        diverged = f" ({len(self.diverged)} diverged)" if self.diverged else ""
        return f"{self.num_members} seeds{diverged}, median return {returns[len(returns) // 2]:.1f}"

    # ------------------------------------------------------------------ members that diverge
    def find_divergence(self, metrics: list[dict[str, float]]) -> dict[int, tuple[str, float]]:
        """{member: (quantity, value)} for each member not stopped yet whose losses, gradient norm
        (GUARDED_METRICS) or parameters are not finite after this iteration."""
        finite_parameters = torch.isfinite(self.optimizer.flat_params).all(dim=1).tolist()
        found = {}
        for index, row in enumerate(metrics):
            if index in self.diverged:
                continue
            bad = [(name, row[name]) for name in GUARDED_METRICS if name in row and not math.isfinite(row[name])]
            if not finite_parameters[index]:
                bad.append(("parameters", math.nan))
            if bad:
                found[index] = bad[0]
        return found

    def stop_member(self, index: int, quantity: str, value: float, last_good: torch.Tensor) -> None:
        """Member `index` diverged: its θ goes back to `last_good` (its values before the iteration)
        and stays there, it takes no more steps, logs nothing more and saves no more checkpoints
        (its folder keeps its last good one), and DIVERGED_NAME in its folder says when and why.
        The other members go on exactly as they would have: nothing couples them to it."""
        self.diverged[index] = {"seed": self.seeds[index], "iteration": self.iteration, "quantity": quantity,
                                "value": str(value)}
        self.optimizer.flat_params[index] = last_good
        if self.run_dirs is not None:
            self.run_dirs[index].mkdir(parents=True, exist_ok=True)
            (self.run_dirs[index] / DIVERGED_NAME).write_text(json.dumps(self.diverged[index], indent=2) + "\n")

    def recent_return(self) -> float:
        raise TypeError("a seed batch has one recent return per member: recent_returns_by_member()")

    def recent_returns_by_member(self) -> list[float]:
        """Each member's mean return of its last training episodes; NaN for a member that diverged."""
        return [math.nan if index in self.diverged else _mean(recent)
                for index, recent in enumerate(self.recent_returns)]

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict:
        raise TypeError("a seed batch has one checkpoint per member: member(s).state_dict(), or save()")

    def load_state_dict(self, state: dict) -> None:
        raise TypeError("a seed batch loads one checkpoint per member: load_member_states(states), or resume()")

    def save(self) -> list[Path]:
        """Write every member's own checkpoint into its run folder (atomically, one file each), diverged
        members' excepted."""
        if self.run_dirs is None:
            raise ValueError("save() needs the run folders")
        paths = []
        for index, folder in enumerate(self.run_dirs):
            if index in self.diverged:
                continue
            save_checkpoint(self.member_state_dict(index), folder / CHECKPOINT_NAME)
            paths.append(folder / CHECKPOINT_NAME)
        return paths

    def load_member_states(self, states: Sequence[dict]) -> None:
        """Continue from the members' checkpoints (one per member, all of one iteration), each loaded
        by its own trainer's `load_state_dict`; CheckpointError if they do not fit. Envs that can load
        a member's state continue its episodes, bit for bit; others start fresh ones, as a single run's."""
        for index, state in enumerate(states):
            self.member(index).load_state_dict(state)
        first = self.members[0]
        for name in COUNTERS:
            setattr(self, name, getattr(first, name))
        self._gather_copy_state()
        self._gather_adapted()

    @classmethod
    def resume(cls, run_dirs: Sequence[str | Path], make_envs: Callable[[PPOConfig, int], object],
               total_timesteps: int | None = None, progress: bool = True) -> "SeedBatch":
        """Continue a seed batch from its members' folders; `make_envs(config, S)` builds the S·N copies.

        The members must have been saved together by one trainer class (one config but the seed, one
        iteration, the same settings), and none may have diverged; a member that diverged, or was trained
        on alone, is resumed on its own (`ppo.trainers.choice.resume_run`, ppo-train --resume).
        `total_timesteps` changes the budget as for a single run (ppo.trainers.base). On `SeedBatch`
        itself the class is the one the checkpoints name.
        """
        loaded = [PPO.load_run(folder, PPOConfig, required_keys=PPO.REQUIRED_STATE) for folder in run_dirs]
        if not loaded:
            raise ConfigError("a seed batch needs at least one run folder")
        states, configs = [state for state, _ in loaded], [config for _, config in loaded]
        single = cls.single_run if cls is not SeedBatch else _trainer_of(states[0], run_dirs[0])
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
        settings = [single.saved_settings(state, folder) for state, folder in zip(states, run_dirs)]
        if any(member != settings[0] for member in settings):
            raise CheckpointError(f"the runs in {run_dirs[0]} … were trained with different settings {settings}; "
                                  "resume each alone (ppo-train --resume)")
        config = configs[0]
        if total_timesteps is not None:
            config = config.replace(total_timesteps=total_timesteps).validate()
        seeds = [member.seed for member in configs]
        batch = single(config, make_envs(config, len(seeds)), seeds=seeds, run_dirs=run_dirs, progress=progress,
                       **settings[0])
        batch.load_member_states(states)
        return batch


def _trainer_of(state: dict, path) -> type[PPO]:
    """The trainer class a checkpoint's record names (registered classes only)."""
    record = state.get("trainer", {})
    name = record.get("class", "PPO") if isinstance(record, dict) else record
    if name not in TRAINERS:
        raise CheckpointError(f"checkpoint {path} was written by {name!r}; resume it with {name}.resume([...])")
    return TRAINERS[name]
