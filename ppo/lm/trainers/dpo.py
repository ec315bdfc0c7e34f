"""Direct Preference Optimization (DPO) and IPO: fine-tune the policy on comparisons, with no reward model.

API note: `train_dpo` takes `PreferencePairs` (made by `encode_preference_pairs`), an
`EncodedComparisons` that also knows where each completion starts; a plain
`EncodedComparisons` (from `ppo.lm.algorithm.reward_model.encode_comparisons`) does not, and is refused.
`DPOConfig` has one field more than beta, loss, learning_rate, epochs, batch_size, grad_clip
and seed: `anneal_lr` (default on), the learning rate's linear decay to 0, without which the
last iterate keeps the gradient noise of the last steps. `ipo_optimum` gives IPO's optimum.

Given comparisons (x, y_w, y_l) in which y_w was preferred, and a frozen reference π_ref
(the SFT model), write the implicit reward of the policy π_θ as

    r_θ(x, y) = β · log( π_θ(y | x) / π_ref(y | x) ),      log π(y | x) = Σ_t log π(y_t | x, y_<t)

over the completion's tokens (EOS included), and the log-ratio difference of a pair as

    h = ( log π_θ(y_w) − log π_ref(y_w) ) − ( log π_θ(y_l) − log π_ref(y_l) ).

DPO (Rafailov et al. 2023, eq. 7) fits r_θ to the comparisons with the Bradley–Terry loss

    L_DPO = −E[ log σ(β · h) ].

Under the Bradley–Terry model P(y ≻ y') = σ(r(x, y) − r(x, y')), with every pair of
completions compared, the minimiser is β·log(π/π_ref) = r + const(x), i.e. the optimum of
the KL-regularised objective E_π[r] − β·KL(π ‖ π_ref) that PPO maximises:

    π*_β(y | x) = π_ref(y | x) · exp(r(x, y) / β) / Z(x).

IPO (Azar et al. 2023, eq. 17, with τ = β) regresses h on a fixed target instead:

    L_IPO = E[ ( h − 1/(2β) )² ].

When the pairs (y, y') are drawn from a policy μ (here π_ref) and labelled with preference
probabilities P(y ≻ y'), setting the gradient of the expected loss to zero gives
h(y, y') = (p(y ≻ μ) − p(y' ≻ μ)) / β with p(y ≻ μ) = E_{y'~μ}[P(y ≻ y')], so its optimum is

    π_IPO(y | x) ∝ π_ref(y | x) · exp( p(y ≻ μ) / β ):

a tilt by the bounded win rate against μ rather than by the Bradley–Terry reward. It does
not go to a deterministic policy when preferences are deterministic (DPO's log-odds would be
infinite), and it is not π*_β.

Both losses see only the completions that appear in the comparisons: the share of
probability the policy puts on completions never compared is not constrained by them. With
deterministic preferences (P = 1) DPO's loss falls towards 0 as h → +∞, which pushing the
rejected completions down achieves as well as raising the chosen one, so that mass can leave
for completions no comparison shows. Measured on the tests' tiny model (39 comparisons
"pizza" ≻ another answer, all deterministic, β 0.5, 3 epochs of 16 per minibatch, seed 4), at
a constant learning rate 3e-3 the pizza rate went 10.7% → 9.7% while malformed strings went
3.8% → 90.3%; at a constant 1e-3, or 3e-3 annealed, pizza reached 93.8%.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from ppo.config import ConfigBase, require_count, require_one_of, require_positive, require_seed
from ppo.lm.models.gpt import GPT, log_probs_of
from ppo.lm.algorithm.reward_model import EncodedComparisons, encode_comparisons
from ppo.lm.models.tokenizer import CharTokenizer
from ppo.trainers.base import TrainingDiverged

LOSSES = ("dpo", "ipo")
TRAINING_STATE = ("optimizer", "schedule", "order_generator", "history")  # what `after_epoch` gets, `resume_from` takes


# ---------------------------------------------------------------- the loss


def sequence_log_probs(model: GPT, tokens: torch.Tensor, completion_mask: torch.Tensor,
                       temperature: float = 1.0) -> torch.Tensor:
    """log π(y | x) = Σ_t log softmax(z_t / τ)[y_t] over the completion tokens of each row. (B,)

    tokens: (B, L) BOS + prompt + completion + PAD; completion_mask: (B, L) bool, True on the
    tokens of the completion (EOS included), False on BOS, the prompt and the padding.
    Gradients flow unless called under torch.no_grad().
    """
    if completion_mask.shape != tokens.shape:
        raise ValueError(f"completion_mask {tuple(completion_mask.shape)} must have the shape of tokens "
                         f"{tuple(tokens.shape)}")
    if bool(completion_mask[:, 0].any()):
        raise ValueError("completion_mask is True at position 0, which no token predicts")
    token_log_probs = log_probs_of(model, tokens, temperature)  # (B, L−1): position t scores token t+1
    return (token_log_probs * completion_mask[:, 1:].to(token_log_probs.dtype)).sum(dim=1)


def dpo_loss(policy_chosen: torch.Tensor, policy_rejected: torch.Tensor, reference_chosen: torch.Tensor,
             reference_rejected: torch.Tensor, beta: float, kind: str = "dpo") -> torch.Tensor:
    """The mean over pairs of −log σ(β·h) (kind "dpo") or (h − 1/(2β))² (kind "ipo"); all inputs (B,).

    h = (policy_chosen − reference_chosen) − (policy_rejected − reference_rejected), the
    sequence log-probabilities of the preferred and the other completion (the module docstring).
    −log σ(β·h) is computed as softplus(−β·h), exact for large |β·h|.
    """
    require_one_of("kind", kind, LOSSES)
    require_positive("beta", beta)
    h = (policy_chosen - reference_chosen) - (policy_rejected - reference_rejected)  # (B,)
    if kind == "dpo":
        return F.softplus(-beta * h).mean()
    return (h - 1.0 / (2.0 * beta)).pow(2).mean()


def ipo_optimum(reference_probabilities: dict[str, float], win_probability: Callable[[str, str], float], beta: float,
                pair_distribution: dict[str, float] | None = None) -> dict[str, float]:
    """IPO's optimum over groups of completions: π(g) ∝ π_ref(g) · exp(p(g ≻ μ) / β), p(g ≻ μ) = Σ_h μ(h)·P(g ≻ h).

    The groups are those of `reference_probabilities` (π_ref(g)); `win_probability(g, h)` is
    P(y ≻ y') for y in g and y' in h (P(g ≻ g) = 1/2), so inside a group π ∝ π_ref, as for
    π*_β. μ, the distribution the compared completions are drawn from, is `pair_distribution`
    (renormalised), by default π_ref itself. Computed in float64.
    """
    require_positive("beta", beta)
    mu = pair_distribution if pair_distribution is not None else reference_probabilities
    total = sum(mu.values())
    groups = [g for g, p in reference_probabilities.items() if p > 0]
    log_tilted = torch.tensor([math.log(reference_probabilities[g])
                               + sum(m / total * win_probability(g, h) for h, m in mu.items()) / beta
                               for g in groups], dtype=torch.float64)
    optimum = dict(zip(groups, torch.softmax(log_tilted, dim=0).tolist()))
    return {g: optimum.get(g, 0.0) for g in reference_probabilities}


# ---------------------------------------------------------------- the comparisons


@dataclass
class PreferencePairs(EncodedComparisons):
    """Comparisons encoded for the reward model, plus where each completion starts."""

    prompt_lengths: torch.Tensor  # (N,) BOS + prompt: the index of each completion's first token

    @staticmethod
    def _completion_mask(tokens: torch.Tensor, prompt_lengths: torch.Tensor, last: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.size(1)).unsqueeze(0)  # (1, L)
        return (positions >= prompt_lengths.unsqueeze(1)) & (positions <= last.unsqueeze(1))  # (N, L)

    @property
    def chosen_mask(self) -> torch.Tensor:
        """(N, L) True on the preferred completion's tokens, EOS included."""
        return self._completion_mask(self.chosen, self.prompt_lengths, self.chosen_last)

    @property
    def rejected_mask(self) -> torch.Tensor:
        """(N, L') True on the other completion's tokens, EOS included."""
        return self._completion_mask(self.rejected, self.prompt_lengths, self.rejected_last)

    def stacked(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Chosen rows then rejected rows, right-padded to one width: tokens (2N, L), completion mask (2N, L)
        and the index of each row's EOS (2N,). The padding (token 0) is never scored, and a causal model
        does not look ahead, so its value changes nothing."""
        width = max(self.chosen.size(1), self.rejected.size(1))

        def widen(t: torch.Tensor) -> torch.Tensor:
            return F.pad(t, (0, width - t.size(1)))

        tokens = torch.cat([widen(self.chosen), widen(self.rejected)])
        mask = torch.cat([widen(self.chosen_mask), widen(self.rejected_mask)])
        return tokens, mask, torch.cat([self.chosen_last, self.rejected_last])


def encode_preference_pairs(tokenizer: CharTokenizer, pairs: list[tuple[str, str, str]]) -> PreferencePairs:
    """(prompt, chosen, rejected) triples -> `PreferencePairs`: BOS + prompt + completion + EOS, right-padded."""
    if not pairs:
        raise ValueError("no comparisons to encode")
    encoded = encode_comparisons(tokenizer, pairs)
    prompt_lengths = torch.tensor([len(tokenizer.encode(prompt)) for prompt, _, _ in pairs])  # (N,)
    return PreferencePairs(**vars(encoded), prompt_lengths=prompt_lengths)


# ---------------------------------------------------------------- training


@dataclass
class DPOConfig(ConfigBase):
    beta: float = field(
        default=0.5,
        metadata={"help": "β: the KL coefficient whose optimum π_ref·exp(r/β) DPO aims at (IPO: τ, target h = 1/(2β))"},
    )
    loss: str = field(default="dpo", metadata={"help": "dpo (−log σ(β·h)) or ipo ((h − 1/(2β))²)"})
    learning_rate: float = field(default=1e-3, metadata={"help": "Adam learning rate α₀"})
    anneal_lr: bool = field(
        default=True,
        metadata={"help": "decay the learning rate linearly to 0 over the run: α = α₀ · (1 − steps done / steps)"},
    )
    epochs: int = field(default=4, metadata={"help": "passes over the comparisons"})
    batch_size: int = field(default=64, metadata={"help": "comparisons per minibatch (the last one may be smaller)"})
    grad_clip: float | None = field(
        default=1.0, metadata={"help": "clip the global gradient norm of the policy to this; none = off"}
    )
    seed: int = field(default=1, metadata={"help": "seed of the minibatch order"})

    def validate(self) -> DPOConfig:
        """Raise ConfigError naming the first impossible value; return self when all is well."""
        self.check_types()
        require_positive("beta", self.beta)
        require_one_of("loss", self.loss, LOSSES)
        require_positive("learning_rate", self.learning_rate)
        require_count("epochs", self.epochs)
        require_count("batch_size", self.batch_size)
        if self.grad_clip is not None:
            require_positive("grad_clip", self.grad_clip)
        require_seed("seed", self.seed)
        self.check_effects()
        return self


@torch.no_grad()
def _reference_log_probs(reference: GPT, tokens: torch.Tensor, mask: torch.Tensor, chunk_size: int = 1024):
    was_training = reference.training
    reference.eval()
    log_probs = torch.cat([sequence_log_probs(reference, tokens[i : i + chunk_size], mask[i : i + chunk_size])
                           for i in range(0, len(tokens), chunk_size)])  # (2N,)
    reference.train(was_training)
    return log_probs


def train_dpo(policy: GPT, reference: GPT, comparisons: PreferencePairs, config: DPOConfig, *,
              progress: bool = False, resume_from: dict | None = None,
              after_epoch: Callable[[dict], bool | None] | None = None) -> list[dict]:
    """Train `policy` in place on the comparisons with L_DPO or L_IPO (config.loss); returns one dict per epoch.

    `after_epoch(state)` is called after each epoch with the state that continues the
    training (its keys TRAINING_STATE: the optimizer's, the learning-rate schedule's, the
    order generator's and the epochs' history, beside the policy's weights); returning True
    stops after that epoch. `resume_from=state` continues from such a state, with the
    policy's weights loaded by the caller: the epochs that follow are those the
    uninterrupted run would have trained, bit for bit.

    The reference is frozen: its log-probs are computed once. Each epoch visits the
    comparisons in an order drawn from config.seed, in minibatches of config.batch_size,
    one Adam step each. The policy runs in eval mode (dropout off, as the reference is
    scored) and is left in eval mode. Per epoch, averaged over its comparisons as they were
    scored before each step:

        loss              L_DPO or L_IPO
        reward_margin     β·h = r_θ(y_w) − r_θ(y_l), the implicit reward's margin
        reward_accuracy   share of comparisons with h > 0
        reference_kl      (1/2N) Σ_y log π_ref(y) − log π_θ(y) over both completions of each pair:
                          an estimate of KL(π_ref ‖ π_θ) when the completions were sampled from π_ref
    """
    config.validate()
    if not isinstance(comparisons, PreferencePairs):
        raise TypeError("train_dpo needs PreferencePairs (ppo.lm.trainers.dpo.encode_preference_pairs), which know where "
                        f"each completion starts; got {type(comparisons).__name__}")
    if len(comparisons) == 0:
        raise ValueError("no comparisons to train on")
    tokens, mask, last = comparisons.stacked()  # (2N, L), (2N, L), (2N,)
    reference_log_probs = _reference_log_probs(reference, tokens, mask)  # (2N,)
    n = len(comparisons)
    generator = torch.Generator().manual_seed(config.seed)
    optimizer = torch.optim.Adam(policy.parameters(), lr=config.learning_rate)
    steps = config.epochs * math.ceil(n / config.batch_size)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 - step / steps if config.anneal_lr else 1.0)
    policy.eval()
    history = []
    if resume_from is not None:
        optimizer.load_state_dict(resume_from["optimizer"])
        schedule.load_state_dict(resume_from["schedule"])
        generator.set_state(resume_from["order_generator"])
        history = [dict(row) for row in resume_from["history"]]
    epochs = range(len(history), config.epochs)
    if progress:
        from tqdm.auto import tqdm

        epochs = tqdm(epochs, desc=f"{config.loss.upper()} epochs", leave=False)
    for epoch in epochs:
        totals = dict.fromkeys(("loss", "reward_margin", "reward_accuracy", "reference_kl"), 0.0)
        order = torch.randperm(n, generator=generator)  # (N,)
        for start in range(0, n, config.batch_size):
            rows = order[start : start + config.batch_size]  # (b,)
            both = torch.cat([rows, rows + n])  # (2b,) chosen then rejected: one forward pass
            width = int(last[both].max()) + 1  # the minibatch's longest row
            log_probs = sequence_log_probs(policy, tokens[both, :width], mask[both, :width])  # (2b,)
            chosen, rejected = log_probs.chunk(2)
            reference_chosen, reference_rejected = reference_log_probs[both].chunk(2)
            loss = dpo_loss(chosen, rejected, reference_chosen, reference_rejected, config.beta, config.loss)
            if not math.isfinite(float(loss.detach())):
                finished = f"after {len(history)} finished epoch{'s' * (len(history) != 1)}"
                raise TrainingDiverged(f"epoch {epoch + 1}: loss = {float(loss.detach())}; training stopped {finished} "
                                       "(try a smaller learning rate)", "loss", float(loss.detach()))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if config.grad_clip is not None:
                torch.nn.utils.clip_grad_norm_(policy.parameters(), config.grad_clip)
            optimizer.step()
            schedule.step()
            with torch.no_grad():
                h = (chosen - reference_chosen) - (rejected - reference_rejected)  # (b,)
                b = len(rows)
                totals["loss"] += float(loss) * b
                totals["reward_margin"] += float(config.beta * h.sum())
                totals["reward_accuracy"] += float((h > 0).sum())
                totals["reference_kl"] += float((reference_log_probs[both] - log_probs).sum()) / 2
        history.append({"epoch": epoch + 1, **{name: total / n for name, total in totals.items()}})
        if progress:
            epochs.set_postfix(loss=f"{history[-1]['loss']:.4f}", accuracy=f"{history[-1]['reward_accuracy']:.2f}")
        state = {"optimizer": optimizer.state_dict(), "schedule": schedule.state_dict(),
                 "order_generator": generator.get_state(), "history": [dict(row) for row in history]}
        if after_epoch is not None and after_epoch(state):
            break
    return history

