"""PPO on a language model with a KL penalty to the reference: the same core as CartPole.

    policy π_θ ← copy of the SFT model;  π_ref ← the SFT model, frozen;  critic V
    for iteration = 1 .. iterations:
        sample B completions y ~ π_old(· | x) at temperature τ          (ppo.lm.rollout)
        log π_old(y_t|s_t), log π_ref(y_t|s_t), V(s_t) for every token, masked after EOS
        r_t = −β·KL_t + score(y)·1{t = EOS}                              (ppo.lm.rewards)
        Â_t, R_t ← GAE(γ, λ) along the token axis                        (ppo.advantages)
        optionally whiten Â over the real tokens of the batch            (ppo.losses)
        for epoch = 1 .. K, for each shuffled minibatch of completions:
            recompute log π_θ(y_t|s_t) (logits / τ), H[π_θ], V(s_t)
            stop the update if approx KL(π_old ‖ π_θ) > target_kl
            L = L_policy(r_t(θ), Â_t, ε) − c_e·H + c_v·L_value(clipped)    (ppo.losses)
            one Adam step, gradient norm clipped
        β ← KL controller(mean sequence KL)                               (ppo.kl_control)

Advantages along tokens: the episode of completion i is its n_i tokens; the last real
token (EOS) is terminal, so δ_{n−1} = r_{n−1} − V(s_{n−1}) and nothing is bootstrapped past it.
Every tensor is zero after EOS, so the padding adds nothing to GAE or to a loss.

Two defaults differ from CartPole's, both because one prompt soon has one answer. Once
nearly every completion is "pizza", whitened advantages would blow the leftover noise
up to unit variance, so Â is left in reward units (`norm_adv` off). And a rare malformed
sample ("pizzza") carries a large negative advantage whose update also lowers the
shared "z" of the good completions, whose Â ≈ 0 does not defend them: a minibatch
whose approx KL to π_old exceeds `target_kl` ends the update before that happens.

Dropout is off throughout (the models are built with dropout 0 and kept in eval mode): with
dropout on, the recomputed log-probs would differ from the rollout's even before any update.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm import tqdm

from envs.token_task import is_well_formed, target_food_score, task_prompts
from ppo.advantages import compute_gae
from ppo.checkpoint import save_checkpoint
from ppo.config import ConfigError
from ppo.kl_control import AdaptiveKLController, FixedKLController
from ppo.lm.model import GPT
from ppo.lm.rewards import SequenceScorer, TokenRewards, assemble_rewards, per_token_kl, rule_scorer
from ppo.lm.rlhf_config import RLHFConfig
from ppo.lm.rollout import CompletionBatch, Rollout, collect_rollout, repeat_prompts, score_completions
from ppo.lm.tokenizer import CharTokenizer
from ppo.logger import MetricsLogger
from ppo.losses import (
    clip_fraction,
    clipped_surrogate_loss,
    entropy_bonus,
    explained_variance,
    kl_estimate,
    masked_mean,
    normalize_advantages,
    value_loss,
)

def copy_with_value_head(model: GPT, value_head: bool) -> GPT:
    """A copy of `model` with dropout 0, in eval mode, with (a zero-initialised) value head or without."""
    config = dataclasses.replace(model.config, value_head=value_head, dropout=0.0)
    clone = GPT(config)
    state = {k: v for k, v in model.state_dict().items() if not k.startswith("value_head.")}
    missing, unexpected = clone.load_state_dict(state, strict=False)
    assert not unexpected and all(k.startswith("value_head.") for k in missing), (missing, unexpected)
    return clone.eval()


def token_advantages(
    rewards: torch.Tensor,  # (B, T) r_t, zero after EOS
    values: torch.Tensor,  # (B, T) V(s_t), zero after EOS
    mask: torch.Tensor,  # (B, T) bool
    gamma: float,
    gae_lambda: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Â_t and R_t = Â_t + V(s_t), (B, T), from ppo.advantages.compute_gae over the token axis.

    The tensors are transposed to the core's (T, N) layout; `terminated` marks each
    completion's last real token, and V(s_{t+1}) is the next position's value (0 after EOS).
    """
    rewards_tn, values_tn, mask_tn = rewards.T, values.T, mask.T  # (T, B)
    next_values = torch.cat([values_tn[1:], torch.zeros_like(values_tn[:1])], dim=0)  # (T, B)
    next_is_real = torch.cat([mask_tn[1:], torch.zeros_like(mask_tn[:1])], dim=0)  # (T, B)
    terminated = mask_tn & ~next_is_real  # (T, B): the last real token
    advantages, returns = compute_gae(rewards_tn, values_tn, next_values, terminated, terminated, gamma, gae_lambda)
    real = mask.to(rewards.dtype)
    return advantages.T * real, returns.T * real


