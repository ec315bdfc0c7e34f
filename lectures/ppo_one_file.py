"""PPO in one file: the algorithm of the library's trainer (`ppo.PPO`), top to bottom.

    python lectures/ppo_one_file.py --seed 1          # CartPole-v1 with the library's CartPole preset

It imports only torch, numpy, gymnasium and the standard library, and reads in the order
one iteration runs: the settings, the network, the rollout, GAE, K epochs of shuffled
minibatches, the diagnostics; then a greedy evaluation, whose mean is the last line
printed. Symbols in names and comments are the lectures' (lecture 6 walks through it):

    π_θ(a | s), V_θ(s)   the policy and the value network          Agent
    r_t(θ) = π_θ(a_t | s_t) / π_old(a_t | s_t)                       ratio
    Â_t = Σ_k (γλ)^k δ_{t+k},  δ_t = r_t + γ V(s_{t+1}) − V(s_t)     advantages (GAE)
    L = −E[min(r_t Â_t, clip(r_t, 1 − ε, 1 + ε) Â_t)] + c_v L_value − c_e H[π_θ]

This is not a second implementation beside the library: tests/test_ppo_one_file.py holds
it equal to `ppo.PPO` on the same settings, seed and environments (gymnasium's CartPole,
stepped in Python), weight for weight after three iterations. So every detail here (the
orthogonal initialisation, the Gumbel-max sampling, the bootstrap after a time limit, the
per-minibatch target-KL check) is the library's, and when the library's arithmetic changes,
that test says so. The library adds what a one-file script leaves out: batched torch
environments, seed batches, recurrent networks, checkpoints and resume, several processes.
"""

from __future__ import annotations

import argparse
import math
import time
from collections import deque

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from torch import nn


# ---------------------------------------------------------------------------- 1. the settings
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The library's CartPole-v1 preset (ppo/presets.py) as defaults; every one is a flag."""
    parser = argparse.ArgumentParser(description="PPO in one file, on an env with discrete actions")
    arg = parser.add_argument
    arg("--env-id", default="CartPole-v1", help="a gymnasium env: 1-D Box observations, Discrete actions")
    arg("--seed", type=int, default=1, help="seed of the weights, actions, minibatches and envs")
    arg("--total-timesteps", type=int, default=100_000, help="environment steps to train for")
    arg("--num-envs", type=int, default=64, help="N copies of the env, stepped together")
    arg("--num-steps", type=int, default=32, help="T steps per copy per rollout: a batch of B = N·T")
    arg("--learning-rate", type=float, default=5e-3, help="Adam's α₀, annealed linearly to 0")
    arg("--adam-eps", type=float, default=1e-5, help="Adam's ε")
    arg("--update-epochs", type=int, default=6, help="K epochs over each rollout")
    arg("--num-minibatches", type=int, default=4, help="M minibatches per epoch")
    arg("--gamma", type=float, default=0.99, help="discount γ")
    arg("--gae-lambda", type=float, default=0.95, help="GAE λ")
    arg("--clip-coef", type=float, default=0.2, help="the surrogate's clip ε")
    arg("--value-clip-coef", type=float, default=None, help="clip V_θ to V_old ± this (default off)")
    arg("--norm-adv", action=argparse.BooleanOptionalAction, default=False,
        help="whiten Â per minibatch")
    arg("--ent-coef", type=float, default=0.0, help="entropy coefficient c_e")
    arg("--vf-coef", type=float, default=0.5, help="value-loss coefficient c_v")
    arg("--max-grad-norm", type=float, default=0.5, help="clip the gradient's global norm to this")
    arg("--target-kl", type=float, default=None, help="end an update at a minibatch whose KL exceeds this")
    arg("--eval-episodes", type=int, default=100, help="greedy episodes the trained policy is scored on")
    args = parser.parse_args(argv)
    args.batch_size = args.num_envs * args.num_steps
    args.num_iterations = args.total_timesteps // args.batch_size
    if args.num_iterations < 1 or args.batch_size % args.num_minibatches:
        parser.error(f"need total_timesteps ≥ N·T = {args.batch_size} and N·T divisible by "
                     f"num_minibatches = {args.num_minibatches}")
    return args


