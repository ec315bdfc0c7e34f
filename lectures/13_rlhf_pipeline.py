# %% [markdown]
r"""
# Lecture 13 — The RLHF pipeline

**What it teaches.** In [lecture 12](12_ppo_for_language_models.ipynb) the reward was a rule we wrote down. In <a href="../glossary.html#term-RLHF">RLHF</a> nobody
can write it down: people compare pairs of answers, a *<a href="../glossary.html#term-Reward-model">reward model</a>* learns to score
answers from those comparisons, and <a href="../glossary.html#term-PPO">PPO</a> optimises the reward model's score. The three
stages:

1. **<a href="../glossary.html#term-SFT">SFT</a>**: supervised next-token training on demonstrations ([lecture 12](12_ppo_for_language_models.ipynb));
2. **reward model**: $r_\phi(x, y)$ fitted to comparisons $(x,\ y_w \succ y_l)$ with the
   <a href="../glossary.html#term-BradleyTerry-model">Bradley–Terry likelihood</a>

   $$
   P(y_w \succ y_l) = \sigma\big(r_\phi(x, y_w) - r_\phi(x, y_l)\big);
   $$

3. **PPO**: maximise $\mathbb E\big[r_\phi(x, y)\big] - \beta\, \mathrm{KL}(\pi \,\Vert\, \pi_\text{SFT})$.

The reward model is a proxy. It was fitted on the answers people compared, and PPO is
an optimiser that goes looking for whatever the proxy over-scores. The <a href="../glossary.html#term-KL-divergence">KL</a> penalty is
what keeps it near the text the reward model was trained on. We make this concrete:
our "people" prefer healthy food according to a hidden table (`envs/token_task.py`,
`HEALTHINESS`), so we can score every answer with the truth (the *gold* score) as well
as with the proxy.

**What it shows.**
1. A reward model trained on synthetic comparisons: its loss, its accuracy on held-out
   pairs, its scores next to the hidden rule — and strings it never saw that it scores
   above every food.
2. Reward <a href="../glossary.html#term-Over-optimisation">over-optimisation</a> measured as Gao, Schulman & Hilton (2022) measure it
   (`experiments/studies/overoptimization.py`): the gold and the proxy score against the
   distance $d = \sqrt{\mathrm{KL}}$ from the SFT model, for PPO at a sweep of β over training and for
   <a href="../glossary.html#term-Best-of-n">best-of-n</a> sampling (exactly), with their fitted functional forms.
3. Two KL controllers (`ppo/lm/algorithm/kl_control.py`): Ziegler et al.'s proportional rule, and
   β solved from the batch so that the <a href="../glossary.html#term-KL-regularised-optimum">KL-regularised optimum</a> has the <a href="../glossary.html#term-Target-KL">target KL</a>.
4. Two <a href="../glossary.html#term-Critic">critic</a>-free trainers of the library (`ppo/lm/trainers/group_trainer.py`) — a
   group-normalised <a href="../glossary.html#term-Baseline">baseline</a> (<a href="../glossary.html#term-GRPO">GRPO</a>) and a leave-one-out baseline (<a href="../glossary.html#term-RLOO">RLOO</a>) — against PPO
   with a critic, on the same reward.
5. <a href="../glossary.html#term-DPO">DPO</a> (`ppo/lm/trainers/dpo.py`): the policy trained on the comparisons directly, against the
   exact optimum it aims at.

**Prerequisites.** [Lecture 12](12_ppo_for_language_models.ipynb).

**Library.** `ppo/lm/algorithm/reward_model.py` (`RewardModel`, `bradley_terry_loss`,
`train_reward_model`, `pairwise_accuracy`), `envs/token_task.py` (`preference_pairs`,
`healthiness`, `corrupt`), `ppo/lm/algorithm/task.py` (`CompletionTask`: any reward),
`ppo/lm/trainers/rlhf_trainer.py` (`RLHFTrainer`), `ppo/lm/trainers/group_trainer.py` (`trainer_class`,
`GroupBaselineTrainer`, `group_advantages`), `ppo/lm/algorithm/kl_control.py`
(`OptimumKLController`, `ProportionalKLController`), `ppo/lm/exact/enumeration.py`, `ppo/lm/exact/best_of_n.py`,
`ppo/lm/exact/overoptimization_fit.py`, `experiments/studies/overoptimization.py` (`train_proxy`,
`best_of_n_points`, `ppo_points`), `ppo/lm/algorithm/rollout.py` (`sample_completions`,
`score_completions`), `ppo/lm/algorithm/rewards.py` (`per_token_kl`); for section 6 `ppo/lm/trainers/dpo.py`
(`DPOConfig`, `train_dpo`), `experiments/tasks/preference_rater.py` (`rater_comparisons`) and
`experiments/studies/preference_methods.py` (`train_preference_policy`). Command line:
`python -m experiments.commands.rlhf --reward model [--algorithm grpo|rloo]`,
`python -m experiments.studies.overoptimization`.
"""

# %%
import csv
import math
import random
import statistics
import time
from collections import Counter

import torch

from _common import Lecture, plt, print_table
from envs import corpus
from envs.token_task import HEALTHINESS, corrupt, healthiness, is_well_formed, preference_pairs
from experiments.studies import overoptimization
from experiments.tasks.food_task import FoodTaskConfig, food_task
from experiments.studies.preference_methods import train_preference_policy
from experiments.tasks.preference_rater import rater_comparisons
from experiments.tasks.two_choice_task import ANSWERS, TwoChoiceTaskConfig, two_choice_task
from ppo.lm.exact.best_of_n import best_of_n_kl_bound
from ppo.lm.trainers.dpo import DPOConfig
from ppo.lm.trainers.group_trainer import group_advantages, trainer_class
from ppo.lm.algorithm.kl_control import KLFeedback, ProportionalKLController, largest_tilted_kl, solve_beta, tilted_kl
from ppo.lm.exact.optimum import MALFORMED, completion_probabilities, kl_regularised_optimum
from ppo.lm.exact.optimum_distance import total_variation
from ppo.lm.models.pretrain import PretrainConfig, load_or_pretrain_sft
from ppo.lm.algorithm.reward_model import bradley_terry_loss, encode_comparisons, encode_texts, pairwise_accuracy, train_reward_model
from ppo.lm.algorithm.rewards import per_token_kl
from ppo.lm.trainers.rlhf_config import RLHFConfig
from ppo.lm.trainers.rlhf_trainer import RLHFTrainer
from ppo.lm.algorithm.rollout import repeat_prompts, sample_completions, score_completions

lecture = Lecture("13_rlhf_pipeline", __doc__)
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

The same cached model as [lecture 12](12_ppo_for_language_models.ipynb): it completes "ravin likes " with the foods of the
corpus in the corpus's proportions, and almost always spells them right.
"""

# %%
sft, tokenizer = load_or_pretrain_sft(corpus.FOOD_CORPUS, lecture.choose(full=PretrainConfig(), quick=QUICK_SFT),
                                      verbose=True)
print(f"SFT model: {sft.num_parameters():,} parameters")

# %% [markdown]
r"""
## 2. Stage 2: a reward model from comparisons

