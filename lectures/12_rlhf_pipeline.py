# %% [markdown]
"""
# Lecture 12 — The RLHF pipeline

**What it teaches.** In lecture 11 the reward was a rule we wrote down. In RLHF nobody
can write it down: people compare pairs of answers, a *reward model* learns to score
answers from those comparisons, and PPO optimises the reward model's score. The three
stages:

    1. SFT            supervised next-token training on demonstrations          (lecture 11)
    2. reward model   r_φ(x, y) fitted to comparisons (x, y_w ≻ y_l) with the
                      Bradley–Terry likelihood  P(y_w ≻ y_l) = σ(r_φ(x, y_w) − r_φ(x, y_l))
    3. PPO            maximise E[r_φ(x, y)] − β · KL(π ‖ π_SFT)

The reward model is a proxy. It was fitted on the answers people compared, and PPO is
an optimiser that goes looking for whatever the proxy over-scores. The KL penalty is
what keeps it near the text the reward model was trained on. We make this concrete:
our "people" prefer healthy food according to a hidden table (`envs/token_task.py`,
`HEALTHINESS`), so we can score every answer with the truth as well as with the proxy.

**What it shows.**
1. A reward model trained on synthetic comparisons: its loss, its accuracy on held-out
   pairs, its scores next to the hidden rule — and strings it never saw that it scores
   above every food.
2. PPO against it with β > 0 and with β = 0: the proxy score, the true score, the
   well-formed rate and the KL side by side. The gap between proxy and truth is
   reward hacking.
3. The adaptive KL controller (`ppo/lm/kl_control.py`): β steered towards a KL target.
4. Two critic-free alternatives built from the same pieces — a group-normalised
   baseline (GRPO-style) and a leave-one-out baseline (RLOO) — against PPO with a critic.

**Prerequisites.** Lecture 11.

**Library.** `ppo/lm/reward_model.py` (`RewardModel`, `bradley_terry_loss`,
`train_reward_model`, `pairwise_accuracy`), `envs/token_task.py` (`preference_pairs`,
`healthiness`, `corrupt`), `ppo/lm/task.py` (`CompletionTask`: any reward),
`ppo/lm/rlhf_trainer.py` (`RLHFTrainer`), `ppo/lm/kl_control.py` (`AdaptiveKLController`),
`ppo/lm/rollout.py` (`sample_completions`, `score_completions`), `ppo/lm/rewards.py`
(`per_token_kl`), `ppo/update.py` (`run_update`), `ppo/losses.py`
(`clipped_surrogate_loss`). Command line: `python -m experiments.rlhf --reward model`.
"""

# %%
import random
import time
from collections import Counter

import torch

from _common import Lecture, plt, print_table
from envs import corpus
from envs.token_task import HEALTHINESS, corrupt, healthiness, is_well_formed, preference_pairs
from experiments.food_task import FoodTaskConfig, food_task
from ppo.lm.kl_control import AdaptiveKLController
from ppo.lm.pretrain import PretrainConfig, load_or_pretrain_sft
from ppo.lm.reward_model import bradley_terry_loss, encode_comparisons, encode_texts, pairwise_accuracy, train_reward_model
from ppo.lm.rewards import per_token_kl
from ppo.lm.rlhf_config import RLHFConfig
from ppo.lm.rlhf_trainer import RLHFTrainer, copy_with_value_head
from ppo.lm.rollout import TokenBatch, repeat_prompts, sample_completions, score_completions
from ppo.losses import clipped_surrogate_loss
from ppo.optim import FlatAdam, linear_annealing
from ppo.update import MinibatchLoss, run_update

lecture = Lecture("12_rlhf_pipeline", __doc__)
PERSON, RELATION = "ravin", "likes"
PROMPT = corpus.prompt(PERSON, RELATION)
QUICK_SFT = PretrainConfig(corpus_size=6_000, val_size=200, steps=250, batch_size=64, learning_rate=1e-2,
                           warmup_steps=20, eval_interval=250)
EVAL_SAMPLES = lecture.choose(full=1000, quick=128)
ITERATIONS = lecture.choose(full=40, quick=2)
BATCH = lecture.choose(full=128, quick=32)

# %% [markdown]
"""
## 1. Stage 1: the SFT model

The same cached model as lecture 11: it completes "ravin likes " with the foods of the
corpus in the corpus's proportions, and almost always spells them right.
"""

