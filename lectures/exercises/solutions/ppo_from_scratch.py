"""Solutions to lectures/exercises/ppo_from_scratch.py."""

import torch
from torch.distributions import Categorical


@torch.no_grad()
def collect_rollout(policy, envs, obs, num_steps):
    steps = []
    logits, values = policy(obs)
    for _ in range(num_steps):
        distribution = Categorical(logits=logits)
        actions = distribution.sample()
        result = envs.step(actions)
        next_logits, next_values = policy(result.obs)
        successor_values = next_values.clone()  # V(s_{t+1}); after a truncation, V(final obs) instead
        if result.truncated.any():
            successor_values[result.truncated] = policy(result.final_obs[result.truncated])[1]
        steps.append({"obs": obs, "actions": actions, "log_probs": distribution.log_prob(actions), "values": values,
                      "rewards": result.reward, "terminated": result.terminated,
                      "dones": result.terminated | result.truncated, "next_values": successor_values})
        obs, logits, values = result.obs, next_logits, next_values
    return {key: torch.stack([step[key] for step in steps]) for key in steps[0]}, obs


def advantages_and_returns(rollout, gamma, gae_lambda):
    not_terminated = 1.0 - rollout["terminated"].float()
    not_done = 1.0 - rollout["dones"].float()
    deltas = rollout["rewards"] + gamma * not_terminated * rollout["next_values"] - rollout["values"]  # (T, N)
    advantages = torch.zeros_like(deltas)
    following = torch.zeros_like(deltas[0])  # Â_{t+1}
    for t in reversed(range(len(deltas))):
        following = deltas[t] + gamma * gae_lambda * not_done[t] * following
        advantages[t] = following
    return advantages, advantages + rollout["values"]


def ppo_loss(policy, minibatch, clip_coef, vf_coef, ent_coef):
    logits, values = policy(minibatch["obs"])
    distribution = Categorical(logits=logits)
    log_ratio = distribution.log_prob(minibatch["actions"]) - minibatch["log_probs"]
    ratio = log_ratio.exp()
    advantages = minibatch["advantages"]
    surrogate = torch.min(ratio * advantages, ratio.clamp(1 - clip_coef, 1 + clip_coef) * advantages)
    entropy = distribution.entropy().mean()
    loss = -surrogate.mean() + vf_coef * 0.5 * (values - minibatch["returns"]).pow(2).mean() - ent_coef * entropy
    with torch.no_grad():
        stats = {"approx_kl": float((ratio - 1 - log_ratio).mean()),
                 "clip_fraction": float(((ratio - 1).abs() > clip_coef).float().mean()), "entropy": float(entropy)}
    return loss, stats


def ppo_update(policy, optimizer, rollout, advantages, returns, *, epochs, num_minibatches, clip_coef, vf_coef,
               ent_coef, max_grad_norm, generator):
    samples = {"obs": rollout["obs"].flatten(0, 1), "actions": rollout["actions"].flatten(),
               "log_probs": rollout["log_probs"].flatten(), "advantages": advantages.flatten(),
               "returns": returns.flatten()}
    size = len(samples["actions"]) // num_minibatches
    totals, count = {}, 0
    for _ in range(epochs):
        order = torch.randperm(len(samples["actions"]), generator=generator)
        for start in range(0, size * num_minibatches, size):
            minibatch = {key: value[order[start:start + size]] for key, value in samples.items()}
            whitened = minibatch["advantages"]
            minibatch["advantages"] = (whitened - whitened.mean()) / (whitened.std() + 1e-8)
            loss, stats = ppo_loss(policy, minibatch, clip_coef, vf_coef, ent_coef)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)
            optimizer.step()
            totals = {key: totals.get(key, 0.0) + value for key, value in stats.items()}
            count += 1
    return {key: value / count for key, value in totals.items()}
