"""Three relatives of PPO-Clip, each a small subclass of `ppo.trainers.ppo.PPO`.

Two watch d = KL[π_old ‖ π_θ], measured on the whole rollout after each update, and
compare it with a target d_targ:

    d > 1.5 · d_targ   the update moved the policy too far  → be stricter next time
    d < d_targ / 1.5   the update barely moved it           → be looser next time

PPO-Penalty (Schulman et al. 2017) drops the clip and penalises the KL instead:

    L_policy = −E[ r_t(θ) Â_t ] + β · KL[π_old ‖ π_θ]
    stricter: β ← 2β          looser: β ← β / 2

Adaptive clipping keeps PPO-Clip's loss and moves ε instead:

    stricter: ε ← ε / 2       looser: ε ← 2ε        (kept inside [ε_min, ε_max])

Dual-clip PPO (Ye et al. 2020, "Mastering Complex Control in MOBA Games with Deep
Reinforcement Learning") bounds PPO-Clip's objective from below where the advantage is
negative. There min(r Â, clip(r, 1 − ε, 1 + ε) Â) = r Â for every r > 1 + ε, which grows
without bound in −r: a sample whose ratio has run away (an action the new policy likes
far more than the old one did) can dominate the minibatch. With c > 1,

    Â_t ≥ 0:  min( r_t Â_t, clip(r_t, 1 − ε, 1 + ε) Â_t )                  (PPO-Clip's)
    Â_t < 0:  max( min( r_t Â_t, clip(r_t, 1 − ε, 1 + ε) Â_t ),  c · Â_t )

so for Â_t < 0 and r_t > c the objective is the constant c·Â_t, and that sample sends
no gradient (ppo.algorithm.losses.dual_clip_surrogate_objective).

Each class says what it is in one place: its loss (`policy_loss`), its rule
(`after_update`, which a run calls once per update), the numbers the rule changes
(`adapted`: logged every iteration, checkpointed, and per member in a seed batch), its
own settings (`settings`: default, meaning, allowed values; ppo.trainers.settings) and
the metrics.csv columns it adds (`columns`, ppo.runs.metrics_columns).
`register_algorithm` gives it its `ppo-train --algorithm` name. From those alone it
trains one run or a batch of seeds, on feed-forward or recurrent networks, and resumes
with the settings it was started with (ppo.trainers.choice). Inside the loss the KL is
the k3 estimate from the sampled actions (the loss sees only log-probabilities of the
actions taken).
"""

from __future__ import annotations

import torch

from ppo.algorithm.losses import (clipped_surrogate_loss, dual_clip_fraction, dual_clip_surrogate_loss,
                                  kl_estimate)
from ppo.config import ConfigError
from ppo.runs.metrics_columns import MetricsColumn
from ppo.trainers.ppo import PPO
from ppo.trainers.registry import register_algorithm
from ppo.trainers.settings import Setting

KL_TOLERANCE = 1.5  # d counts as "on target" inside [d_targ / 1.5, 1.5 · d_targ]
TOO_FAR, ON_TARGET, TOO_CLOSE = "too far", "on target", "too close"


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
    return clipped_surrogate_loss(new_log_probs, old_log_probs, advantages, float("inf"), mask)


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
def rollout_kl(trainer: PPO, samples: dict[str, torch.Tensor] | None = None) -> float:
    """k3 estimate of KL[π_old ‖ π_θ] over every sample of a trainer's rollout (any PPO trainer).

    π_old's log-probs are the stored ones, π_θ is the network now (after an update, the policy
    that update produced), read under the stored action masks, a recurrent one replayed through
    the stored sequences. `samples`: the rollout as `update_samples` lays it out (by default,
    the trainer's buffer now). With several processes, the mean over their equal shares, so
    every process adapts alike.
    """
    if samples is None:
        unused = torch.zeros_like(trainer.buffer.values)  # the KL reads no advantages or returns
        samples = trainer.update_samples(unused, unused)
    new_log_probs, _, _, transitions = trainer.evaluate_samples(samples)
    return trainer.world.mean_of(float(kl_estimate(new_log_probs - transitions["log_probs"], "k3")))


KL_TARGET = Setting(0.01, "the KL d_targ the rule adapts toward (not --target-kl, PPO-Clip's early stop)")


