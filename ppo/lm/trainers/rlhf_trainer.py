"""PPO on a language model with a KL penalty to the reference: the same core as CartPole.

    policy π_θ ← copy of the SFT model;  π_ref ← the SFT model, frozen;  critic V
    task ← the caller's prompts and reward                              (ppo.lm.algorithm.task.CompletionTask)
    for iteration = 1 .. iterations:
        α ← α₀ · (1 − (iteration − 1) / iterations)                      (BaseTrainer.learning_rate_fraction)
        sample B completions y ~ π_old(· | x) at temperature τ          (ppo.lm.algorithm.rollout)
        log π_old(y_t|s_t), log π_ref(y_t|s_t), V(s_t) for every token, masked after EOS
        r_t = −β·KL_t + score(y)·1{t = EOS}                              (ppo.lm.algorithm.rewards)
              (KL_t: k1 for reward-k1, the exact per-state KL for loss-full, 0 for loss-k3)
        Â_t, R_t ← GAE(γ, λ) along the token axis                        (ppo.algorithm.advantages)
        K epochs of shuffled minibatches of completions, for each:       (ppo.algorithm.update.run_update)
            recompute log π_θ(y_t|s_t) (logits / τ), H[π_θ], V(s_t)
            L = L_policy(r_t(θ), Â_t, ε) − c_e·H + c_v·L_value(ε_v)      (ppo.algorithm.losses)
                + β·mean_t KL-loss term (k3_t or exact KL_t; none for reward-k1) (ppo.lm.algorithm.kl_penalty)
            stop if approx KL(π_old ‖ π_θ) > target_kl, else:
            zero the gradients, backward, clip the global norm, Adam step
        β ← KL controller(mean sequence KL)                               (ppo.lm.algorithm.kl_control)

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

import dataclasses
import json
from collections import Counter
from pathlib import Path

import torch
from tqdm import tqdm

from ppo.algorithm.advantages import compute_gae
from ppo.trainers.base import BaseTrainer
from ppo.runs.checkpoint import CheckpointError, check_run_folder, load_checkpoint
from ppo.config import ConfigError
from ppo.parallel.distributed import SINGLE_PROCESS, World
from ppo.lm.algorithm.kl_control import KLFeedback, kl_controller
from ppo.lm.algorithm.kl_penalty import kl_loss_per_token
from ppo.lm.models.gpt import GPT, GPTConfig
from ppo.lm.algorithm.rewards import TokenRewards, assemble_rewards, per_token_kl
from ppo.lm.trainers.rlhf_config import RLHFConfig
from ppo.lm.algorithm.rollout import (
    CompletionBatch,
    CompletionScores,
    Rollout,
    TokenBatch,
    collect_rollout,
    repeat_prompts,
    score_completions,
)
from ppo.lm.algorithm.task import CompletionTask
from ppo.lm.models.tokenizer import CharTokenizer
from ppo.algorithm.losses import (
    clipped_surrogate_loss,
    entropy_bonus,
    explained_variance,
    masked_mean,
    normalize_advantages,
    ppo_loss,
    value_clip_fraction,
    value_loss,
)
from ppo.parallel.optim import FlatAdam
from ppo.algorithm.update import MinibatchLoss, run_update, update_settings


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
    """Â_t and R_t = Â_t + V(s_t), (B, T), from ppo.algorithm.advantages.compute_gae over the token axis.

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


