"""Derivations: derive on paper, then check the result numerically. Check: pytest lectures/exercises/test_derivations.py

Three results the lectures use without proof. Each exercise asks the questions that lead
to the derivation and then for code that confirms it on a small case, by enumeration or
by brute force, so that a wrong derivation shows up as a wrong number.
"""

import torch


def score_function(logits: torch.Tensor) -> torch.Tensor:
    """Exercise D.1a. For the categorical policy π = softmax(z) over K actions: the score
    ∇_z log π(a) of every action a, written out (no autograd). logits z: (K,) → (K, K),
    row a = ∇_z log π(a).

    Derive it: log π(a) = z_a − log Σ_b exp(z_b); differentiate with respect to z_c.
    """
    raise NotImplementedError("exercise D.1a")


def expected_gradient(logits: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Exercise D.1b. The expected policy-gradient estimate E_{a~π}[∇_z log π(a) · w(a)] of
    one action's weight w (the return, or the return minus a baseline), computed exactly by
    enumerating the K actions (no autograd, no sampling). logits, weights: (K,) → (K,).

    Questions, before you run the check (lecture 2's baseline rests on the answers):
    1. What is Σ_a π(a) ∇_z log π(a)? (Write π ∇log π as ∇π.)
    2. So what is E[∇_z log π(a) · b] for a constant baseline b, and how does
       expected_gradient(z, w − b) compare with expected_gradient(z, w)?
    3. Does a baseline that depends on the action a keep the expectation? On the state?
    The check confirms 2 for several b, and that expected_gradient equals ∇_z E_π[w].
    """
    raise NotImplementedError("exercise D.1b")


def gae_as_discounted_sum(rewards: torch.Tensor, values: torch.Tensor, last_value: float, gamma: float,
                          gae_lambda: float) -> torch.Tensor:
    """Exercise D.2a. Â_t = Σ_{l=0}^{T−t−1} (γλ)^l δ_{t+l} for a rollout of T steps inside
    one episode that goes on after it, with δ_t = r_t + γ V(s_{t+1}) − V(s_t) and
    V(s_T) = last_value. rewards, values: (T,) → (T,). Write the sum as a sum (the
    backward recursion is lecture 3's; this is the other side of the identity).
    """
    raise NotImplementedError("exercise D.2a")


def lambda_return_minus_value(rewards: torch.Tensor, values: torch.Tensor, last_value: float, gamma: float,
                              gae_lambda: float) -> torch.Tensor:
    """Exercise D.2b. G_t^λ − V(s_t), the λ-return from its definition minus the value:

        G_t^(n) = r_t + γ r_{t+1} + … + γ^(n−1) r_{t+n−1} + γ^n V(s_{t+n})
        G_t^λ   = (1 − λ) Σ_{n=1}^{T−t−1} λ^(n−1) G_t^(n) + λ^(T−t−1) G_t^(T−t)

    same arguments as D.2a. Questions: show that G_t^(n) − V(s_t) = Σ_{l<n} γ^l δ_{t+l}
    (add and subtract γ^l V(s_{t+l}): the sum telescopes); then put that into G_t^λ − V(s_t)
    and collect the weight of each δ_{t+l}. What should the check find when it compares
    this function with D.2a? What do λ = 0 and λ = 1 give?
    """
    raise NotImplementedError("exercise D.2b")


def kl_regularised_objective(logits: torch.Tensor, reference_probabilities: torch.Tensor, rewards: torch.Tensor,
                             beta: float) -> torch.Tensor:
    """Exercise D.3a. J(π) = E_{y~π}[r(y)] − β KL(π ‖ π_ref) for π = softmax(logits) over
    K answers, exactly (a sum over the K answers), differentiable in the logits.
    (K,), (K,), (K,) → a scalar. This is what RLHF-PPO maximises (lecture 12).
    """
    raise NotImplementedError("exercise D.3a")


def maximise_by_gradient_ascent(reference_probabilities: torch.Tensor, rewards: torch.Tensor, beta: float,
                                steps: int = 400, learning_rate: float = 0.2) -> torch.Tensor:
    """Exercise D.3b. Maximise J (D.3a) over the logits by gradient ascent from the logits
    of π_ref (Adam, or plain gradient steps); return the probabilities reached, (K,).
    """
    raise NotImplementedError("exercise D.3b")


def closed_form_optimum(reference_probabilities: torch.Tensor, rewards: torch.Tensor, beta: float) -> torch.Tensor:
    """Exercise D.3c. The maximiser of J in closed form, (K,).

    Derive it: maximise Σ_y π(y) r(y) − β Σ_y π(y) log(π(y) / π_ref(y)) subject to
    Σ_y π(y) = 1 (a Lagrange multiplier); set the derivative in π(y) to zero and solve
    for π(y). Which y does π* favour as β → 0, and what is π* as β → ∞? Mind the overflow
    of exp for small β. The check compares with D.3b's brute force.
    """
    raise NotImplementedError("exercise D.3c")


def optimal_objective_value(reference_probabilities: torch.Tensor, rewards: torch.Tensor, beta: float) -> float:
    """Exercise D.3d. max_π J(π), in closed form: put D.3c's π* into J and simplify (the
    normalising constant of π* appears). A float.
    """
    raise NotImplementedError("exercise D.3d")