# %%
sft, tokenizer = load_or_pretrain_sft(corpus.FOOD_CORPUS, lecture.choose(full=PretrainConfig(), quick=QUICK_SFT),
                                      verbose=True)
print(f"SFT model: {sft.num_parameters():,} parameters")

# %% [markdown]
"""
## 2. Stage 2: a reward model from comparisons

`preference_pairs` draws two candidate completions for a random person's prompt — a
food, or with some probability a corrupted food ("pizzza", "lettce") — and labels the
pair with the hidden rule: the healthier food wins, and any food beats a corrupted one.
These labels are all the reward model ever sees of the rule.

`train_reward_model` starts from the SFT weights with a zero scalar head read at the
EOS token, and minimises the Bradley–Terry loss −log σ(r(y_w) − r(y_l)). Only score
*differences* are learned, so afterwards the scores are shifted and scaled to mean 0 and
std 1 on the SFT model's own completions. We keep its budget small — a few thousand
comparisons, a few hundred steps — as a real reward model is small next to the space of
answers a policy can produce.
"""

# %%
RM_PAIRS, RM_STEPS, MALFORMED_FRACTION = lecture.choose(full=2000, quick=200), lecture.choose(full=200, quick=20), 0.3
train_pairs = preference_pairs(RM_PAIRS, seed=1, relation=RELATION, malformed_fraction=MALFORMED_FRACTION)
heldout_pairs = preference_pairs(1000, seed=2, relation=RELATION, malformed_fraction=MALFORMED_FRACTION)
print_table([{"prompt": prompt, "chosen y_w": chosen, "rejected y_l": rejected} for prompt, chosen, rejected in train_pairs[:6]],
            title=f"Six of {len(train_pairs):,} training comparisons ({MALFORMED_FRACTION:.0%} of candidates corrupted)")
started = time.perf_counter()
reward_model, rm_losses = train_reward_model(sft, tokenizer, train_pairs, steps=RM_STEPS)
rm_seconds = time.perf_counter() - started
train_accuracy = pairwise_accuracy(reward_model, encode_comparisons(tokenizer, train_pairs))
heldout_accuracy = pairwise_accuracy(reward_model, encode_comparisons(tokenizer, heldout_pairs))
reward_model.normalize_on(sample_completions(sft, tokenizer, repeat_prompts([PROMPT], 512), 16,
                                             generator=torch.Generator().manual_seed(0)))
