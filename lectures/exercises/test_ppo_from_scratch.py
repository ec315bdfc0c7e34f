"""Checks for ppo_from_scratch.py: each function against the library, then a short learning run."""

import torch
from torch.distributions import Categorical

import training_loop
from feedback import check_close, check_equal
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
    shapes = {key: tuple(value.shape) for key, value in sorted(rollout.items())}
    check_equal(shapes, {**{key: (NUM_STEPS, NUM_ENVS) for key in ("actions", "log_probs", "values", "rewards",
                                                                   "terminated", "dones", "next_values")},
                         "obs": (NUM_STEPS, NUM_ENVS, 4)}, "the rollout's keys and shapes, (T, N) and obs (T, N, 4)")
    check_equal(rollout["obs"][0], first_obs, "rollout['obs'][0], the first observation")
    with torch.no_grad():
        logits, values = policy(rollout["obs"])  # (T, N, A), (T, N)
    distribution = Categorical(logits=logits)
    check_close(rollout["log_probs"], distribution.log_prob(rollout["actions"]), "rollout['log_probs'], log π(a_t | s_t)", {
        "probabilities in place of log-probabilities":
            distribution.probs.gather(-1, rollout["actions"].unsqueeze(-1)).squeeze(-1),
        "the log-probability of the greedy action, not of the action taken": distribution.log_prob(logits.argmax(-1)),
        "log π of the other action (the action's index off)": distribution.log_prob(1 - rollout["actions"]),
    }, atol=1e-6)
    check_close(rollout["values"], values, "rollout['values'], V(s_t)", atol=1e-6)
    assert 0 < int(rollout["actions"].sum()) < NUM_STEPS * NUM_ENVS  # sampled, not greedy
    # the same envs replayed with the recorded actions give the recorded rewards, flags and observations
    replay = make_torch_vec_env("CartPole-v1", NUM_ENVS, max_episode_steps=TIME_LIMIT)
    obs = replay.reset(seed=0)
    for t in range(NUM_STEPS):
        check_equal(rollout["obs"][t], obs, f"rollout['obs'][{t}], the observation the action was taken in")
        result = replay.step(rollout["actions"][t])
        check_equal(rollout["rewards"][t], result.reward, f"rollout['rewards'][{t}]")
        check_equal(rollout["terminated"][t], result.terminated, f"rollout['terminated'][{t}]", {
            "terminated | truncated stored as terminated (a time limit is not a termination)":
                result.terminated | result.truncated})
        check_equal(rollout["dones"][t], result.terminated | result.truncated, f"rollout['dones'][{t}]", {
            "terminated alone (a truncation ends the episode too)": result.terminated,
            "truncated alone (a termination ends the episode too)": result.truncated})
        with torch.no_grad():
            successor = torch.where(result.truncated, policy(result.final_obs)[1], policy(result.obs)[1])
            after_reset = policy(result.obs)[1]
        live = ~result.terminated  # a terminal successor's value is never read
        check_close(rollout["next_values"][t][live], successor[live], f"rollout['next_values'][{t}] where not terminated",
                    {"V of the reset observation at a time limit, not of final_obs (the state the episode was cut in)":
                     after_reset[live]}, atol=1e-6)
        obs = result.obs
    check_equal(next_obs, obs, "the next observation collect_rollout returns (the one after the last step)")
    truncated = rollout["dones"] & ~rollout["terminated"]
    assert truncated.any(), "the check's time limit should cut some episodes"