class KLAdaptivePPO(PPO):
    """PPO that measures KL[π_old ‖ π_θ] on the rollout after each update and adapts.

    Subclasses say what to adapt in `adapt(kl)` and name it in `adapted`. `kl_target` is
    d_targ; it is separate from `config.target_kl`, the early-stopping threshold of the
    plain trainer (leave that one off for these variants).
    """

    settings = {"kl_target": KL_TARGET}
    columns = (MetricsColumn("kl_after_update", "The k3 estimate of KL(π_old ‖ π_θ) over every sample of the rollout, "
                             "with θ after the update: what β or ε is adapted on.", "nats",
                             "in [d_targ / 1.5, 1.5·d_targ], where β or ε stays as it is"),)

    def after_update(self, samples: dict[str, torch.Tensor]) -> dict[str, float]:
        metrics = super().after_update(samples)
        kl = self.rollout_kl(samples)
        metrics["kl_after_update"] = kl
        self.adapt(kl)
        return metrics

    def rollout_kl(self, samples: dict[str, torch.Tensor]) -> float:
        """KL[π_old ‖ π_θ] over the rollout's samples, after the update (`rollout_kl`)."""
        return rollout_kl(self, samples)

    def adapt(self, kl: float) -> None:
        raise NotImplementedError


@register_algorithm("penalty", "PPO-Penalty: the unclipped surrogate minus β·KL, with β adapted after each update")
class PPOPenalty(KLAdaptivePPO):
    """PPO-Penalty: the unclipped surrogate plus β · KL, with β adapted after each update."""

    settings = {**KLAdaptivePPO.settings, "initial_beta": Setting(1.0, "β of the first update")}
    adapted = ("beta",)
    columns = (MetricsColumn("beta", "β, the KL coefficient of this update's loss; after it, doubled when "
                             "kl_after_update > 1.5·d_targ and halved when it is below d_targ / 1.5 (d_targ: "
                             "`kl_target`).", "> 0"),)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.beta = self.initial_beta  # adapted after every update; a checkpoint keeps where it stands

    def policy_loss(self, new_log_probs, old_log_probs, advantages):
        return kl_penalty_loss(new_log_probs, old_log_probs, advantages, self.beta)

    def adapt(self, kl: float) -> None:
        self.beta = update_kl_coefficient(self.beta, kl, self.kl_target)


@register_algorithm("adaptive-clip", "PPO-Clip whose ε is halved or doubled after each update to keep the KL "
                    "near --kl-target")
class AdaptiveClipPPO(KLAdaptivePPO):
    """PPO-Clip whose ε is halved or doubled after each update to keep the KL near target.

    Only the policy's ε adapts; value clipping keeps `config.value_clip_coef`.
    """

    settings = {**KLAdaptivePPO.settings, "min_clip": Setting(0.02, "the smallest ε", below=1.0),
                "max_clip": Setting(0.5, "the largest ε", below=1.0)}
    adapted = ("clip_coef",)
    columns = (MetricsColumn("clip_coef", "ε of this update's clipped surrogate; after it, halved when "
                             "kl_after_update > 1.5·d_targ and doubled when it is below d_targ / 1.5, within "
                             "[min_clip, max_clip].", "(0, 1)"),)

    @classmethod
    def check_settings(cls, given):
        values = super().check_settings(given)
        if values["min_clip"] > values["max_clip"]:
            raise ConfigError(f"clip bounds [{values['min_clip']}, {values['max_clip']}] must satisfy "
                              "0 < min_clip ≤ max_clip < 1")
        return values

    def adapt(self, kl: float) -> None:
        self.clip_coef = update_clip_coefficient(self.clip_coef, kl, self.kl_target, self.min_clip, self.max_clip)


@register_algorithm("dual-clip", "PPO-Clip whose objective is bounded below by c·Â where Â < 0 (Ye et al. 2020)")
class DualClipPPO(PPO):
    """Dual-clip PPO: PPO-Clip's objective, held at c·Â_t where Â_t < 0 and r_t(θ) > c (module docstring)."""

    settings = {"dual_clip": Setting(3.0, "c of the lower bound c·Â for Â < 0 (Ye et al. 2020 use 3)", above=1.0)}
    columns = (MetricsColumn("dual_clip_fraction", "Share of samples whose objective is held at the dual-clip "
                             "bound c·Â_t, E[1{Â_t < 0 and r_t(θ) > c}], over the minibatches visited.", "[0, 1]"),)

    def policy_loss(self, new_log_probs, old_log_probs, advantages):
        return dual_clip_surrogate_loss(new_log_probs, old_log_probs, advantages, self.clip_coef, self.dual_clip)

    def policy_diagnostics(self, new_log_probs, old_log_probs, advantages):
        return {"dual_clip_fraction": dual_clip_fraction(new_log_probs.detach(), old_log_probs, advantages,
                                                         self.dual_clip)}
