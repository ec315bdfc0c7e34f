"""Exercises for lecture 9 — PPO-Penalty and adaptive clipping. Check: pytest lectures/exercises/test_lecture_09.py"""

import torch


def adapt_beta(beta: float, kl: float, kl_target: float) -> float:
    """Exercise 9.1. PPO-Penalty's adaptive β (Schulman et al. 2017, section 4): after an
    update has measured the KL between the old and the new policy, return the β for the
    next update. kl_target is the KL one update should reach.

    The rule has a band around the target, a factor of 1.5 wide on each side: inside the
    band (its ends included) β stays; outside it, β is doubled or halved. Which change
    brings the next update's KL back towards the target when this one moved too far, and
    which when it barely moved? (Lecture 9, "The penalised objective on one sample" and
    "Training the three over ten seeds".)
    """
    raise NotImplementedError("exercise 9.1")


def kl_penalty_loss(new_log_probs: torch.Tensor, old_log_probs: torch.Tensor, advantages: torch.Tensor,
                    beta: float) -> torch.Tensor:
    """Exercise 9.2. PPO-Penalty's policy loss, to minimise: the surrogate objective without
    the clip (lecture 5's L^PG, the ratio times the advantage, averaged over the samples),
    with a penalty of β times KL(π_old ‖ π_θ) in place of the clip. Estimate the KL on the
    sampled actions with k3 (exercise 7.1). Arguments as in exercise 5.1, with β in place
    of ε; returns a scalar.

    Questions: the objective is maximised and the loss minimised: which sign does each
    term take in the loss? Which of the two terms carries a gradient at θ = θ_old?
    (Lecture 9, "The penalised objective on one sample".)
    """
    raise NotImplementedError("exercise 9.2")
