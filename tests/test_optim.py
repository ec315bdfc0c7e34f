"""FlatAdam against a hand-worked step and against torch.optim.Adam + clip_grad_norm_."""

import copy

import gymnasium as gym
import pytest
import torch

from ppo.models.networks import ActorCritic
from ppo.parallel.optim import FlatAdam


def test_first_step_by_hand():
    # t = 1: m = 0.1·g, v = 0.001·g²; bias-corrected m̂ = g, v̂ = g², so θ ← θ − α·g / (|g| + ε).
    weight = torch.nn.Parameter(torch.tensor([1.0, -2.0]))
    optimizer = FlatAdam([weight], lr=0.1, eps=1e-8)
    (2.0 * weight[0] - 3.0 * weight[1]).backward()  # g = (2, −3)
    optimizer.step()
    torch.testing.assert_close(weight.detach(), torch.tensor([1.0 - 0.1, -2.0 + 0.1]), atol=1e-6, rtol=0)
    torch.testing.assert_close(optimizer.exp_avg, torch.tensor([0.2, -0.3]))
    torch.testing.assert_close(optimizer.exp_avg_sq, torch.tensor([0.004, 0.009]))


def test_global_norm_clipping_by_hand():
    weight = torch.nn.Parameter(torch.zeros(2))
    bias = torch.nn.Parameter(torch.zeros(1))
    optimizer = FlatAdam([weight, bias], lr=0.1)
    (3.0 * weight[0] + 4.0 * bias[0]).backward()  # g = (3, 0 | 4), ‖g‖ = 5
    norm = optimizer.clip_grad_norm(1.0)
    assert float(norm) == pytest.approx(5.0)
    torch.testing.assert_close(weight.grad, torch.tensor([0.6, 0.0]), atol=1e-6, rtol=0)
    torch.testing.assert_close(bias.grad, torch.tensor([0.8]), atol=1e-6, rtol=0)
    optimizer.clip_grad_norm(10.0)  # below the limit: unchanged
    torch.testing.assert_close(bias.grad, torch.tensor([0.8]), atol=1e-6, rtol=0)


@pytest.mark.parametrize("shared", [False, True])
def test_matches_torch_adam_with_clipping_over_many_steps(shared):
    torch.manual_seed(0)
    reference = ActorCritic(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2), shared=shared)
    model = copy.deepcopy(reference)
    torch_adam = torch.optim.Adam(reference.parameters(), lr=1e-2, eps=1e-5)
    flat_adam = FlatAdam(model.parameters(), lr=1e-2, eps=1e-5)
    for step in range(60):
        obs, actions, weights = torch.randn(32, 4), torch.randint(0, 2, (32,)), torch.randn(32)
        for net, optimizer in ((reference, torch_adam), (model, flat_adam)):
            log_probs, entropy, values = net.evaluate_actions(obs, actions)
            loss = -(log_probs * weights).mean() + (values - weights).pow(2).mean() - 0.01 * entropy.mean()
            optimizer.zero_grad()
            loss.backward()
        torch.nn.utils.clip_grad_norm_(reference.parameters(), 0.5)
        torch_adam.step()
        flat_adam.clip_grad_norm(0.5)
        flat_adam.step()
        learning_rate = 1e-2 * (1 - step / 60)  # the trainer anneals between updates
        torch_adam.param_groups[0]["lr"] = learning_rate
        flat_adam.lr = learning_rate
    for expected, actual in zip(reference.parameters(), model.parameters()):
        torch.testing.assert_close(actual, expected, atol=2e-6, rtol=1e-5)


def test_parameters_and_gradients_live_in_the_flat_vectors():
    model = ActorCritic(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(2))
    before = [p.detach().clone() for p in model.parameters()]
    optimizer = FlatAdam(model.parameters(), lr=1e-3)
    for value, parameter in zip(before, model.parameters()):
        torch.testing.assert_close(parameter.detach(), value)  # values kept when re-pointed
    obs, actions = torch.randn(8, 3), torch.randint(0, 2, (8,))
    log_probs, _, values = model.evaluate_actions(obs, actions)
    loss = log_probs.sum() + values.sum()
    expected = torch.autograd.grad(loss, list(model.parameters()), retain_graph=True)
    loss.backward(retain_graph=True)
    torch.testing.assert_close(optimizer.flat_grads, torch.cat([g.reshape(-1) for g in expected]))
    loss.backward()  # gradients accumulate in place until zero_grad
    torch.testing.assert_close(optimizer.flat_grads, 2 * torch.cat([g.reshape(-1) for g in expected]))
    optimizer.zero_grad()
    assert all(p.grad is not None and not p.grad.any() for p in model.parameters())


def test_state_dict_round_trip_and_mismatch(tmp_path):
    weight = torch.nn.Parameter(torch.ones(3))
    optimizer = FlatAdam([weight], lr=0.5)
    weight.sum().backward()
    optimizer.step()
    path = tmp_path / "optimizer.pt"
    torch.save(optimizer.state_dict(), path)
    restored = FlatAdam([torch.nn.Parameter(torch.ones(3))], lr=0.1)
    restored.load_state_dict(torch.load(path, weights_only=True))
    assert restored.lr == 0.5 and restored.steps == 1
    torch.testing.assert_close(restored.exp_avg, optimizer.exp_avg)
    with pytest.raises(ValueError, match="shape"):
        FlatAdam([torch.nn.Parameter(torch.ones(4))], lr=0.1).load_state_dict(optimizer.state_dict())


def test_step_refuses_gradients_detached_from_the_flat_vector():
    model = torch.nn.Linear(3, 2)
    optimizer = FlatAdam(model.parameters(), lr=0.1)
    model.zero_grad()  # nn.Module's zero_grad sets .grad to None
    model(torch.randn(4, 3)).sum().backward()  # autograd allocates fresh gradients elsewhere
    with pytest.raises(RuntimeError, match="zero_grad"):
        optimizer.step()


def test_parameter_groups_step_with_their_own_learning_rates_like_torch_adam():
    torch.manual_seed(1)
    policy, critic = torch.nn.Linear(3, 2), torch.nn.Linear(3, 1)
    twins = copy.deepcopy(policy), copy.deepcopy(critic)
    torch_adam = torch.optim.Adam([{"params": policy.parameters(), "lr": 1e-2}, {"params": critic.parameters(), "lr": 5e-2}],
                                  eps=1e-5)
    flat_adam = FlatAdam([{"params": twins[0].parameters(), "lr": 1e-2}, {"params": twins[1].parameters(), "lr": 5e-2}],
                         eps=1e-5)
    for step in range(20):
        x = torch.randn(16, 3)
        for (p, c), optimizer in (((policy, critic), torch_adam), (twins, flat_adam)):
            loss = p(x).pow(2).mean() + (c(x) - 1).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
        torch_adam.step()
        flat_adam.step()
        fraction = 1 - (step + 1) / 20  # the annealing scales every group from its own initial rate
        for group, initial in zip(torch_adam.param_groups, (1e-2, 5e-2)):
            group["lr"] = initial * fraction
        flat_adam.scale_learning_rates(fraction)
    for expected, actual in zip([*policy.parameters(), *critic.parameters()], [*twins[0].parameters(), *twins[1].parameters()]):
        torch.testing.assert_close(actual, expected, atol=1e-6, rtol=1e-5)
    assert [group.lr for group in flat_adam.groups] == [1e-2 * fraction, 5e-2 * fraction]