class RLHFTrainer(BaseTrainer):
    """PPO of a copy of `reference` on the caller's task, with a KL penalty to `reference`."""

    sample_unit = "completions"
    budget_field = "iterations"
    run_kind = "ppo-rlhf"
    uses_critic = True  # False: no value network at all (ppo.lm.trainers.group_trainer)
    REQUIRED_STATE = ("gpt_config", "tokenizer", "reference", "policy", "critic", "optimizer", "beta", "generator",
                      "torch_rng")

    def __init__(self, config: RLHFConfig, reference: GPT, tokenizer: CharTokenizer, task: CompletionTask,
                 run_dir: str | Path | None = None, progress: bool = True, world: World = SINGLE_PROCESS):
        """With K = world.size processes each samples batch_size / K completions (ppo.parallel.distributed)."""
        super().__init__(config.validate(), run_dir, progress, world)
        self.local_batch_size = world.share(config.batch_size, "batch_size")
        world.share(config.batch_size // config.num_minibatches, "the minibatch size batch_size / num_minibatches")
        torch.manual_seed(config.seed)
        self.tokenizer = tokenizer
        self.task = task
        self.reference = copy_with_value_head(reference, value_head=False).requires_grad_(False)
        shared = config.critic == "shared" and self.uses_critic
        self.policy = copy_with_value_head(reference, value_head=shared)
        self.critic = copy_with_value_head(reference, value_head=True) if self.uses_critic and not shared else None
        self.prompts = self.rollout_prompts(task.prompts, self.local_batch_size)
        room = reference.config.block_size - max(len(tokenizer.encode(p)) for p in self.prompts)
        if config.max_new_tokens > room:
            raise ConfigError(f"max_new_tokens = {config.max_new_tokens} does not fit: the model has room for {room} "
                              f"tokens after the longest prompt")

        groups = [{"params": list(self.policy.parameters()), "lr": config.learning_rate}]
        if self.critic is not None:
            groups.append({"params": list(self.critic.parameters()), "lr": config.critic_learning_rate})
        self.optimizer = FlatAdam(groups, eps=config.adam_eps)
        world.broadcast_(self.optimizer.flat_params)
        self.kl_controller = kl_controller(config.kl_coef, config.kl_target, config.kl_controller,
                                           config.effective_kl_horizon)
        self.generator = torch.Generator().manual_seed(world.seed(config.seed))  # sampling and minibatch order
        if world.distributed:
            torch.manual_seed(world.seed(config.seed))

    def rollout_prompts(self, prompts: list[str], batch_size: int) -> list[str]:
        """The prompt of each of the B completions of a rollout."""
        return repeat_prompts(prompts, batch_size)

    @property
    def total_iterations(self) -> int:
        return self.config.iterations

    @property
    def samples_seen(self) -> int:
        return self.iteration * self.config.batch_size

    @property
    def total_samples(self) -> int:
        return self.config.iterations * self.config.batch_size

    @property
    def value_model(self) -> GPT:
        """The model whose value head is the critic: the separate critic, or the policy itself."""
        return self.policy if self.critic is None else self.critic

    # ------------------------------------------------------------------ one iteration, step by step

    def collect(self) -> Rollout:
        return collect_rollout(self.policy, self.reference, self.critic, self.tokenizer, self.prompts,
                               self.config.max_new_tokens, self.config.temperature, self.generator,
                               with_values=self.uses_critic)

    def rewards(self, rollout: Rollout) -> TokenRewards:
        scores = self.task.reward(rollout.batch)  # (B,)
        return assemble_rewards(scores, rollout.batch.ended_with_eos, rollout.log_probs, rollout.reference_log_probs,
                                rollout.batch.mask, self.kl_controller.beta, self.config.effective_kl_penalty,
                                self.config.missing_eos_penalty, rollout.exact_kl)

    def advantages(self, rollout: Rollout, token_rewards: TokenRewards) -> tuple[torch.Tensor, torch.Tensor]:
        """(Â, R), both (B, T) and zero after EOS (whitening, if norm_adv, happens per minibatch)."""
        mask = rollout.batch.mask
        rewards = token_rewards.rewards
        if self.config.whiten_rewards:
            rewards = whiten_keep_mean(rewards, mask)
        return token_advantages(rewards, rollout.values, mask, self.config.gamma, self.config.gae_lambda)

    def minibatch_loss(self, minibatch: dict[str, torch.Tensor]) -> MinibatchLoss:
        """The PPO loss of b completions, with log π_θ, H and V recomputed at temperature τ."""
        config = self.config
        tokens = TokenBatch(minibatch["tokens"], minibatch["prompt_lengths"], minibatch["completion"], minibatch["mask"])
        mask = tokens.mask  # (b, T)
        scored = score_completions(self.policy, tokens, config.temperature, with_entropy=True, with_values=True,
                                   critic=self.critic, with_distributions=self.kl_loss_needs_distributions)
        old_log_probs, old_values = minibatch["log_probs"], minibatch["values"]  # (b, T)
        advantages = minibatch["advantages"]
        if config.norm_adv:  # over the whole minibatch, all processes' shares together
            advantages = self.world.whiten(advantages, mask)
        policy_loss = clipped_surrogate_loss(scored.log_probs, old_log_probs, advantages, config.clip_coef, mask,
                                             clip_coef_high=config.clip_coef_high)
        critic_loss = value_loss(scored.values, old_values, minibatch["returns"], config.value_clip_coef, mask)
        entropy = entropy_bonus(scored.entropy, mask)
        kl_loss = self.kl_loss(scored, minibatch)
        return MinibatchLoss(
            loss=ppo_loss(policy_loss, critic_loss, entropy, config.vf_coef, config.ent_coef) + kl_loss,
            log_ratio=(scored.log_probs.detach() - old_log_probs) * mask,
            mask=mask,
            terms={
                "policy_loss": policy_loss,
                "value_loss": critic_loss,
                "entropy": entropy,
                "kl_loss": kl_loss,
                "value_clip_fraction": value_clip_fraction(scored.values, old_values, config.value_clip_coef, mask),
            },
        )

    @property
    def kl_loss_needs_distributions(self) -> bool:
        return self.config.effective_kl_penalty == "loss-full"

    def kl_loss(self, scored: CompletionScores, minibatch: dict[str, torch.Tensor]) -> torch.Tensor:
        """β · token average of the placement's differentiated KL term (ppo.lm.algorithm.kl_penalty); 0 for reward-k1."""
        placement = self.config.effective_kl_penalty
        if placement == "reward-k1":
            return torch.zeros((), dtype=scored.log_probs.dtype)
        term = kl_loss_per_token(placement, scored.log_probs, minibatch["reference_log_probs"], minibatch["mask"],
                                 scored.distributions, minibatch.get("reference_distributions"))  # (b, T)
        return self.kl_controller.beta * self.token_average(term, minibatch["mask"])

    def token_average(self, per_token: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """A loss term's mean over the minibatch's real tokens (the group trainers may average otherwise)."""
        return masked_mean(per_token, mask)

    def update_samples(self, rollout: Rollout, advantages: torch.Tensor, returns: torch.Tensor) -> dict[str, torch.Tensor]:
        """What the update shuffles into minibatches: one row per completion."""
        batch = rollout.batch
        samples = {"tokens": batch.tokens, "prompt_lengths": batch.prompt_lengths, "completion": batch.completion,
                   "mask": batch.mask, "log_probs": rollout.log_probs, "values": rollout.values,
                   "reference_log_probs": rollout.reference_log_probs, "advantages": advantages, "returns": returns}
        if self.kl_loss_needs_distributions:
            samples["reference_distributions"] = rollout.reference_distributions  # (B, T, V)
        return samples

    def update(self, rollout: Rollout, advantages: torch.Tensor, returns: torch.Tensor) -> dict[str, float]:
        """K epochs of shuffled minibatches of completions (ppo.algorithm.update); returns the diagnostics."""
        samples = self.update_samples(rollout, advantages, returns)
        return run_update(samples, self.minibatch_loss, self.optimizer, generator=self.generator, world=self.world,
                          clip_coef_high=self.config.clip_coef_high, **update_settings(self.config))

    def kl_feedback(self, rollout: Rollout, token_rewards: TokenRewards) -> KLFeedback:
        """The whole batch, all processes' shares, for the KL controller (β stays one number).

        The mean sequence KL is k1's, Σ_t ℓ_t, whatever the placement: the controller steers KL(π ‖ π_ref).
        """
        mask = rollout.batch.mask
        log_ratios = ((rollout.log_probs - rollout.reference_log_probs) * mask).sum(dim=1).double()  # (B,) ℓ_i
        scores = token_rewards.scores.double()  # (B,)
        mean_kl = self.world.mean_of(float(log_ratios.mean()))
        if self.world.distributed:
            scores, log_ratios = (torch.cat(self.world.gather(t)) for t in (scores, log_ratios))
        return KLFeedback(mean_kl, self.config.batch_size, scores, log_ratios)

    def run_iteration(self) -> dict[str, float]:
        config = self.config
        if config.anneal_lr:
            self.optimizer.scale_learning_rates(self.learning_rate_fraction())
        beta = self.kl_controller.beta
        rollout = self.collect()
        token_rewards = self.rewards(rollout)
        advantages, returns = self.advantages(rollout, token_rewards)
        metrics = self.update(rollout, advantages, returns)
        feedback = self.kl_feedback(rollout, token_rewards)
        self.kl_controller.update(feedback)
        mean_kl = feedback.mean_sequence_kl

        batch, mask = rollout.batch, rollout.batch.mask
        non_score = (-beta * token_rewards.kl).sum(dim=1)  # (B,) the penalty paid, in the reward or in the loss
        rollout_metrics = {
            "score": float(token_rewards.scores.mean()),
            "non_score_reward": float(non_score.mean()),
            "total_reward": float((token_rewards.scores + non_score).mean()),
            "sequence_kl": mean_kl,
            "sequence_kl_k1": self._sequence_kl(rollout, "k1"),
            "sequence_kl_k3": self._sequence_kl(rollout, "k3"),
            "sequence_kl_full": float(rollout.exact_kl.sum(1).mean()),
            "rollout_entropy": float(masked_mean(rollout.entropy, mask)),
            "explained_variance": explained_variance(rollout.values, returns, mask),
            "beta": beta,
            **self.task.measure(batch),
            "eos_rate": float(batch.ended_with_eos.float().mean()),
            "completion_length": float(mask.sum(1).float().mean()),
            "learning_rate": self.optimizer.lr,
        }
        if self.world.distributed:  # means over equal shares are the run's means (the same for β, KL, α)
            averaged = self.world.average_(torch.tensor(list(rollout_metrics.values()), dtype=torch.float64))
            rollout_metrics = dict(zip(rollout_metrics, averaged.tolist()))
        metrics.update(rollout_metrics)
        if config.sample_every and self.progress and (self.iteration + 1) % config.sample_every == 0 \
                and self.world.is_main:
            self._print_samples(batch, self.iteration + 1)
        return metrics

    @staticmethod
    def _sequence_kl(rollout: Rollout, estimator: str) -> float:
        """Mean over the batch of Σ_t KL_t with a sampled-token estimator (k1, k3)."""
        kl = per_token_kl(rollout.log_probs, rollout.reference_log_probs, rollout.batch.mask, estimator)
        return float(kl.sum(1).mean())

    def progress_text(self, metrics: dict[str, float]) -> str:
        return f"score {metrics['score']:.2f} KL {metrics['sequence_kl']:.2f}"

    def _print_samples(self, batch: CompletionBatch, iteration: int) -> None:
        counts = Counter(f"{prompt}{text}{'⏎' if eos else '…'}"
                         for prompt, text, eos in zip(batch.prompts, batch.texts, batch.ended_with_eos))
        shown = ", ".join(f"{text!r}×{count}" for text, count in counts.most_common(6))
        tqdm.write(f"[iteration {iteration}] {shown}")  # above the progress bar, if there is one

    # ------------------------------------------------------------------ checkpoints

    def state_dict(self) -> dict:
        """Models, optimizer, β and the random streams (each process's own under "processes")."""
        own = {"generator": self.generator.get_state(), "torch_rng": torch.get_rng_state()}
        return {
            **super().state_dict(),
            "gpt_config": dataclasses.asdict(self.reference.config),
            "tokenizer": self.tokenizer.state_dict(),
            "reference": self.reference.state_dict(),
            "policy": self.policy.state_dict(),
            "critic": None if self.critic is None else self.critic.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "beta": self.kl_controller.beta,
            "kl_controller": self.kl_controller.state_dict(),
            "world_size": self.world.size,
            "processes": self.world.gather(own) if self.world.distributed else None,
            **own,
        }

    def load_state_dict(self, state: dict) -> None:
        try:
            self.policy.load_state_dict(state["policy"])
            if self.critic is not None:
                self.critic.load_state_dict(state["critic"])
            self.optimizer.load_state_dict(state["optimizer"])
            super().load_state_dict(state)
            self.kl_controller.load_state_dict(state.get("kl_controller", {"beta": state["beta"]}))
            if int(state.get("world_size", 1)) != self.world.size:  # another number of processes: fresh streams
                self.generator.manual_seed(self.world.seed(self.config.seed) + self.iteration)
                torch.manual_seed(self.world.seed(self.config.seed) + self.iteration)
                return
            own = state["processes"][self.world.rank] if self.world.distributed else state
            self.generator.set_state(own["generator"])
            torch.set_rng_state(own["torch_rng"])
        except (RuntimeError, ValueError, KeyError, TypeError, IndexError) as error:
            raise CheckpointError(f"checkpoint does not match these models ({str(error).splitlines()[0][:120]})") from None

    @classmethod
    def _check_matches_folder(cls, config: RLHFConfig, config_path: Path, checkpoint_path: Path) -> None:
        """As BaseTrainer's; a config.json written before kl_penalty existed is compared as RLHFConfig upgrades it,
        and one written before a setting existed (advantage_scale, ...) as if it held that setting's default."""
        try:
            folder_config = json.loads(config_path.read_text()) if config_path.is_file() else None
        except (OSError, ValueError):
            folder_config = None  # the base check names the damage
        if isinstance(folder_config, dict) and ("kl_estimator" in folder_config
                                                or not set(config.to_dict()) <= set(folder_config)):
            upgraded = RLHFConfig.from_dict(folder_config).to_dict()
            differing = sorted(name for name in upgraded if name != cls.budget_field
                               and json.dumps(upgraded[name]) != json.dumps(config.to_dict()[name]))
            if differing:
                raise CheckpointError(f"checkpoint {checkpoint_path} does not belong to the run in "
                                      f"{config_path.parent} (config.json differs in {', '.join(differing[:3])})")
            return
        super()._check_matches_folder(config, config_path, checkpoint_path)

    @classmethod
    def resume(cls, run_dir: str | Path, task: CompletionTask, iterations: int | None = None,
               progress: bool = True, world: World = SINGLE_PROCESS) -> "RLHFTrainer":
        """Continue a run from its checkpoint; the task (prompts and reward) comes from the caller."""
        state, config = cls.load_run(run_dir, RLHFConfig, required_keys=cls.REQUIRED_STATE)
        return cls.from_checkpoint(state, config, run_dir, task, iterations, progress, world)

    @classmethod
    def from_checkpoint(cls, state: dict, config: RLHFConfig, run_dir: str | Path, task: CompletionTask,
                        iterations: int | None = None, progress: bool = True,
                        world: World = SINGLE_PROCESS) -> "RLHFTrainer":
        """A trainer that continues from `state`, the checkpoint `load_run` read (with its config)."""
        if iterations is not None:
            config = config.replace(iterations=iterations).validate()
        reference, tokenizer = _reference_from_state(state, run_dir)
        trainer = cls(config, reference, tokenizer, task, run_dir=run_dir, progress=progress, world=world)
        trainer.load_state_dict(state)
        check_run_folder(run_dir, trainer.iteration, resume_with=f"{cls.__name__}.resume")  # its log is whole
        return trainer


def _reference_from_state(state: dict, path) -> tuple[GPT, CharTokenizer]:
    try:
        tokenizer = CharTokenizer.from_state_dict(state["tokenizer"])
        reference = GPT(GPTConfig(**state["gpt_config"]))
        reference.load_state_dict(state["reference"])
    except (TypeError, ValueError, RuntimeError, KeyError) as error:
        raise CheckpointError(f"checkpoint {path} holds no usable reference model ({str(error).splitlines()[0]})") from None
    return reference.eval(), tokenizer


POLICY_STATE = ("config", "gpt_config", "tokenizer", "reference", "policy")  # what a policy is rebuilt from


def load_lm_policy(path) -> tuple[GPT, GPT, CharTokenizer]:
    """(policy, reference, tokenizer) of a run folder or checkpoint written by RLHFTrainer (or ppo-dpo)."""
    return lm_policy_from_state(load_checkpoint(path, required_keys=POLICY_STATE), path)


def lm_policy_from_state(state: dict, path) -> tuple[GPT, GPT, CharTokenizer]:
    """(policy, reference, tokenizer) of a loaded checkpoint `state` (POLICY_STATE); `path` names it in errors."""
    reference, tokenizer = _reference_from_state(state, path)
    shared = state["config"].get("critic") == "shared"
    policy = GPT(dataclasses.replace(reference.config, value_head=shared))
    try:
        policy.load_state_dict(state["policy"])
    except RuntimeError as error:
        raise CheckpointError(f"checkpoint {path}: the policy does not match its model config ({str(error).splitlines()[0]})") from None
    return policy.eval(), reference, tokenizer
