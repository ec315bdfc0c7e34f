# %% [markdown]
r"""
# Lecture 12 — PPO for language models

**What it teaches.** Text generation is an MDP, and <a href="../glossary.html#term-PPO">PPO</a> runs on it unchanged:

$$
\begin{aligned}
&\text{state} && s_t = (\text{prompt } x,\ \text{tokens } y_0 \ldots y_{t-1} \text{ generated so far})\\
&\text{action} && a_t = y_t \text{, the next token, drawn from } \pi_\theta(\cdot \mid s_t) = \operatorname{softmax}(z_t / \tau)\\
&\text{episode} && \text{ends at the EOS token (or at a length limit)}\\
&\text{reward} && r_t = -\beta\, \mathrm{KL}_t \text{ at every token, } + \operatorname{score}(y) \text{ added at the EOS token only}
\end{aligned}
$$

where $\mathrm{KL}_t = \log \pi_\theta(y_t \mid s_t) - \log \pi_\text{ref}(y_t \mid s_t)$ compares the policy with a frozen
<a href="../glossary.html#term-Reference-policy-_ref">reference</a>, the supervised (<a href="../glossary.html#term-SFT">SFT</a>) model PPO started from. Summed over a <a href="../glossary.html#term-Completion">completion</a>, the
$\mathrm{KL}_t$ are an estimate of $\mathrm{KL}(\pi_\theta \,\Vert\, \pi_\text{ref})$ for that prompt, so PPO maximises

$$
J(\pi) = \mathbb E_{y \sim \pi}\big[\operatorname{score}(y)\big] - \beta\, \mathrm{KL}(\pi \,\Vert\, \pi_\text{ref}),
$$

whose maximiser is known exactly: $\pi^*(y) \propto \pi_\text{ref}(y) \exp\big(\operatorname{score}(y) / \beta\big)$. On our toy
corpus every well-formed answer is one of ten foods, so π* can be computed and PPO's
result checked against it — a yardstick real <a href="../glossary.html#term-RLHF">RLHF</a> never has.

The machinery is the one from CartPole: the <a href="../glossary.html#term-Clipped-surrogate">clipped surrogate</a> and the <a href="../glossary.html#term-Value-loss">value loss</a> of
`ppo/algorithm/losses.py`, <a href="../glossary.html#term-GAE">GAE</a> of `ppo/algorithm/advantages.py` run along the token axis ($\gamma = 1$, the
last real token <a href="../glossary.html#term-Termination">terminal</a>), the same K <a href="../glossary.html#term-Epoch">epochs</a> of <a href="../glossary.html#term-Minibatch">minibatches</a> of `ppo/algorithm/update.py`, the same
<a href="../glossary.html#term-KL-divergence">KL</a> estimators (<a href="../glossary.html#term-k1-k2-k3-estimators">k1</a>, and k3, the "<a href="../glossary.html#term-Approx-KL">approx KL</a>"; section 5 sets them side by side). The trainer does not know the task: it gets
the prompts and the reward from us, as a `CompletionTask`.

The experiment is a classic first exercise in RLHF teaching material: teach a model
that rarely completes "ravin likes " with "pizza" (section 1 gives the exact rate) to
say pizza, with a reward for exactly "pizza" + <a href="../glossary.html#term-EOS">EOS</a>. One of this course's reference
texts runs this experiment: the teaching notebook "Proximal Policy Optimization" of a
small-language-model course built on its own library, `cleanllm` ("We use PPO to shift
Ravin's diet"). On its own character-level model it updates the model after every
single completion:

```python
for episode in range(300):
    completion = generate(policy, prompt)                 # one sample
    reward = 4.0 if completion.endswith("pizza<EOS>") else 0.0
    ppo_update(policy, critic, [completion], [reward])    # a batch of one
```

That notebook (called "the `cleanllm` notebook" below) reports, as its own result
(quoted here, not run): "pizza" in 12 of 100 samples before training and in 81 of 100
after 300 episodes (a sample counts when its
text contains "pizza"), a logged "mean KL" between 3.76 and 3.88 over episodes 100–300
(which it describes as an average over an episode's tokens, so not the sequence KL this
lecture measures), and garbled completions among the pizzas ("pizzaicres wpiesE").
[Lecture 8](08_implementation_details.ipynb) (defect 8) measures why a batch of one is a poor gradient. Here we train with
batches of completions and measure ours — target rate, KL, entropy, well-formed rate —
and set it next to π*.

The pizza task has one decision: the first letter of the food settles everything, so it
is a one-decision bandit, the clearest case for the mechanics (sections 1–6: one episode
token by token, GAE along the tokens, the KL estimators and placements, π*). On it a
<a href="../glossary.html#term-Critic">critic</a>, token-level credit and a critic-free group <a href="../glossary.html#term-Baseline">baseline</a> have nothing to differ on.
Section 7 therefore runs a second task with two decisions six tokens apart — a relation,
"likes" or "hates", at the first token and a food at the seventh, paid only in the right
combination — and there sets PPO's critic against <a href="../glossary.html#term-RLOO">RLOO</a>'s and <a href="../glossary.html#term-GRPO">GRPO</a>'s group baselines and
against π*.

**Prerequisites.** Lectures [3](03_gae.ipynb)–[8](08_implementation_details.ipynb); [lecture 8](08_implementation_details.ipynb)'s defects 4–8 are the LM-side pitfalls.

**Library.** `ppo/lm/` — in `models/`: `tokenizer.py`, `gpt.py` (a tiny GPT),
`sampling.py`, `pretrain.py` (`load_or_pretrain_sft`); in `algorithm/`: `rollout.py`
(sample, then score every token), `rewards.py` (per-token rewards), `kl_penalty.py` (where
$\beta\,\mathrm{KL}$ goes), `task.py` (`CompletionTask`); in `exact/`: `kl_gradients.py` (each placement's
exact expected gradient), `optimum.py` (π*); in `trainers/`: `rlhf_trainer.py`
(`RLHFTrainer`), `evaluation.py`, `diagnostics.py`; `envs/corpus.py`
(the known distribution), `envs/token_task.py` (prompts and rule rewards),
`experiments/tasks/food_task.py` (the two handed to the trainer); for section 7
`experiments/tasks/two_choice_task.py`, `ppo/lm/trainers/group_trainer.py` (RLOO and GRPO),
`ppo/lm/exact/optimum_distance.py` (distance to π*), `experiments/studies/compare_lm_trainers.py`
(`position_shares`, `first_reaching`), `experiments/studies/grpo_biases.py` (`difficulty_bias`) and
`experiments/commands/statistics.py` (<a href="../glossary.html#term-IQM">IQM</a> with confidence intervals); `ppo/algorithm/update.py`,
`ppo/algorithm/losses.py` (`kl_per_sample`), `ppo/algorithm/advantages.py`
(`compute_gae`). Command lines: `python -m experiments.commands.rlhf`, `python -m
experiments.studies.compare_lm_trainers`.
"""

# %%
import math
import statistics

import numpy as np
import torch
from matplotlib.ticker import MaxNLocator

from _common import Lecture, plt, print_table
from envs import corpus
from experiments.studies.compare_lm_trainers import first_reaching, position_shares
from experiments.tasks.food_task import FoodTaskConfig, food_task
from experiments.studies.grpo_biases import difficulty_bias, print_difficulty
from experiments.commands.statistics import interval_estimates
from experiments.tasks.two_choice_task import ANSWERS, TwoChoiceTaskConfig, two_choice_task
from ppo.algorithm.advantages import compute_gae
from ppo.lm.trainers.diagnostics import critic_values_along, plot_critic_values
from ppo.lm.trainers.evaluation import evaluate_lm_policy
from ppo.lm.trainers.group_trainer import trainer_class
from ppo.lm.exact.kl_gradients import enumerated_batch, placement_gradients
from ppo.lm.algorithm.kl_penalty import KL_PENALTIES
from ppo.lm.models.gpt import GPT, GPTConfig, next_token_log_probs
from ppo.lm.exact.optimum import MALFORMED, completion_probabilities, kl_regularised_optimum
from ppo.lm.exact.optimum_distance import total_variation
from ppo.lm.models.pretrain import PretrainConfig, load_or_pretrain_sft
from ppo.lm.algorithm.rewards import per_token_kl
from ppo.lm.trainers.rlhf_config import RLHFConfig
from ppo.lm.trainers.rlhf_trainer import RLHFTrainer
from ppo.lm.algorithm.rollout import collect_rollout, repeat_prompts
from ppo.lm.models.sampling import sample_texts

lecture = Lecture("12_ppo_for_language_models", __doc__)
PERSON, RELATION, TARGET = "ravin", "likes", "pizza"
PROMPT = corpus.prompt(PERSON, RELATION)
# --quick uses a much smaller SFT model (trained in seconds, cached like the default one)
QUICK_SFT = PretrainConfig(corpus_size=6_000, val_size=200, steps=250, batch_size=64, learning_rate=1e-2,
                           warmup_steps=20, eval_interval=250)
EVAL_SAMPLES = lecture.choose(full=1000, quick=200)
KL_SAMPLES = lecture.choose(full=2000, quick=200)  # completions on which section 5 compares the KL estimators

# %% [markdown]
r"""
## 1. The model: an SFT model of a corpus whose distribution we know

`envs/corpus.py` draws sentences "person relation food" from a table of percentages.
`load_or_pretrain_sft` trains the tiny GPT of `ppo/lm/models/gpt.py` on them by next-token
prediction (once; the checkpoint is cached under a hash of its configuration). Because
the table is known, so is what the model should have learned. For each food,
$\pi_\text{ref}(\text{food} + \text{EOS} \mid \text{prompt})$ is a product of next-token probabilities — computed exactly
(`ppo.lm.exact.optimum.completion_probabilities`), no sampling involved. The full run's SFT
model matches the corpus's ten foods to within a percentage point each and puts under
1% on malformed strings; it says pizza rarely, under 15% of the time. (The --quick run
uses a small model trained in seconds, which matches the table only roughly.)
"""

# %%
sft_config = lecture.choose(full=PretrainConfig(), quick=QUICK_SFT)
sft, tokenizer = load_or_pretrain_sft(corpus.FOOD_CORPUS, sft_config, verbose=True)
print(f"tokenizer: {tokenizer.vocab_size} tokens (BOS, EOS, PAD and {len(tokenizer.characters)} characters "
      f"{''.join(tokenizer.characters)!r}); GPT: {sft.config.n_layer} layer(s), {sft.config.n_head} heads, "
      f"width {sft.config.n_embd}, context {sft.config.block_size}, {sft.num_parameters():,} parameters")
reference_probabilities = completion_probabilities(sft, tokenizer, PROMPT, corpus.FOODS)
truth = corpus.food_distribution(PERSON, RELATION)
print_table([{"completion": food, "corpus p(food)": truth.get(food, 0.0), "SFT π_ref(food + EOS)": reference_probabilities[food]}
             for food in (*corpus.FOODS, MALFORMED)], title=f"What the SFT model says after {PROMPT!r} (exact)")
texts, ended = sample_texts(sft, tokenizer, PROMPT, 8, generator=torch.Generator().manual_seed(0))
print("eight samples:", ", ".join(repr(text + ("⏎" if eos else "…")) for text, eos in zip(texts, ended)), "(⏎ = EOS)")

# %% tags=["claims"]
largest_gap = max(abs(reference_probabilities[food] - truth.get(food, 0.0)) for food in corpus.FOODS)
lecture.claim("the full run's SFT model matches the corpus's ten foods to within a percentage point each and puts "
              "under 1% on malformed strings",
              len(corpus.FOODS) == 10 and largest_gap < 0.01 and reference_probabilities[MALFORMED] < 0.01,
              measured=f"{len(corpus.FOODS)} foods, largest |π_ref − p| {largest_gap:.4f}, "
                       f"malformed {reference_probabilities[MALFORMED]:.2%}", quick=False)
lecture.claim("it says pizza rarely, under 15% of the time", reference_probabilities[TARGET] < 0.15,
              measured=f"π_ref({TARGET} + EOS) = {reference_probabilities[TARGET]:.1%}")

# %% [markdown]
r"""
## 2. One episode, token by token

The task is ours to hand over: `food_task` wraps the prompt "ravin likes ", the rule
reward (`score` for exactly "pizza" + EOS, else 0), the well-formedness check and the
pizza rate into a `CompletionTask`. `RLHFTrainer` holds three copies of the SFT
weights: the policy $\pi_\theta$ (trained), the reference $\pi_\text{ref}$ (frozen) and a critic with a
scalar value head (trained; the head starts at zero). One call to `collect` samples a batch of completions with the KV-cache
sampler (it keeps every layer's keys and values of the tokens already generated, so each
new token costs one position's forward pass) and then scores every token with a full forward pass at the sampling
temperature: $\log \pi_\text{old}(y_t \mid s_t)$, $\log \pi_\text{ref}(y_t \mid s_t)$, $V(s_t)$, all zero after EOS.
`rewards` turns them into the per-token rewards $r_t$. Before any update $\pi_\theta = \pi_\text{ref}$,
so every $\mathrm{KL}_t$ is exactly 0 and the only reward is the score at EOS.
"""