# ---------------------------------------------------------------------------- 2. the network
def layer(in_dim: int, out_dim: int, gain: float) -> nn.Linear:
    """A linear layer with orthogonal weights scaled by `gain` and zero bias."""
    linear = nn.Linear(in_dim, out_dim)
    nn.init.orthogonal_(linear.weight, gain)
    nn.init.zeros_(linear.bias)
    return linear


def body(in_dim: int, width: int = 64) -> nn.Sequential:
    """Two tanh layers of `width` units, gain √2 (the hidden layers of CleanRL and of the library)."""
    return nn.Sequential(layer(in_dim, width, math.sqrt(2)), nn.Tanh(),
                         layer(width, width, math.sqrt(2)), nn.Tanh())


class Agent(nn.Module):
    """π_θ(· | s) = softmax(z(s)) and V_θ(s), on separate bodies; the policy's last layer has gain
    0.01 (nearly uniform actions at first), the value's gain 1."""

    def __init__(self, obs_dim: int, num_actions: int):
        super().__init__()
        self.actor_body = body(obs_dim)
        self.critic_body = body(obs_dim)
        self.policy_head = layer(64, num_actions, 0.01)
        self.value_head = layer(64, 1, 1.0)

    def log_pi(self, obs: torch.Tensor) -> torch.Tensor:
        """log π_θ(a | s) for every action a: (B, actions)."""
        return torch.log_softmax(self.policy_head(self.actor_body(obs)), dim=-1)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """V_θ(s): (B,)."""
        return self.value_head(self.critic_body(obs)).squeeze(-1)


def sample(log_pi: torch.Tensor, uniform: torch.Tensor) -> torch.Tensor:
    """a ~ π by the Gumbel-max trick: argmax_a (log π(a | s) − log(−log U_a)), U ~ U(0, 1)."""
    uniform = uniform.clamp(min=torch.finfo(uniform.dtype).tiny)
    return (log_pi - torch.log(-torch.log(uniform))).argmax(dim=-1)


def chosen(log_pi: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """log π(a_t | s_t) of the actions taken: (B,)."""
    return log_pi.gather(-1, actions.unsqueeze(-1)).squeeze(-1)


def make_envs(env_id: str, num_envs: int) -> gym.vector.VectorEnv:
    """N copies in one process; a copy whose episode ends is reset in the same step
    (its final observation then comes in info["final_obs"])."""
    return gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="sync",
                        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP})


def tensor(array, dtype=torch.float32) -> torch.Tensor:
    return torch.as_tensor(np.asarray(array), dtype=dtype)


