"""Every setting of a PPO run on a language model, with its default and meaning.

The update's settings (epochs, minibatches, learning rate, clipping, GAE, ...) are the
ones `ppo.config.UpdateConfig` declares for CartPole too, with the same names and
meanings; only some defaults differ here (redeclared below). The task — prompts and
reward — is not a setting of the trainer: the caller passes a `ppo.lm.algorithm.task.CompletionTask`.

Derived sizes:
    minibatch_size = batch_size / num_minibatches      completions per gradient step
    gradient steps per iteration ≤ update_epochs · num_minibatches
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ppo.config import (
    ConfigError,
    NoEffect,
    UpdateConfig,
    require_count,
    require_finite,
    require_non_negative,
    require_one_of,
    require_positive,
)
from ppo.lm.algorithm.kl_penalty import GROUP_NORMALISED_KL_PENALTIES, KL_PENALTIES, REMOVED_ESTIMATORS, default_kl_penalty

KL_CONTROLLERS = ("optimum", "proportional")

CRITIC_KINDS = ("separate", "shared")
ALGORITHMS = ("ppo", "grpo", "rloo")
ADVANTAGE_SCALES = ("auto", "group-std", "batch-std", "none")  # grpo's divisor of R_i − mean_group R (auto: group-std)
LOSS_AVERAGINGS = ("token", "sequence", "constant")  # how a minibatch's per-token loss terms become one number

# Settings that grpo and rloo have no use for, and why; set away from their defaults they are refused
# (RLHFConfig.no_effect).
UNUSED_WITHOUT_CRITIC = {
    "norm_adv": "the group baseline scales Â itself (ppo.lm.trainers.group_trainer)",
    "whiten_rewards": "the group baseline compares whole-sequence rewards R_i, not per-token rewards",
    "critic": "they train no critic",
    "critic_learning_rate": "they train no critic",
    "vf_coef": "they train no critic (no value loss)",
    "value_clip_coef": "they train no critic (no value loss)",
    "gamma": "they compute no GAE: every token of a completion gets its Â_i",
    "gae_lambda": "they compute no GAE: every token of a completion gets its Â_i",
}


@dataclass
class RLHFConfig(UpdateConfig):
    algorithm: str = field(
        default="ppo",
        metadata={"help": "ppo (a critic, token-level GAE), grpo (group-normalised baseline) or rloo "
                  "(leave-one-out baseline); grpo and rloo train no critic (ppo.lm.trainers.group_trainer) and refuse the settings "
                  "they have no use for (norm_adv, whiten_rewards, the critic's and GAE's) away from their defaults"},
    )
    group_size: int = field(
        default=16,
        metadata={"help": "grpo/rloo: completions G sampled per prompt, compared with each other"},
    )
    advantage_scale: str = field(
        default="auto",
        metadata={"help": "grpo only: what divides R_i − mean_group R (ppo.lm.trainers.group_trainer): group-std = std_group R "
                  "+ 1e-6 (as published, Shao et al. 2024; up-weights prompts the policy nearly always or never "
                  "solves), batch-std = the std of R_j − mean_group R_j over the whole batch (one divisor for every "
                  "prompt, as REINFORCE++-baseline, Hu et al. 2025), none = nothing (Dr. GRPO, Liu et al. 2025); "
                  "auto = group-std. ppo and rloo accept only auto (ppo scales Â with norm_adv; rloo's Â is unscaled)"},
    )
    loss_averaging: str = field(
        default="token",
        metadata={"help": "grpo/rloo: how the per-token terms ℓ_it of the policy loss and of a KL loss term become "
                  "one loss over b completions of lengths |y_i| (ppo.lm.trainers.group_trainer): token = Σ_it ℓ_it / Σ_i |y_i| "
                  "(the default, this library's behaviour so far; DAPO, Yu et al. 2025), sequence = (1/b) Σ_i "
                  "(1/|y_i|) Σ_t ℓ_it (published GRPO: a long completion's tokens weigh less), constant = Σ_it ℓ_it "
                  "/ (b · max_new_tokens) (Dr. GRPO). ppo accepts only token: its losses are masked means over "
                  "the minibatch's tokens"},
    )

    # --- rollout sizes --------------------------------------------------------------------------
    iterations: int = field(default=20, metadata={"help": "rollout + update cycles"})
    batch_size: int = field(
        default=128,
        metadata={"help": "completions B per rollout (of the whole run: under torchrun each of K processes "
                  "samples B/K)"},
    )
    max_new_tokens: int = field(
        default=16,
        metadata={"help": "completion length limit in tokens"},
    )
    temperature: float = field(
        default=1.0,
        metadata={"help": "sampling temperature τ; log-probs are recomputed at the same τ"},
    )

    # --- the reward: score at EOS, KL penalty to the reference (SFT) model at every token ---------
    missing_eos_penalty: float = field(
        default=-1.0,
        metadata={"help": "score of a completion that never emitted EOS (replaces the task's reward)"},
    )
    kl_coef: float = field(
        default=0.15,
        metadata={"help": "β of r_t = −β·KL_t (the initial β when adaptive); 0 = no penalty"},
    )
    kl_target: float | None = field(
        default=None,
        metadata={"help": "target mean sequence KL (nats) of the adaptive controller; none = fixed β"},
    )
    kl_controller: str = field(
        default="optimum",
        metadata={
            "help": "how β follows kl_target (ppo/lm/algorithm/kl_control.py): optimum = β solved each iteration so that "
            "the batch's estimate of the KL-regularised optimum has the target KL, pooled over the batches (this "
            "library's own rule, not a published one; its finite-sample bias: the estimate reads low once the policy "
            "is far from π_ref, so β errs small and the KL settles above the target); proportional = "
            "β·(1 + clip(KL/target − 1, ±0.2)·batch_size/H) (Ziegler et al. 2019)"
        },
    )
    kl_horizon: int | None = field(
        default=None,
        metadata={
            "help": "horizon H of the proportional rule, in completions (> batch_size/5); none = "
            "max(batch_size, iterations·batch_size/20), so that β can change by up to a fifth per iteration in a "
            "20-iteration run, and as much in all over any longer run (lm-human-preferences: 10000)"
        },
    )
    kl_penalty: str = field(
        default="auto",
        metadata={"help": "where β·KL goes (ppo/lm/algorithm/kl_penalty.py): reward-k1 = log π − log π_ref in the detached "
                  "reward (gradient of KL(π‖π_ref): the RLHF objective); loss-full = the exact per-state "
                  "KL(π(·|s_t)‖π_ref(·|s_t)) differentiated in the loss, plus the same in the reward to credit the "
                  "moves that lead there (gradient of KL(π‖π_ref) too, noisier near the optimum); loss-k3 = "
                  "k3 differentiated in the loss, as published GRPO (gradient of the reverse KL(π_ref‖π) at each "
                  "visited state: not the objective's KL); auto = reward-k1, or loss-k3 for grpo. k3 and the exact "
                  "KL in the detached reward alone do not regularise and are not offered"},
    )
    whiten_rewards: bool = field(
        default=False,
        metadata={"help": "scale the per-token rewards to unit variance (mean kept); with kl_penalty reward-k1 "
                  "only (a KL term in the loss would keep its scale)"},
    )

    # --- the critic -------------------------------------------------------------------------------
    critic: str = field(
        default="separate",
        metadata={
            "help": "separate (a value model initialised from the SFT weights) or shared (a value head on the"
            " policy's trunk)"
        },
    )
    critic_learning_rate: float = field(
        default=1e-3,
        metadata={"help": "Adam learning rate of a separate critic"},
    )
    sample_every: int = field(
        default=5,
        metadata={"help": "print sample completions every this many iterations; 0 = never"},
    )
    clip_coef_high: float | None = field(
        default=None,
        metadata={"help": "upper clip ε_high of the surrogate: r_t(θ) is clipped to [1 − clip_coef, 1 + ε_high] "
                  "(clip-higher, Yu et al. 2025, DAPO, who use 0.28 with clip_coef 0.2), and the logged "
                  "clip_fraction counts r_t outside that range; none = clip_coef (symmetric)"},
    )

    # --- the update's defaults for a language model (meanings: ppo.config.UpdateConfig) ------------
    # Once one prompt has one answer, whitened advantages would blow the leftover noise up
    # to unit variance: Â stays in reward units (norm_adv off); γ = 1 inside a sentence.
    num_minibatches: int = 2
    learning_rate: float = 3e-4
    max_grad_norm: float | None = 1.0
    target_kl: float | None = 0.02
    vf_coef: float = 0.1
    ent_coef: float = 0.0
    gamma: float = 1.0
    norm_adv: bool = False
    checkpoint_every: int = 5

    # What each setting needs to take effect (ppo.config.ConfigBase.check_effects).
    no_effect = {
        **{name: (NoEffect("algorithm", ("grpo", "rloo"), why),) for name, why in UNUSED_WITHOUT_CRITIC.items()},
        "critic_learning_rate": (NoEffect("algorithm", ("grpo", "rloo"), UNUSED_WITHOUT_CRITIC["critic_learning_rate"]),
                                 NoEffect("critic", ("shared",), "a shared critic is a head on the policy, trained "
                                          "at its learning_rate")),
        "group_size": (NoEffect("algorithm", ("ppo",), "only grpo and rloo sample groups of completions per prompt"),),
        "advantage_scale": (NoEffect("algorithm", ("ppo", "rloo"), "only grpo scales its group advantages (ppo: "
                                     "norm_adv; rloo's Â is unscaled)"),),
        "loss_averaging": (NoEffect("algorithm", ("ppo",), "ppo's losses are masked means over the minibatch's "
                                    "tokens; loss_averaging is for grpo and rloo"),),
        "kl_penalty": (NoEffect("kl_coef", (0.0,), "β = 0 puts no KL term anywhere"),),
        "kl_controller": (NoEffect("kl_target", (None,), "β stays at kl_coef unless kl_target is set"),),
        "kl_horizon": (NoEffect("kl_target", (None,), "β stays at kl_coef unless kl_target is set"),
                       NoEffect("kl_controller", ("optimum",), "only the proportional rule has a horizon")),
    }

    @classmethod
    def from_dict(cls, data: dict) -> RLHFConfig:
        """As UpdateConfig.from_dict; a config written before kl_penalty existed (it named kl_estimator) is upgraded
        when it trained PPO or RLOO with k1 in the reward (now reward-k1), and refused otherwise."""
        if isinstance(data, dict) and "kl_estimator" in data:
            data = dict(data)
            estimator = data.pop("kl_estimator")
            if estimator in REMOVED_ESTIMATORS:
                raise ConfigError(f"kl_estimator = {estimator!r} is no longer offered: "
                                  f"{REMOVED_ESTIMATORS[estimator]}; start a new run with --kl-penalty "
                                  f"({', '.join(KL_PENALTIES)})")
            if data.get("algorithm") == "grpo":
                raise ConfigError("this grpo run kept the KL in the group-normalised reward, which rescales β from "
                                  "group to group; it can no longer be resumed: start a new run (--kl-penalty loss-k3)")
            data.setdefault("kl_penalty", "reward-k1")
        return super().from_dict(data)

    @property
    def effective_kl_penalty(self) -> str:
        """kl_penalty, with auto resolved: reward-k1 for ppo and rloo, loss-k3 for grpo."""
        return default_kl_penalty(self.algorithm) if self.kl_penalty == "auto" else self.kl_penalty

    @property
    def effective_advantage_scale(self) -> str:
        """advantage_scale, with auto resolved: group-std for grpo (as published), none for rloo (and ppo)."""
        if self.advantage_scale != "auto":
            return self.advantage_scale
        return "group-std" if self.algorithm == "grpo" else "none"

    @property
    def adaptive_kl(self) -> bool:
        return self.kl_target is not None

    @property
    def effective_kl_horizon(self) -> int:
        """H = kl_horizon, or by default max(batch_size, iterations · batch_size / 20).

        β ← β·(1 + e·B/H) with |e| ≤ 0.2 moves β by at most 0.2·B/H per iteration; with the
        default H that is 4 / iterations (at most 0.2), so over the whole run β can grow or
        shrink by a factor of about (1 + 4/I)^I ≈ e⁴ ≈ 50 for any run length I ≥ 20: enough to
        reach a KL target from any sensible starting β, while the controller still averages
        over several iterations of noisy KL estimates.
        """
        if self.kl_horizon is not None:
            return self.kl_horizon
        return max(self.batch_size, self.iterations * self.batch_size // 20)

    def validate(self) -> RLHFConfig:
        """Raise ConfigError naming the first impossible value; return self when all is well."""
        self.check_types()
        for name in ("iterations", "batch_size", "max_new_tokens"):
            require_count(name, getattr(self, name))
        if self.kl_horizon is not None:
            require_count("kl_horizon", self.kl_horizon)
            if 5 * self.kl_horizon <= self.batch_size:
                raise ConfigError(f"kl_horizon = {self.kl_horizon} must be more than batch_size / 5 = "
                                  f"{self.batch_size / 5:g}: a shorter horizon lets one step of the proportional rule "
                                  f"β·(1 + e·batch_size/H), e ≥ −0.2, make β negative")
        require_one_of("critic", self.critic, CRITIC_KINDS)
        require_one_of("algorithm", self.algorithm, ALGORITHMS)
        require_one_of("kl_penalty", self.kl_penalty, ("auto", *KL_PENALTIES))
        require_one_of("advantage_scale", self.advantage_scale, ADVANTAGE_SCALES)
        require_one_of("loss_averaging", self.loss_averaging, LOSS_AVERAGINGS)
        require_one_of("kl_controller", self.kl_controller, KL_CONTROLLERS)
        super().validate()  # refuses the settings that cannot take effect (no_effect)
        if self.algorithm != "ppo":
            require_count("group_size", self.group_size, minimum=2)
            if self.batch_size % self.group_size:
                raise ConfigError(f"batch_size = {self.batch_size} is not divisible by group_size = {self.group_size}")
        if self.whiten_rewards and self.effective_kl_penalty != "reward-k1":
            raise ConfigError(f"whiten_rewards rescales the reward but not the KL term of kl_penalty = "
                              f"{self.effective_kl_penalty!r} in the loss, so β would change from batch to batch; "
                              f"whiten only with reward-k1")
        if self.norm_adv and self.effective_kl_penalty != "reward-k1":
            raise ConfigError(f"norm_adv whitens the advantages, which carry the reward's part of the penalty but not "
                              f"the KL term of kl_penalty = {self.effective_kl_penalty!r} in the loss, so β would "
                              f"change from batch to batch; whiten only with reward-k1")
        divisors = {"group-std": ("each group's std", "group to group"), "batch-std": ("the batch's std", "batch to batch")}
        if self.algorithm == "grpo" and self.effective_kl_penalty not in GROUP_NORMALISED_KL_PENALTIES \
                and self.effective_advantage_scale in divisors:
            divisor, between = divisors[self.effective_advantage_scale]
            raise ConfigError(f"kl_penalty = {self.kl_penalty!r} puts KL in the reward, which grpo divides by {divisor}, "
                              f"so β would change from {between}; with grpo use "
                              f"{', '.join(GROUP_NORMALISED_KL_PENALTIES)}, or advantage_scale none")
        require_finite("missing_eos_penalty", self.missing_eos_penalty)
        require_non_negative("kl_coef", self.kl_coef)
        if self.kl_target is not None:
            require_positive("kl_target", self.kl_target)
            if self.kl_coef <= 0:
                raise ConfigError("the adaptive KL controller (kl_target set) needs kl_coef > 0 to start from")
        for name in ("critic_learning_rate", "temperature"):
            require_positive(name, getattr(self, name))
        if self.clip_coef_high is not None:
            require_positive("clip_coef_high", self.clip_coef_high)
        require_count("sample_every", self.sample_every, minimum=0)
        return self