tail = rm_losses[-max(1, len(rm_losses) // 10):]
print(f"{RM_STEPS} Bradley–Terry steps in {rm_seconds:.1f} s: loss {rm_losses[0]:.3f} → {sum(tail) / len(tail):.3f} "
      f"(log 2 = {bradley_terry_loss(torch.zeros(1), torch.zeros(1)):.3f} is a coin flip); pairwise accuracy "
      f"train {train_accuracy:.1%}, held-out {heldout_accuracy:.1%}")


@torch.no_grad()
def proxy_scores(texts: list[str], prompt: str = PROMPT) -> torch.Tensor:
    """The reward model's normalised score of prompt + text + EOS for each text. (N,)"""
    tokens, last = encode_texts(tokenizer, [prompt + text for text in texts])
    return reward_model(tokens, last)


food_scores = proxy_scores(list(corpus.FOODS))
print_table(sorted(({"food": food, "hidden healthiness": HEALTHINESS[food], "reward model r_φ": float(score)}
                    for food, score in zip(corpus.FOODS, food_scores)), key=lambda row: -row["hidden healthiness"]),
            title=f"Scores for {PROMPT!r}: the hidden rule and the learned proxy")

# %% [markdown]
"""
The ranking of the foods is what the comparisons taught. But the proxy scores every
string, including strings no comparison contained. We probe it with a few thousand
near-misses of foods and random strings of the corpus's characters:
"""

# %%
rng = random.Random(0)
characters = corpus.corpus_characters()
PROBES_PER_KIND = lecture.choose(full=3000, quick=300)
near_misses = {corrupt(rng.choice(corpus.FOODS), rng) for _ in range(PROBES_PER_KIND)}
random_strings = {"".join(rng.choice(characters) for _ in range(rng.randint(1, 12))) for _ in range(PROBES_PER_KIND)}
probes = sorted(near_misses | random_strings)
probes = [text for text in probes if text.strip() and text not in corpus.FOODS]
probe_scores = proxy_scores(probes)
best_food = float(food_scores.max())
above = probe_scores > best_food
order = probe_scores.argsort(descending=True)[:8]
print(f"{len(probes):,} malformed probe strings (true score {healthiness('', False):g} each): "
      f"{int(above.sum())} score above the best food ({best_food:.2f}); the highest:")
print("  " + ", ".join(f"{probes[i]!r} {float(probe_scores[i]):.2f}" for i in order.tolist()))

figure, axes = plt.subplots(1, 2, figsize=(11, 4))
axes[0].plot(rm_losses, color="tab:blue", alpha=0.6)
axes[0].set_xlabel("Bradley–Terry step")
axes[0].set_ylabel("loss −log σ(r_w − r_l)")
axes[0].set_title(f"Reward model training (held-out accuracy {heldout_accuracy:.1%})")
axes[1].hist(probe_scores.tolist(), bins=50, color="tab:gray", alpha=0.7, label="malformed probe strings")
for food, score in zip(corpus.FOODS, food_scores.tolist()):
    axes[1].axvline(score, color="tab:green", lw=1)
axes[1].axvline(best_food, color="tab:green", lw=2, label="the ten foods (best: thick)")
axes[1].set_xlabel("r_φ (normalised)")
axes[1].set_title("What the proxy thinks of strings it never saw")
axes[1].legend(fontsize=8)
lecture.save_figure(figure, "reward_model.png")

# %% [markdown]
"""
## 3. Stage 3: PPO against the reward model, with and without the KL penalty

`RLHFTrainer` accepts any task with any reward: a function from a batch of completions
to one score each. We hand it the food task with the reward model's `score_batch` as
the reward, wrapped so that it also records the hidden rule's score of the same batch —
a number PPO never sees. Two runs, identical but
for β: the default penalty, and none.

`measure` evaluates a policy on fresh samples: the proxy score (with the missing-EOS
penalty, as in training), the true score, the well-formed rate and the KL to the SFT
model (k1, summed over tokens).
"""


# %%
class RecordingScorer:
    """The reward model's scores for PPO; the hidden rule's mean score of each batch on the side."""

    def __init__(self):
        self.true_means: list[float] = []

    def __call__(self, batch) -> torch.Tensor:
        true_scores = [healthiness(text, bool(eos)) for text, eos in zip(batch.texts, batch.ended_with_eos)]
        self.true_means.append(sum(true_scores) / len(batch))
        return reward_model.score_batch(batch)


BASE = RLHFConfig(iterations=ITERATIONS, batch_size=BATCH, sample_every=0, tensorboard=False)
TASK_CONFIG = FoodTaskConfig(person=PERSON, relation=RELATION, reward="model")


@torch.no_grad()
def measure(policy, reference, seed: int = 0) -> dict:
    batch = sample_completions(policy, tokenizer, [PROMPT] * EVAL_SAMPLES, BASE.max_new_tokens, BASE.temperature,
                               torch.Generator().manual_seed(10_000 + seed))
    completions = list(zip(batch.texts, batch.ended_with_eos.tolist()))  # (text, ended with EOS)
    proxy = torch.where(batch.ended_with_eos, reward_model.score_batch(batch), torch.tensor(BASE.missing_eos_penalty))
    kl = per_token_kl(score_completions(policy, batch, BASE.temperature).log_probs,
                      score_completions(reference, batch, BASE.temperature).log_probs, batch.mask, "k1").sum(1)
    counts = Counter(text + ("" if eos else "…") for text, eos in completions)
    return {"proxy score r_φ": float(proxy.mean()),
            "true score": sum(healthiness(text, eos) for text, eos in completions) / len(completions),
            "well-formed": f"{sum(is_well_formed(text, eos) for text, eos in completions) / len(completions):.1%}",
            "KL to SFT": float(kl.mean()),
            "most frequent": ", ".join(f"{text!r}×{count}" for text, count in counts.most_common(3))}


def run_ppo(config: RLHFConfig) -> tuple[RLHFTrainer, RecordingScorer, float]:
    scorer = RecordingScorer()
    trainer = RLHFTrainer(config, sft, tokenizer, food_task(TASK_CONFIG, reward=scorer), progress=False)
    started = time.perf_counter()
    trainer.train()
    return trainer, scorer, (time.perf_counter() - started) / config.iterations


BETAS = [BASE.kl_coef, 0.0]
ppo_runs = {beta: run_ppo(BASE.replace(kl_coef=beta)) for beta in BETAS}
reference = ppo_runs[BASE.kl_coef][0].reference
hacking_rows = [{"policy": "SFT", **measure(reference, reference)}]
for beta, (trainer, _, _) in ppo_runs.items():
    hacking_rows.append({"policy": f"PPO, β = {beta}", **measure(trainer.policy, reference)})
print_table(hacking_rows, title=f"After {ITERATIONS} iterations × {BATCH} completions: {EVAL_SAMPLES} fresh samples each")
no_penalty = hacking_rows[-1]
print(f"β = 0: proxy score {no_penalty['proxy score r_φ']:+.2f} against the best food's {best_food:+.2f}; "
      f"true score {no_penalty['true score']:+.2f} against the best food's {max(HEALTHINESS.values()):+.2f}")

figure, axes = plt.subplots(1, 4, figsize=(16, 3.8))
for beta, (trainer, scorer, _) in ppo_runs.items():
    iterations = range(1, len(trainer.history) + 1)
    label = f"β = {beta}"
    axes[0].plot(iterations, [m["score"] for m in trainer.history], label=label)
    axes[1].plot(iterations, scorer.true_means, label=label)
    axes[2].plot(iterations, [m["well_formed_rate"] for m in trainer.history], label=label)
    axes[3].plot(iterations, [m["sequence_kl"] for m in trainer.history], label=label)
axes[0].axhline(best_food, color="gray", ls=":", label="best food")
axes[1].axhline(max(HEALTHINESS.values()), color="gray", ls=":", label="best food")
for axis, title in zip(axes, ("proxy score r_φ (what PPO sees)", "true score (hidden rule)", "well-formed rate",
                              "sequence KL to SFT (nats)")):
    axis.set_title(title, fontsize=10)
    axis.set_xlabel("iteration")
    axis.legend(fontsize=8)
lecture.save_figure(figure, "reward_hacking.png")

# %% [markdown]
"""
Read the two PPO rows against each other. With the penalty, every step away from the
SFT model's spelling costs β per nat, so the policy stays among the strings the reward
model was trained to rank. Without it, nothing stops the policy from following the
proxy into the strings of the probe above, where the proxy and the truth part ways —
if it finds one, its proxy score rises past the best food's while the true score and
the well-formed rate fall, and the KL climbs. Whether and when it finds one depends on
the seed and the budget; the penalty removes the incentive either way.

## 4. An adaptive β

A fixed β is an exchange rate you must guess. The controller of `ppo/lm/kl_control.py`
(Ziegler et al. 2019) steers it towards a KL target instead: after each batch of n
completions with mean sequence KL,

    e = clip(KL / KL_target − 1, −0.2, 0.2),     β ← β · (1 + e · n / horizon).

We start from the default β, ask for a target KL well below what that β settled at,
and shorten the horizon (in completions) so that β can move within this short run.
"""

# %%
fixed_kl = ppo_runs[BASE.kl_coef][0].history[-1]["sequence_kl"]
KL_TARGET = 1.0  # nats; the fixed-β run settled at the KL printed below
HORIZON = 256  # completions; short, so that β can move within this run (the table shows one batch's change)
print_table([{"measured KL": kl, "e": min(max(kl / KL_TARGET - 1, -0.2), 0.2),
              "β after one batch (from 1.0)": AdaptiveKLController(1.0, KL_TARGET, HORIZON).update(kl, BATCH)}
             for kl in (0.0, KL_TARGET / 2, KL_TARGET, KL_TARGET * 1.1, KL_TARGET * 3)],
            title=f"The update rule, target {KL_TARGET} nats, n = {BATCH}, horizon {HORIZON}")
ADAPTIVE_ITERATIONS = lecture.choose(full=60, quick=ITERATIONS)
adaptive, _, _ = run_ppo(BASE.replace(kl_target=KL_TARGET, kl_horizon=HORIZON, iterations=ADAPTIVE_ITERATIONS))
betas = [m["beta"] for m in adaptive.history] + [adaptive.kl_controller.beta]
kl_curve = [m["sequence_kl"] for m in adaptive.history]
last_batches = kl_curve[-max(1, len(kl_curve) // 6):]
print(f"{ADAPTIVE_ITERATIONS} iterations: β {betas[0]:.3g} → lowest {min(betas):.3g} → final {betas[-1]:.3g}; "
      f"sequence KL highest {max(kl_curve):.2f}, mean of the last {len(last_batches)} batches "
      f"{sum(last_batches) / len(last_batches):.2f} (target {KL_TARGET}; the fixed β = {BASE.kl_coef} run ended at {fixed_kl:.2f})")
print_table([{"policy": f"PPO, adaptive β → KL {KL_TARGET}", **measure(adaptive.policy, reference)}],
            title="The adaptive run on fresh samples")

figure, axes = plt.subplots(1, 2, figsize=(11, 4))
iterations = range(1, len(adaptive.history) + 1)
axes[0].plot(iterations, [m["sequence_kl"] for m in adaptive.history], label="adaptive β")
axes[0].plot(range(1, len(ppo_runs[BASE.kl_coef][0].history) + 1),
             [m["sequence_kl"] for m in ppo_runs[BASE.kl_coef][0].history], label=f"fixed β = {BASE.kl_coef}")
axes[0].axhline(KL_TARGET, color="black", ls="--", lw=1, label="target")
axes[0].set_ylabel("sequence KL to SFT (nats)")
axes[1].plot(range(len(betas)), betas, color="tab:purple")
axes[1].set_ylabel("β")
axes[1].set_yscale("log")
for axis in axes:
    axis.set_xlabel("iteration")
axes[0].legend(fontsize=8)
axes[0].set_title("KL steered towards a target")
axes[1].set_title("β, adapted after every batch")
lecture.save_figure(figure, "adaptive_kl.png")

# %% [markdown]
"""
Read adaptive_kl.png: while the KL is more than 20% above the target, e sits at its
clip and β grows by the same factor every batch; the policy answers with a lag (it has to
unlearn), so β keeps growing for a while after the KL has started to fall — a
proportional controller with a limited rate. The learning rate annealed to 0 by the end
of the run also slows the policy's answer. Compare the most frequent completions with
the fixed-β row of section 3: the same reward model, another point on the
reward–KL trade-off.

## 5. Without a critic: group baselines (GRPO-style) and leave-one-out (RLOO)

PPO's critic is a second network as large as the policy, trained alongside it, whose
only job is the baseline V(s_t). For a reward paid once per completion there is a
cheaper baseline: sample G completions of the same prompt and compare each with the
others. With the sequence reward R_i = r_φ(y_i) − β · Σ_t KL_t(y_i):

    GRPO-style:  Â_i = (R_i − mean_j R_j) / (std_j R_j + ε)       (one group of G)
    RLOO:        Â_i = R_i − (1 / (G − 1)) Σ_{j ≠ i} R_j

Every token of completion i gets the same Â_i; no value network, no GAE. (GRPO as
published also moves the KL from the reward into the loss; here both keep it in the
reward, so the only difference from PPO is the baseline.) Everything else is reused:
the sampler, the per-token log-probs at temperature τ, the KL estimate, PPO's clipped
surrogate with the same ε, and the very update routine of both trainers
(`ppo.update.run_update`: the same epochs, minibatches, gradient clipping and early stop).
"""


# %%
def group_advantages(rewards: torch.Tensor, group_size: int, kind: str) -> torch.Tensor:
    """(B,) sequence rewards, consecutive groups of G completions of one prompt -> (B,) advantages."""
    grouped = rewards.view(-1, group_size)  # (B / G, G)
    if kind == "GRPO":
        advantages = (grouped - grouped.mean(1, keepdim=True)) / (grouped.std(1, keepdim=True) + 1e-6)
    else:  # RLOO: the mean of the other G − 1 rewards
        advantages = grouped - (grouped.sum(1, keepdim=True) - grouped) / (group_size - 1)
    return advantages.reshape(-1)


def train_critic_free(kind: str, config: RLHFConfig, group_size: int) -> tuple[list[dict], object, float]:
    torch.manual_seed(config.seed)
    policy = copy_with_value_head(sft, value_head=False)
    frozen = copy_with_value_head(sft, value_head=False).requires_grad_(False)
    optimizer = FlatAdam(policy.parameters(), lr=config.learning_rate, eps=config.adam_eps)
    generator = torch.Generator().manual_seed(config.seed)

    def minibatch_loss(minibatch: dict) -> MinibatchLoss:
        """PPO's clipped surrogate on b completions; no value loss, no entropy term."""
        tokens = TokenBatch(minibatch["tokens"], minibatch["prompt_lengths"], minibatch["completion"], minibatch["mask"])
        new_log_probs = score_completions(policy, tokens, config.temperature).log_probs  # (b, T)
        loss = clipped_surrogate_loss(new_log_probs, minibatch["log_probs"], minibatch["advantages"], config.clip_coef,
                                      tokens.mask)
        return MinibatchLoss(loss=loss, log_ratio=(new_log_probs.detach() - minibatch["log_probs"]) * tokens.mask,
                             mask=tokens.mask, terms={"policy_loss": loss})

    history, started = [], time.perf_counter()
    for iteration in range(config.iterations):
        optimizer.lr = linear_annealing(config.learning_rate, iteration, config.iterations)  # as RLHFTrainer
        with torch.no_grad():
            batch = sample_completions(policy, tokenizer, [PROMPT] * config.batch_size, config.max_new_tokens,
                                       config.temperature, generator)
            old_log_probs = score_completions(policy, batch, config.temperature).log_probs  # (B, T)
            reference_log_probs = score_completions(frozen, batch, config.temperature).log_probs
            scores = torch.where(batch.ended_with_eos, reward_model.score_batch(batch),
                                 torch.tensor(config.missing_eos_penalty))  # (B,)
            sequence_kl = per_token_kl(old_log_probs, reference_log_probs, batch.mask, config.kl_estimator).sum(1)
            advantages = group_advantages(scores - config.kl_coef * sequence_kl, group_size, kind)  # (B,)
            token_advantages = advantages.unsqueeze(1) * batch.mask  # (B, T): Â_i at every real token
        samples = {"tokens": batch.tokens, "prompt_lengths": batch.prompt_lengths, "completion": batch.completion,
                   "mask": batch.mask, "log_probs": old_log_probs, "advantages": token_advantages}
        run_update(samples, minibatch_loss, optimizer, update_epochs=config.update_epochs,
                   num_minibatches=config.num_minibatches, max_grad_norm=config.max_grad_norm,
                   target_kl=config.target_kl, clip_coef=config.clip_coef, generator=generator)
        well_formed = [is_well_formed(text, bool(eos)) for text, eos in zip(batch.texts, batch.ended_with_eos)]
        history.append({"score": float(scores.mean()), "sequence_kl": float(sequence_kl.mean()),
                        "well_formed_rate": sum(well_formed) / len(batch)})
    return history, policy, (time.perf_counter() - started) / config.iterations


GROUP_SIZE = lecture.choose(full=16, quick=8)
print(f"{BATCH // GROUP_SIZE} groups of G = {GROUP_SIZE} completions per iteration, β = {BASE.kl_coef}, "
      f"{ITERATIONS} iterations, the same optimiser settings as PPO")
ppo_trainer, _, ppo_seconds = ppo_runs[BASE.kl_coef]
method_rows = [{"method": "PPO (critic, token-level GAE)", "s / iteration": ppo_seconds,
                "trained networks": 2, **measure(ppo_trainer.policy, reference)}]
critic_free = {}
for kind in ("GRPO", "RLOO"):
    history, policy, seconds = train_critic_free(kind, BASE, GROUP_SIZE)
    critic_free[kind] = history
    method_rows.append({"method": f"{kind} baseline, no critic", "s / iteration": seconds, "trained networks": 1,
                        **measure(policy, reference)})
print_table(method_rows, title=f"Three ways to the same objective (β = {BASE.kl_coef}): {EVAL_SAMPLES} fresh samples each")

figure, axes = plt.subplots(1, 2, figsize=(11, 4))
curves = {"PPO (critic)": ppo_trainer.history, **{f"{kind} (no critic)": history for kind, history in critic_free.items()}}
for name, history in curves.items():
    iterations = range(1, len(history) + 1)
    axes[0].plot(iterations, [m["score"] for m in history], label=name)
    axes[1].plot(iterations, [m["sequence_kl"] for m in history], label=name)
axes[0].set_title("proxy score r_φ of the batch")
axes[1].set_title("sequence KL to SFT (nats)")
for axis in axes:
    axis.set_xlabel("iteration")
    axis.legend(fontsize=8)
lecture.save_figure(figure, "critic_free.png")

# %% [markdown]
"""
## What to take away

* A reward model is trained on comparisons and is only trustworthy near them (the probe
  in section 2). PPO is an optimiser: it will find what the proxy over-scores unless
  something holds it back.
* The KL penalty to the SFT model is that something: compare the β rows of section 3 —
  proxy score, true score, well-formed rate and KL.
* The adaptive controller replaces "choose β" with "choose a KL budget" (section 4).
* With one reward per completion, a baseline from other samples of the same prompt can
  stand in for the critic (section 5): one network fewer to train and hold in memory, at
  the price of G samples per prompt and no per-token credit assignment. Compare the
  rows and the seconds per iteration.
"""

# %%
lecture.finish()