# ---------------------------------------------------------------------------- 3.–5. training
def train(args: argparse.Namespace, iterations: int | None = None, log_every: int = 8) -> Agent:
    """PPO for args.num_iterations iterations (or the first `iterations` of that schedule)."""
    torch.set_num_threads(1)  # a network this small runs fastest on one thread
    envs = make_envs(args.env_id, args.num_envs)
    N, T, B = args.num_envs, args.num_steps, args.batch_size
    obs_dim = envs.single_observation_space.shape[0]
    num_actions = int(envs.single_action_space.n)

    torch.manual_seed(args.seed)
    agent = Agent(obs_dim, num_actions)
    action_rng = torch.Generator()
    action_rng.set_state(torch.get_rng_state())  # the actions' stream: on from the init's draws
    shuffle_rng = torch.Generator().manual_seed(args.seed)  # the minibatches' own stream
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=args.adam_eps)

    # The rollout's storage, (T, N) per step and copy
    obs = torch.zeros(T, N, obs_dim)
    actions = torch.zeros(T, N, dtype=torch.int64)
    log_probs, values, rewards = torch.zeros(T, N), torch.zeros(T, N), torch.zeros(T, N)
    terminated = torch.zeros(T, N, dtype=torch.bool)
    truncated = torch.zeros(T, N, dtype=torch.bool)
    final_obs = torch.zeros(N, T, obs_dim)  # the last observation of an episode a time limit cut

    next_obs = tensor(envs.reset(seed=args.seed)[0])  # copy i is seeded with seed + i
    episode_return, recent_returns = torch.zeros(N), deque(maxlen=20)
    start = time.time()
    last = args.num_iterations if iterations is None else iterations
    for iteration in range(1, last + 1):
        # α falls linearly from α₀ (first iteration) to α₀ / I (last)
        for group in optimizer.param_groups:
            group["lr"] = args.learning_rate * (1.0 - (iteration - 1) / args.num_iterations)

        # 3. The rollout: T steps of N copies with π_old; log π_old(a_t | s_t), V_old(s_t) kept
        with torch.no_grad():
            for t in range(T):
                uniform = torch.rand((N, num_actions), generator=action_rng)
                log_pi = agent.log_pi(next_obs)
                action = sample(log_pi, uniform)
                obs[t], actions[t] = next_obs, action
                log_probs[t], values[t] = chosen(log_pi, action), agent.value(next_obs)
                observation, reward, term, trunc, info = envs.step(action.numpy())
                rewards[t] = tensor(reward)
                terminated[t], truncated[t] = tensor(term, torch.bool), tensor(trunc, torch.bool)
                for i in np.flatnonzero(trunc):  # the episode's true last observation
                    final_obs[i, t] = tensor(info["final_obs"][i])
                episode_return += rewards[t]
                done = terminated[t] | truncated[t]
                recent_returns.extend(episode_return[done].tolist())
                episode_return[done] = 0.0
                next_obs = tensor(observation)

            # 4. GAE. The successor of s_t is s_{t+1}, or, after a time limit, the episode's
            #    final observation, bootstrapped: a time limit is not a terminal state.
            final_values = torch.zeros(T, N)
            if truncated.any():
                values_of_final = agent.value(final_obs.reshape(N * T, obs_dim)).view(N, T).T
                final_values = torch.where(truncated, values_of_final, 0.0)
            successors = torch.cat([values[1:], agent.value(next_obs)[None]])  # V(s_{t+1})
            next_values = torch.where(truncated, final_values, successors)
            not_terminated = 1.0 - terminated.to(torch.float32)
            not_done = 1.0 - (terminated | truncated).to(torch.float32)
            deltas = rewards + args.gamma * not_terminated * next_values - values  # δ_t
            advantages = torch.zeros(T, N)
            following = torch.zeros(N)  # Â_{t+1}
            for t in reversed(range(T)):  # Â_t = δ_t + γλ (1 − done_t) Â_{t+1}
                following = deltas[t] + args.gamma * args.gae_lambda * not_done[t] * following
                advantages[t] = following
            returns = advantages + values  # R_t, the value's target: the raw Â plus V_old

        # 5. K epochs of shuffled minibatches, one gradient step each
        batch = {"obs": obs.reshape(B, obs_dim), "actions": actions.reshape(B),
                 "log_probs": log_probs.reshape(B), "values": values.reshape(B),
                 "advantages": advantages.reshape(B), "returns": returns.reshape(B)}
        size, stopped = B // args.num_minibatches, False
        kls, clipped, value_losses = [], [], []
        for epoch in range(args.update_epochs):
            order = torch.randperm(B, generator=shuffle_rng)
            shuffled = {name: value[order] for name, value in batch.items()}
            for first in range(0, B, size):
                mb = {name: value[first:first + size] for name, value in shuffled.items()}
                log_pi = agent.log_pi(mb["obs"])
                new_log_prob = chosen(log_pi, mb["actions"])
                new_value = agent.value(mb["obs"])
                entropy = -(log_pi.exp() * log_pi).sum(dim=-1)  # H[π_θ(· | s)]
                log_ratio = new_log_prob - mb["log_probs"]
                ratio = torch.exp(log_ratio)  # r_t(θ)

                # k3 estimate of KL(π_old ‖ π_θ) on this minibatch, before its step
                kl = float((torch.expm1(log_ratio.detach()) - log_ratio.detach()).mean())
                kls.append(kl)
                clipped.append(float(((ratio.detach() - 1.0).abs() > args.clip_coef).float().mean()))
                if args.target_kl is not None and kl > args.target_kl:
                    stopped = True  # π_θ is already further from π_old than allowed: no step
                    break

                adv = mb["advantages"]
                if args.norm_adv:
                    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                clipped_ratio = torch.clamp(ratio, 1.0 - args.clip_coef, 1.0 + args.clip_coef)
                policy_loss = -torch.min(ratio * adv, clipped_ratio * adv).mean()
                squared_error = (new_value - mb["returns"]) ** 2
                if args.value_clip_coef is not None:  # V_clip = V_old + clip(V_θ − V_old, ±ε_v)
                    moved = torch.clamp(new_value - mb["values"], -args.value_clip_coef,
                                        args.value_clip_coef)
                    clipped_error = (mb["values"] + moved - mb["returns"]) ** 2
                    squared_error = torch.max(squared_error, clipped_error)
                value_loss = 0.5 * squared_error.mean()
                value_losses.append(float(value_loss.detach()))
                loss = policy_loss + args.vf_coef * value_loss
                if args.ent_coef:
                    loss = loss - args.ent_coef * entropy.mean()

                optimizer.zero_grad()
                loss.backward()
                # g ← g · min(1, c / (‖g‖₂ + 10⁻⁶)), the norm over every parameter together
                grads = [p.grad for p in agent.parameters()]
                grad_norm = torch.linalg.vector_norm(torch.cat([g.reshape(-1) for g in grads]))
                for g in grads:
                    g.mul_(torch.clamp(args.max_grad_norm / (grad_norm + 1e-6), max=1.0))
                optimizer.step()
            if stopped:
                break

        # The diagnostics: KL(π_old ‖ π_θ) and the clip fraction over the minibatches visited, and
        # the share of the returns' variance the critic explains (1: perfect, 0: no better than a mean)
        if iteration % log_every == 0 or iteration == args.num_iterations:
            explained = 1.0 - float((returns - values).var() / returns.var())
            recent = sum(recent_returns) / len(recent_returns) if recent_returns else math.nan
            print(f"iteration {iteration:3d}/{args.num_iterations}  steps {iteration * B:7,d}  "
                  f"return {recent:6.1f}  approx_kl {sum(kls) / len(kls):.4f}  "
                  f"clip_fraction {sum(clipped) / len(clipped):.3f}  explained_variance {explained:5.2f}  "
                  f"value_loss {sum(value_losses) / max(1, len(value_losses)):7.3f}  "
                  f"{time.time() - start:5.1f} s", flush=True)
    envs.close()
    return agent


# ---------------------------------------------------------------------------- 6. evaluation
@torch.no_grad()
def evaluate(agent: Agent, env_id: str, episodes: int, seed: int) -> list[float]:
    """The greedy policy (argmax π), one episode in each of `episodes` copies: their returns."""
    envs = gym.make_vec(env_id, num_envs=episodes, vectorization_mode="sync")
    observation, _ = envs.reset(seed=seed)
    returns, running = np.zeros(episodes), np.ones(episodes, dtype=bool)
    while running.any():
        action = agent.log_pi(tensor(observation)).argmax(dim=-1)
        observation, reward, term, trunc, _ = envs.step(action.numpy())
        returns += reward * running
        running &= ~(term | trunc)
    envs.close()
    return returns.tolist()


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    agent = train(args)
    returns = evaluate(agent, args.env_id, args.eval_episodes, seed=args.seed + 10_000)
    print(f"greedy mean return over {len(returns)} episodes: "
          f"{np.mean(returns):.1f} ± {np.std(returns):.1f}")


if __name__ == "__main__":
    main()
