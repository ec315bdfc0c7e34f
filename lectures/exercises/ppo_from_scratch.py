"""PPO from scratch: the rollout and the update, written by you. Check: pytest lectures/exercises/test_ppo_from_scratch.py

Lectures 3–6 use the library's `PPO` trainer; here you write its core yourself, without
ppo.trainers.ppo, ppo.algorithm.update, ppo.algorithm.losses or ppo.algorithm.advantages (the checks refuse a module that
imports them; torch and a batched environment from envs/ are all you need). The given
loop in training_loop.py calls your four functions; its `train` is what the learning
check runs: a short seeded CartPole run must reach the return stated there.

Shapes: T steps, N environment copies, D observation size, A actions, b = minibatch size.

The policy network (training_loop.PolicyNetwork) maps observations (N, D) to
(logits (N, A), values (N,)): π_θ(·|s) = softmax(logits), V(s) = values.

The environments (envs.factory.make_vec_env("CartPole-v1", N, "torch")) follow
ppo.vec_env: envs.step(actions (N,) int64) returns a StepResult with obs (N, D),
reward (N,), terminated (N,), truncated (N,) and final_obs (N, D); where an episode ended,
obs is already the first observation of the next one and final_obs the last of the
finished one (lecture 8 on why a truncation needs it).
"""

import torch
from torch import nn


def collect_rollout(policy: nn.Module, envs, obs: torch.Tensor, num_steps: int) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """Exercise S.1. Run the policy for num_steps steps in the N copies, starting from the
    observations `obs` (N, D). Sample each action from π_θ(·|s_t); no gradients needed.

    Return (rollout, the observations after the last step (N, D)). rollout holds (T, N)
    tensors unless said otherwise:
        obs (T, N, D)  s_t, what the policy acted on
        actions        a_t (int64)
        log_probs      log π_θ(a_t|s_t) at the time of acting
        values         V(s_t)
        rewards        r_t
        terminated     the episode reached a terminal state at step t (bool)
        dones          terminated or truncated (bool)
        next_values    V of s_t's true successor: V(s_{t+1}) of the same episode, which is
                       V(final_obs) where the episode was truncated (any value where terminated)
    """
    raise NotImplementedError("exercise S.1")


def advantages_and_returns(rollout: dict[str, torch.Tensor], gamma: float,
                           gae_lambda: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Exercise S.2. GAE(γ, λ) advantages Â_t and the critic's targets R_t = Â_t + V(s_t),
    both (T, N), from a rollout of S.1 (exercises 3.1 and 3.2 did this for one env).
    """
    raise NotImplementedError("exercise S.2")


def ppo_loss(policy: nn.Module, minibatch: dict[str, torch.Tensor], clip_coef: float, vf_coef: float,
             ent_coef: float) -> tuple[torch.Tensor, dict[str, float]]:
    """Exercise S.3. PPO's loss on one minibatch: the clipped surrogate of lecture 5 plus
    vf_coef × ½ E[(V_θ(s) − R)²] minus ent_coef × the mean entropy of π_θ(·|s).

    minibatch holds obs (b, D), actions (b,), log_probs (b,) (log π_old, from the rollout),
    advantages (b,) (use them as given) and returns (b,). Return (the loss, a scalar with
    its graph; {"approx_kl": mean of (r − 1) − log r, "clip_fraction": share of samples
    with |r − 1| > clip_coef, "entropy": mean entropy} as floats), r = π_θ(a|s) / π_old(a|s).
    """
    raise NotImplementedError("exercise S.3")


def ppo_update(policy: nn.Module, optimizer: torch.optim.Optimizer, rollout: dict[str, torch.Tensor],
               advantages: torch.Tensor, returns: torch.Tensor, *, epochs: int, num_minibatches: int,
               clip_coef: float, vf_coef: float, ent_coef: float, max_grad_norm: float,
               generator: torch.Generator) -> dict[str, float]:
    """Exercise S.4. The update: `epochs` passes over the rollout's T·N samples, each pass in
    a fresh random order (drawn with `generator`) cut into num_minibatches minibatches; on
    each minibatch, whiten its advantages (mean 0, std 1), take S.3's loss, and one
    optimizer step with the gradient's global norm clipped to max_grad_norm.

    Return the mean over the minibatches of S.3's three diagnostics.
    """
    raise NotImplementedError("exercise S.4")