`preference_pairs` draws two candidate <a href="../glossary.html#term-Completion">completions</a> for a random person's prompt — a
food, or with some probability a corrupted food ("pizzza", "lettce") — and labels the
pair with the hidden rule: the healthier food wins, and any food beats a corrupted one.
These labels are all the reward model ever sees of the rule.

`train_reward_model` starts from the SFT weights with a zero scalar head read at the
<a href="../glossary.html#term-EOS">EOS</a> token, and minimises the Bradley–Terry loss $-\log \sigma\big(r(y_w) - r(y_l)\big)$. Only score
*differences* are learned, so afterwards the scores are shifted and scaled to mean 0 and
std 1 on the SFT model's own completions. We keep its budget small — a few thousand
comparisons, a few hundred steps — as a real reward model is small next to the space of
answers a policy can produce. This reward model is the one PPO, GRPO and RLOO optimise
in sections 4 and 5.
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
def proxy_scores(texts: list[str], model=None) -> torch.Tensor:
    """A reward model's (default: this one's) normalised score of PROMPT + text + EOS for each text. (N,)"""
    tokens, last = encode_texts(tokenizer, [PROMPT + text for text in texts])
    return (model or reward_model)(tokens, last)


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

# %% tags=["claims"]
final_rm_loss = sum(tail) / len(tail)
lecture.claim("The Bradley–Terry loss falls below log 2, the coin flip, and the reward model ranks held-out pairs "
              "better than chance", final_rm_loss < math.log(2) and heldout_accuracy > 0.5,
              measured=f"loss {final_rm_loss:.3f}, held-out accuracy {heldout_accuracy:.1%}")
healthiest, least_healthy = max(corpus.FOODS, key=HEALTHINESS.get), min(corpus.FOODS, key=HEALTHINESS.get)
proxy_order = [corpus.FOODS[i] for i in food_scores.argsort(descending=True).tolist()]
lecture.claim("The ranking of the foods is what the comparisons taught: the healthiest food scores highest and the "
              "least healthy lowest (the order between them is rougher)",
              proxy_order[0] == healthiest and proxy_order[-1] == least_healthy,
              measured=f"proxy's order: {', '.join(proxy_order)}", quick=False)
lecture.claim("The proxy scores some strings it never saw above every food", int(above.sum()) > 0,
              measured=f"{int(above.sum())} of {len(probes):,} probes above {best_food:.2f}", quick=False)

# %% [markdown]
r"""
## 3. Over-optimisation, measured: the gold and the proxy score against $\sqrt{\mathrm{KL}}$

The probe shows *that* a proxy over-scores strings it never saw. Gao, Schulman & Hilton
(2022) measure *how much optimisation* it takes before the gold score suffers, and find
the same functional forms across reward-model sizes. `experiments/studies/overoptimization.py`
runs their experiment on the food task; its command (`python -m
experiments.studies.overoptimization`) writes a figure, a CSV and the fits. Here we call its
functions on the lecture's SFT model, with the command's defaults (far smaller ones
under `--quick`), and write the same CSV and a figure like its own:

* the gold score is the hidden rule (`healthiness`: a food's healthiness, the malformed
  score of section 2 for anything else);
* the proxy (`train_proxy`) is a reward model fitted, as in InstructGPT, to comparisons
  of the SFT model's *own* samples, labelled by raters who prefer $a$ over $b$ with
  probability $\sigma\big((\operatorname{gold}(a) - \operatorname{gold}(b)) / T\big)$. Two imperfections follow, as in real reward
  models: few comparisons (very few between the healthy foods the SFT model rarely says),
  and a blind spot — the SFT model almost never writes a malformed string, so this proxy
  has hardly seen one (section 2's reward model saw many, on purpose);
* best-of-n (`best_of_n_points`): draw $n$ completions from $\pi_\text{ref}$, keep the one the proxy
  scores highest. Every completion with $\pi_\text{ref}(y \mid x) \ge \varepsilon$ is enumerated with its exact
  probability (`ppo.lm.exact.enumeration`), and with $F(s) = P_\text{ref}(r \le s)$, $F^-(s) = P_\text{ref}(r < s)$,
  $q = F - F^-$ (`ppo.lm.exact.best_of_n`),

  $$
  \pi_\text{bon}(y) = \frac{\pi_\text{ref}(y)}{q(r(y))} \Big( F\big(r(y)\big)^n - F^-\big(r(y)\big)^n \Big),
  $$

  so $\mathrm{KL}(\pi_\text{bon} \,\Vert\, \pi_\text{ref})$ and both expected scores follow in closed form for every $n$, no
  sampling — exact up to the completions rarer than ε (their total mass is the
  residual; at least one of $n$ draws falls among them with probability $1 - (1 - \text{residual})^n$,
  the total variation by which the results may be off, printed for the largest n);
* PPO against the proxy (`ppo_points`, `RLHFTrainer`) for every β of a sweep: both
  scores and the sequence KL of every <a href="../glossary.html#term-Iteration">iteration</a>'s <a href="../glossary.html#term-Rollout">rollout</a>, and of fresh samples at the end.

With $d = \sqrt{\mathrm{KL}(\pi \,\Vert\, \pi_\text{ref})}$, the gold score gained over the SFT model is fitted by least
squares (`ppo.lm.exact.overoptimization_fit`) with the paper's forms

$$
\begin{aligned}
&\text{best-of-}n\text{:} && R(d) = d\,(a - b\,d), && \text{peak at } d^* = a / (2b),\\
&\text{RL:} && R(d) = d\,(a - b \log d), && \text{peak at } d^* = \exp(a/b - 1)
\end{aligned}
$$

($a$, $b$ are the fit's coefficients; the paper calls them α, β, but here β is the KL
coefficient), and $\mathrm{KL}^* = {d^*}^2$ is where more optimisation starts to lower the gold score.
"""

# %%
OVEROPTIMIZATION_FLAGS = lecture.choose(
    full=[],  # the command's defaults
    quick=["--betas", "0", "--iterations", "2", "--batch-size", "16", "--preference-pairs", "40",
           "--reward-model-steps", "5", "--eval-samples", "32", "--best-of-n-max", "50",
           "--enumeration-threshold", "1e-4"])
settings = overoptimization.settings_from(overoptimization.build_parser().parse_args(
    ["--out-dir", str(lecture.folder), "--person", PERSON, "--relation", RELATION, *OVEROPTIMIZATION_FLAGS]))
started = time.perf_counter()
gold_proxy, num_comparisons = overoptimization.train_proxy(settings, sft, tokenizer, RELATION)
bon_rows, residual = overoptimization.best_of_n_points(settings, sft, tokenizer, gold_proxy)
gold_sft, proxy_sft = bon_rows[0]["gold"], bon_rows[0]["proxy"]  # n = 1 is π_ref itself
print(f"proxy: a reward model fitted to {num_comparisons} comparisons of SFT samples (rater noise T = "
      f"{settings.rater_noise:g}); the SFT model's gold score {gold_sft:+.3f}, proxy {proxy_sft:+.3f}")
print(f"best-of-n: every completion with π_ref ≥ {settings.enumeration_threshold:g} enumerated (residual mass "
      f"{residual:.1e}: within total variation {1 - (1 - residual) ** settings.best_of_n_max:.2g} at n = "
      f"{settings.best_of_n_max:,}); PPO: {settings.ppo.iterations} iterations × {settings.ppo.batch_size} "
      f"completions for each β of {' '.join(f'{beta:g}' for beta in settings.betas)}")