# %%
TASK_CONFIG = FoodTaskConfig(person=PERSON, relation=RELATION, target_food=TARGET)
TASK = food_task(TASK_CONFIG)
CONFIG = RLHFConfig(sample_every=0, tensorboard=False, iterations=lecture.choose(full=20, quick=3),
                    batch_size=lecture.choose(full=128, quick=64))
print(f"β = {CONFIG.kl_coef} ({CONFIG.effective_kl_penalty}), score {TASK_CONFIG.score} for exactly {TARGET!r} + EOS, "
      f"missing-EOS penalty {CONFIG.missing_eos_penalty}, γ = {CONFIG.gamma}, λ = {CONFIG.gae_lambda}, "
      f"ε = {CONFIG.clip_coef}, temperature {CONFIG.temperature}; {CONFIG.iterations} iterations × "
      f"{CONFIG.batch_size} completions, {CONFIG.update_epochs} epochs × {CONFIG.num_minibatches} minibatches")


def episode_table(trainer: RLHFTrainer, rollout, token_rewards, row: int, advantages=None) -> list[dict]:
    batch = rollout.batch
    prompt_text = batch.prompts[row]
    rows = []
    for t in range(int(batch.mask[row].sum())):
        token = int(batch.completion[row, t])
        entry = {"t": t, "state s_t": repr(prompt_text + batch.texts[row][:t]),
                 "action y_t": "EOS" if token == tokenizer.eos_id else repr(tokenizer.decode([token])),
                 "log π": float(rollout.log_probs[row, t]), "log π_ref": float(rollout.reference_log_probs[row, t]),
                 "KL_t (k1)": float(token_rewards.kl[row, t]) + 0.0, "r_t": float(token_rewards.rewards[row, t]) + 0.0}  # no "-0"
        if advantages is not None:
            entry["V(s_t)"] = float(rollout.values[row, t])
            entry["Â_t"] = float(advantages[row, t])
        rows.append(entry)
    return rows


def first_row_with(batch, text: str) -> int:
    return next((i for i, t in enumerate(batch.texts) if t == text and bool(batch.ended_with_eos[i])), 0)


trainer = RLHFTrainer(CONFIG, sft, tokenizer, TASK, run_dir=lecture.fresh_folder("run"), progress=False)
rollout = trainer.collect()
token_rewards = trainer.rewards(rollout)
print_table(episode_table(trainer, rollout, token_rewards, first_row_with(rollout.batch, TARGET)),
            title="One completion of the first rollout, before any update (π_θ = π_ref)")

# %% tags=["claims"]
# π_θ and π_ref hold the same weights and score the same batch with the same kernels in this
# process, so their log-probs are bit-identical: KL_t is exactly 0, not merely small.
mask = rollout.batch.mask  # (B, T) real tokens, EOS included
last = torch.zeros_like(mask)
last[torch.arange(len(mask)), mask.sum(1) - 1] = True  # (B, T) the last real token of each completion
lecture.claim("before any update every KL_t is exactly 0 and the only reward is the score at EOS",
              bool((token_rewards.kl[mask] == 0).all()) and bool((token_rewards.rewards[mask & ~last] == 0).all()),
              measured=f"largest |KL_t| {float(token_rewards.kl[mask].abs().max()):.1e}, largest |r_t| before the last "
                       f"token {float(token_rewards.rewards[mask & ~last].abs().max()):.1e} over {len(mask)} completions")
lecture.claim("the critic's value head starts at zero", bool((rollout.values[mask] == 0).all()),
              measured=f"largest |V(s_t)| in the first rollout {float(rollout.values[mask].abs().max()):.1e}")

# %% [markdown]
r"""
## 3. The pizza experiment

`RLHFTrainer.train` runs one PPO <a href="../glossary.html#term-Iteration">iteration</a> per batch of completions (the module
docstring of `ppo/lm/trainers/rlhf_trainer.py` spells out the loop) and calls us back after each
with its metrics, as CartPole's trainer does. We print the
diagnostics worth watching, the ones TRL (Hugging Face's RLHF library) logs among them: the target rate, the share of
well-formed completions (a food, then EOS), the mean sequence KL to the reference, the
entropy per token, and the update's approx $\mathrm{KL}(\pi_\text{old} \,\Vert\, \pi_\theta)$ and <a href="../glossary.html#term-Clip-fraction">clip fraction</a>, and plot
them with the score, the total reward and the critic's loss. (`ppo-rlhf` writes the
same curves, and β, into its run folder as training_grid.png.) The critic's values
along "ravin likes pizz" and "ravin likes sala" are recorded before and after.
"""

# %%
probe_texts = [PROMPT + TARGET[:-1], PROMPT + "salad"[:-1]]
critic_before = {text: critic_values_along(trainer.value_model, tokenizer, text) for text in probe_texts}