def whiten_keep_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Scale x to unit variance over the masked positions without shifting its mean (lm-human-preferences)."""
    mean = masked_mean(x, mask)
    return (normalize_advantages(x, mask) + mean) * mask.to(x.dtype)


@dataclass
class MinibatchResult:
    loss: torch.Tensor
    policy_loss: torch.Tensor
    value_loss: torch.Tensor
    entropy: torch.Tensor
    log_ratio: torch.Tensor  # (b, T) log r_t(θ), zero after EOS
    approx_kl: torch.Tensor
    clip_fraction: torch.Tensor
    value_clip_fraction: torch.Tensor


class RLHFTrainer:
    """PPO of a copy of `reference` against a sequence scorer, with a KL penalty to `reference`."""

    def __init__(self, config: RLHFConfig, reference: GPT, tokenizer: CharTokenizer,
                 scorer: SequenceScorer | None = None, run_dir: str | Path | None = None, progress: bool = True):
        self.config = config.validate()
        torch.manual_seed(config.seed)
        self.tokenizer = tokenizer
        self.reference = copy_with_value_head(reference, value_head=False).requires_grad_(False)
        shared = config.critic == "shared"
        self.policy = copy_with_value_head(reference, value_head=shared)
        self.critic = None if shared else copy_with_value_head(reference, value_head=True)
        self.scorer = scorer or rule_scorer(target_food_score(config.target_food, config.score))
        self.prompts = repeat_prompts(task_prompts(config.person, config.relation), config.batch_size)
        room = reference.config.block_size - max(len(tokenizer.encode(p)) for p in self.prompts)
        if config.max_new_tokens > room:
            raise ConfigError(f"max_new_tokens = {config.max_new_tokens} does not fit: the model has room for {room} "
                             f"tokens after the longest prompt")

        groups = [{"params": list(self.policy.parameters()), "lr": config.learning_rate}]
        if self.critic is not None:
            groups.append({"params": list(self.critic.parameters()), "lr": config.critic_learning_rate})
        self.optimizer = torch.optim.Adam(groups, eps=1e-5)
        self.initial_lrs = [group["lr"] for group in groups]
        self.kl_controller = (AdaptiveKLController(config.kl_coef, config.kl_target, config.kl_horizon)
                              if config.adaptive_kl else FixedKLController(config.kl_coef))
        self.generator = torch.Generator().manual_seed(config.seed)
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.logger = (MetricsLogger(self.run_dir, tensorboard=config.tensorboard, progress=progress,
                                     total_steps=config.iterations * config.batch_size)
                       if self.run_dir is not None else None)
        self.iteration = 0
        self.train_seconds = 0.0
        self.history: list[dict] = []

    @property
    def value_model(self) -> GPT:
        """The model whose value head is the critic: the separate critic, or the policy itself."""
        return self.policy if self.critic is None else self.critic

    # ------------------------------------------------------------------ one iteration, step by step

    def collect(self) -> Rollout:
        return collect_rollout(self.policy, self.reference, self.critic, self.tokenizer, self.prompts,
                               self.config.max_new_tokens, self.config.temperature, self.generator)

    def rewards(self, rollout: Rollout) -> TokenRewards:
        scores = self.scorer(rollout.batch)  # (B,)
        return assemble_rewards(scores, rollout.batch.ended_with_eos, rollout.log_probs, rollout.reference_log_probs,
                                rollout.batch.mask, self.kl_controller.beta, self.config.kl_estimator,
                                self.config.missing_eos_penalty)

    def advantages(self, rollout: Rollout, token_rewards: TokenRewards) -> tuple[torch.Tensor, torch.Tensor]:
        """(Â, R), both (B, T) and zero after EOS; Â whitened over the real tokens if norm_adv."""
        mask = rollout.batch.mask
        rewards = token_rewards.rewards
        if self.config.whiten_rewards:
            rewards = whiten_keep_mean(rewards, mask)
        advantages, returns = token_advantages(rewards, rollout.values, mask, self.config.gamma, self.config.gae_lambda)
        if self.config.norm_adv:
            advantages = normalize_advantages(advantages, mask)
        return advantages, returns

    def minibatch_loss(self, rollout: Rollout, rows: torch.Tensor, advantages: torch.Tensor,
                       returns: torch.Tensor) -> MinibatchResult:
        """The PPO loss of the completions `rows`, with everything recomputed at temperature τ."""
        config = self.config
        batch = rollout.batch.select(rows)
        mask = batch.mask  # (b, T)
        scored = score_completions(self.policy, batch, config.temperature, with_entropy=True, with_values=True,
                                   critic=self.critic)
        old_log_probs, old_values = rollout.log_probs[rows], rollout.values[rows]  # (b, T)
        policy_loss = clipped_surrogate_loss(scored.log_probs, old_log_probs, advantages[rows], config.clip_coef, mask)
        critic_loss = value_loss(scored.values, old_values, returns[rows], config.value_clip_coef, mask)
        entropy = entropy_bonus(scored.entropy, mask)
        loss = policy_loss - config.ent_coef * entropy + config.vf_coef * critic_loss
        with torch.no_grad():
            log_ratio = (scored.log_probs - old_log_probs) * mask
            value_clip = config.value_clip_coef if config.value_clip_coef is not None else float("inf")
            value_clipped = ((scored.values - old_values).abs() > value_clip).float()
            return MinibatchResult(
                loss=loss, policy_loss=policy_loss.detach(), value_loss=critic_loss.detach(), entropy=entropy.detach(),
                log_ratio=log_ratio, approx_kl=kl_estimate(log_ratio, "k3", mask),
                clip_fraction=clip_fraction(scored.log_probs, old_log_probs, config.clip_coef, mask),
                value_clip_fraction=masked_mean(value_clipped, mask),
            )

    def update(self, rollout: Rollout, advantages: torch.Tensor, returns: torch.Tensor) -> dict[str, float]:
        """K epochs of shuffled minibatches of completions; returns the mean diagnostics."""
        config = self.config
        totals = Counter()
        steps = 0
        for _ in range(config.update_epochs):
            order = torch.randperm(config.batch_size, generator=self.generator)
            for start in range(0, config.batch_size, config.minibatch_size):
                result = self.minibatch_loss(rollout, order[start : start + config.minibatch_size], advantages, returns)
                for name in ("policy_loss", "value_loss", "approx_kl", "clip_fraction", "value_clip_fraction"):
                    totals[name] += float(getattr(result, name))
                steps += 1
                if config.target_kl is not None and float(result.approx_kl) > config.target_kl:
                    return self._update_summary(totals, steps, early_stopped=True)
                self.optimizer.zero_grad(set_to_none=True)
                result.loss.backward()
                torch.nn.utils.clip_grad_norm_(self.policy.parameters(), config.max_grad_norm)
                if self.critic is not None:
                    torch.nn.utils.clip_grad_norm_(self.critic.parameters(), config.max_grad_norm)
                self.optimizer.step()
        return self._update_summary(totals, steps, early_stopped=False)

    @staticmethod
    def _update_summary(totals: Counter, steps: int, early_stopped: bool) -> dict[str, float]:
        return {**{name: total / steps for name, total in totals.items()}, "gradient_steps": float(steps - early_stopped),
                "early_stopped": float(early_stopped)}

    def train_iteration(self) -> dict[str, float]:
        config = self.config
        started = time.perf_counter()
        if config.anneal_lr:
            fraction = 1.0 - self.iteration / config.iterations
            for group, initial in zip(self.optimizer.param_groups, self.initial_lrs):
                group["lr"] = initial * fraction
        beta = self.kl_controller.beta
        rollout = self.collect()
        token_rewards = self.rewards(rollout)
        advantages, returns = self.advantages(rollout, token_rewards)
        update_stats = self.update(rollout, advantages, returns)
        mean_kl = float(token_rewards.sequence_kl.mean())
        self.kl_controller.update(mean_kl, config.batch_size)
        seconds = time.perf_counter() - started
        self.train_seconds += seconds
        self.iteration += 1

        batch, mask = rollout.batch, rollout.batch.mask
        well_formed = [is_well_formed(text, bool(eos)) for text, eos in zip(batch.texts, batch.ended_with_eos)]
        non_score = (-beta * token_rewards.kl).sum(dim=1)  # (B,)
        metrics = {
            "score": float(token_rewards.scores.mean()),
            "non_score_reward": float(non_score.mean()),
            "total_reward": float((token_rewards.scores + non_score).mean()),
            "sequence_kl": mean_kl,
            "sequence_kl_k3": float(per_token_kl(rollout.log_probs, rollout.reference_log_probs, mask, "k3").sum(1).mean()),
            "entropy": float(masked_mean(rollout.entropy, mask)),
            **update_stats,
            "explained_variance": explained_variance(rollout.values, returns, mask),
            "beta": beta,
            "target_rate": sum(ok and text == config.target_food for text, ok in zip(batch.texts, well_formed)) / len(batch),
            "well_formed_rate": sum(well_formed) / len(batch),
            "eos_rate": float(batch.ended_with_eos.float().mean()),
            "completion_length": float(mask.sum(1).float().mean()),
            "learning_rate": self.optimizer.param_groups[0]["lr"],
            "completions_per_second": config.batch_size / seconds,
        }
        self.history.append(metrics)
        if self.logger is not None:
            step = self.iteration * config.batch_size
            self.logger.log(step, metrics)
            self.logger.progress(step, f"score {metrics['score']:.2f} KL {mean_kl:.2f} "
                                       f"{config.target_food} {metrics['target_rate']:.0%}")
        if config.sample_every and self.iteration % config.sample_every == 0:
            self._print_samples(batch)
        return metrics

    def train(self) -> dict[str, float]:
        metrics: dict[str, float] = {}
        while self.iteration < self.config.iterations:
            metrics = self.train_iteration()
        if self.run_dir is not None:
            self.save()
        return metrics

    # ------------------------------------------------------------------ bookkeeping

    def _print_samples(self, batch: CompletionBatch) -> None:
        counts = Counter(f"{prompt}{text}{'⏎' if eos else '…'}"
                         for prompt, text, eos in zip(batch.prompts, batch.texts, batch.ended_with_eos))
        shown = ", ".join(f"{text!r}×{count}" for text, count in counts.most_common(6))
        tqdm.write(f"[iteration {self.iteration}] {shown}")  # above the progress bar, if there is one

    def state(self) -> dict:
        return {
            "config": self.config.to_dict(),
            "gpt_config": dataclasses.asdict(self.reference.config),
            "tokenizer": self.tokenizer.state_dict(),
            "reference": self.reference.state_dict(),
            "policy": self.policy.state_dict(),
            "critic": None if self.critic is None else self.critic.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "beta": self.kl_controller.beta,
            "iteration": self.iteration,
            "train_seconds": self.train_seconds,
        }

    def save(self, path: str | Path | None = None) -> Path:
        """Atomic checkpoint (ppo.checkpoint), loadable with weights_only=True."""
        path = Path(path) if path is not None else self.run_dir / "checkpoint.pt"
        save_checkpoint(self.state(), path)
        return path

    def close(self) -> None:
        if self.logger is not None:
            self.logger.close()


def load_policy(checkpoint: dict) -> tuple[GPT, GPT, CharTokenizer]:
    """(policy, reference, tokenizer) from a checkpoint dict written by RLHFTrainer.save."""
    from ppo.lm.model import GPTConfig

    tokenizer = CharTokenizer.from_state_dict(checkpoint["tokenizer"])
    reference = GPT(GPTConfig(**checkpoint["gpt_config"]))
    reference.load_state_dict(checkpoint["reference"])
    shared = RLHFConfig.from_dict(checkpoint["config"]).critic == "shared"
    policy = GPT(dataclasses.replace(reference.config, value_head=shared))
    policy.load_state_dict(checkpoint["policy"])
    return policy.eval(), reference.eval(), tokenizer