ppo_rows = overoptimization.ppo_points(settings, sft, tokenizer, gold_proxy, RELATION)  # prints each β's final policy
overoptimization_seconds = time.perf_counter() - started
for row in bon_rows + ppo_rows:
    row["sqrt_kl"] = math.sqrt(max(row["kl"], 0.0))
    row["gold_gain"] = row["gold"] - gold_sft


training_rows = [row for row in ppo_rows if row["method"] == "ppo"]
finals = {row["beta"]: row for row in ppo_rows if row["method"] == "ppo_final"}
fits = {"best-of-n": overoptimization.fit_gold_curve("best_of_n", bon_rows, gold_sft),
        "PPO": overoptimization.fit_gold_curve("rl", training_rows, gold_sft)}
csv_path = lecture.path("overoptimization.csv")
with csv_path.open("w", newline="") as file:
    writer = csv.DictWriter(file, fieldnames=overoptimization.CSV_COLUMNS)
    writer.writeheader()
    writer.writerows({key: row.get(key, "") for key in overoptimization.CSV_COLUMNS} for row in bon_rows + ppo_rows)
lecture.wrote(csv_path)

shown_n = sorted({bon_rows[round(i * (len(bon_rows) - 1) / 5)]["n"] for i in range(6)})
print_table([{"n": row["n"], "KL(π_bon ‖ π_ref)": row["kl"] if row["kl"] > 1e-12 else 0.0,  # n = 1: 0, not 1e-16
              "log n − (n−1)/n": best_of_n_kl_bound(row["n"]),
              "d = √KL": row["sqrt_kl"] if row["kl"] > 1e-12 else 0.0, "proxy": row["proxy"], "gold": row["gold"]}
             for row in bon_rows if row["n"] in shown_n],
            title=f"Best-of-n for {PROMPT!r}, exact")
print_table([{"β": beta, "KL to SFT": row["kl"], "d = √KL": row["sqrt_kl"], "proxy": row["proxy"],
              "gold": row["gold"], "most frequent": row["most_frequent"]} for beta, row in finals.items()],
            title=f"PPO against the proxy after {settings.ppo.iterations} iterations, {settings.eval_samples} fresh "
                  f"samples per β")
largest_d = {"best-of-n": max(row["sqrt_kl"] for row in bon_rows), "PPO": max(row["sqrt_kl"] for row in training_rows)}
print_table([{"method": name, "form": "d(a − bd)" if name == "best-of-n" else "d(a − b log d)", "a": fit.alpha,
              "b": fit.beta, "rms error": fit.rms_error, "points": fit.num_points,
              "largest measured KL": fit.largest_distance ** 2,
              "peak KL* = d*²": f"{fit.peak_kl:.3g}" if fit.peak_in_range else f"({fit.peak_kl:.3g}: beyond)",
              "fit's best gold (at KL)": f"{gold_sft + fit.best_in_range[1]:+.3f} ({fit.best_in_range[0] ** 2:.3g})"}
             for name, fit in fits.items() if fit is not None],
            title=f"The fitted forms of Gao et al. (gold gain over the SFT model against d = √KL), held inside the rule's "
                  f"gold range {overoptimization.GOLD_RANGE[0]:+g} … {overoptimization.GOLD_RANGE[1]:+g}")
best_beta = max(finals, key=lambda beta: finals[beta]["gold"])
bon_peak = max(bon_rows, key=lambda row: row["gold"])
print(f"best-of-n: gold highest at n = {bon_peak['n']:,} ({bon_peak['gold']:+.3f}, KL {bon_peak['kl']:.2f}); at n = "
      f"{bon_rows[-1]['n']:,} gold {bon_rows[-1]['gold']:+.3f} at proxy {bon_rows[-1]['proxy']:+.3f} (proxy at the "
      f"gold peak {bon_peak['proxy']:+.3f})")
best_proxy_food = float(proxy_scores(list(corpus.FOODS), gold_proxy).max())
for beta, row in finals.items():
    if row["proxy"] > best_proxy_food and row["gold"] < gold_sft:
        print(f"β = {beta:g} over-optimised: proxy {row['proxy']:+.2f}, above the proxy's best food "
              f"({best_proxy_food:+.2f}), at gold {row['gold']:+.2f}, below the SFT model's {gold_sft:+.2f}")
print(f"best final gold at β = {best_beta:g} ({finals[best_beta]['gold']:+.3f}, KL {finals[best_beta]['kl']:.2f}); "
      f"the experiment took {overoptimization_seconds:.1f} s")

gold_width = overoptimization.GOLD_RANGE[1] - overoptimization.GOLD_RANGE[0]


def gold_uncertainty(n: int) -> float:
    """How far best-of-n's exact gold may be off: total variation 1 − (1 − residual)ⁿ times the gold range."""
    return (1 - (1 - residual) ** n) * gold_width


bon_last = bon_rows[-1]
rise, fall = bon_peak["gold"] - gold_sft, bon_peak["gold"] - bon_last["gold"]
fall_bound = gold_uncertainty(bon_peak["n"]) + gold_uncertainty(bon_last["n"])
print(f"best-of-n gold: rise {rise:+.3f} up to n = {bon_peak['n']:,} (may be off by {gold_uncertainty(bon_peak['n']):.3f});"
      f" fall {fall:.3f} from there to n = {bon_last['n']:,}, against {fall_bound:.3f} that the two may be off together")

figure, axes = plt.subplots(1, 3, figsize=(17, 6))
d_bon = [row["sqrt_kl"] for row in bon_rows]
axes[0].plot(d_bon, [row["gold"] for row in bon_rows], "o-", ms=3, color="tab:orange", label="gold (exact)")
axes[0].plot(d_bon, [row["proxy"] for row in bon_rows], "s-", ms=3, color="tab:blue", label="proxy (exact)")
for n in (1, 10, 100, 1_000, 10_000):
    row = next((row for row in bon_rows if row["n"] == n), None)
    if row is not None:
        axes[0].annotate(f"n={n:,}", (row["sqrt_kl"], row["gold"]), fontsize=7, xytext=(2, 4),
                         textcoords="offset points")
axes[0].set_title(f"best-of-n, n = 1 … {settings.best_of_n_max:,}")
colors = plt.get_cmap("viridis")
for index, beta in enumerate(settings.betas):
    color = colors(index / max(1, len(settings.betas) - 1))
    rows = [row for row in training_rows if row["beta"] == beta]
    for axis, key in ((axes[1], "gold"), (axes[2], "proxy")):
        axis.plot([row["sqrt_kl"] for row in rows], [row[key] for row in rows], "-", lw=1.2, alpha=0.7, color=color,
                  label=f"β = {beta:g}")
        axis.plot([finals[beta]["sqrt_kl"]], [finals[beta][key]], "*", ms=10, color=color, mec="black", mew=0.5)
for axis, (name, fit) in zip(axes[:2], fits.items()):
    if fit is not None:
        grid = torch.linspace(0, max(largest_d[name], 1e-3), 200, dtype=torch.float64)
        axis.plot(grid.tolist(), (gold_sft + fit.predict(grid)).tolist(), "--", color="black", lw=1.2,
                  label=f"fit: a {fit.alpha:.3f}, b {fit.beta:.3f}")