def test_advantages_and_returns_match_the_library(exercise):
    _, _, rollout, _ = a_rollout(exercise, seed=1)
    advantages, returns = exercise.advantages_and_returns(rollout, 0.9, 0.8)
    gae = lambda terminated, dones, gamma=0.9, gae_lambda=0.8: compute_gae(  # noqa: E731
        rollout["rewards"], rollout["values"], rollout["next_values"], terminated, dones, gamma, gae_lambda)
    expected = gae(rollout["terminated"], rollout["dones"])
    never = torch.zeros_like(rollout["dones"])
    mistakes = {
        "a truncation treated as a termination (no bootstrap from V(final_obs) at a time limit)":
            gae(rollout["dones"], rollout["dones"]),
        "a forgotten done mask (the advantage runs on across episode boundaries)": gae(rollout["terminated"], never),
        "γ and λ swapped": gae(rollout["terminated"], rollout["dones"], 0.8, 0.9),
    }
    check_close(advantages, expected[0], "advantages_and_returns' advantages (γ = 0.9, λ = 0.8)",
                {mistake: value[0] for mistake, value in mistakes.items()}, atol=1e-5)
    check_close(returns, expected[1], "advantages_and_returns' returns (Â + V)", {
        "the advantages returned as returns (R = Â + V)": expected[0],
        **{mistake: value[1] for mistake, value in mistakes.items()}}, atol=1e-5)


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
    library = torch.autograd.grad(expected, list(policy.parameters()), retain_graph=True)
    policy_loss = clipped_surrogate_loss(new_log_probs, minibatch["log_probs"], minibatch["advantages"], 0.2)
    squared_error = ((values - minibatch["returns"]) ** 2).mean()
    check_close(loss.detach(), expected.detach(), "ppo_loss (L_policy + c_v L_value − c_e H, c_v = 0.5, c_e = 0.01)", {
        "the entropy bonus added to the loss, not subtracted (it should be maximised)":
            (policy_loss + 0.5 * value_loss(values, values, minibatch["returns"]) + 0.01 * entropy).detach(),
        "the value loss without its ½ (L_value = ½ E[(V − R)²])":
            (policy_loss + 0.5 * squared_error - 0.01 * entropy).detach(),
        "the value loss forgotten": (policy_loss - 0.01 * entropy).detach(),
        "the entropy term forgotten": (policy_loss + 0.5 * value_loss(values, values, minibatch["returns"])).detach(),
    }, atol=1e-6)
    flat = lambda gradients: torch.cat([gradient.flatten() for gradient in gradients])  # noqa: E731
    actor_only = torch.autograd.grad(policy_loss - 0.01 * entropy, list(policy.parameters()), allow_unused=True)
    check_close(flat(mine), flat(library), "the gradient of ppo_loss with respect to the policy's parameters", {
        "the values detached (the critic gets no gradient)": flat(
            [torch.zeros_like(parameter) if gradient is None else gradient
             for gradient, parameter in zip(actor_only, policy.parameters())]),
    }, atol=1e-6)
    log_ratio = new_log_probs.detach() - minibatch["log_probs"]
    ratio = log_ratio.exp()
    check_close(stats["approx_kl"], float((ratio - 1 - log_ratio).mean()), "stats['approx_kl'] (k3: E[(r − 1) − log r])", {
        "the k1 estimator E[−log r] in place of k3": float((-log_ratio).mean()),
        "log r in place of −log r inside k3": float((ratio - 1 + log_ratio).mean()),
    }, atol=1e-6, rtol=0.0)
    check_close(stats["clip_fraction"], float(((ratio - 1).abs() > 0.2).float().mean()), "stats['clip_fraction'] (ε = 0.2)", {
        "the share inside [1 − ε, 1 + ε], not outside": float(((ratio - 1).abs() <= 0.2).float().mean()),
        "|log r| > ε in place of |r − 1| > ε": float((log_ratio.abs() > 0.2).float().mean()),
    }, atol=1e-6, rtol=0.0)
    check_close(stats["entropy"], float(entropy.detach()), "stats['entropy'] (the mean over the minibatch)", {
        "a sum over the minibatch in place of the mean": float(distribution.entropy().sum().detach())}, atol=1e-6, rtol=0.0)


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
    check_equal(optimizer.steps, 3 * 4, "the optimiser steps of ppo_update(epochs = 3, num_minibatches = 4)", {
        "one step per epoch, not per minibatch": 3, "the minibatches of one epoch only (the epoch loop missing)": 4,
        "one step for the whole update": 1})
    check_equal(sorted(set(stats) & {"approx_kl", "clip_fraction", "entropy"}), ["approx_kl", "clip_fraction", "entropy"],
                "the diagnostics ppo_update returns")
    batches = [obs for obs in seen if obs.shape == (NUM_STEPS * NUM_ENVS // 4, 4)]
    check_equal(len(batches), 12, f"forward passes on minibatches of {NUM_STEPS * NUM_ENVS // 4} observations", {
        "the whole batch at each step, not a minibatch of a quarter of it": 0})
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