def report(trainer: RLHFTrainer, metrics: dict) -> None:
    if trainer.iteration % max(1, CONFIG.iterations // 5) == 0 or trainer.iteration == 1:
        print(f"iteration {trainer.iteration:>3}: {TARGET} {metrics['target_rate']:6.1%}  well-formed "
              f"{metrics['well_formed_rate']:6.1%}  KL {metrics['sequence_kl']:5.2f}  entropy {metrics['entropy']:.3f}  "
              f"approx KL {metrics['approx_kl']:.4f}  clip fraction {metrics['clip_fraction']:.3f}  "
              f"gradient steps {metrics['gradient_steps']:.0f}")


trainer.train(callback=report)  # metrics.csv and checkpoint.pt go to the run folder
lecture.wrote(trainer.run_dir / "checkpoint.pt")

DIAGNOSTIC_PANELS = (  # (metrics, title, y-label); β is fixed in this run, so it gets no panel
    (("score", "total_reward"), "score, and total reward score − β·KL", "reward per completion"),
    (("target_rate", "well_formed_rate"), "target rate and well-formed rate", "share of the batch"),
    (("sequence_kl",), "mean sequence KL to π_ref", "nats per completion"),
    (("entropy",), "entropy per token", "nats per token"),
    (("approx_kl",), "approx KL(π_old ‖ π_θ) (left) and clip fraction (right)", "approx KL (nats per token)"),
    (("value_loss",), "critic loss", "mean squared error"),
)
figure, axes = plt.subplots(2, 3, figsize=(14, 7))
iterations = range(1, len(trainer.history) + 1)
for axis, (keys, title, ylabel) in zip(axes.flat, DIAGNOSTIC_PANELS):
    for key in keys:
        axis.plot(iterations, [metrics[key] for metrics in trainer.history], label=key)
    axis.set_title(title, fontsize=10)
    axis.set_xlabel("iteration")
    axis.set_ylabel(ylabel)
    axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    axis.grid(alpha=0.3)
    if keys == ("approx_kl",):  # the clip fraction is ~10x larger: its own axis, so the KL stays readable
        clip_axis = axis.twinx()
        clip_axis.plot(iterations, [metrics["clip_fraction"] for metrics in trainer.history], color="tab:orange",
                       label="clip_fraction")
        clip_axis.set_ylabel("clip fraction (share of tokens)")
        clip_axis.set_ylim(bottom=0)
        axis.set_ylim(bottom=0)
        handles = axis.get_legend_handles_labels()[0] + clip_axis.get_legend_handles_labels()[0]
        axis.legend(handles, [handle.get_label() for handle in handles], fontsize=7)
    else:
        axis.legend(fontsize=7)
figure.suptitle(f"PPO on {PROMPT!r}… (rule reward, β = {CONFIG.kl_coef} throughout)")
lecture.save_figure(figure, "training_diagnostics.png")
critic_after = {text: critic_values_along(trainer.value_model, tokenizer, text) for text in probe_texts}
lecture.wrote(plot_critic_values(probe_texts, critic_before, critic_after, lecture.path("critic_values.png"),
                                 "the critic's V(s_t) before and after PPO", prompt=PROMPT))
print_table([{"prefix": text, "V before": critic_before[text][-1], "V after": critic_after[text][-1]} for text in probe_texts],
            title="The critic's value of the last prefix (the score is paid one token later, at EOS)")


def optimum_at(beta: float):
    """π*_β of the rule reward over the ten foods and the malformed rest (`ppo.lm.exact.optimum`)."""
    scores = {group: (TASK_CONFIG.score if group == TARGET else 0.0) for group in reference_probabilities}
    return kl_regularised_optimum(reference_probabilities, scores, beta)


# %% [markdown]
r"""
What the run shows (the numbers are this run's). In the top-middle panel the pizza rate climbs from the SFT model's
11% to above 95% at iteration 6 and averages 99.5% over the
last five iterations, while the well-formed rate never drops below 98.4%. The entropy per token (bottom left) falls from 0.300 to 0.0095, below a tenth of
where it started, and the approx KL (bottom middle, left axis) and the clip fraction
(its right axis) end at 0 to four decimals: the policy has all but stopped moving. That
is not a collapse to fix: at this β the <a href="../glossary.html#term-KL-regularised-optimum">exact optimum</a> π* itself puts 99.0% on
"pizza" + EOS (section 6), so a nearly deterministic policy is what the objective asks for.

The critic figure: before training every value is 0 (dashed; the head starts at zero).
After it, the value of "ravin likes pizz" is 1.002, within 0.05 of the score, and that
of "ravin likes sala" −0.016, near 0: once the first character is chosen,
the outcome is settled. The value of the prompt itself, $s_0$, is 0.668, within 0.05 of
the last iteration's mean total reward $\operatorname{score} - \beta\,\mathrm{KL}$, 0.674. Inside the prompt (shaded) the values wander away from 0: PPO never acts in
those states, so no loss constrains the critic there.
"""

# %% [markdown]
r"""
The same episode table on the trained policy shows the other half of the reward:
$\mathrm{KL}_t$ is no longer zero, and it is not spread evenly. Look at which token carries it:
the first, "p". Pizza is the only food that starts with p, and after "ravin likes p" the
SFT model already finishes "izza" + EOS with probability above 0.99, so the policy had
nothing to change after $t = 0$.
"""

# %%
generator = torch.Generator().manual_seed(1)
trainer.generator = generator
rollout = trainer.collect()
token_rewards = trainer.rewards(rollout)
advantages, returns = trainer.advantages(rollout, token_rewards)
row = first_row_with(rollout.batch, TARGET)
print_table(episode_table(trainer, rollout, token_rewards, row, advantages),
            title=f"One completion after {CONFIG.iterations} iterations (β = {CONFIG.kl_coef})")

# %% tags=["claims"]
history = trainer.history
first_above = next((i + 1 for i, m in enumerate(history) if m["target_rate"] > 0.95), None)
last_five = sum(m["target_rate"] for m in history[-5:]) / len(history[-5:])
lowest_well_formed = min(m["well_formed_rate"] for m in history)
lecture.claim("the pizza rate climbs to above 95% by iteration 12 and averages above 95% over the last five iterations",
              first_above is not None and first_above <= 12 and last_five > 0.95,
              measured=f"first above 95% at iteration {first_above}, last-five mean {last_five:.1%}", quick=False)
lecture.claim("the well-formed rate never drops below 95%", lowest_well_formed >= 0.95,
              measured=f"lowest well-formed rate {lowest_well_formed:.1%}", quick=False)
lecture.claim("the entropy per token ends below a tenth of where it started; approx KL and clip fraction end near 0",
              history[-1]["entropy"] < 0.1 * history[0]["entropy"] and history[-1]["approx_kl"] < 1e-3
              and history[-1]["clip_fraction"] < 0.01,
              measured=f"entropy {history[0]['entropy']:.3f} → {history[-1]['entropy']:.4f}, last approx KL "
                       f"{history[-1]['approx_kl']:.5f}, last clip fraction {history[-1]['clip_fraction']:.4f}", quick=False)
lecture.claim("at this β π* puts more than 98% on pizza + EOS", optimum_at(CONFIG.kl_coef).probabilities[TARGET] > 0.98,
              measured=f"π*_{CONFIG.kl_coef}({TARGET} + EOS) = {optimum_at(CONFIG.kl_coef).probabilities[TARGET]:.1%}",
              quick=False)
pizz, sala = probe_texts
first_state = len(PROMPT)  # entry i of critic_values_along: the value after reading i characters (BOS first)
prompt_values = critic_after[pizz][:first_state]  # states inside the prompt, where PPO never acts
lecture.claim("before training every value is 0", all(v == 0 for text in probe_texts for v in critic_before[text]),
              measured=f"largest |V| before {max(abs(v) for text in probe_texts for v in critic_before[text]):.1e}")
lecture.claim("after training V('ravin likes pizz') is within 0.05 of the score and V('ravin likes sala') within 0.2 of 0",
              abs(critic_after[pizz][-1] - TASK_CONFIG.score) < 0.05 and abs(critic_after[sala][-1]) < 0.2,
              measured=f"V(pizz) {critic_after[pizz][-1]:.3f}, V(sala) {critic_after[sala][-1]:.3f}", quick=False)
lecture.claim("V(s_0) is within 0.05 of the last iteration's mean total reward",
              abs(critic_after[pizz][first_state] - history[-1]["total_reward"]) < 0.05,
              measured=f"V(s_0) {critic_after[pizz][first_state]:.3f}, total reward {history[-1]['total_reward']:.3f}",
              quick=False)
lecture.claim("inside the prompt the trained critic's values wander away from 0", max(map(abs, prompt_values)) > 0.1,
              measured=f"largest |V| inside the prompt {max(map(abs, prompt_values)):.3f}", quick=False)
foods_on_p = [food for food in corpus.FOODS if food.startswith(TARGET[0])]
with torch.no_grad():
    first_letter = float(next_token_log_probs(sft(torch.tensor([tokenizer.encode(PROMPT)])))[0, -1, tokenizer.encode(
        TARGET[0], add_bos=False)[0]].exp())  # π_ref(first letter of the target | prompt)
rest_given_first = reference_probabilities[TARGET] / first_letter  # π_ref("izza" + EOS | prompt + "p")
lecture.claim("pizza is the only food that starts with p, and after 'ravin likes p' the SFT model finishes 'izza' + EOS "
              "with probability above 0.99", foods_on_p == [TARGET] and rest_given_first > 0.99,
              measured=f"foods starting with {TARGET[0]!r}: {foods_on_p}; π_ref(rest | first letter) {rest_given_first:.4f}",
              quick=False)

# %% [markdown]
r"""
## 4. Token-level GAE is `compute_gae` along the token axis

Each completion is one episode of n tokens; the last real token (EOS) is terminal, so
nothing is <a href="../glossary.html#term-Bootstrap">bootstrapped</a> past it; $\gamma = 1$ (nothing to <a href="../glossary.html#term-Discount">discount</a> inside a sentence) and $\lambda < 1$
lets the critic shorten the credit path. `ppo.algorithm.advantages.compute_gae` takes $(T, N)$
tensors, steps × environments: here $T$ is the token position and $N$ the batch of
completions. For the completion above, by hand:
"""

# %%
n = int(rollout.batch.mask[row].sum())
rewards_tn = token_rewards.rewards[row, :n].unsqueeze(1)  # (T, 1): one "environment", n steps
values_tn = rollout.values[row, :n].unsqueeze(1)  # (T, 1)
next_values = torch.cat([values_tn[1:], torch.zeros(1, 1)])  # V(s_{t+1}); after EOS nothing
terminal = torch.zeros(n, 1, dtype=torch.bool)
terminal[-1] = True
by_hand, _ = compute_gae(rewards_tn, values_tn, next_values, terminal, terminal, CONFIG.gamma, CONFIG.gae_lambda)
deltas = rewards_tn + CONFIG.gamma * next_values * (~terminal) - values_tn
print_table([{"t": t, "r_t": float(rewards_tn[t]), "V(s_t)": float(values_tn[t]), "δ_t": float(deltas[t]),
              "Â_t = compute_gae": float(by_hand[t]), "Â_t from the trainer": float(advantages[row, t])} for t in range(n)],
            title=f"GAE along one completion (γ = {CONFIG.gamma}, λ = {CONFIG.gae_lambda}; "
                  f"norm_adv = {CONFIG.norm_adv}, whiten_rewards = {CONFIG.whiten_rewards})")

# %% [markdown]
r"""
**On this task the critic and token-level GAE have nothing to do.** Section 5 measures
where the policy's KL to $\pi_\text{ref}$ is spent along the completion: at least 99% of it at $t = 0$,
the first character. The food task is a one-decision bandit: the first token settles the
food, the value of every later state is settled with it (the critic's $V \approx 1$ after "pizz",
$V \approx 0$ after "sala", above), and what a critic adds is a baseline for the one state $s_0$,
which the mean reward of the batch provides as well. Token-level credit assignment, a
learned critic against a critic-free baseline (RLOO and GRPO, defined in section 7), $\lambda = 0.95$ against $\lambda = 1$:
none of these has anything to differ on here. Section 7 runs the task where they can:
its reward depends on a relation chosen at the first token and a food chosen six tokens
later.
"""

# %% tags=["claims"]
# float32: the trainer runs the same recursion over the whole (T, B) batch; 1e-6 is a few ulps at |Â| ≤ 1
lecture.claim("compute_gae along the token axis gives the trainer's advantages",
              bool(torch.allclose(by_hand[:, 0], advantages[row, :n], rtol=0, atol=1e-6)),
              measured=f"largest difference {float((by_hand[:, 0] - advantages[row, :n]).abs().max()):.1e}")

# %% [markdown]
r"""
## 5. The KL penalty: measuring it, and where it goes

**Measuring.** The penalty needs $\mathrm{KL}(\pi \,\Vert\, \pi_\text{ref})$ from samples. Per token, with
$\rho = \pi_\text{ref}(y_t \mid s_t) / \pi(y_t \mid s_t)$, $k_1 = -\log \rho$ and $k_3 = (\rho - 1) - \log \rho$ are both unbiased
(Schulman 2020; `ppo.algorithm.losses.kl_per_sample`); k1 can be negative, k3 cannot. Schulman
finds k3 the one with the smaller variance while π and $\pi_\text{ref}$ are close (ρ near 1). Once
the policy has moved far, as ours has, a rare token that $\pi_\text{ref}$ likes much more than π does
gives a huge ρ, and k3 a heavy tail. With a tiny vocabulary we can also compute the exact
KL of the two next-token distributions at every visited prefix,
$\sum_v \pi(v \mid s_t) \log\big(\pi(v \mid s_t) / \pi_\text{ref}(v \mid s_t)\big)$ (`rollout.exact_kl`), and sum it along the
completion: an estimate of the same sequence KL without the sampling noise of the token.
The figure puts every completion's k1 and k3 on one axis (a symmetric log scale, so that a
value tens of nats out fits next to the bulk), and the printed lines say how much of each
mean the largest 1% of completions carry.

What the run shows: the exact sum's spread over completions is smaller than k1's (a
std of 0.26 against 0.54; what is left is the noise of which prefixes a completion
visits); k3's spread is larger than k1's (23), and its largest 1% of completions carry
52.5% of its mean, against 1.1% for k1 (the right panel's far-right dots). k1's sample mean, 2.131 ± 0.012, lies within three
standard errors of the exact 2.135; k3's, 2.675, rests on how many of those rare
completions a sample happens to catch. The left panel: 99.7% of the exact KL is spent at
$t = 0$ (the bandit of section 4; section 7 sets the two-choice task's shares
beside it). The estimators are compared on this policy because it has moved two nats
from $\pi_\text{ref}$, where k3's tail shows; no credit across tokens is involved.
"""

# %%
# A larger sample than one training batch: the rare completions that carry k3's tail must show up in it.
with torch.no_grad():
    sample = collect_rollout(trainer.policy, trainer.reference, None, tokenizer, [PROMPT] * KL_SAMPLES,
                             CONFIG.max_new_tokens, CONFIG.temperature, torch.Generator().manual_seed(30_000),
                             with_values=False)
batch, mask = sample.batch, sample.batch.mask
exact = sample.exact_kl  # (B, T) KL(π(·|s_t) ‖ π_ref(·|s_t)) at every visited prefix
estimates = {name: per_token_kl(sample.log_probs, sample.reference_log_probs, mask, name) for name in ("k1", "k3")}
kl_rows = [{"estimator": "exact, per prefix", "mean sequence KL": float(exact.sum(1).mean()),
            "std over completions": float(exact.sum(1).std()), "negative per-token values": "0%"}]
for name, values in estimates.items():
    kl_rows.append({"estimator": name, "mean sequence KL": float(values.sum(1).mean()),
                    "std over completions": float(values.sum(1).std()),
                    "negative per-token values": f"{float((values[mask] < 0).float().mean()):.0%}"})
print_table(kl_rows, title=f"KL(π_θ ‖ π_ref) on {len(batch)} fresh completions of the trained policy")
by_position = exact.sum(0) / exact.sum()
print("share of the exact KL spent at completion position t: "
      + ", ".join(f"t={t}: {float(share):.0%}" for t, share in enumerate(by_position[:8])))

figure, axes = plt.subplots(1, 2, figsize=(11, 4))
axes[0].bar(range(len(by_position)), by_position.tolist(), color="tab:purple")
axes[0].set_xlabel("completion position t (0 = first character)")
axes[0].set_ylabel("share of the sequence KL")
axes[0].set_title("Where the KL is spent")
# One dot per completion on a symmetric-log axis: the bulk near the mean and a rare k3
# value tens of nats out stay readable on the same axis; a triangle above the dots marks each mean.
for row_index, (name, values) in enumerate(estimates.items()):
    sums = values.sum(1)  # (B,) per-completion sequence KL
    largest = sums.sort(descending=True).values[: max(1, len(sums) // 100)]
    print(f"{name}: per-completion sums from {float(sums.min()):.2f} to {float(sums.max()):.2f} nats; "
          f"the largest 1% of completions carry {float(largest.sum() / sums.sum()):.0%} of the mean")
    jitter = (torch.rand(len(sums), generator=torch.Generator().manual_seed(row_index)) - 0.5) * 0.5
    axes[1].scatter(sums.tolist(), (row_index + jitter).tolist(), s=12, alpha=0.5, label=f"{name}, one completion")
    # the mean as a marker just above the row's dots, so that it hides none of them
    axes[1].plot([float(sums.mean())], [row_index + 0.36], "v", color="black", ms=8,
                 label="each estimator's mean" if row_index == 0 else None)
all_sums = torch.cat([values.sum(1) for values in estimates.values()])
axes[1].axvline(float(exact.sum(1).mean()), color="0.4", ls="--", lw=1, zorder=0, label="exact, mean (behind the dots)")
axes[1].set_xscale("symlog", linthresh=1.0)
axes[1].set_xlim(min(-1.0, 2 * float(all_sums.min())), 2 * float(all_sums.max()))  # room for the extreme dots
axes[1].set_ylim(-0.45, len(estimates) + 0.2)
axes[1].set_yticks(range(len(estimates)), list(estimates))
axes[1].set_xlabel("sequence KL estimate (nats, symmetric log scale)")
axes[1].legend(fontsize=8, loc="upper left", ncol=2)
axes[1].set_title("k1 and k3, one number per completion")
lecture.save_figure(figure, "kl_estimators.png")

# %% [markdown]
r"""
**Where it goes: the same value, different gradients** (Tang & Munos 2025, *On a few
pitfalls in KL divergence gradient estimation for RL*, arXiv 2506.09477). The three
estimators agree on the *value* of the KL. What trains the policy is a *gradient*, and there they part. A term in
the reward is detached, like the score: the <a href="../glossary.html#term-Policy-gradient">policy-gradient</a> step $-\hat A_t \nabla \log \pi(y_t \mid s_t)$
moves it through the sampled actions only, so its expected gradient is $\mathbb E_\pi\big[\widehat{\mathrm{KL}}\, \nabla \log \pi\big]$,
and that equals $\nabla \mathbb E_\pi\big[\widehat{\mathrm{KL}}\big]$ only if $\mathbb E_\pi\big[\nabla \widehat{\mathrm{KL}}\big] = 0$ — true for k1 alone:

* **k1 in the reward** (`--kl-penalty reward-k1`, PPO's default):
  $\nabla \mathrm{KL}(\pi \,\Vert\, \pi_\text{ref}) = \mathbb E_\pi\big[\ell(y) \nabla \log \pi(y)\big] + \mathbb E_\pi\big[\nabla \ell(y)\big]$,
  and the second term is $\mathbb E_\pi\big[\nabla \log \pi(y)\big] = 0$. With
  reward-to-go, each token is charged the k1 of itself and of everything after it: exactly
  the RLHF objective, whose maximiser is $\pi^* \propto \pi_\text{ref} \exp(\operatorname{score}/\beta)$.
* **k3 in the reward** (refused): at one state
  $\mathbb E_\pi\big[k_3 \nabla \log \pi\big] = \nabla \mathrm{KL}(\pi \,\Vert\, \pi_\text{ref}) - \nabla \mathrm{KL}(\pi_\text{ref} \,\Vert\, \pi)$,
  about 0 near $\pi_\text{ref}$, and pointing anywhere far from it: β then pulls the policy almost
  nowhere, or sideways (the table below measures how far off). Near $\pi_\text{ref}$ is where a
  large β keeps the policy: on the pizza task π* at $\beta = 1$ says pizza 25.8% of the time, at
  a KL of 0.08 nats from $\pi_\text{ref}$.
* **The exact per-state KL in the reward** (refused): $\mathrm{KL}\big(\pi(\cdot \mid s_t) \,\Vert\, \pi_\text{ref}(\cdot \mid s_t)\big)$ depends on
  $s_t$ alone, so it drops out of the <a href="../glossary.html#term-Advantage">advantage</a> of the token chosen there; only the moves
  that *led* to $s_t$ are charged for it. Same symptom in the table below.
* **The exact per-state KL in the loss** (`loss-full`): differentiated, it charges the
  decision at $s_t$; by the chain rule $\mathrm{KL}(\pi \,\Vert\, \pi_\text{ref}) = \mathbb E_\pi\big[\sum_t \mathrm{KL}_t(s_t)\big]$, so the full gradient
  is that *plus* $\mathbb E_\pi\big[\sum_t \mathrm{KL}_t \nabla \log P(s_t)\big]$ — which is exactly what the same $\mathrm{KL}_t$ in the
  reward contributes. The two halves together follow $\nabla \mathrm{KL}(\pi \,\Vert\, \pi_\text{ref})$ exactly, without the
  noise of the sampled token. The reward half alone does not (the row "exact KL in the
  reward alone" below). The loss half alone comes close on these small models — cosine
  above 0.99 and norm within 2% of $\nabla \mathrm{KL}$'s (the row "exact KL in the loss alone") — because
  the reward half is small here (under a fifth of $\nabla \mathrm{KL}$'s length, by the row just above it); close
  is not exact. It is not the quieter choice where it
  matters, though: at π*, $\operatorname{score}(y) - \beta\,\ell(y) = \beta \log Z$ for *every* $y$, so with k1 in the
  reward every <a href="../glossary.html#term-Return">return</a> is the same and the gradient noise vanishes at the optimum; with
  loss-full the returns still differ there and a run jitters around π* (more
  completions per batch shrink the jitter).
* **k3 in the loss** (`loss-k3`, as published GRPO does it (section 7); the default of the
  library's GRPO trainer):
  $\nabla k_{3,t} = (1 - \rho_t) \nabla \log \pi(y_t \mid s_t)$, whose mean over $y_t \sim \pi$ is
  $-\sum_v \pi_\text{ref}(v \mid s_t) \nabla \log \pi(v \mid s_t) = \nabla \mathrm{KL}\big(\pi_\text{ref}(\cdot \mid s_t) \,\Vert\, \pi(\cdot \mid s_t)\big)$:
  the *reverse* KL at each state the policy visits, the visits
  held fixed. It regularises, but towards a different optimum (at each state
  $\pi(a \mid s) = \beta\, \pi_\text{ref}(a \mid s) / \big(\mu_s - Q(s, a)\big)$, with $\mu_s$ the Lagrange multiplier that makes
  $\pi(\cdot \mid s)$ sum to 1, rather than $\pi^* \propto \pi_\text{ref} \exp(\operatorname{score}/\beta)$).

`ppo.lm.exact.kl_gradients` checks these claims on a model small enough to list every
completion (a 7-token vocabulary, at most 3 tokens: 259 completions): the exact expected
gradient of each placement's <a href="../glossary.html#term-Surrogate-objective">surrogate</a>, $\sum_y \pi(y) \nabla S(y)$, against the exact gradient of each
divergence. A cosine of 1 with a norm ratio of 1 means the placement follows that gradient.
"""


# %%
def tiny_model(seed: int):
    """A 7-token GPT (BOS, EOS, PAD, four letters) in float64, so that exact identities hold to ~1e-12."""
    model = GPT(GPTConfig(vocab_size=7, block_size=6, n_layer=1, n_head=2, n_embd=16),
                generator=torch.Generator().manual_seed(seed))
    return model.eval().double()


gradient_rows = []
for policy_seed, reference_seed in ((1, 2), (3, 4)):
    _, placements = placement_gradients(tiny_model(policy_seed), tiny_model(reference_seed),
                                        enumerated_batch([0], 7, eos_id=1, pad_id=2, max_new_tokens=3))
    for name, result in placements.items():
        gradient_rows.append({"models": f"{policy_seed} vs {reference_seed}", "placement": name,
                              "cos ∇KL(π‖π_ref)": result.cosines["KL(π‖π_ref)"],
                              "cos ∇ state reverse KL": result.cosines["state reverse KL"],
                              "cos ∇KL(π_ref‖π)": result.cosines["KL(π_ref‖π)"],
                              "norm / |∇KL(π‖π_ref)|": result.norm_ratio})
print_table(gradient_rows, title="Expected gradient of each placement, every completion enumerated (β = 1)", digits=4)

# %% [markdown]
r"""
And on the pizza task: each offered placement trained at the same β, its exact pizza rate
(`completion_probabilities` of the trained policy, no sampling) and its KL (the exact
per-state KL summed along fresh samples), next to $\pi^*_\beta$. reward-k1 and loss-full land on
π*; loss-k3 lands elsewhere, because the divergence it controls is not the objective's. Its
own fixed point can be computed too: only the states on the path to "pizza" + EOS have
actions of different value, $Q(s, \text{on the path}) = V(\text{next state})$ and 0 off it, so at each of
them $\pi(\text{on} \mid s) = \beta q / (\mu - V)$ and $\pi(\text{off} \mid s) = \beta (1 - q) / \mu$ with $q = \pi_\text{ref}(\text{on} \mid s)$ and μ the
Lagrange multiplier that makes them sum to 1 (μ, not λ: λ is GAE's), solved backwards from
the score at EOS; everywhere else
$\pi = \pi_\text{ref}$. This comparison stays on the pizza task because only there, with one path
carrying the whole reward, can loss-k3's fixed point be solved by hand; section 7 shows
k3 in the loss on the two-choice task against π*.
"""

# %%
PLACEMENT_BETA = 0.5


@torch.no_grad()
def exact_rate_and_kl(policy, seed: int) -> tuple[float, float]:
    """(π(target + EOS) exactly, KL(π ‖ π_ref) as the exact per-state KL summed along EVAL_SAMPLES samples)."""
    rate = completion_probabilities(policy, tokenizer, PROMPT, corpus.FOODS)[TARGET]
    fresh = collect_rollout(policy, trainer.reference, None, tokenizer, [PROMPT] * EVAL_SAMPLES, CONFIG.max_new_tokens,
                            CONFIG.temperature, torch.Generator().manual_seed(20_000 + seed), with_values=False)
    return rate, float(fresh.exact_kl.sum(1).mean())


@torch.no_grad()
def loss_k3_fixed_point(beta: float) -> tuple[float, float]:
    """(target rate, KL(π ‖ π_ref)) where k3 in the loss stops moving: the per-state rule above, by bisection on μ."""
    prompt_ids = tokenizer.encode(PROMPT)
    path = tokenizer.encode(TARGET, add_bos=False) + [tokenizer.eos_id]
    on_path = [float(next_token_log_probs(sft(torch.tensor([prompt_ids + path[:k]]))[0, -1])[token].exp())
               for k, token in enumerate(path)]  # q_k = π_ref(path token k | prefix)
    value, chosen = float(TASK_CONFIG.score), []
    for q in reversed(on_path):
        low, high = value, value + 1e6  # π(on) + π(off) falls from +∞ to 0 as μ grows past V
        for _ in range(200):
            mu = (low + high) / 2
            low, high = (mu, high) if beta * q / (mu - value) + beta * (1 - q) / mu > 1 else (low, mu)
        chosen.insert(0, beta * q / ((low + high) / 2 - value))
        value *= chosen[0]
    reach, kl = 1.0, 0.0
    for q, on in zip(on_path, chosen):
        kl += reach * (on * math.log(on / q) + (1 - on) * math.log((1 - on) / (1 - q)))
        reach *= on
    return reach, kl


best = optimum_at(PLACEMENT_BETA)
k3_rate, k3_kl = loss_k3_fixed_point(PLACEMENT_BETA)
placement_rows = [{"placement": "π*_β (exact)", f"{TARGET} rate": f"{best.probabilities[TARGET]:.1%}", "KL": best.kl},
                  {"placement": "loss-k3's fixed point", f"{TARGET} rate": f"{k3_rate:.1%}", "KL": k3_kl}]
for placement in KL_PENALTIES:
    placed = RLHFTrainer(CONFIG.replace(kl_coef=PLACEMENT_BETA, kl_penalty=placement), sft, tokenizer, TASK,
                         progress=False)
    placed.train()
    rate, kl = exact_rate_and_kl(placed.policy, 1)
    placement_rows.append({"placement": placement, f"{TARGET} rate": f"{rate:.1%}", "KL": kl})
print_table(placement_rows, title=f"Each KL placement at β = {PLACEMENT_BETA}, {CONFIG.iterations} iterations, "
                                  f"against π*_β", digits=3)

# %% tags=["claims"]
exact_sums = exact.sum(1)  # (B,) one sequence KL per completion
sums = {name: values.sum(1) for name, values in estimates.items()}  # (B,) each
top_share = {name: float(v.sort(descending=True).values[: max(1, len(v) // 100)].sum() / v.sum()) for name, v in sums.items()}
lecture.claim("k1 can be negative, k3 cannot", bool((estimates["k1"][mask] < 0).any()) and bool((estimates["k3"][mask] >= 0).all()),
              measured=", ".join(f"{name} negative on {float((v[mask] < 0).float().mean()):.0%} of tokens"
                                 for name, v in estimates.items()))
lecture.claim("the exact sum's spread over completions is smaller than k1's",
              float(exact_sums.std()) < float(sums["k1"].std()),
              measured=f"std exact {float(exact_sums.std()):.4f}, k1 {float(sums['k1'].std()):.3f}")
lecture.claim("k3's spread is larger than k1's, and its largest 1% of completions carry at least five times the share of "
              "its mean that k1's do", float(sums["k3"].std()) > float(sums["k1"].std())
              and top_share["k3"] > 5 * max(top_share["k1"], 0.0),
              measured=f"std k3 {float(sums['k3'].std()):.3f}, k1 {float(sums['k1'].std()):.3f}; largest 1% carry "
                       f"k3 {top_share['k3']:.1%}, k1 {top_share['k1']:.1%}", quick=False)
k1_standard_error = float(sums["k1"].std()) / math.sqrt(len(sums["k1"]))
lecture.claim("k1's sample mean lies within three standard errors of the exact one",
              abs(float(sums["k1"].mean() - exact_sums.mean())) < 3 * k1_standard_error,
              measured=f"exact {float(exact_sums.mean()):.3f}, k1 {float(sums['k1'].mean()):.3f} ± {k1_standard_error:.3f}, "
                       f"k3 {float(sums['k3'].mean()):.3f}")
lecture.claim("at least 99% of the exact KL is spent at t = 0", float(by_position[0]) >= 0.99,
              measured=f"share at t = 0: {float(by_position[0]):.4f}", quick=False)
by_name = {(row["models"], row["placement"]): row for row in gradient_rows}
lecture.claim("reward-k1 and loss-full follow ∇KL(π ‖ π_ref): cosine 1 and norm ratio 1",
              all(abs(by_name[(m, p)]["cos ∇KL(π‖π_ref)"] - 1) < 1e-6 and abs(by_name[(m, p)]["norm / |∇KL(π‖π_ref)|"] - 1) < 1e-6
                  for m in ("1 vs 2", "3 vs 4") for p in ("reward-k1", "loss-full")),
              measured=", ".join(f"{p} ({m}) cos {by_name[(m, p)]['cos ∇KL(π‖π_ref)']:.6f}" for m in ("1 vs 2", "3 vs 4")
                                 for p in ("reward-k1", "loss-full")))
refused = ("k3 in the reward (refused)", "exact KL in the reward alone (refused)")
lecture.claim("k3, or the exact KL alone, in a detached reward does not follow ∇KL(π ‖ π_ref): its expected gradient "
              "points at most half-way along it (cosine below 0.5) and is under a fifth of its length",
              all(by_name[(m, p)]["cos ∇KL(π‖π_ref)"] < 0.5 and by_name[(m, p)]["norm / |∇KL(π‖π_ref)|"] < 0.2
                  for m in ("1 vs 2", "3 vs 4") for p in refused),
              measured=", ".join(f"{p.split(' (')[0]} ({m}) cos {by_name[(m, p)]['cos ∇KL(π‖π_ref)']:.3f}, "
                                 f"norm {by_name[(m, p)]['norm / |∇KL(π‖π_ref)|']:.3f}"
                                 for m in ("1 vs 2", "3 vs 4") for p in refused))
loss_alone = [by_name[(m, "exact KL in the loss alone")] for m in ("1 vs 2", "3 vs 4")]
lecture.claim("The loss half alone comes close on these small models — cosine above 0.99 and norm within 2% of "
              "∇KL's — but is not exact",
              all(row["cos ∇KL(π‖π_ref)"] > 0.99 and abs(row["norm / |∇KL(π‖π_ref)|"] - 1) < 0.02 for row in loss_alone)
              and any(abs(row["cos ∇KL(π‖π_ref)"] - 1) > 1e-6 or abs(row["norm / |∇KL(π‖π_ref)|"] - 1) > 1e-6
                      for row in loss_alone),
              measured=", ".join(f"{row['models']}: cos {row['cos ∇KL(π‖π_ref)']:.4f}, norm "
                                 f"{row['norm / |∇KL(π‖π_ref)|']:.4f}" for row in loss_alone))
lecture.claim("k3 in the loss follows the reverse KL at the visited states",
              all(abs(by_name[(m, "loss-k3")]["cos ∇ state reverse KL"] - 1) < 1e-6 for m in ("1 vs 2", "3 vs 4")),
              measured=", ".join(f"{by_name[(m, 'loss-k3')]['cos ∇ state reverse KL']:.6f}" for m in ("1 vs 2", "3 vs 4")))
at_one = optimum_at(1.0)  # quoted in the k3-in-the-reward item of this section
lecture.claim("π* at β = 1: 25.8% pizza, KL 0.08", f"{at_one.probabilities[TARGET]:.1%}" == "25.8%"
              and f"{at_one.kl:.2f}" == "0.08", measured=f"{at_one.probabilities[TARGET]:.2%}, KL {at_one.kl:.3f}", quick=False)
trained = {row["placement"]: row for row in placement_rows}
lecture.claim("reward-k1 and loss-full land on π*; loss-k3 lands elsewhere (on its own fixed point)",
              all(abs(float(trained[p][f"{TARGET} rate"][:-1]) - 100 * best.probabilities[TARGET]) < 2
                  for p in ("reward-k1", "loss-full"))
              and abs(float(trained["loss-k3"][f"{TARGET} rate"][:-1]) - 100 * k3_rate) < 2
              and abs(k3_rate - best.probabilities[TARGET]) > 0.05,
              measured=", ".join(f"{p} {trained[p][f'{TARGET} rate']}" for p in trained), quick=False)

# %% [markdown]
r"""
## 6. Against the exact optimum

For the rule reward (score for exactly "pizza" + EOS, 0 for anything else) the
objective's maximiser is $\pi^*(y) \propto \pi_\text{ref}(y) \exp\big(\operatorname{score}(y) / \beta\big)$, computed here over the
ten foods and the lumped malformed rest (`ppo.lm.exact.optimum`). A small β buys a high target
rate at a large KL; a large β keeps the model close to the SFT model. We train PPO at a
few β (the run above is one of them), evaluate each policy on fresh samples at
temperature 1 (`ppo.lm.trainers.evaluation.evaluate_lm_policy`) and put the results on π*'s curve.

What the run shows: PPO follows π*'s trade-off — from $\beta = 0.05$ to $\beta = 0.5$ its rate falls
from 99.8% to 51.2% and its KL from 2.16 to 0.48 nats — and at every β it ends within 2.6 points of π*'s rate and 0.06
nats of π*'s KL (the red dots on the black curves). The last printed line sets the figures the `cleanllm` notebook reports (see the
introduction) beside ours; its model, reward (4, not 1) and KL measure differ from ours, so the two are set
side by side, not ranked.
"""


# %%
def evaluate(policy, seed: int):
    return evaluate_lm_policy(policy, trainer.reference, tokenizer, TASK, EVAL_SAMPLES, 1.0, CONFIG.max_new_tokens,
                              torch.Generator().manual_seed(10_000 + seed), CONFIG.missing_eos_penalty)


BETAS = lecture.choose(full=[0.05, CONFIG.kl_coef, 0.5], quick=[CONFIG.kl_coef])
runs = {CONFIG.kl_coef: trainer}
for beta in BETAS:
    if beta not in runs:
        runs[beta] = RLHFTrainer(CONFIG.replace(kl_coef=beta), sft, tokenizer, TASK, progress=False)
        runs[beta].train()
        print(f"trained β = {beta}")
sft_eval = evaluate(trainer.reference, 0)
optimum_rows = [{"policy": "SFT (π_ref)", "β": "", f"{TARGET} rate": f"{sft_eval.rates['target_rate']:.1%}",
                 "π* rate": "", "well-formed": f"{sft_eval.rates['well_formed_rate']:.1%}", "KL (k1 ± s.e.)": "0",
                 "π* KL": "", "most frequent": ", ".join(sft_eval.examples[:3])}]
evaluations = {}
for beta in BETAS:
    result = evaluations[beta] = evaluate(runs[beta].policy, 1)
    best = optimum_at(beta)
    optimum_rows.append({"policy": "PPO", "β": beta, f"{TARGET} rate": f"{result.rates['target_rate']:.1%}",
                         "π* rate": f"{best.probabilities[TARGET]:.1%}", "well-formed": f"{result.rates['well_formed_rate']:.1%}",
                         "KL (k1 ± s.e.)": f"{result.kl_k1:.2f} ± {result.kl_k1_stderr:.2f}", "π* KL": f"{best.kl:.2f}",
                         "most frequent": ", ".join(result.examples[:3])})
print_table(optimum_rows, title=f"PPO against π* ∝ π_ref·exp(score/β): {EVAL_SAMPLES} fresh completions each, temperature 1")
REFERENCE_NOTEBOOK_REPORTS = {"samples containing 'pizza' before": "12 of 100",
                              "after 300 one-completion updates": "81 of 100",
                              "logged mean KL (its per-token average), episodes 100-300": "3.76 to 3.88",
                              "completions": "some garbled, e.g. 'pizzaicres wpiesE'"}
print("beside it, as reported by the 'Proximal Policy Optimization' notebook of the cleanllm course (its own model, "
      "reward 4; quoted, not run here): " + "; ".join(f"{key} {value}" for key, value in REFERENCE_NOTEBOOK_REPORTS.items()))

beta_grid = torch.logspace(math.log10(0.01), math.log10(3.0), 60).tolist()
curve = [optimum_at(beta) for beta in beta_grid]
figure, axes = plt.subplots(1, 2, figsize=(11, 4))
axes[0].plot(beta_grid, [o.probabilities[TARGET] for o in curve], "k-", label="π* (exact)")
axes[1].plot(beta_grid, [o.kl for o in curve], "k-", label="π* (exact)")
axes[0].plot(BETAS, [evaluations[b].rates['target_rate'] for b in BETAS], "o", color="tab:red", ms=8, label="PPO")
axes[1].errorbar(BETAS, [evaluations[b].kl_k1 for b in BETAS], yerr=[2 * evaluations[b].kl_k1_stderr for b in BETAS],
                 fmt="o", color="tab:red", ms=8, label="PPO (k1, ± 2 s.e.)")
axes[0].axhline(reference_probabilities[TARGET], color="gray", ls=":", label="SFT")
axes[0].set_ylabel(f"P({TARGET} + EOS)")
axes[1].set_ylabel("KL(π ‖ π_ref), nats")
for axis in axes:
    axis.set_xscale("log")
    axis.set_xlabel("β")
    axis.legend(fontsize=8)
axes[0].set_title("Target rate")
axes[1].set_title("Distance from the SFT model")
lecture.save_figure(figure, "optimum.png")

figure, axes = plt.subplots(1, 3, figsize=(14, 4))
for beta in BETAS:
    history = runs[beta].history
    iterations = range(1, len(history) + 1)
    axes[0].plot(iterations, [m["target_rate"] for m in history], label=f"β = {beta}")
    axes[0].plot(iterations, [m["well_formed_rate"] for m in history], ls=":", color=axes[0].lines[-1].get_color())
    axes[1].plot(iterations, [m["sequence_kl"] for m in history], label=f"β = {beta}")
    axes[1].axhline(optimum_at(beta).kl, ls="--", lw=0.8, color=axes[1].lines[-1].get_color())
    axes[2].plot(iterations, [m["entropy"] for m in history], label=f"β = {beta}")
axes[0].set_title(f"{TARGET} rate (solid), well-formed (dotted)")
axes[1].set_title("sequence KL to π_ref (dashed: π*'s)")
axes[2].set_title("entropy per token")
for axis in axes:
    axis.set_xlabel("iteration")
    axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    axis.legend(fontsize=8)
lecture.save_figure(figure, "training_curves.png")

# %% tags=["claims"]
rates = {beta: evaluations[beta].rates["target_rate"] for beta in BETAS}
kls = {beta: evaluations[beta].kl_k1 for beta in BETAS}
low, high = min(BETAS), max(BETAS)
lecture.claim("from the smallest β to the largest PPO's rate falls by more than 20 points and its KL by more than a nat",
              rates[low] - rates[high] > 0.2 and kls[low] - kls[high] > 1.0,
              measured=f"β = {low}: {rates[low]:.1%}, KL {kls[low]:.2f}; β = {high}: {rates[high]:.1%}, KL {kls[high]:.2f}",
              quick=False)
gaps = {beta: (rates[beta] - optimum_at(beta).probabilities[TARGET], kls[beta] - optimum_at(beta).kl) for beta in BETAS}
lecture.claim("at every β PPO ends within 5 points of π*'s rate and within 0.15 nats of π*'s KL",
              all(abs(rate_gap) < 0.05 and abs(kl_gap) < 0.15 for rate_gap, kl_gap in gaps.values()),
              measured=", ".join(f"β = {beta}: rate {rate_gap:+.1%}, KL {kl_gap:+.3f}" for beta, (rate_gap, kl_gap) in gaps.items()),
              quick=False)

# %% [markdown]
r"""
## 7. A decision in mid-sequence: the two-choice task

`experiments/tasks/two_choice_task.py`. The prompt is a name — eight prompts, "ravin ",
"maya ", …, one per person of the corpus — and the SFT model completes it with a relation
and a food: "likes donuts", "hates lettuce". The relation is decided at the completion's
first token ($t = 0$, "l" or "h"), the food at $t = 6$ (and at $t = 7$ among soda, salad and
sushi, which share their first letter). The rule pays only the right combination: 1 for a
healthy food liked (lettuce, salad, apples, sushi), 0.5 for an unhealthy one hated (soda,
donuts, cookies, ice cream), 0 for anything else. Neither word pays on its own: what
"likes" is worth depends on the food that follows it six tokens later.

π* stays exact: $r$ is constant on each of the 20 answers "relation food", so per prompt
$\pi^*_\beta(y) \propto \pi_\text{ref}(y) \exp\big(r(y)/\beta\big)$ is a distribution over 20 answers and the rest. So is the
value of every state under π*,

$$
V^*_\beta(s) = \beta \log \sum_y \pi_\text{ref}(y \mid s) \exp\big(r(y)/\beta\big),
$$

summed over the
completions that continue $s$ — the total reward $r - \beta \sum_t \mathrm{KL}_t$ that π* collects from $s$ on,
which is what a critic learns to predict once the policy is π*. The table gives it after
"ravin ", "ravin likes " and "ravin hates ": $V^*_\beta$ is about 0.54 after 'ravin likes ' and
0.14 after 'ravin hates '. From either state the SFT model adds a paid food in 11–15% of
its completions (second column), but "likes" is paid twice as much, so the SFT model's
expected reward $\mathbb E_{\pi_\text{ref}}[r \mid s]$ is about 0.14 after "likes " and 0.06 after "hates "; the
exponential tilt of π* multiplies that difference: the gap in $V^*_\beta$ is about five times
as large.

The runs here use $\beta = 0.25$, not the 0.15 of the pizza runs: $\pi^*_\beta$ says 'hates' about one
time in six at $\beta = 0.25$ (at 0.15, one in twenty-five), so both branches stay visited and
a critic has data on each.
"""

# %%
TWO_CHOICE = TwoChoiceTaskConfig()
TWO_TASK = two_choice_task(TWO_CHOICE)
TWO_PROMPT = TWO_TASK.prompts[0]  # "ravin "
TWO_BETA = 0.25
TWO_SCORES = TWO_CHOICE.answer_scores()  # r of the 20 answers, and 0 for MALFORMED (here: everything else)


def answer_probabilities(model, prompt: str) -> dict[str, float]:
    """π(answer + EOS | prompt) for the 20 answers, exact; MALFORMED lumps the rest (malformed or no EOS)."""
    return completion_probabilities(model, tokenizer, prompt, ANSWERS)


def gold(probabilities: dict[str, float]) -> float:
    """E_π[r] over the answers, the rest counted 0."""
    return sum(p * TWO_SCORES[group] for group, p in probabilities.items())


def likes_share(probabilities: dict[str, float]) -> float:
    return sum(p for group, p in probabilities.items() if group.startswith("likes "))


def state_groups(model, said: str) -> dict[str, float]:
    """π(g | TWO_PROMPT + said) over the answers that continue `said`, the rest one group (MALFORMED): exact."""
    continuations = [answer[len(said):] for answer in ANSWERS if answer.startswith(said)]
    return completion_probabilities(model, tokenizer, TWO_PROMPT + said, continuations)


def soft_values(model, said: str) -> tuple[float, float]:
    """(V^π(s), V*_β(s)) at s = TWO_PROMPT + said, over state_groups (the rest scored 0):
    V^π(s) = Σ_g π(g|s)·(r(g) − β·log(π(g|s)/π_ref(g|s))) and V*_β(s) = β·log Σ_g π_ref(g|s)·exp(r(g)/β)."""
    reference, policy = state_groups(sft, said), state_groups(model, said)
    scores = {group: TWO_SCORES.get(said + group, 0.0) for group in reference}
    value = sum(p * (scores[g] - TWO_BETA * math.log(p / reference[g])) for g, p in policy.items() if p > 0)
    return value, kl_regularised_optimum(reference, scores, TWO_BETA).objective


two_reference = {prompt: answer_probabilities(sft, prompt) for prompt in TWO_TASK.prompts}
two_optimum = {prompt: kl_regularised_optimum(two_reference[prompt], TWO_SCORES, TWO_BETA) for prompt in TWO_TASK.prompts}
sft_gold = statistics.fmean(gold(two_reference[p]) for p in TWO_TASK.prompts)
optimum_gold = statistics.fmean(o.expected_score for o in two_optimum.values())
optimum_likes = statistics.fmean(likes_share(o.probabilities) for o in two_optimum.values())
likes_at_015 = statistics.fmean(likes_share(kl_regularised_optimum(two_reference[p], TWO_SCORES, 0.15).probabilities)
                                for p in TWO_TASK.prompts)
exact_rows = []
for said in ("", "likes ", "hates "):
    paid = sum(p for group, p in state_groups(sft, said).items() if TWO_SCORES.get(said + group, 0.0) > 0)
    exact_rows.append({"state s": repr(TWO_PROMPT + said), "π_ref(a paid answer | s)": paid,
                       "V*_β(s)": soft_values(sft, said)[1]})
print_table(exact_rows, title=f"The two-choice task after {TWO_PROMPT!r}, exact, β = {TWO_BETA}")
v_star = {row["state s"]: row["V*_β(s)"] for row in exact_rows}
sft_likes = statistics.fmean(likes_share(two_reference[p]) for p in TWO_TASK.prompts)
print(f"over the {len(TWO_TASK.prompts)} prompts: SFT gold {sft_gold:.3f}, 'likes' {sft_likes:.1%}; "
      f"π*_β gold {optimum_gold:.3f}, 'likes' {optimum_likes:.1%}, "
      f"KL {statistics.fmean(o.kl for o in two_optimum.values()):.3f} "
      f"nats (at β = 0.15 π* says 'likes' {likes_at_015:.1%})")

# %% [markdown]
r"""
### Four trainers, ten seeds each

| trainer | baseline | KL term |
|---|---|---|
| PPO | a critic $V(s_t)$ and GAE along the tokens | k1 in the reward |
| RLOO | $\hat A_i = R_i - {}$ the mean of the other $G - 1$ completions of the prompt | k1 in the reward |
| RLOO, k3 in the loss | the same baseline | $\beta k_3$ differentiated in the loss |
| GRPO | $\hat A_i = (R_i - \operatorname{mean}_j R_j) / \operatorname{std}_j R_j$ over the group | $\beta k_3$ in the loss, as published |

(`ppo/lm/trainers/group_trainer.py`: RLOO is Ahmadian et al. 2024's leave-one-out baseline, GRPO
Shao et al. 2024's group-normalised one; [lecture 13](13_rlhf_pipeline.ipynb) works one group by hand.) Each row
differs from the one above in one thing: the critic gives way to a group baseline, then
k1 in the reward to k3 in the loss, then the plain difference to one divided by the
group's std. A group baseline gives every token of completion i the same $\hat A_i$; PPO's
critic gives each token its own. Every run: $\beta = 0.25$, 30 iterations of 64 completions
(eight groups of eight, one group per prompt), the library's other defaults, seeds 1–10.
The table's columns. Four are measured exactly on the trained policy, over the 20
answers (the rest, malformed or unfinished, one group scored 0), and averaged over the
eight prompts: *gold E[r]*, the expected rule reward; `TV to π*`, the total variation
distance to $\pi^*_\beta$ (0 on the optimum, 1 for disjoint distributions); *'likes'*, the
probability that the answer starts with "likes"; *rest*, the probability of a malformed
or unfinished string. Two come from the run's own training batches (their mean rule
score r, the KL not subtracted): *half-way at*, sample efficiency, the completions
sampled until the mean of two consecutive batches' scores first reaches half-way from
the SFT model's gold to π*'s (`first_reaching`; *reached half-way* counts the seeds that
got there); *batches, last ⅔*, the batches' mean score over the last two thirds of the
run. Each cell is an IQM over the ten seeds with its 95% <a href="../glossary.html#term-Bootstrap-confidence-interval">stratified bootstrap interval</a>,
written IQM [low, high] ([lecture 7](07_diagnostics_and_tuning.ipynb)); the SFT and π* rows are exact.

What the run shows (the table, and the figure's three panels). Every run of every method
gets half-way from the SFT model's gold to π*'s, and the four intervals of the
completions it takes overlap: on this task, at this size, the critic buys no sample
efficiency over the group baselines. If anything the contrary: past half-way PPO's
batches trail RLOO's and GRPO's: over the last two thirds of the run their mean score is
lower than both, its interval below both of theirs by a few hundredths (column
"batches, last ⅔"; left panel, the blue band under the orange and red ones).
The likely reason is the critic itself, still being learned: its errors (below, up to a
third) enter every Â, while a group baseline is computed afresh from each group. Where
a run lands is decided by the KL term. PPO and RLOO, with k1 in the reward,
land closest to $\pi^*_\beta$: their TV intervals overlap each other and lie below those of both
runs with k3 in the loss (middle panel), and their gold (IQMs 0.832 and 0.854 in this
run) is within 0.04 of π*'s 0.859. RLOO with
k3 in the loss has the lowest gold of the four, and says 'likes' less often than π*: k3
in the loss has its own fixed point (section 5), not π*. GRPO says 'likes' more often
than π* and than each of the three others (right panel). Its one difference from the
row above is the division by the group's std, and the std of r over one prompt's
completions is about 0.36 under the SFT model and 0.29 under π*: dividing by it
multiplies the score's pull, roughly by $1/\operatorname{std}$, so two- to threefold or more (computed
exactly below for a 0/1 score), while the $\beta k_3$ term keeps its size, as a smaller β
would. GRPO leaves the most mass malformed or unfinished (column "rest"): its IQM, 1.5% in
this run, is the highest of the four, and the two runs with k1 in the reward leave under
1.2% (0.7% and 0.8% here). RLOO with k3 in the loss, at 1.0% in this run, lies between;
how much it leaves changes from one machine to another, as does its share of the KL past
$t = 7$ (next table). With ten seeds the intervals are wide and may overlap, so read this
as a tendency of a fraction of a percent, not a separation. The next table shows where.
"""

# %%
TWO_METHODS = {  # name: (algorithm, KL placement)
    "PPO": ("ppo", "reward-k1"),
    "RLOO": ("rloo", "reward-k1"),
    "RLOO, k3 in the loss": ("rloo", "loss-k3"),
    "GRPO": ("grpo", "loss-k3"),
}
METHOD_COLOURS = {"PPO": "tab:blue", "RLOO": "tab:orange", "RLOO, k3 in the loss": "tab:green", "GRPO": "tab:red"}
TWO_SEEDS = lecture.choose(full=list(range(1, 11)), quick=[1])
TWO_CONFIG = RLHFConfig(sample_every=0, tensorboard=False, kl_coef=TWO_BETA, batch_size=64, group_size=8,
                        iterations=lecture.choose(full=30, quick=2))
POSITION_SAMPLES = lecture.choose(full=512, quick=64)  # fresh completions per run for the KL's position shares
CRITIC_STATES = ("", "likes ", "hates ", "likes a", "likes d")  # completion prefixes after TWO_PROMPT
halfway_level = (sft_gold + optimum_gold) / 2


@torch.no_grad()
def two_choice_measures(trainer: RLHFTrainer, seed: int) -> dict:
    """Exact answer shares against π*_β, the KL's position shares on fresh samples, the learning curve."""
    policy = {prompt: answer_probabilities(trainer.policy, prompt) for prompt in TWO_TASK.prompts}
    fresh = collect_rollout(trainer.policy, trainer.reference, None, tokenizer,
                            repeat_prompts(TWO_TASK.prompts, POSITION_SAMPLES), TWO_CONFIG.max_new_tokens,
                            TWO_CONFIG.temperature, torch.Generator().manual_seed(40_000 + seed), with_values=False)
    curve = [metrics["score"] for metrics in trainer.history]
    shares = position_shares(fresh.exact_kl)  # share at t = 0, 1–5, 6, 7, ≥ 8
    return {"gold": statistics.fmean(gold(policy[p]) for p in TWO_TASK.prompts),
            "likes": statistics.fmean(likes_share(policy[p]) for p in TWO_TASK.prompts),
            "rest": statistics.fmean(policy[p][MALFORMED] for p in TWO_TASK.prompts),
            "tv": statistics.fmean(total_variation(policy[p], two_optimum[p].probabilities) for p in TWO_TASK.prompts),
            "kl_shares": shares, "late_kl": shares[-1], "curve": curve,
            "late_score": statistics.fmean(curve[len(curve) // 3:]),  # the training batches, last two thirds
            "halfway": first_reaching(curve, halfway_level, TWO_CONFIG.batch_size)}


two_trainers = {name: [] for name in TWO_METHODS}
for name, (algorithm, placement) in TWO_METHODS.items():
    for seed in TWO_SEEDS:
        groups = TWO_CONFIG.group_size if algorithm != "ppo" else RLHFConfig.group_size  # PPO samples no groups
        config = TWO_CONFIG.replace(algorithm=algorithm, kl_penalty=placement, seed=seed, group_size=groups)
        two_trainers[name].append(trainer_class(algorithm)(config, sft, tokenizer, TWO_TASK, progress=False))
        two_trainers[name][-1].train()
    print(f"trained {name}: {len(TWO_SEEDS)} seeds of {TWO_CONFIG.iterations} iterations × "
          f"{TWO_CONFIG.batch_size} completions")
two_runs = {name: [two_choice_measures(trainer, seed) for trainer, seed in zip(trainers, TWO_SEEDS)]
            for name, trainers in two_trainers.items()}

critic_runs = [{said: (critic_values_along(ppo_run.value_model, tokenizer, TWO_PROMPT + said)[-1],  # (V, V^π, V*)
                       *soft_values(ppo_run.policy, said)) for said in CRITIC_STATES}
               for ppo_run in two_trainers["PPO"]]

BOOTSTRAP_REPS = lecture.choose(full=2000, quick=100)
completions_run = TWO_CONFIG.iterations * TWO_CONFIG.batch_size


def per_seed(name: str, key: str) -> np.ndarray:
    """One number per seed; a run that never got half-way counts as the run's length (censored)."""
    return np.array([completions_run if run[key] is None else run[key] for run in two_runs[name]], dtype=float)


MEASURES = {"gold": "gold E[r]", "tv": "TV to π*", "likes": "'likes'", "rest": "rest", "halfway": "half-way at",
            "late_score": "batches, last ⅔"}
two_estimates = {key: interval_estimates({name: per_seed(name, key) for name in TWO_METHODS}, reps=BOOTSTRAP_REPS,
                                         seed=0) for key in (*MEASURES, "late_kl")}


def iqm_cell(key: str, name: str, digits: int = 3) -> str:
    row = two_estimates[key][name]
    return f"{row['iqm']:.{digits}f} [{row['iqm_low']:.{digits}f}, {row['iqm_high']:.{digits}f}]"


sft_distance = statistics.fmean(total_variation(two_reference[p], two_optimum[p].probabilities) for p in TWO_TASK.prompts)
sft_rest = statistics.fmean(two_reference[p][MALFORMED] for p in TWO_TASK.prompts)
optimum_rest = statistics.fmean(o.probabilities[MALFORMED] for o in two_optimum.values())
comparison_rows = [{"method": "SFT (π_ref), exact", "gold E[r]": f"{sft_gold:.3f}", "TV to π*": f"{sft_distance:.3f}",
                    "'likes'": f"{sft_likes:.3f}", "rest": f"{sft_rest:.4f}", "half-way at": "", "batches, last ⅔": "",
                    "reached half-way": ""}]
for name in TWO_METHODS:
    reached = sum(run["halfway"] is not None for run in two_runs[name])
    comparison_rows.append({"method": name, **{column: iqm_cell(key, name, 0 if key == "halfway" else 3)
                                               for key, column in MEASURES.items()},
                            "reached half-way": f"{reached}/{len(TWO_SEEDS)}"})
comparison_rows.append({"method": "π*_β, exact", "gold E[r]": f"{optimum_gold:.3f}", "TV to π*": "0",
                        "'likes'": f"{optimum_likes:.3f}", "rest": f"{optimum_rest:.4f}"})
print_table(comparison_rows, title=f"The two-choice task at β = {TWO_BETA}: IQM [95% CI] over seeds {TWO_SEEDS[0]}–"
                                   f"{TWO_SEEDS[-1]}, {completions_run} completions per run; exact over the answers, "
                                   f"mean over the {len(TWO_TASK.prompts)} prompts")


def score_spread(probabilities: dict[str, float]) -> float:
    """The std of r over one prompt's completions, exact over the groups."""
    mean = gold(probabilities)
    return math.sqrt(sum(p * (TWO_SCORES[g] - mean) ** 2 for g, p in probabilities.items()))


spread_sft = statistics.fmean(score_spread(two_reference[p]) for p in TWO_TASK.prompts)
spread_optimum = statistics.fmean(score_spread(o.probabilities) for o in two_optimum.values())
print(f"std of r over one prompt's completions (exact, mean over prompts): SFT {spread_sft:.3f}, π*_β {spread_optimum:.3f}")
figure, axes = plt.subplots(1, 3, figsize=(15, 4.2))
for index, (name, runs) in enumerate(two_runs.items()):
    colour = METHOD_COLOURS[name]
    curves = torch.tensor([run["curve"] for run in runs], dtype=torch.float64)  # (seeds, iterations)
    completions = [(i + 1) * TWO_CONFIG.batch_size for i in range(curves.shape[1])]
    mean = curves.mean(0)
    half_width = 1.96 * curves.std(0) / math.sqrt(len(runs)) if len(runs) > 1 else torch.zeros_like(mean)
    axes[0].plot(completions, mean.tolist(), color=colour, label=name)
    axes[0].fill_between(completions, (mean - half_width).tolist(), (mean + half_width).tolist(), color=colour, alpha=0.15)
    for axis, key in ((axes[1], "tv"), (axes[2], "likes")):
        values = per_seed(name, key)
        jitter = (np.arange(len(values)) - (len(values) - 1) / 2) * 0.03
        axis.scatter(index + jitter, values, color=colour, s=18, alpha=0.7)
        row = two_estimates[key][name]
        axis.plot([index, index], [row["iqm_low"], row["iqm_high"]], color="black", lw=2)
        axis.plot([index], [row["iqm"]], marker="_", color="black", ms=16)
axes[0].axhline(optimum_gold, color="black", ls="--", lw=1, label="π*_β (exact)")
axes[0].axhline(sft_gold, color="gray", ls=":", lw=1, label="SFT (exact)")
axes[0].set_xlabel("completions sampled")
axes[0].set_ylabel("training batch's mean score")
axes[0].set_title("Learning curves (mean over seeds, 95% band)")
axes[0].legend(fontsize=8, loc="lower right")
axes[2].axhline(optimum_likes, color="black", ls="--", lw=1, label="π*_β (exact)")
axes[2].legend(fontsize=8, loc="lower left")
for axis, title, ylabel in ((axes[1], "Where each lands: distance to π*_β", "TV(π, π*_β), mean over prompts"),
                            (axes[2], "How often the first word is 'likes'", "π('likes …'), mean over prompts")):
    axis.set_xticks(range(len(TWO_METHODS)), list(TWO_METHODS), fontsize=8)
    axis.set_title(title + " (dots: seeds; bar: IQM, 95% CI)", fontsize=9)
    axis.set_ylabel(ylabel)
lecture.save_figure(figure, "two_choice_comparison.png")

# %% [markdown]
r"""
### GRPO's division by the group's std, exactly

How much does the division weigh? `experiments/studies/grpo_biases.py` computes it exactly for a
score that is 1 with probability p and 0 otherwise (ours has three levels, so this gives
the shape, not our exact factor): summed over the binomial number of successes in a group
of G = 8, the expected gradient of one completion's term is $c(p) \nabla p$, and the table sets
$c(p)$ with the group's std against $c(p)$ without any division (the choice of Dr. GRPO,
Liu et al. 2025, *Understanding R1-Zero-Like Training*; `advantage_scale none`). At
$p = \tfrac12$ the division multiplies the pull by about two; towards
$p = 0$ or 1 by more (about 2.6 at $p = 0.05$ and 0.95), because the group's std shrinks when
nearly all its scores agree, which is also when most groups tie: at $p = 0.95$ two groups
in three tie and get $\hat A = 0$. The $\beta k_3$ term is divided by nothing, so GRPO trains as if β
were two to three times smaller, the more so on prompts it nearly always or never gets
right. (The runs above average the loss over tokens, `loss_averaging token`, the
library's default; published GRPO averages per completion, and the same module computes
the length bias that choice brings.)
"""

# %%
GRPO_SUCCESS_RATES = (0.05, 0.2, 0.5, 0.8, 0.95)
difficulty = difficulty_bias(list(GRPO_SUCCESS_RATES), TWO_CONFIG.group_size)
print_difficulty(difficulty)

# %% [markdown]
r"""
### Where the KL is spent

The same measurement as section 5's left panel, now for every run: the exact per-state
KL along fresh completions, as shares of its sum over positions. On the pizza task all of
it was at $t = 0$. Here PPO spends between a fifth and a third of its KL at $t = 0$ on every
seed (25.5% to 28.3% in this run), and more than three fifths at $t = 6$ and 7 (69.4% to 71.8%), where the food is chosen, and almost
nothing between them ($t = 1$–5 spell out a relation already chosen): two decisions, two
places where the policy leaves $\pi_\text{ref}$. The two runs with k3 in the loss spend the largest
shares of their KL past $t = 7$ (6.7% and 6.4%, means over seeds, against PPO's 2.1%), GRPO the
most by IQM (5.8% against PPO's 1.6%), with a wide spread over seeds (the whiskers: the range
over seeds). The spread there is wide for every method: PPO and RLOO each have a seed that
spends more than twice their IQM's share of its KL past $t = 7$. Past $t = 7$ the SFT model
spells the food out letter by letter, so KL spent there is a misspelling in the making: the malformed mass above. One reading: with k1 in the
reward a misspelt letter is charged its log-ratio, many nats where $\pi_\text{ref}$ all but never
misspells; k3 in the loss charges the reverse KL at the state, small while the right
letter keeps most of the mass; and GRPO's division by the std enlarges every step.
"""

# %%
POSITION_COLUMNS = ("t = 0", "t = 1–5", "t = 6", "t = 7", "t ≥ 8")
food_shares = [float(by_position[start:end].sum()) for start, end in ((0, 1), (1, 6), (6, 7), (7, 8), (8, None))]
position_rows = [{"method": "PPO on the pizza task (§5)",
                  **{column: f"{share:.1%}" for column, share in zip(POSITION_COLUMNS, food_shares)}}]
mean_shares = {}
for name, runs in two_runs.items():
    mean_shares[name] = [statistics.fmean(run["kl_shares"][i] for run in runs) for i in range(len(POSITION_COLUMNS))]
    position_rows.append({"method": name, **{column: f"{share:.1%}"
                                             for column, share in zip(POSITION_COLUMNS, mean_shares[name])}})
print_table(position_rows, title=f"Where the KL is spent: share of E_π[Σ_t KL(π(·|s_t) ‖ π_ref(·|s_t))] at completion "
                                 f"position t, mean over seeds ({POSITION_SAMPLES} fresh completions per run)")
figure, axis = plt.subplots(figsize=(9, 4))
width = 0.8 / (len(TWO_METHODS) + 1)
axis.bar(np.arange(len(POSITION_COLUMNS)) - 0.4 + width / 2, food_shares, width, color="0.6",
         label="PPO, pizza task (§5)")
for index, (name, shares) in enumerate(mean_shares.items()):
    seed_shares = np.array([run["kl_shares"] for run in two_runs[name]])  # (seeds, positions)
    whiskers = np.stack([shares - seed_shares.min(0), seed_shares.max(0) - shares])
    axis.bar(np.arange(len(POSITION_COLUMNS)) - 0.4 + (index + 1.5) * width, shares, width, color=METHOD_COLOURS[name],
             yerr=whiskers, capsize=2, error_kw={"lw": 0.8}, label=f"{name}, two-choice task")
axis.set_xticks(range(len(POSITION_COLUMNS)), ["t = 0\n(relation)", "t = 1–5", "t = 6\n(food)",
                                                "t = 7\n(s…: which food)",
                                                "t ≥ 8\n(rest of the food, EOS)"])
axis.set_ylabel("share of the sequence KL\n(bar: mean over seeds; whisker: range)")
axis.set_xlabel("completion position")
axis.set_title("Where the KL is spent along the completion")
axis.legend(fontsize=8)
lecture.save_figure(figure, "two_choice_kl_positions.png")

# %% [markdown]
r"""
### What the critic says

The pizza task left the critic one thing to learn; here it has to price the first word
by the food that will follow it. The table sets PPO's critic after training beside the
exact value of the same seed's trained policy,

$$
V^\pi(s) = \sum_g \pi(g \mid s) \Big( r(g) - \beta \log \frac{\pi(g \mid s)}{\pi_\text{ref}(g \mid s)} \Big)
$$

over the answers $g$ that continue $s$ (what the critic regresses on: the total
reward from $s$ on; the rest, scored 0, is one group, which slightly understates its KL),
and beside $V^*_\beta(s)$.

What the run shows. Where the trained policy goes — the prompt, 'likes ', 'likes a' —
the critic's errors have either sign and stay within 0.2 of the exact $V^\pi$ on every seed.
After 'ravin hates ' and 'ravin likes d' it is too high on every seed, by up to a third:
the trained policy says 'hates' in about one completion in seven or eight, and seldom adds donuts
to "likes", so the critic is trained on few of those states. Yet it ranks 'likes ' above
'hates ' on every seed, by less than the exact gap. That gap is what the critic adds to
the first token's credit, ten or more tokens before the reward arrives. With $\gamma = 1$ and
the library's $\lambda = 0.95$, GAE's advantage of the first token is

$$
\hat A_0 = \sum_l \lambda^l \delta_l = \sum_l \lambda^l r_l + (1 - \lambda) \sum_{l \ge 1} \lambda^{l-1} V(s_l) - V(s_0):
$$

the rewards, the score discounted by λ per token ($\lambda^{10} \approx 0.6$ ten tokens on), plus the
critic's values of the states the first token led to ("ravin l", …, "ravin likes ",
…), each weighted $(1 - \lambda) \lambda^{l-1}$: higher along "likes" than along "hates". RLOO and
GRPO give the "l" of a completion the same $\hat A$ as its food. On this task that finer
credit did not make PPO faster (the table above); what a critic adds over the group
baselines is the per-token value, not speed, here.
"""

# %%
def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} [{min(values):.2f}, {max(values):.2f}]"


critic_table = []
for said in CRITIC_STATES:
    critic_table.append({"state s": repr(TWO_PROMPT + said),
                         "critic V(s)": spread([run[said][0] for run in critic_runs]),
                         "exact V^π(s)": spread([run[said][1] for run in critic_runs]),
                         "V*_β(s)": f"{critic_runs[0][said][2]:.2f}"})
print_table(critic_table, title="PPO's critic after training against the exact values (median [min, max] over seeds)")

# %% tags=["claims"]
lecture.claim("π*_β says 'hates' about one time in six at β = 0.25 (at 0.15, one in twenty-five)",
              0.12 < 1 - optimum_likes < 0.22 and 0.03 < 1 - likes_at_015 < 0.05,
              measured=f"π*_0.25 'hates' {1 - optimum_likes:.1%}, π*_0.15 'hates' {1 - likes_at_015:.1%}", quick=False)
likes_value, hates_value = v_star[repr(TWO_PROMPT + "likes ")], v_star[repr(TWO_PROMPT + "hates ")]
lecture.claim("V*_β is about 0.54 after 'ravin likes ' and 0.14 after 'ravin hates '",
              abs(likes_value - 0.54) < 0.01 and abs(hates_value - 0.14) < 0.01,
              measured=f"{likes_value:.3f} and {hates_value:.3f}", quick=False)
paid_after = {row["state s"]: row["π_ref(a paid answer | s)"] for row in exact_rows}
sft_expected = {said: sum(p * TWO_SCORES.get(said + group, 0.0) for group, p in state_groups(sft, said).items())
                for said in ("likes ", "hates ")}
tilt = (likes_value - hates_value) / (sft_expected["likes "] - sft_expected["hates "])
lecture.claim("from either state the SFT model adds a paid food in 11–15% of its completions; its expected reward is "
              "about 0.14 after 'likes ' and 0.06 after 'hates '; the gap in V*_β is about five times as large",
              all(0.11 <= paid_after[repr(TWO_PROMPT + said)] <= 0.15 for said in ("likes ", "hates "))
              and abs(sft_expected["likes "] - 0.14) < 0.01 and abs(sft_expected["hates "] - 0.06) < 0.01
              and 4 < tilt < 6,
              measured=f"paid: {paid_after[repr(TWO_PROMPT + 'likes ')]:.3f}, {paid_after[repr(TWO_PROMPT + 'hates ')]:.3f}; "
                       f"E_π_ref[r|s]: {sft_expected['likes ']:.3f}, {sft_expected['hates ']:.3f}; gap ratio {tilt:.2f}",
              quick=False)

def interval_order(key: str, first: str, second: str) -> str:
    """'below' / 'above' when first's IQM interval lies wholly below / above second's, else 'overlaps'."""
    a, b = two_estimates[key][first], two_estimates[key][second]
    return "below" if a["iqm_high"] < b["iqm_low"] else "above" if a["iqm_low"] > b["iqm_high"] else "overlaps"


def measured_intervals(key: str) -> str:
    return ", ".join(f"{name} {iqm_cell(key, name, 0 if key == 'halfway' else 3)}" for name in TWO_METHODS)


all_halfway = [run["halfway"] for runs in two_runs.values() for run in runs]
method_pairs = [(a, b) for i, a in enumerate(TWO_METHODS) for b in list(TWO_METHODS)[i + 1:]]
lecture.claim("every run of every method gets half-way from the SFT model's gold to π*'s, and the four intervals of the "
              "completions it takes overlap",
              None not in all_halfway and all(interval_order("halfway", a, b) == "overlaps" for a, b in method_pairs),
              measured=f"{measured_intervals('halfway')}; single runs {min(h or 0 for h in all_halfway)} to "
                       f"{max(h or 0 for h in all_halfway)}", quick=False)
late_scores = {name: two_estimates["late_score"][name]["iqm"] for name in TWO_METHODS}
lecture.claim("past half-way PPO's batches trail RLOO's and GRPO's: over the last two thirds of the run their mean score "
              "is lower than both, its interval below both of theirs by a few hundredths",
              all(interval_order("late_score", "PPO", b) == "below" and 0.01 < late_scores[b] - late_scores["PPO"] < 0.1
                  for b in ("RLOO", "GRPO")),
              measured=measured_intervals("late_score"), quick=False)
reward_k1, loss_k3 = ("PPO", "RLOO"), ("RLOO, k3 in the loss", "GRPO")
lecture.claim("PPO and RLOO, with k1 in the reward, land closest to π*_β: their TV intervals overlap each other and lie "
              "below those of both runs with k3 in the loss",
              interval_order("tv", "PPO", "RLOO") == "overlaps"
              and all(interval_order("tv", a, b) == "below" for a in reward_k1 for b in loss_k3),
              measured=measured_intervals("tv"), quick=False)
lecture.claim("their gold is within 0.04 of π*'s", all(abs(two_estimates["gold"][name]["iqm"] - optimum_gold) < 0.04
                                                       for name in reward_k1),
              measured=f"{measured_intervals('gold')}; π* {optimum_gold:.3f}", quick=False)
lecture.claim("RLOO with k3 in the loss has the lowest gold of the four, and says 'likes' less often than π*",
              all(interval_order("gold", loss_k3[0], b) == "below" for b in TWO_METHODS if b != loss_k3[0])
              and two_estimates["likes"]["RLOO, k3 in the loss"]["iqm_high"] < optimum_likes,
              measured=f"gold {measured_intervals('gold')}; 'likes' {measured_intervals('likes')}, π* {optimum_likes:.3f}",
              quick=False)
lecture.claim("GRPO says 'likes' more often than π* and than each of the three others",
              two_estimates["likes"]["GRPO"]["iqm_low"] > optimum_likes
              and all(interval_order("likes", "GRPO", b) == "above" for b in TWO_METHODS if b != "GRPO"),
              measured=f"{measured_intervals('likes')}, π* {optimum_likes:.3f}", quick=False)

lecture.claim("the std of r over one prompt's completions is about 0.36 under the SFT model and 0.29 under π*",
              abs(spread_sft - 0.36) < 0.01 and abs(spread_optimum - 0.29) < 0.01,
              measured=f"SFT {spread_sft:.3f}, π* {spread_optimum:.3f}", quick=False)
rests = {name: two_estimates["rest"][name]["iqm"] for name in TWO_METHODS}
lecture.claim("GRPO leaves the most mass malformed or unfinished: its IQM is the highest of the four and above 1.2%, "
              "each of the two runs with k1 in the reward below 1.2%",
              rests["GRPO"] == max(rests.values()) and 0.012 < rests["GRPO"] < 0.03
              and all(rests[b] < 0.012 for b in reward_k1),
              measured=measured_intervals("rest"), quick=False)

pull = {row["p"]: row["c_group-std"] / row["c_none"] for row in difficulty["rows"]}  # the division's factor at p
ties = {row["p"]: row["tie_share"] for row in difficulty["rows"]}
lecture.claim("at p = ½ the division multiplies the pull by about two; towards p = 0 or 1 by more (about 2.6 at p = 0.05 "
              "and 0.95)", 1.9 < pull[0.5] < 2.1 and pull[0.5] < pull[0.2] < pull[0.05] and pull[0.5] < pull[0.8] < pull[0.95]
              and all(2.5 < pull[p] < 2.7 for p in (0.05, 0.95)),
              measured=", ".join(f"p = {p}: ×{factor:.3f}" for p, factor in pull.items()))
lecture.claim("at p = 0.95 two groups in three tie and get Â = 0", 0.6 < ties[0.95] < 0.7,
              measured=f"tie share at p = 0.95: {ties[0.95]:.3f} (G = {TWO_CONFIG.group_size})")

ppo_shares = [run["kl_shares"] for run in two_runs["PPO"]]
lecture.claim("PPO spends between a fifth and a third of its KL at t = 0 on every seed, and more than three fifths at "
              "t = 6 and 7, where the food is chosen, and almost nothing between them",
              all(0.2 <= shares[0] <= 1 / 3 and shares[2] + shares[3] > 0.6 and shares[1] < 0.02 for shares in ppo_shares),
              measured=f"t = 0: {min(s[0] for s in ppo_shares):.1%} to {max(s[0] for s in ppo_shares):.1%}; t = 6–7: "
                       f"{min(s[2] + s[3] for s in ppo_shares):.1%} to {max(s[2] + s[3] for s in ppo_shares):.1%}; "
                       f"t = 1–5 at most {max(s[1] for s in ppo_shares):.1%}", quick=False)
late = {name: two_estimates["late_kl"][name]["iqm"] for name in TWO_METHODS}
lecture.claim("the two runs with k3 in the loss spend the largest shares of their KL past t = 7, GRPO the most, its "
              "IQM more than twice PPO's, with a wide spread over seeds",
              set(sorted(late, key=late.get)[-2:]) == set(loss_k3) and max(late, key=late.get) == "GRPO"
              and late["GRPO"] > 2 * late["PPO"]
              and two_estimates["late_kl"]["GRPO"]["iqm_high"] - two_estimates["late_kl"]["GRPO"]["iqm_low"] > 0.05,
              measured=", ".join(f"{name} {iqm_cell('late_kl', name)}" for name in TWO_METHODS), quick=False)
late_maxima = {name: max(run["late_kl"] for run in two_runs[name]) for name in reward_k1}
lecture.claim("PPO and RLOO each have a seed that spends more than twice their IQM's share of its KL past t = 7",
              all(value > 2 * late[name] for name, value in late_maxima.items()),
              measured=", ".join(f"{name}: largest share past t = 7 {value:.1%}" for name, value in late_maxima.items()),
              quick=False)

errors = {said: [run[said][0] - run[said][1] for run in critic_runs] for said in CRITIC_STATES}  # critic V − exact V^π
visited, seldom = ("", "likes ", "likes a"), ("hates ", "likes d")
lecture.claim("where the trained policy goes — the prompt, 'likes ', 'likes a' — the critic's errors have either sign and "
              "stay within 0.2 of the exact V^π on every seed",
              all(abs(e) < 0.2 for said in visited for e in errors[said])
              and min(e for said in visited for e in errors[said]) < 0 < max(e for said in visited for e in errors[said]),
              measured=", ".join(f"{TWO_PROMPT + said!r}: {min(errors[said]):+.2f} to {max(errors[said]):+.2f}"
                                 for said in visited), quick=False)
lecture.claim("after 'ravin hates ' and 'ravin likes d' it is too high on every seed, by up to a third",
              all(0 < e < 1 / 3 for said in seldom for e in errors[said]),
              measured=", ".join(f"{TWO_PROMPT + said!r}: {min(errors[said]):+.2f} to {max(errors[said]):+.2f}"
                                 for said in seldom), quick=False)
ppo_hates = [1 - run["likes"] - run["rest"] for run in two_runs["PPO"]]  # well-formed "hates …" answers
lecture.claim("the trained policy says 'hates' in about one completion in seven or eight",
              1 / 8.5 < statistics.median(ppo_hates) < 1 / 6.5,
              measured=f"PPO's 'hates' share, median over seeds {statistics.median(ppo_hates):.1%} "
                       f"({min(ppo_hates):.1%} to {max(ppo_hates):.1%})", quick=False)
lecture.claim("γ = 1 and the library's λ = 0.95", TWO_CONFIG.gamma == 1.0 and TWO_CONFIG.gae_lambda == 0.95,
              measured=f"γ = {TWO_CONFIG.gamma}, λ = {TWO_CONFIG.gae_lambda}")
credit = [run["likes "][0] - run["hates "][0] for run in critic_runs]
exact_credit = [run["likes "][1] - run["hates "][1] for run in critic_runs]
lecture.claim("yet it ranks 'likes ' above 'hates ' on every seed, by less than the exact gap",
              all(0 < c < e for c, e in zip(credit, exact_credit)),
              measured=f"critic's gap {min(credit):.2f} to {max(credit):.2f}, exact {min(exact_credit):.2f} to "
                       f"{max(exact_credit):.2f}", quick=False)



# %% [markdown]
"""
## What to take away

* A language model is a policy over tokens; the episode ends at EOS; the score arrives
  once, at the last real token, and the KL penalty arrives at every token. The rest —
  ratio, clip, GAE, value loss — is imported unchanged from the CartPole library.
* The KL is where the policy decided something: on the pizza task all of it at $t = 0$, a
  one-decision bandit on which the critic and token-level GAE have nothing to do; on the
  two-choice task a fifth to a third at the relation and most of the rest at the food (§7).
* A token-level critic prices a word by what follows it: on the two-choice task it ranks
  "likes " above "hates " where the reward comes ten or more tokens later, and errs where
  the policy seldom goes. At this size it bought no sample efficiency over RLOO's and
  GRPO's group baselines; where a run lands was set by the KL term (k1 in the reward lands
  near π*, k3 in the loss elsewhere) and by GRPO's division by the group's std, which
  acts like a smaller β.
* Compare PPO's rate and KL with π*'s in the table: the gap is the optimiser's, not the
  objective's. If a run ends far above π*'s KL or below its well-formed rate, something
  other than the objective is at work (too few completions per update, too large
  steps, dropout, a stale ratio — [lecture 8](08_implementation_details.ipynb)'s defects).
* A KL value is not a KL gradient. Only k1 belongs in a detached reward; the exact
  per-state KL belongs in the loss (with its reward half), and k3 in the loss controls the
  reverse KL at the visited states, not the objective's KL (§5's tables).
* β is the exchange rate between reward and KL; [lecture 13](13_rlhf_pipeline.ipynb) removes it (β = 0) and
  makes it adaptive.
"""

# %%
lecture.finish()