axes[1].set_title("PPO against the proxy: gold over training (★ final)")
axes[2].set_title("PPO against the proxy: proxy over training (★ final)")
for axis, ylabel in zip(axes, ("score", "gold score (hidden rule)", "proxy score (reward model)")):
    axis.set_xlabel("d = √KL(π ‖ π_ref)  (√nats)")
    axis.set_ylabel(ylabel)
    axis.grid(alpha=0.3)
    # below the panel: every corner of it holds the start or the end of some curve
    axis.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3)
lecture.save_figure(figure, "overoptimization.png")

# %% [markdown]
r"""
Read the tables and overoptimization.png. Best-of-n first: its KL falls ever further
below $\log n - (n-1)/n$ as $n$ grows — that formula assumes no two draws tie, and here a few
likely completions hold almost all the mass. Its gold score rises with the proxy, by far
more than the enumeration may be off, up to a few hundred draws, where the best of n is
almost always the proxy's favourite food, the healthiest one (the best-of-n lines
above). Beyond that the computed gold drifts down, but by less than the enumeration may
be off there (total variation × the gold range of 1.5, printed in the "best-of-n gold"
line): a draw rarer than ε becomes likely at such n, and ε cut exactly those rare
strings out of the computation. Whether best-of-n over-optimises this proxy at all —
picking, out of very many draws, a rare string it over-scores — this run does not
establish; a smaller ε would.

PPO is swept over β, densely where it matters here: between 0.001 and 0.01 the penalty
goes from too cheap to enough. With no penalty or a small one, nothing holds the
policy at the foods: it finds a string in the proxy's blind spot (the "over-optimised"
lines above), the proxy rises above every food's score while the gold drops towards the
malformed score, far from the SFT model — the paper's rise-then-fall of gold against d,
in one run (the gold panel: each over-optimised run's line climbs with the others, then
runs right and down). From some β on PPO settles on the foods the proxy ranks highest: every run
from $\beta = 0.01$ up ends at the foods' KL or nearer the SFT model, the largest β nearest (the
KL column of the PPO table). Below that — in the run shown β = 0, 0.001 and 0.003 find
it, β = 0.002 does not (it ends on 'lettuce', gold +0.997), and β = 0.005 finds it with
about a quarter of its samples ('lettuce' 73%, 'lettes' 27%, gold +0.59) —
with one seed per β, whether a run finds the blind spot is a matter of the run, not
a smooth function of β: a difference in the last
bits of rounding (another CPU) can move a small-β run from one side to the other, so one
seed per β cannot rank the small β. β decides where along the curve PPO stops, and near
the edge it decides only the odds.

The fitted forms summarise these curves as Gao et al. do, with two guards: each is
fitted on the measured distances and held inside the gold range the rule allows
(−0.5 … 1.0 here; an unconstrained least-squares curve can promise more gold than any
answer earns, or less than the worst), and a peak beyond the largest measured KL is
marked "beyond": that is an extrapolation, not a measurement, and the last column gives
the fit's best gold inside the measured range instead.

The PPO fit misses its data. Its rms error is more than five times best-of-n's (the "rms
error" column; 0.312 against 0.034 in the run shown), and its best gold, +0.861, lies
more than 0.1 below the best gold PPO actually reached at the end of a run, +0.999 at
$\beta = 0.03$ (the PPO table): the data are a cliff — gold near the best
food's up to $d \approx 2$, then the malformed score once PPO finds the proxy's blind spot — and
$d(a - b \log d)$ is a smooth hump. Its peak $\mathrm{KL}^*$ says little about where the cliff is.
"""

# %% tags=["claims"]
for name, fit in fits.items():
    if fit is not None:
        curve = gold_sft + fit.predict(torch.linspace(0, fit.largest_distance, 2001, dtype=torch.float64))
        lecture.claim(f"The {name} fit stays inside the rule's gold range over the measured distances",
                      overoptimization.GOLD_RANGE[0] - 1e-3 <= float(curve.min())
                      and float(curve.max()) <= overoptimization.GOLD_RANGE[1] + 1e-3,
                      measured=f"fitted gold {float(curve.min()):+.3f} … {float(curve.max()):+.3f} for KL ≤ "
                               f"{fit.largest_distance ** 2:.2f}")
if fits["PPO"] is not None and fits["best-of-n"] is not None:
    ppo_fit, bon_fit = fits["PPO"], fits["best-of-n"]
    fit_best_gold = gold_sft + ppo_fit.best_in_range[1]
    lecture.claim("The PPO fit misses its data: its rms error is more than five times best-of-n's, and its best gold lies "
                  "more than 0.1 below the best gold PPO reached at the end of a run",
                  ppo_fit.rms_error > 5 * bon_fit.rms_error and finals[best_beta]["gold"] - fit_best_gold > 0.1,
                  measured=f"rms error {ppo_fit.rms_error:.3f} (best-of-n {bon_fit.rms_error:.3f}); fit's best gold "
                           f"{fit_best_gold:+.3f} at KL {ppo_fit.best_in_range[0] ** 2:.2f}, PPO's best final gold "
                           f"{finals[best_beta]['gold']:+.3f} at β = {best_beta:g}, KL {finals[best_beta]['kl']:.2f}",
                  quick=False)
kl_gaps = [best_of_n_kl_bound(row["n"]) - row["kl"] for row in bon_rows]
lecture.claim("Best-of-n's KL falls ever further below log n − (n−1)/n as n grows",
              all(later >= earlier - 1e-9 for earlier, later in zip(kl_gaps, kl_gaps[1:])) and kl_gaps[-1] > 0.1,
              measured=f"gap {kl_gaps[1]:.3f} at n = {bon_rows[1]['n']} … {kl_gaps[-1]:.2f} at n = {bon_rows[-1]['n']:,}")
lecture.claim("Best-of-n's gold score rises with the proxy, by more than the enumeration may be off (total variation "
              "× gold range), up to a few hundred draws, where it is all but the best food's",
              rise > gold_uncertainty(bon_peak["n"]) and 100 <= bon_peak["n"] <= 1000
              and bon_peak["gold"] > overoptimization.GOLD_RANGE[1] - 0.01,
              measured=f"gold {gold_sft:+.3f} → {bon_peak['gold']:+.3f} at n = {bon_peak['n']:,}, off by at most "
                       f"{gold_uncertainty(bon_peak['n']):.3f}", quick=False)
lecture.claim("Beyond that the computed gold drifts down, but by less than the enumeration may be off there: this run "
              "does not establish a fall",
              0 < fall < fall_bound,
              measured=f"gold {bon_peak['gold']:+.3f} at n = {bon_peak['n']:,} → {bon_last['gold']:+.3f} at n = "
                       f"{bon_last['n']:,}: a fall of {fall:.3f} against a bound of {fall_bound:.3f}", quick=False)
penalised = sorted(beta for beta in finals if beta > 0)
hacked = [beta for beta in finals if finals[beta]["proxy"] > best_proxy_food and finals[beta]["gold"] < gold_sft]
settled = [beta for beta in penalised if finals[beta]["gold"] > gold_sft]
large = [beta for beta in penalised if beta >= 0.01]
lecture.claim("Every run from β = 0.01 up ends at the foods' KL or nearer the SFT model (at most 0.05 nats above the "
              "β = 0.01 run's), the largest β nearest",
              bool(large) and all(finals[beta]["kl"] <= finals[large[0]]["kl"] + 0.05 for beta in large)
              and min(penalised, key=lambda beta: finals[beta]["kl"]) == max(penalised),
              measured=", ".join(f"β {beta:g}: {finals[beta]['kl']:.2f}" for beta in penalised), quick=False)
