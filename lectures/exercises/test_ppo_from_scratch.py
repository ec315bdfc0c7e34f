"""Checks for ppo_from_scratch.py: each function against the library, then a short learning run."""

import torch
from torch.distributions import Categorical

import training_loop
from envs.classic import make_torch_vec_env
from ppo.algorithm.advantages import compute_gae
from ppo.algorithm.losses import clipped_surrogate_loss, value_loss

NUM_ENVS, NUM_STEPS, TIME_LIMIT = 4, 24, 9  # a time limit of 9 steps: truncations inside the rollout


def a_rollout(exercise, seed: int = 0):
    torch.manual_seed(seed)
    policy = training_loop.PolicyNetwork(4, 2)
    envs = make_torch_vec_env("CartPole-v1", NUM_ENVS, max_episode_steps=TIME_LIMIT)
    first_obs = envs.reset(seed=seed)
    rollout, next_obs = exercise.collect_rollout(policy, envs, first_obs, NUM_STEPS)
    return policy, first_obs, rollout, next_obs


def test_collect_rollout_records_what_the_policy_and_the_envs_did(exercise):
    policy, first_obs, rollout, next_obs = a_rollout(exercise)
    shapes = {key: tuple(value.shape) for key, value in rollout.items()}
    assert shapes == {**{key: (NUM_STEPS, NUM_ENVS) for key in ("actions", "log_probs", "values", "rewards",
                                                                  "terminated", "dones", "next_values")},
                      "obs": (NUM_STEPS, NUM_ENVS, 4)}
    assert torch.equal(rollout["obs"][0], first_obs)
    with torch.no_grad():
        logits, values = policy(rollout["obs"])  # (T, N, A), (T, N)
    assert torch.allclose(rollout["log_probs"], Categorical(logits=logits).log_prob(rollout["actions"]), atol=1e-6)
    assert torch.allclose(rollout["values"], values, atol=1e-6)
    assert 0 < int(rollout["actions"].sum()) < NUM_STEPS * NUM_ENVS  # sampled, not greedy
    # the same envs replayed with the recorded actions give the recorded rewards, flags and observations
    replay = make_torch_vec_env("CartPole-v1", NUM_ENVS, max_episode_steps=TIME_LIMIT)
    obs = replay.reset(seed=0)
    for t in range(NUM_STEPS):
        assert torch.equal(rollout["obs"][t], obs)
        result = replay.step(rollout["actions"][t])
        assert torch.equal(rollout["rewards"][t], result.reward)
        assert torch.equal(rollout["terminated"][t], result.terminated)
        assert torch.equal(rollout["dones"][t], result.terminated | result.truncated)
        with torch.no_grad():
            successor = torch.where(result.truncated, policy(result.final_obs)[1], policy(result.obs)[1])
        live = ~result.terminated  # a terminal successor's value is never read
        assert torch.allclose(rollout["next_values"][t][live], successor[live], atol=1e-6)
        obs = result.obs
    assert torch.equal(next_obs, obs)
    truncated = rollout["dones"] & ~rollout["terminated"]
    assert truncated.any(), "the check's time limit should cut some episodes"


def test_advantages_and_returns_match_the_library(exercise):
    _, _, rollout, _ = a_rollout(exercise, seed=1)
    advantages, returns = exercise.advantages_and_returns(rollout, 0.9, 0.8)
    expected = compute_gae(rollout["rewards"], rollout["values"], rollout["next_values"], rollout["terminated"],
                           rollout["dones"], 0.9, 0.8)
    assert torch.allclose(advantages, expected[0], atol=1e-5)
    assert torch.allclose(returns, expected[1], atol=1e-5)


def a_minibatch(policy, seed: int = 2):
    generator = torch.Generator().manual_seed(seed)
    obs = torch.randn(64, 4, generator=generator)
    actions = torch.randint(0, 2, (64,), generator=generator)
    with torch.no_grad():
        log_probs = Categorical(logits=policy(obs)[0]).log_prob(actions) + 0.3 * torch.randn(64, generator=generator)
    return {"obs": obs, "actions": actions, "log_probs": log_probs, "advantages": torch.randn(64, generator=generator),
            "returns": torch.randn(64, generator=generator)}


def test_ppo_loss_and_its_gradient_match_the_library(exercise):
    torch.manual_seed(3)
    policy = training_loop.PolicyNetwork(4, 2)
    minibatch = a_minibatch(policy)
    loss, stats = exercise.ppo_loss(policy, minibatch, 0.2, 0.5, 0.01)
    mine = torch.autograd.grad(loss, list(policy.parameters()))
    logits, values = policy(minibatch["obs"])
    distribution = Categorical(logits=logits)
    new_log_probs = distribution.log_prob(minibatch["actions"])
    entropy = distribution.entropy().mean()
    expected = (clipped_surrogate_loss(new_log_probs, minibatch["log_probs"], minibatch["advantages"], 0.2)
                + 0.5 * value_loss(values, values, minibatch["returns"]) - 0.01 * entropy)
    library = torch.autograd.grad(expected, list(policy.parameters()))
    assert torch.allclose(loss, expected, atol=1e-6)
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(mine, library))
    log_ratio = new_log_probs.detach() - minibatch["log_probs"]
    assert abs(stats["approx_kl"] - float((log_ratio.exp() - 1 - log_ratio).mean())) < 1e-6
    assert abs(stats["clip_fraction"] - float(((log_ratio.exp() - 1).abs() > 0.2).float().mean())) < 1e-6
    assert abs(stats["entropy"] - float(entropy.detach())) < 1e-6


class CountingAdam(torch.optim.Adam):
    steps = 0

    def step(self, closure=None):
        self.steps += 1
        return super().step(closure)


def test_ppo_update_takes_one_step_per_minibatch_and_sees_every_sample_each_epoch(exercise):
    policy, _, rollout, _ = a_rollout(exercise, seed=4)
    advantages, returns = compute_gae(rollout["rewards"], rollout["values"], rollout["next_values"],
                                      rollout["terminated"], rollout["dones"], 0.99, 0.95)
    seen = []
    policy.register_forward_hook(lambda module, inputs, output: seen.append(inputs[0].detach().clone()))
    optimizer = CountingAdam(policy.parameters(), lr=1e-3)
    stats = exercise.ppo_update(policy, optimizer, rollout, advantages, returns, epochs=3, num_minibatches=4,
                                clip_coef=0.2, vf_coef=0.5, ent_coef=0.01, max_grad_norm=0.5,
                                generator=torch.Generator().manual_seed(0))
    assert optimizer.steps == 3 * 4
    assert set(stats) >= {"approx_kl", "clip_fraction", "entropy"}
    batches = [obs for obs in seen if obs.shape == (NUM_STEPS * NUM_ENVS // 4, 4)]
    assert len(batches) == 12
    everything = rollout["obs"].reshape(-1, 4)
    key = lambda rows: sorted(map(tuple, rows.tolist()))  # noqa: E731
    for epoch in range(3):
        assert key(torch.cat(batches[4 * epoch:4 * epoch + 4])) == key(everything)
    assert not torch.equal(torch.cat(batches[:4]), everything)  # shuffled
    assert 0 <= stats["clip_fraction"] <= 1 and stats["approx_kl"] > 0  # the steps moved π_θ away from π_old


def test_your_ppo_learns_cartpole(exercise):
    returns = training_loop.train(exercise)
    assert len(returns) >= 20
    last = sum(returns[-20:]) / 20
    assert last >= training_loop.LEARNED_RETURN, f"the last 20 episodes averaged {last:.1f}"
