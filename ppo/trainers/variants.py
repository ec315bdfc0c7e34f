"""Two relatives of PPO-Clip, each a small subclass of `ppo.trainers.ppo.PPO`.

Both watch d = KL[π_old ‖ π_θ], measured on the whole rollout after each update, and
compare it with a target d_targ:

    d > 1.5 · d_targ   the update moved the policy too far  → be stricter next time
    d < d_targ / 1.5   the update barely moved it           → be looser next time

PPO-Penalty (Schulman et al. 2017) drops the clip and penalises the KL instead:

    L_policy = −E[ r_t(θ) Â_t ] + β · KL[π_old ‖ π_θ]
    stricter: β ← 2β          looser: β ← β / 2

Adaptive clipping keeps PPO-Clip's loss and moves ε instead:

    stricter: ε ← ε / 2       looser: ε ← 2ε        (kept inside [ε_min, ε_max])

The surrogate and the KL estimate come from `ppo.algorithm.losses`; only the feedback rule and
the penalised loss are new here. Inside the loss the KL is the k3 estimate from the
sampled actions (the loss sees only log-probabilities of the actions taken).

A variant's own settings (d_targ, the initial β, the bounds on ε) go into its checkpoint
and its run folder's config.json, so `PPOPenalty.resume(run_dir, make_envs)` continues
with the settings the run was started with, and the adapted β or ε where it stood.

Each variant also trains a batch of seeds (`SeedBatchPenalty`, `SeedBatchAdaptiveClip`:
`ppo.trainers.seed_batch.SeedBatchPPO` with the variant's loss and rule): every member
measures its own KL after the update and adapts its own β or ε, as its single run does,
and its folder is that run's (`PPOPenalty.resume` or `ppo-train --resume` continues it).
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

from ppo.config import ConfigError, PPOConfig
from ppo.parallel.distributed import SINGLE_PROCESS, World
from ppo.algorithm.losses import clipped_surrogate_loss, kl_estimate, kl_per_sample
from ppo.trainers.ppo import PPO
from ppo.trainers.seed_batch import SeedBatchPPO
from ppo.vec_env import VecEnv

KL_TOLERANCE = 1.5  # d counts as "on target" inside [d_targ / 1.5, 1.5 · d_targ]
TOO_FAR, ON_TARGET, TOO_CLOSE = "too far", "on target", "too close"


def check_variant_settings(**settings: float) -> None:
    """ConfigError (one line) for an impossible setting of a variant: kl_target and initial_beta
    finite and > 0; 0 < min_clip ≤ max_clip < 1 (the two are given together: a bound alone is checked
    against the other's default by `ppo.trainers.choice.check_settings`)."""
    for name in ("kl_target", "initial_beta"):
        value = settings.get(name)
        if value is not None and not (value > 0 and math.isfinite(value)):
            raise ConfigError(f"{name} = {value} must be a finite number > 0")
    if "min_clip" in settings or "max_clip" in settings:
        low, high = settings["min_clip"], settings["max_clip"]
        if not (0 < low <= high < 1):
            raise ConfigError(f"clip bounds [{low}, {high}] must satisfy 0 < min_clip ≤ max_clip < 1")


def kl_feedback(kl: float, kl_target: float, tolerance: float = KL_TOLERANCE) -> str:
    """TOO_FAR if kl > tolerance · target, TOO_CLOSE if kl < target / tolerance, else ON_TARGET."""
    if kl > tolerance * kl_target:
        return TOO_FAR
    if kl < kl_target / tolerance:
        return TOO_CLOSE
    return ON_TARGET


def update_kl_coefficient(beta: float, kl: float, kl_target: float) -> float:
    """PPO-Penalty's rule: β ← 2β when the KL overshot, β ← β/2 when it undershot."""
    feedback = kl_feedback(kl, kl_target)
    if feedback == TOO_FAR:
        return beta * 2.0
    if feedback == TOO_CLOSE:
        return beta / 2.0
    return beta


def update_clip_coefficient(
    clip_coef: float, kl: float, kl_target: float, min_clip: float = 0.02, max_clip: float = 0.5
) -> float:
    """Adaptive clipping: ε ← ε/2 when the KL overshot, ε ← 2ε when it undershot, within bounds."""
    feedback = kl_feedback(kl, kl_target)
    if feedback == TOO_FAR:
        clip_coef = clip_coef / 2.0
    elif feedback == TOO_CLOSE:
        clip_coef = clip_coef * 2.0
    return min(max(clip_coef, min_clip), max_clip)


def unclipped_surrogate_loss(
    new_log_probs: torch.Tensor, old_log_probs: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """−E[ r_t(θ) Â_t ]: the clipped surrogate with ε = ∞ (clip(r, −∞, ∞) = r)."""
    return clipped_surrogate_loss(new_log_probs, old_log_probs, advantages, math.inf, mask)


def kl_penalty_loss(
    new_log_probs: torch.Tensor,
    old_log_probs: torch.Tensor,
    advantages: torch.Tensor,
    beta: float,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """PPO-Penalty's L_policy = −E[ r_t(θ) Â_t ] + β · KL[π_old ‖ π_θ], the KL by k3.

    The actions were sampled from π_old, so log ρ = log π_θ(a) − log π_old(a) is the log
    ratio `kl_estimate` expects for KL(π_old ‖ π_θ).
    """
    surrogate = unclipped_surrogate_loss(new_log_probs, old_log_probs, advantages, mask)
    return surrogate + beta * kl_estimate(new_log_probs - old_log_probs, "k3", mask)


@torch.no_grad()
def rollout_kl(trainer: PPO) -> float:
    """k3 estimate of KL[π_old ‖ π_θ] over every sample of the trainer's current rollout.

    Works for any feed-forward `PPO`: π_old's log-probs are the ones stored in the buffer, π_θ
    is the model now (after an update, the policy that update produced), read under the action
    masks the actions were drawn with. With several processes, the mean over all of their
    equal shares, so every process adapts alike.
    """
    buffer = trainer.buffer
    batch = buffer.log_probs.numel()  # this process's share of the rollout, T·N/K samples
    obs = buffer.obs.reshape(batch, *buffer.obs.shape[2:])
    actions = buffer.actions.reshape(batch, *buffer.actions.shape[2:])
    masks = None if buffer.action_masks is None else buffer.action_masks.reshape(batch, -1)
    new_log_probs, _, _ = trainer.model.evaluate_actions(obs, actions, masks)
    return trainer.world.mean_of(float(kl_estimate(new_log_probs - buffer.log_probs.reshape(batch), "k3")))


class KLAdaptivePPO(PPO):
    """PPO that measures KL[π_old ‖ π_θ] on the rollout after each update and adapts.

    Subclasses say what to adapt in `adapt(kl)` and what to log in `adapted_values()`.
    `kl_target` is d_targ; it is separate from `config.target_kl`, the early-stopping
    threshold of the plain trainer (leave that one off for these variants).
    """

    settings_names = ("kl_target",)

    def __init__(
        self,
        config: PPOConfig,
        envs: VecEnv,
        run_dir: str | Path | None = None,
        progress: bool = True,
        kl_target: float = 0.01,
        world: World = SINGLE_PROCESS,
    ):
        check_variant_settings(kl_target=kl_target)
        super().__init__(config, envs, run_dir, progress, world)
        self.kl_target = float(kl_target)

    def rollout_kl(self) -> float:
        return rollout_kl(self)

    def update(self, advantages: torch.Tensor, returns: torch.Tensor) -> dict[str, float]:
        metrics = super().update(advantages, returns)
        kl = self.rollout_kl()
        metrics.update(self.adapted_values())  # the values this update used
        metrics["kl_after_update"] = kl
        self.adapt(kl)
        return metrics

    def adapt(self, kl: float) -> None:
        raise NotImplementedError

    def adapted_values(self) -> dict[str, float]:
        raise NotImplementedError

    def state_dict(self) -> dict:
        return {**super().state_dict(), "adapted": self.adapted_values()}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        adapted = state.get("adapted", {})
        for name in self.adapted_values():
            if name in adapted:
                setattr(self, name, float(adapted[name]))


class PPOPenalty(KLAdaptivePPO):
    """PPO-Penalty: the unclipped surrogate plus β · KL, with β adapted after each update."""

    settings_names = ("kl_target", "initial_beta")

    def __init__(self, config: PPOConfig, envs: VecEnv, run_dir=None, progress=True, kl_target=0.01, initial_beta=1.0,
                 world: World = SINGLE_PROCESS):
        check_variant_settings(initial_beta=initial_beta)
        super().__init__(config, envs, run_dir, progress, kl_target, world)
        self.initial_beta = float(initial_beta)
        self.beta = self.initial_beta  # adapted after every update; a checkpoint keeps where it stands

    def policy_loss(self, new_log_probs, old_log_probs, advantages):
        return kl_penalty_loss(new_log_probs, old_log_probs, advantages, self.beta)

    def adapt(self, kl: float) -> None:
        self.beta = update_kl_coefficient(self.beta, kl, self.kl_target)

    def adapted_values(self) -> dict[str, float]:
        return {"beta": self.beta}


class AdaptiveClipPPO(KLAdaptivePPO):
    """PPO-Clip whose ε is halved or doubled after each update to keep the KL near target.

    Only the policy's ε adapts; value clipping keeps `config.value_clip_coef`.
    """

    settings_names = ("kl_target", "min_clip", "max_clip")

    def __init__(self, config: PPOConfig, envs: VecEnv, run_dir=None, progress=True, kl_target=0.01,
                 min_clip: float = 0.02, max_clip: float = 0.5, world: World = SINGLE_PROCESS):
        check_variant_settings(min_clip=min_clip, max_clip=max_clip)
        super().__init__(config, envs, run_dir, progress, kl_target, world)
        self.min_clip, self.max_clip = float(min_clip), float(max_clip)

    def adapt(self, kl: float) -> None:
        self.clip_coef = update_clip_coefficient(self.clip_coef, kl, self.kl_target, self.min_clip, self.max_clip)

    def adapted_values(self) -> dict[str, float]:
        return {"clip_coef": self.clip_coef}


class KLAdaptiveSeedBatch(SeedBatchPPO):
    """A seed batch of a KL-adaptive variant: after each update, member s measures KL[π_old ‖ π_θ]
    on its own rollout (k3, as `rollout_kl`) and adapts its own coefficient (`adapted[s]`)."""

    settings_names = ("kl_target",)
    single_run: type[KLAdaptivePPO]  # the variant each member is a run of (its checkpoint's class)
    adapted_name: str  # "beta" or "clip_coef": what the rule adapts

    def __init__(self, config: PPOConfig, seeds, envs, run_dirs=None, progress: bool = True, kl_target: float = 0.01):
        check_variant_settings(kl_target=kl_target)
        super().__init__(config, seeds, envs, run_dirs, progress)
        self.kl_target = float(kl_target)
        self.adapted: list[float] = [self.initial_value()] * self.num_members

    def initial_value(self) -> float:
        raise NotImplementedError

    def adapt(self, value: float, kl: float) -> float:
        raise NotImplementedError

    def minibatch_loss(self, minibatch):
        """Each member's loss with its own coefficient, which `member_policy_loss` reads as minibatch["adapted"]."""
        adapted = torch.tensor(self.adapted, dtype=torch.float32, device=self.device)
        return super().minibatch_loss({**minibatch, "adapted": adapted})

    @torch.no_grad()
    def rollout_kls(self) -> list[float]:
        """Per member, the k3 estimate of KL[π_old ‖ π_θ] over every sample of its rollout."""
        samples = self.member_samples()
        new_log_probs, _, _ = self.model.evaluate_actions(samples["obs"], samples["actions"],
                                                          samples.get("action_masks"))
        return kl_per_sample(new_log_probs - samples["log_probs"], "k3").mean(dim=1).tolist()

    def update(self, advantages: torch.Tensor, returns: torch.Tensor) -> list[dict[str, float]]:
        rows = super().update(advantages, returns)
        for member, (row, kl) in enumerate(zip(rows, self.rollout_kls())):
            row[self.adapted_name] = self.adapted[member]  # the value this update used
            row["kl_after_update"] = kl
            if member not in self.diverged:
                self.adapted[member] = self.adapt(self.adapted[member], kl)
        return rows

    def member_state_dict(self, member: int) -> dict:
        return {**super().member_state_dict(member), "adapted": {self.adapted_name: self.adapted[member]}}

    def load_member_states(self, states) -> None:
        super().load_member_states(states)
        for member, state in enumerate(states):
            saved = state.get("adapted", {})
            if self.adapted_name in saved:
                self.adapted[member] = float(saved[self.adapted_name])


class SeedBatchPenalty(KLAdaptiveSeedBatch):
    """PPO-Penalty for a batch of seeds: each member's β adapted by its own KL."""

    settings_names = ("kl_target", "initial_beta")
    single_run = PPOPenalty
    adapted_name = "beta"

    def __init__(self, config: PPOConfig, seeds, envs, run_dirs=None, progress: bool = True, kl_target: float = 0.01,
                 initial_beta: float = 1.0):
        check_variant_settings(initial_beta=initial_beta)
        self.initial_beta = float(initial_beta)
        super().__init__(config, seeds, envs, run_dirs, progress, kl_target)

    def initial_value(self) -> float:
        return self.initial_beta

    def member_policy_loss(self, new_log_probs, old_log_probs, advantages, minibatch):
        return kl_penalty_loss(new_log_probs, old_log_probs, advantages, minibatch["adapted"])

    def adapt(self, value: float, kl: float) -> float:
        return update_kl_coefficient(value, kl, self.kl_target)


class SeedBatchAdaptiveClip(KLAdaptiveSeedBatch):
    """Adaptive clipping for a batch of seeds: each member's ε halved or doubled by its own KL."""

    settings_names = ("kl_target", "min_clip", "max_clip")
    single_run = AdaptiveClipPPO
    adapted_name = "clip_coef"

    def __init__(self, config: PPOConfig, seeds, envs, run_dirs=None, progress: bool = True, kl_target: float = 0.01,
                 min_clip: float = 0.02, max_clip: float = 0.5):
        check_variant_settings(min_clip=min_clip, max_clip=max_clip)
        self.min_clip, self.max_clip = float(min_clip), float(max_clip)
        super().__init__(config, seeds, envs, run_dirs, progress, kl_target)

    def initial_value(self) -> float:
        return self.config.clip_coef

    def member_policy_loss(self, new_log_probs, old_log_probs, advantages, minibatch):
        return clipped_surrogate_loss(new_log_probs, old_log_probs, advantages, minibatch["adapted"])

    def member_clip_coefs(self) -> torch.Tensor:
        return torch.tensor(self.adapted, device=self.device).unsqueeze(1)  # (S, 1) against (…, S, b)

    def adapt(self, value: float, kl: float) -> float:
        return update_clip_coefficient(value, kl, self.kl_target, self.min_clip, self.max_clip)