lecture.claim("Small β (or none) lets PPO run far past the foods to a string the proxy over-scores, and a large enough "
              "β stops it at the foods: the KL penalty sets how far along the curve PPO goes",
              bool(hacked) and bool(settled) and max(settled) > max(hacked)
              and finals[min(settled)]["kl"] < finals[max(hacked)]["kl"],
              measured=f"over-optimised at β = {', '.join(f'{beta:g}' for beta in sorted(hacked)) or 'none'}; gold "
                       f"above the SFT model's at β = {', '.join(f'{beta:g}' for beta in settled) or 'none'}", quick=False)

# %% [markdown]
r"""
## 4. An adaptive β

A fixed β is an exchange rate you must guess. `ppo-rlhf --kl-target` asks for a KL
instead, and a controller of `ppo/lm/algorithm/kl_control.py` moves β after every batch. Ziegler
et al. (2019) use a proportional rule (`ProportionalKLController`): with the batch's mean
sequence KL and its $n$ completions,

$$
e = \operatorname{clip}\big(\mathrm{KL} / \mathrm{KL}_\text{target} - 1,\ -0.2,\ 0.2\big), \qquad \beta \leftarrow \beta\, (1 + e\, n / \text{horizon}).
$$

It was made for runs of thousands of batches, in which the policy moves slowly next to
β. Here the policy reaches its optimum in a handful of iterations — as fast as the rule
can move β — and the KL answers β only after the policy has moved: at the start the KL
is 0, so the rule *lowers* β, and the policy overshoots the target, as far as the fixed β
takes it. It comes back only as fast as the rule raises β: by the end of this run the KL
of fresh samples has fallen to two thirds of its peak or less and the policy has spread
out again over several foods, while the last batches' KL is still above the target (the
numbers are printed below the table). Where the fresh samples' KL ends, above or below
the target, changes from one machine to another: the rule reacts to the policy's
overshoot, and the size of that overshoot is the run's.

The library's default (`OptimumKLController`) uses what this objective lets us know:
its maximiser, $\pi^*_\beta(y) \propto \pi_\text{ref}(y) \exp\big(r(y)/\beta\big)$. The batch estimates $\mathrm{KL}(\pi^*_\beta \,\Vert\, \pi_\text{ref})$ for
every β at once: re-weight the completions by $\exp(-\ell_i)$, $\ell_i = \log \pi(y_i)/\pi_\text{ref}(y_i)$,
to make them a sample of $\pi_\text{ref}$ ($q_i$), tilt that by $\exp(r_i/\beta)$ ($p_i(\beta)$), and take
$K(\beta) = \sum_i p_i \log(p_i/q_i)$. $K$ falls as β grows, so $K(\hat\beta) = \mathrm{KL}_\text{target}$ has one root. $\hat\beta$
depends on $\pi_\text{ref}$, the reward and the target only, so every batch estimates the same
number; the controller averages them (geometrically, each weighted by the batch's
effective sample size, which falls as the policy moves away from $\pi_\text{ref}$, and each clipped
to within a factor 2 of the average so far, so no one batch drags it further). β moves
there (by at most a factor 2 per batch) before the policy does, and PPO then converges to
the optimum that has the target KL. This rule is the library's own, not a published one,
and it has a finite-sample bias: once the policy is far from $\pi_\text{ref}$, its batches hold few of
the completions $\pi_\text{ref}$ favours and the policy avoids, so $K(\beta)$ reads low, $\hat\beta$ with it, and
the KL can settle above the target. In the run shown it stays near it, a little above: the last
batches average 1.07 nats and fresh samples of the final policy 1.03, against a target of 1.

The table takes one step of the proportional rule by hand next to the library's, and
evaluates $K(\beta)$ on one batch of the SFT model's completions. Then PPO runs three times
against section 2's reward model: fixed β, and each controller asked for a target KL
well below what the fixed β settles at.
"""


# %%
class RecordingScorer:
    """The reward model's scores for the trainer; the hidden rule's mean score of each batch on the side."""

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
    """Proxy (missing-EOS penalty where EOS is missing, as in training), true score, well-formed rate, KL (k1)."""
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


def train(config: RLHFConfig) -> tuple[RLHFTrainer, float]:
    """The library's trainer for config.algorithm (PPO, GRPO or RLOO) on the food task with section 2's reward
    model; the trainer and its seconds per iteration."""
    trainer = trainer_class(config.algorithm)(config, sft, tokenizer, food_task(TASK_CONFIG, reward=RecordingScorer()),
                                              progress=False)
    started = time.perf_counter()
    trainer.train()
    return trainer, (time.perf_counter() - started) / config.iterations


KL_TARGET = 1.0  # nats; the fixed-β run settles well above it (printed below)
HORIZON = BASE.replace(kl_target=KL_TARGET).effective_kl_horizon  # the default: iterations · batch_size / 20


def proportional_step(beta: float, kl: float, n: int) -> tuple[float, float]:
    """(e, β after one batch) by Ziegler et al.'s proportional rule, written out."""
    error = min(max(kl / KL_TARGET - 1, -0.2), 0.2)
    return error, beta * (1 + error * n / HORIZON)


step_rows = []
for kl in (0.0, KL_TARGET / 2, KL_TARGET, KL_TARGET * 1.1, KL_TARGET * 3):
    error, by_rule = proportional_step(1.0, kl, BATCH)
    controller = ProportionalKLController(1.0, KL_TARGET, HORIZON)
    step_rows.append({"measured KL": kl, "e": error, "β by the proportional rule": by_rule,
                      "β from ProportionalKLController": controller.update(KLFeedback(kl, BATCH))})
print_table(step_rows, title=f"One step from β = 1.0: target {KL_TARGET} nats, n = {BATCH}, horizon {HORIZON}")
same = all(math.isclose(row["β by the proportional rule"], row["β from ProportionalKLController"], rel_tol=1e-12)
           for row in step_rows)
print("the library's controller takes exactly the proportional step" if same else
      "the library's controller departs from the plain proportional rule here (ppo/lm/algorithm/kl_control.py says how)")

sft_batch = sample_completions(sft, tokenizer, [PROMPT] * BATCH, BASE.max_new_tokens, BASE.temperature,
                               torch.Generator().manual_seed(7))
sft_scores = torch.where(sft_batch.ended_with_eos, reward_model.score_batch(sft_batch),
                         torch.tensor(BASE.missing_eos_penalty))
sft_log_ratios = torch.zeros(BATCH)  # the SFT model is the reference: ℓ_i = 0, q uniform
beta_hat = solve_beta(sft_scores, sft_log_ratios, KL_TARGET)
print_table([{"β": beta, "K(β): KL of π*_β, estimated from the batch": tilted_kl(1 / beta, sft_scores, sft_log_ratios)}
             for beta in (0.05, BASE.kl_coef, 0.5, beta_hat, 2.0)],
            title=f"K(β) on {BATCH} SFT completions (largest possible {largest_tilted_kl(sft_scores, sft_log_ratios):.2f}"
                  f" nats); K(β̂) = {KL_TARGET} at β̂ = {beta_hat:.3g}")

fixed, fixed_seconds = train(BASE)
fixed_kl = fixed.history[-1]["sequence_kl"]
adaptive = {rule: train(BASE.replace(kl_target=KL_TARGET, kl_controller=rule))[0]
            for rule in ("proportional", "optimum")}
adaptive_summary = {}
for rule, trainer in adaptive.items():
    betas = [m["beta"] for m in trainer.history] + [trainer.kl_controller.beta]
    kl_curve = [m["sequence_kl"] for m in trainer.history]
    last_batches = kl_curve[-max(1, len(kl_curve) // 6):]
    adaptive_summary[rule] = {"betas": betas, "kl": kl_curve, "last": sum(last_batches) / len(last_batches)}
    print(f"{rule} rule, {len(kl_curve)} iterations: β {betas[0]:.3g} → lowest {min(betas):.3g} → final "
          f"{betas[-1]:.3g}; sequence KL highest {max(kl_curve):.2f}, mean of the last {len(last_batches)} batches "
          f"{sum(last_batches) / len(last_batches):.2f} (target {KL_TARGET}; the fixed β = {BASE.kl_coef} run ended at "
          f"{fixed_kl:.2f})")
reference = fixed.reference
fixed_measured = measure(fixed.policy, reference)
adaptive_measured = {rule: measure(trainer.policy, reference) for rule, trainer in adaptive.items()}
print_table([{"policy": "SFT", **measure(reference, reference)},
             {"policy": f"PPO, fixed β = {BASE.kl_coef}", **fixed_measured},
             *({"policy": f"PPO, {rule} rule → KL {KL_TARGET}", **adaptive_measured[rule]} for rule in adaptive)],
            title=f"After training, {EVAL_SAMPLES} fresh samples each")
for rule, summary in adaptive_summary.items():
    print(f"{rule} rule: sequence KL highest {max(summary['kl']):.2f} → last batches {summary['last']:.2f} → fresh "
          f"samples {adaptive_measured[rule]['KL to SFT']:.3f} (target {KL_TARGET}); most frequent: "
          f"{adaptive_measured[rule]['most frequent']}")

figure, axes = plt.subplots(1, 2, figsize=(11, 4))
axes[0].plot(range(1, len(fixed.history) + 1), [m["sequence_kl"] for m in fixed.history], color="0.5",
             label=f"fixed β = {BASE.kl_coef}")
for rule, trainer in adaptive.items():
    axes[0].plot(range(1, len(trainer.history) + 1), [m["sequence_kl"] for m in trainer.history], label=f"{rule} rule")
    axes[1].plot(range(len(trainer.history) + 1), [m["beta"] for m in trainer.history] + [trainer.kl_controller.beta],
                 label=f"{rule} rule")
axes[0].axhline(KL_TARGET, color="black", ls="--", lw=1, label="target")
axes[0].set_ylabel("sequence KL to SFT (nats)")
axes[1].set_ylabel("β")
axes[1].set_yscale("log")
for axis in axes:
    axis.set_xlabel("iteration")
    axis.legend(fontsize=8)
axes[0].set_title("KL steered towards a target")
axes[1].set_title("β, adapted after every batch")
lecture.save_figure(figure, "adaptive_kl.png")


# %% [markdown]
r"""
Read adaptive_kl.png: the proportional rule first lowers β while the KL is still
climbing from 0 (its lowest β comes within the first iterations), the policy runs to
where the fixed β takes it, and β then climbs at its limited rate while the policy
answers late: at the end of the run the KL is still on its way down. The optimum rule
sets β near $\hat\beta$ within two batches and holds it there; after an early excursion that all
three runs share, the KL comes down to the target as PPO converges to $\pi^*_{\hat\beta}$. Compare both with the fixed-β row: the same reward
model, another point on the reward–KL trade-off.
"""

# %% tags=["claims"]
lecture.claim("The library's controller takes exactly the proportional step", same,
              measured=", ".join(f"{row['β by the proportional rule']:.4g} / {row['β from ProportionalKLController']:.4g}"
                                 for row in step_rows))
k_values = [tilted_kl(1 / beta, sft_scores, sft_log_ratios) for beta in (0.05, BASE.kl_coef, 0.5, 2.0)]
lecture.claim("K falls as β grows", all(later < earlier for earlier, later in zip(k_values, k_values[1:])),
              measured=", ".join(f"{k:.3f}" for k in k_values))
lecture.claim(f"The fixed β = {BASE.kl_coef} run settles well above the target KL (more than twice it)",
              fixed_kl > 2 * KL_TARGET, measured=f"{fixed_kl:.2f} nats, target {KL_TARGET}", quick=False)
proportional, optimum = adaptive_summary["proportional"], adaptive_summary["optimum"]
lowest_at = proportional["betas"].index(min(proportional["betas"]))
lecture.claim("The proportional rule first lowers β while the KL is still climbing from 0 (its lowest β within the "
              "first five iterations)", min(proportional["betas"]) < proportional["betas"][0] and lowest_at <= 5,
              measured=f"β {proportional['betas'][0]:.3g} → lowest {min(proportional['betas']):.3g} after "
                       f"{lowest_at} batches", quick=False)
lecture.claim("Under the proportional rule the policy runs to where the fixed β takes it (its highest KL within 20% "
              "of the fixed-β run's final KL), and at the end of the run the KL is still on its way down (the last "
              "batches' mean above the target by more than 20%)",
              max(proportional["kl"]) > 0.8 * fixed_kl and proportional["last"] > 1.2 * KL_TARGET,
              measured=f"highest {max(proportional['kl']):.2f} (fixed β: {fixed_kl:.2f}), last batches "
                       f"{proportional['last']:.2f}", quick=False)
lecture.claim("The optimum rule sets β near β̂ within two batches and holds it there (β after two batches within a "
              "factor 1.5 of β̂ and of its final β)",
              max(abs(math.log(optimum["betas"][2] / beta_hat)), abs(math.log(optimum["betas"][2] / optimum["betas"][-1])))
              < math.log(1.5),
              measured=f"β̂ {beta_hat:.3g}; β after two batches {optimum['betas'][2]:.3g}, final {optimum['betas'][-1]:.3g}",
              quick=False)
optimum_fresh_kl = adaptive_measured["optimum"]["KL to SFT"]
lecture.claim("Under the optimum rule the KL settles near the target here: the last batches and fresh samples of the "
              "final policy both sit within 10% of it",
              abs(optimum["last"] / KL_TARGET - 1) < 0.1 and abs(optimum_fresh_kl / KL_TARGET - 1) < 0.1,
              measured=f"last batches {optimum['last']:.3f}, fresh samples {optimum_fresh_kl:.3f}, target {KL_TARGET}",
              quick=False)
proportional_fresh = adaptive_measured["proportional"]
proportional_top = Counter()
for text in proportional_fresh["most frequent"].split(", "):
    proportional_top[text.rsplit("×", 1)[0]] = int(text.rsplit("×", 1)[1])
lecture.claim("Under the proportional rule the policy comes back only as fast as β rises: by the end the KL of fresh "
              "samples has fallen to two thirds of its peak or less and the policy has spread out again over several "
              "foods (its three most frequent answers each above 10% of the samples)",
              proportional_fresh["KL to SFT"] < 2 * max(proportional["kl"]) / 3
              and len(proportional_top) == 3 and min(proportional_top.values()) > 0.1 * EVAL_SAMPLES,
              measured=f"KL highest {max(proportional['kl']):.2f} → fresh samples {proportional_fresh['KL to SFT']:.2f}"
                       f" (target {KL_TARGET}); {proportional_fresh['most frequent']}", quick=False)

# %% [markdown]
r"""
## 5. Without a critic: group baselines (GRPO) and leave-one-out (RLOO)

PPO's critic is a second network as large as the policy, trained alongside it, whose
only job is the baseline $V(s_t)$. For a reward paid once per completion there is a
cheaper baseline: sample $G$ completions of the same prompt and compare each with the
others. With the sequence reward $R_i = r_\phi(y_i) - \beta \sum_t \mathrm{KL}_t(y_i)$, and $j$ over the group of $G$:

$$
\begin{aligned}
\text{GRPO:}\quad \hat A_i &= \frac{R_i - \operatorname{mean}_j R_j}{\operatorname{std}_j R_j + \varepsilon},\\
\text{RLOO:}\quad \hat A_i &= R_i - \frac{1}{G - 1} \sum_{j \ne i} R_j.
\end{aligned}
$$

Every token of completion $i$ gets the same $\hat A_i$; no value network, no <a href="../glossary.html#term-GAE">GAE</a>. The library's
`GroupBaselineTrainer` (`ppo/lm/trainers/group_trainer.py`) is `RLHFTrainer` with three methods
replaced: the rollout's prompts come in groups of G, `advantages` puts $\hat A_i$ on every token
(`group_advantages`), and `minibatch_loss` drops the <a href="../glossary.html#term-Value-loss">value loss</a>. Everything else is PPO's:
the sampler, the per-token log-probs at temperature τ, the <a href="../glossary.html#term-Clipped-surrogate">clipped surrogate</a> with the
same ε, and the same update routine (`ppo.algorithm.update.run_update`: <a href="../glossary.html#term-Epoch">epochs</a>, <a href="../glossary.html#term-Minibatch">minibatches</a>,
<a href="../glossary.html#term-Gradient-clipping">gradient clipping</a>, <a href="../glossary.html#term-Early-stopping">early stop</a>). `trainer_class(config.algorithm)` picks the trainer, as
`ppo-rlhf --algorithm grpo|rloo --group-size G` does. Where the KL penalty goes is
`RLHFConfig.kl_penalty` (`ppo/lm/algorithm/kl_penalty.py`): RLOO keeps PPO's placement, <a href="../glossary.html#term-k1-k2-k3-estimators">k1</a> in the
reward, so its baseline is the only difference from PPO. GRPO divides each reward by its
group's std, which would rescale a KL in the reward, so it puts k3 in the loss as
published (`loss-k3`, the default for `grpo`): that regularises the reverse KL at each
visited state, not the $\mathrm{KL}(\pi \,\Vert\, \pi_\text{SFT})$ of PPO's objective, so GRPO's row optimises a
different objective at the same β. First the two baselines on one group by hand:
"""

# %%
example = torch.tensor([1.0, 0.5, 0.0, -0.5])
print_table([{"R_i": float(reward), "mean of the other three": float((example.sum() - reward) / 3),
              "GRPO Â_i": float(grpo), "RLOO Â_i": float(rloo)}
             for reward, grpo, rloo in zip(example, group_advantages(example, 4, "grpo"),
                                           group_advantages(example, 4, "rloo"))],
            title="One group of G = 4 sequence rewards (group_advantages)")
GROUP_SIZE = lecture.choose(full=16, quick=8)
print(f"{BATCH // GROUP_SIZE} groups of G = {GROUP_SIZE} completions per iteration, β = {BASE.kl_coef}, "
      f"{ITERATIONS} iterations, the same optimiser settings as PPO; KL penalty: "
      + ", ".join(f"{algorithm} {BASE.replace(algorithm=algorithm).effective_kl_penalty}"
                  for algorithm in ("ppo", "grpo", "rloo")))
trainers = {"PPO (critic, token-level GAE)": (fixed, fixed_seconds)}
for algorithm in ("grpo", "rloo"):
    trainers[f"{algorithm.upper()} baseline, no critic"] = train(BASE.replace(algorithm=algorithm,
                                                                               group_size=GROUP_SIZE))
print_table([{"method": name, "s / iteration": seconds, "trained networks": 2 if trainer.uses_critic else 1,
              **(fixed_measured if trainer is fixed else measure(trainer.policy, reference))}
             for name, (trainer, seconds) in trainers.items()],
            title=f"Three trainers, β = {BASE.kl_coef}: {EVAL_SAMPLES} fresh samples each")

figure, axes = plt.subplots(1, 2, figsize=(11, 4))
for name, (trainer, _) in trainers.items():
    iterations = range(1, len(trainer.history) + 1)
    axes[0].plot(iterations, [m["score"] for m in trainer.history], label=name)
    axes[1].plot(iterations, [m["sequence_kl"] for m in trainer.history], label=name)
axes[0].set_title("proxy score r_φ of the batch")
axes[1].set_title("sequence KL to SFT (nats)")
for axis in axes:
    axis.set_xlabel("iteration")
    axis.legend(fontsize=8)
lecture.save_figure(figure, "critic_free.png")

# %% tags=["claims"]
critic_parameters = {name: 0 if trainer.critic is None else sum(p.numel() for p in trainer.critic.parameters())
                     for name, (trainer, _) in trainers.items()}
lecture.claim("The critic-free trainers hold no second network; PPO's critic is as large as the policy",
              all(count == 0 for name, count in critic_parameters.items() if not name.startswith("PPO"))
              and critic_parameters["PPO (critic, token-level GAE)"] >= sft.num_parameters(),
              measured=", ".join(f"{name}: critic {count:,} parameters" for name, count in critic_parameters.items())
                       + f" (policy {sft.num_parameters():,})")

# %% [markdown]
r"""
## 6. Without a reward model: DPO

DPO (Rafailov et al. 2023, *Direct Preference Optimization*) skips stages 2 and 3. The
maximiser of $\mathbb E[r] - \beta\, \mathrm{KL}(\pi \,\Vert\, \pi_\text{ref})$ is $\pi^* \propto \pi_\text{ref} \exp(r/\beta)$ ([lecture 12](12_ppo_for_language_models.ipynb)), so
$r = \beta \log(\pi^*/\pi_\text{ref}) + \beta \log Z(x)$, the last term a function of the prompt alone. The
Bradley–Terry likelihood of a comparison, $\sigma\big(r(y_w) - r(y_l)\big)$, sees only the difference of
two rewards for the same prompt, so that term cancels and the likelihood can be written
in the policy itself; maximised over π in place of $r$, it is

$$
L_\text{DPO} = -\log \sigma(\beta h), \qquad h = \log \frac{\pi(y_w)}{\pi_\text{ref}(y_w)} - \log \frac{\pi(y_l)}{\pi_\text{ref}(y_l)}
$$

(`ppo/lm/trainers/dpo.py`, `train_dpo`). No reward model, no sampling during training: one
supervised pass over the comparisons. It runs here as `experiments/studies/preference_methods.py`
runs it, on the two-choice task of [lecture 12](12_ppo_for_language_models.ipynb), section 7 (a relation at the first token
and a food six tokens later, paid only together): comparisons of the SFT model's own
samples, two completions of one prompt, labelled by a simulated rater who prefers $y_1$ with
probability $\sigma\big((r(y_1) - r(y_2))/t\big)$ (`experiments/tasks/preference_rater.py`). Those comparisons
imply the reward $r/t$, so DPO at β aims at $\pi_\text{ref} \exp\big(r/(t\beta)\big)$, which we compute exactly over
the 20 answers ([lecture 12](12_ppo_for_language_models.ipynb)'s `kl_regularised_optimum`): on this task, unlike the food
answers scored by a learned reward model above, we can say exactly where DPO should land
and measure how far it is. One seed, $t = 0.5$, $\beta = 0.3$ ($t\beta = 0.15$), the module's
defaults for the rest.

The table measures each policy exactly over the 20 answers (the rest, malformed or
unfinished, one group) and averages over the eight prompts: the gold E[r] under the rule,
the total variation to DPO's target (0 on it, 1 for disjoint distributions), and the
malformed-or-unfinished mass.

What the run shows. DPO moves most of the way from the SFT model to its target: the
total variation to it falls from 0.775 to 0.269, and the gold E[r] rises from 0.27 to 0.92 (the target's is 0.975). It also leaves
more of its mass on malformed or unfinished strings than the SFT model did — 3.3% on
this seed, where the SFT model has 0.2% (and the target, which tilts only the 20
answers, less still). One reading: the loss only ever compares two
sampled completions, and pushing a rejected one down can send its mass to strings no
comparison contains, which nothing in the loss prices, whereas PPO would sample such
strings and be charged their KL. `python -m
experiments.studies.preference_methods` sets DPO beside IPO, a reward model + PPO and best-of-n
from the same comparisons, over several seeds.
"""

# %%
DPO_COMPARISONS = lecture.choose(full=2000, quick=200)
RATER_TEMPERATURE, DPO_BETA = 0.5, 0.3
two_choice_config = TwoChoiceTaskConfig()
two_choice = two_choice_task(two_choice_config)
two_choice_scores = two_choice_config.answer_scores()  # the 20 answers; MALFORMED (all else here) 0
dpo_comparisons = rater_comparisons(sft, tokenizer, two_choice.prompts,
                                lambda text: two_choice_config.completion_score(text, True), DPO_COMPARISONS,
                                RATER_TEMPERATURE, BASE.max_new_tokens, seed=1)
dpo_policy = train_preference_policy(sft, tokenizer, dpo_comparisons,
                                     DPOConfig(beta=DPO_BETA, epochs=lecture.choose(full=4, quick=1), seed=1).validate())


def two_choice_groups(model) -> dict[str, dict[str, float]]:
    """π(answer + EOS | prompt) of each prompt over the 20 answers, the rest lumped (MALFORMED): exact."""
    return {prompt: completion_probabilities(model, tokenizer, prompt, ANSWERS) for prompt in two_choice.prompts}


sft_groups, dpo_groups = two_choice_groups(sft), two_choice_groups(dpo_policy)
dpo_target = {prompt: kl_regularised_optimum(sft_groups[prompt], two_choice_scores, RATER_TEMPERATURE * DPO_BETA)
              for prompt in two_choice.prompts}


def summary(groups: dict[str, dict[str, float]]) -> dict[str, float]:
    """Mean over the prompts of the gold E[r], the TV to DPO's target and the malformed-or-unfinished mass."""
    return {"gold": sum(sum(p * two_choice_scores[g] for g, p in groups[x].items()) for x in groups) / len(groups),
            "tv": sum(total_variation(groups[x], dpo_target[x].probabilities) for x in groups) / len(groups),
            "rest": sum(groups[x][MALFORMED] for x in groups) / len(groups)}


dpo_rows = {"SFT (π_ref)": summary(sft_groups), "DPO": summary(dpo_groups),
            f"target π_ref·exp(r/(t·β)), t·β = {RATER_TEMPERATURE * DPO_BETA:g}":
                summary({x: dpo_target[x].probabilities for x in two_choice.prompts})}
print_table([{"policy": name, "gold E[r]": row["gold"], "TV to the target": row["tv"],
              "malformed or unfinished": f"{row['rest']:.2%}"} for name, row in dpo_rows.items()],
            title=f"DPO on {len(dpo_comparisons)} rater comparisons of the two-choice task (seed 1): exact over the 20 "
                  f"answers, mean over the {len(two_choice.prompts)} prompts")

# %% tags=["claims"]
sft_summary, dpo_summary = dpo_rows["SFT (π_ref)"], dpo_rows["DPO"]
target_gold = statistics.fmean(o.expected_score for o in dpo_target.values())
lecture.claim("the total variation to it falls from above 0.75 to below 0.3", sft_summary["tv"] > 0.75 and dpo_summary["tv"] < 0.3,
              measured=f"TV to the target: SFT {sft_summary['tv']:.3f}, DPO {dpo_summary['tv']:.3f}", quick=False)
lecture.claim("the gold E[r] rises from 0.27 to above 0.9 (the target's is 0.975)",
              round(sft_summary["gold"], 2) == 0.27 and dpo_summary["gold"] > 0.9 and round(target_gold, 3) == 0.975,
              measured=f"SFT {sft_summary['gold']:.3f}, DPO {dpo_summary['gold']:.3f}, target {target_gold:.3f}", quick=False)
target_rest = statistics.fmean(o.probabilities[MALFORMED] for o in dpo_target.values())
lecture.claim("it leaves more than 3% of its mass on malformed or unfinished strings on this seed, where the SFT "
              "model has 0.2% (and the target less still)",
              dpo_summary["rest"] > 0.03 and round(sft_summary["rest"], 3) == 0.002 and target_rest < sft_summary["rest"],
              measured=f"DPO {dpo_summary['rest']:.2%}, SFT {sft_summary['rest']:.2%}, target {target_rest:.3%}",
              quick=False)

# %% [markdown]
r"""
## What to take away

* A reward model is trained on comparisons and is only trustworthy near them (the probe
  in section 2). PPO is an optimiser: it will find what the proxy over-scores unless
  something holds it back.
* Over-optimisation has a shape (section 3): measured against $d = \sqrt{\mathrm{KL}}$, the gold score
  first rises with the proxy and then, once PPO's policy leaves the region the
  comparisons covered, falls while the proxy keeps rising (best-of-n's rise is clear;
  its fall, at n in the thousands, is within what the computation may be off). The KL
  penalty sets how far along that curve PPO goes.
* The adaptive controller replaces "choose β" with "choose a KL budget" (section 4).
* With one reward per completion, a baseline from other samples of the same prompt can
  stand in for the critic (section 5): one network fewer to train and hold in memory, at
  the price of $G$ samples per prompt and no per-token credit assignment. Compare the
  rows and the seconds per iteration.
* DPO (section 6) learns from the comparisons directly, without a reward model or
  sampling, and comes most of the way to the exact optimum its loss aims at; the mass it
  moves onto strings no comparison contains is priced by nothing in its loss.
"""

# %%
lecture.finish()
