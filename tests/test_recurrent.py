"""Recurrent PPO (ppo.trainers.recurrent), one test per way it is known to go wrong.

The env is CartPole with only (x, θ) observed (`PositionsOnly`, defined here), a task
whose episodes end inside a rollout, so every rollout holds episode starts and carries
a state across its boundary.
"""

import math

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces
from torch import nn

from envs.classic import make_torch_vec_env
from experiments.commands import train
from ppo.runs.checkpoint import load_checkpoint
from ppo.config import ConfigError, PPOConfig
from ppo.parallel.distributed import World
from ppo.runs.evaluation import Policy, evaluate_policy
from ppo.algorithm.losses import kl_per_sample
from ppo.models.networks import ActorCritic
from ppo.parallel.optim import FlatAdam
from ppo.models.gru_sequence import GRUSequence
from ppo.models.recurrent_networks import RecurrentActorCritic
from ppo.trainers.choice import resume_run
from envs.factory import make_seed_batch_env, make_vec_env
from ppo.trainers.recurrent import RecurrentPPO, columns
from ppo.trainers.ppo import PPO
from ppo.vec_env import StepResult

KEPT = [0, 2]  # x and θ of CartPole's (x, ẋ, θ, θ̇)

# As in tests/test_trainer.py: the rollout scores N observations per call and the replay
# T·b at once, so a CPU's matmul kernels may round the MLP's dot products in another
# order; each such rounding moves a log-prob by an ulp or so, and the GRU carries it
# through at most T steps without growing it (its state is a convex mix of bounded values).
# 32 ulps of 1.0 bound that with room; replaying a trained policy from a wrong state moves
# r by 1e-3 or more (test_replaying_from_a_zero_state_instead_of_the_stored_one_breaks_ratio_one).
RATIO_ONE_TOLERANCE = 32 * torch.finfo(torch.float32).eps


class PositionsOnly:
    """The batched torch CartPole with the velocities removed from every observation."""

    def __init__(self, num_envs: int):
        self.envs = make_torch_vec_env("CartPole-v1", num_envs)
        self.num_envs, self.device = num_envs, self.envs.device
        self.single_action_space = self.envs.single_action_space
        box = self.envs.single_observation_space
        self.single_observation_space = spaces.Box(box.low[KEPT], box.high[KEPT], dtype=np.float32)

    def reset(self, seed=None):
        return self.envs.reset(seed=seed)[:, KEPT]

    def step(self, actions):
        result = self.envs.step(actions)
        return StepResult(result.obs[:, KEPT], result.reward, result.terminated, result.truncated,
                          result.final_obs[:, KEPT])

    def state_dict(self):
        return self.envs.state_dict()

    def load_state_dict(self, state):
        self.envs.load_state_dict(state)

    def close(self):
        self.envs.close()


SMALL = dict(env_id="CartPole-v1", env_backend="torch", num_envs=8, num_steps=32, num_minibatches=4, update_epochs=2,
             total_timesteps=8 * 32 * 3, learning_rate=1e-3, tensorboard=False, recurrent="gru")


def recurrent_trainer(**overrides) -> RecurrentPPO:
    config = PPOConfig(**{**SMALL, **overrides})
    return RecurrentPPO(config, PositionsOnly(config.num_envs), progress=False)


def torch_cell(model: RecurrentActorCritic, core: int) -> nn.Module:
    """torch's own nn.GRUCell / nn.LSTMCell holding the weights of `model`'s core `core` (0 actor, 1 critic)."""
    cores = model.cores
    cell = (nn.GRUCell if cores.cell == "gru" else nn.LSTMCell)(cores.weight_ih.shape[2], cores.hidden_size)
    for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
        getattr(cell, name).data.copy_(getattr(cores, name)[core])
    return cell


def replay_one_env(model: RecurrentActorCritic, obs, actions, starts, state):
    """A slow reference: env by env, step by step, h ← 0 where an episode starts, then one
    call of torch's GRUCell per core; returns (log π(a_t), H_t, V_t) per step (T,)."""
    actor_cell, critic_cell = torch_cell(model, 0), torch_cell(model, 1)
    log_probs, entropies, values = [], [], []
    for t in range(len(starts)):
        if starts[t]:
            state = torch.zeros_like(state)
        actor_hidden = actor_cell(model.actor_body(obs[t:t + 1]), state[:, 0])
        critic_hidden = critic_cell(model.critic_body(obs[t:t + 1]), state[:, 1])
        state = torch.stack([actor_hidden, critic_hidden], dim=1)
        dist = model.policy_head(actor_hidden)
        log_probs.append(dist.log_prob(actions[t:t + 1]))
        entropies.append(dist.entropy())
        values.append(model.value_head(critic_hidden).squeeze(-1))
    return torch.cat(log_probs), torch.cat(entropies), torch.cat(values)


# ---------------------------------------------------------------- the cells are torch's cells

@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_both_cores_step_as_torchs_own_cells(cell):
    torch.manual_seed(1)
    model = RecurrentActorCritic(spaces.Box(-1, 1, (3,)), spaces.Discrete(2), cell=cell, recurrent_size=5,
                                 ortho_init=False)
    with torch.no_grad():  # biases that are not zero, so a misplaced one shows
        model.cores.bias_hh.uniform_(-1, 1)
        model.cores.bias_ih.uniform_(-1, 1)
    inputs, state = torch.randn(2, 4, 64), torch.randn(2, 4, model.state_width)
    new_state = model.cores.step(model.cores.input_gates(inputs), state)
    for core in range(2):
        reference = torch_cell(model, core)
        if cell == "gru":
            expected = reference(inputs[core], state[core])
        else:
            expected = torch.cat(reference(inputs[core], (state[core, :, :5], state[core, :, 5:])), dim=1)
        torch.testing.assert_close(new_state[core], expected, rtol=0, atol=1e-6)


def test_the_hand_written_gru_backward_matches_autograd_through_torchs_cell():
    """GRUSequence against an independent reference: nn.GRUCell stepped in a loop, with the
    state zeroed where an episode starts, differentiated by autograd (float64, every input)."""
    torch.manual_seed(2)
    cores, steps, batch, inputs_size, hidden = 2, 7, 3, 4, 5
    model = RecurrentActorCritic(spaces.Box(-1, 1, (3,)), spaces.Discrete(2), recurrent_size=hidden,
                                 hidden_sizes=(inputs_size,), ortho_init=False).double()
    with torch.no_grad():
        model.cores.bias_hh.uniform_(-1, 1)
    inputs = torch.randn(cores, steps * batch, inputs_size, dtype=torch.float64)
    kept = (torch.rand(steps, 1, batch, 1) > 0.3).double()
    kept[:, :, 0] = 1.0  # one sequence without a reset, so the initial state's gradient reaches step 0
    state = torch.randn(cores, batch, hidden, dtype=torch.float64, requires_grad=True)
    upstream = torch.randn(cores, steps, batch, hidden, dtype=torch.float64)

    states = model.cores.sequence(model.cores.input_gates(inputs).view(cores, steps, batch, -1), kept, state)
    names = [name for name, _ in model.cores.named_parameters()]
    grads = dict(zip(["state", *names], torch.autograd.grad((states * upstream).sum(),
                                                            [state, *model.cores.parameters()])))
    for core in range(cores):
        cell = nn.GRUCell(inputs_size, hidden).double()
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(cell, name).data.copy_(getattr(model.cores, name)[core])
        start = state[core].detach().requires_grad_()
        h, reference = start, []
        for t in range(steps):
            h = cell(inputs[core].view(steps, batch, -1)[t], h * kept[t, 0])
            reference.append(h)
        reference = torch.stack(reference)
        torch.testing.assert_close(states[core], reference, rtol=0, atol=1e-12)
        reference_grads = torch.autograd.grad((reference * upstream[core]).sum(), [start, *cell.parameters()])
        torch.testing.assert_close(grads["state"][core], reference_grads[0], rtol=0, atol=1e-12)
        for name, reference_grad in zip(("weight_ih", "weight_hh", "bias_ih", "bias_hh"), reference_grads[1:]):
            torch.testing.assert_close(grads[name][core], reference_grad, rtol=0, atol=1e-12, msg=name)


@pytest.mark.parametrize("kept_per_member", [True, False])
def test_gru_sequence_under_vmap_is_each_members_own_call_forward_and_backward(kept_per_member):
    """vmap of GRUSequence over S members (the batching rule folds members into cores) against one
    call per member: the same states, and the same gradients of every input (float64)."""
    torch.manual_seed(3)
    members, cores, steps, batch, hidden = 3, 2, 5, 4, 6
    inputs = [torch.randn(members, cores, steps, batch, 3 * hidden, dtype=torch.float64, requires_grad=True),
              torch.randn(members, cores, batch, hidden, dtype=torch.float64, requires_grad=True),
              torch.randn(members, cores, 3 * hidden, hidden, dtype=torch.float64, requires_grad=True),
              torch.randn(members, cores, 3 * hidden, dtype=torch.float64, requires_grad=True)]
    kept = (torch.rand(members if kept_per_member else 1, steps, 1, batch, 1) > 0.3).double()
    upstream = torch.randn(members, cores, steps, batch, hidden, dtype=torch.float64)

    def states(input_gates, member_kept, state, weight_hh, bias_hh):
        return GRUSequence.apply(input_gates, member_kept, state, weight_hh, bias_hh)[0]

    input_gates, state, weight_hh, bias_hh = inputs
    kept_dim = 0 if kept_per_member else None
    mapped = torch.func.vmap(states, in_dims=(0, kept_dim, 0, 0, 0))(
        input_gates, kept if kept_per_member else kept[0], state, weight_hh, bias_hh)
    mapped_grads = torch.autograd.grad((mapped * upstream).sum(), inputs)
    for member in range(members):
        alone = states(input_gates[member], kept[member if kept_per_member else 0], state[member],
                       weight_hh[member], bias_hh[member])
        torch.testing.assert_close(mapped[member], alone, rtol=0, atol=1e-12)
        alone_grads = torch.autograd.grad((alone * upstream[member]).sum(), inputs)
        for mapped_grad, alone_grad in zip(mapped_grads, alone_grads):
            torch.testing.assert_close(mapped_grad[member], alone_grad[member], rtol=0, atol=1e-12)


# ---------------------------------------------------------------- the state is zeroed at every episode start

@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_unroll_zeroes_the_state_before_an_episodes_first_observation(cell):
    torch.manual_seed(0)
    model = RecurrentActorCritic(spaces.Box(-1, 1, (2,)), spaces.Discrete(2), cell=cell, recurrent_size=8)
    obs = torch.randn(5, 3, 2)
    starts = torch.zeros(5, 3, dtype=torch.bool)
    starts[3, 1] = True
    state = torch.randn(3, 2, model.state_width)  # a state carried in from before the rollout
    actor, critic, _ = model.unroll(obs, state, starts)
    fresh_starts = torch.tensor([[True], [False]])  # env 1 alone, from t = 3, from a zero state
    fresh_actor, fresh_critic, _ = model.unroll(obs[3:, 1:2], model.initial_state(1), fresh_starts)
    torch.testing.assert_close(actor[3:, 1:2], fresh_actor, rtol=0, atol=1e-6)  # env 1 forgot its past at t = 3
    torch.testing.assert_close(critic[3:, 1:2], fresh_critic, rtol=0, atol=1e-6)
    carried, _, _ = model.unroll(obs[:, 1:2], state[1:2], torch.zeros(5, 1, dtype=torch.bool))
    assert (actor[3, 1] - carried[3, 0]).abs().max() > 1e-3  # without the reset the past shows


def test_rollout_marks_the_first_reset_and_every_autoreset_step_as_an_episode_start():
    trainer = recurrent_trainer()
    starts_seen, dones_seen = [], []
    for _ in range(2):
        trainer.collect_rollout()
        starts_seen.append(trainer.buffer.episode_starts.clone())
        dones_seen.append(trainer.buffer.terminated | trainer.buffer.truncated)
    first, second = starts_seen
    assert first[0].all()  # the reset before the first rollout
    assert torch.equal(first[1:], dones_seen[0][:-1])  # SAME_STEP: the step after a done reads the next episode
    assert torch.equal(second[0], dones_seen[0][-1])  # across the rollout boundary
    assert torch.equal(second[1:], dones_seen[1][:-1])
    assert dones_seen[0].any() and dones_seen[1].any()  # episodes did end inside the rollouts


def test_the_rollouts_log_prob_at_an_episode_start_is_that_of_a_zero_state():
    trainer = recurrent_trainer()
    trainer.collect_rollout()
    trainer.collect_rollout()  # the second: its starts follow episodes that ran before them
    buffer, model = trainer.buffer, trainer.model
    steps, envs = torch.nonzero(buffer.episode_starts, as_tuple=True)
    assert len(steps) >= 4
    with torch.no_grad():
        log_probs, _, values = model.evaluate_actions(buffer.obs[steps, envs].unsqueeze(0),
                                                      buffer.actions[steps, envs].unsqueeze(0),
                                                      model.initial_state(len(steps)),
                                                      torch.ones(1, len(steps), dtype=torch.bool))
    torch.testing.assert_close(log_probs[0], buffer.log_probs[steps, envs], rtol=0, atol=1e-6)
    torch.testing.assert_close(values[0], buffer.values[steps, envs], rtol=0, atol=1e-5)


# ---------------------------------------------------------------- the stored initial states are replayed

@pytest.mark.parametrize("cell, shared, length", [("gru", False, None), ("gru", True, None), ("lstm", False, None),
                                                  ("gru", False, 8), ("lstm", False, 4)])
def test_first_minibatch_of_every_update_has_ratio_one_to_rounding(cell, shared, length):
    trainer = recurrent_trainer(recurrent=cell, shared_network=shared, sequence_length=length)
    errors, initial_states = [], []

    def record(ppo, metrics):
        errors.append(metrics["first_minibatch_ratio_error"])
        initial_states.append(ppo.buffer.initial_state.abs().max())

    trainer.train(callback=record)
    assert len(errors) == 3
    assert initial_states[0] == 0 and min(initial_states[1:]) > 0.01  # later rollouts start from a carried state
    assert max(errors) <= RATIO_ONE_TOLERANCE


def test_replaying_from_a_zero_state_instead_of_the_stored_one_breaks_ratio_one():
    """The planted bug the ratio test exists for: the update forgets the initial states."""
    trainer = recurrent_trainer(learning_rate=1e-2, total_timesteps=8 * 32 * 4)
    trainer.train(callback=lambda ppo, metrics: ppo.iteration == 3)  # a policy that has left the uniform one
    trainer.collect_rollout()
    advantages, returns = trainer.compute_advantages()
    samples = trainer.update_samples(advantages, returns)
    stored = trainer.minibatch_loss(samples).log_ratio.abs().max()
    forgotten = trainer.minibatch_loss({**samples, "initial_state": torch.zeros_like(samples["initial_state"])})
    assert stored <= RATIO_ONE_TOLERANCE < 1e-3 < forgotten.log_ratio.abs().max()


# ---------------------------------------------------------------- sequence minibatches

def test_an_epochs_minibatches_are_whole_env_sequences_each_env_once_in_order():
    trainer = recurrent_trainer(num_envs=8, num_minibatches=4, update_epochs=3)
    seen = []
    loss = trainer.minibatch_loss
    trainer.minibatch_loss = lambda minibatch: (seen.append({k: v.clone() for k, v in minibatch.items()}),
                                                loss(minibatch))[1]
    trainer.collect_rollout()
    trainer.collect_rollout()
    trainer.update(*trainer.compute_advantages())
    obs_columns, start_columns = columns(trainer.buffer.obs), columns(trainer.buffer.episode_starts)
    assert len(seen) == 3 * 4
    for epoch in range(3):
        envs_in_epoch = []
        for minibatch in seen[epoch * 4:(epoch + 1) * 4]:
            assert minibatch["obs"].shape == (2, 32, 2)  # 8 / 4 envs, all T = 32 steps each
            for row in range(2):
                matches = [n for n in range(8) if torch.equal(minibatch["obs"][row], obs_columns[n])]
                assert len(matches) == 1  # a whole column, its steps in order
                n = matches[0]
                assert torch.equal(minibatch["episode_starts"][row], start_columns[n])
                assert torch.equal(minibatch["initial_state"][row], trainer.buffer.initial_state[n])
                envs_in_epoch.append(n)
        assert sorted(envs_in_epoch) == list(range(8))  # every step once per epoch
    assert [m["obs"][0, 0, 0] for m in seen[:4]] != [m["obs"][0, 0, 0] for m in seen[4:8]]  # reshuffled


def recorded_rollout_states(trainer: RecurrentPPO) -> list[torch.Tensor]:
    """Wrap the trainer's act so that it records, step by step, the state the envs enter each step with."""
    states, act = [], trainer.act
    trainer.act = lambda obs: (states.append(trainer.recurrent_state.clone()), act(obs))[1]
    return states


def test_shorter_sequences_are_each_envs_steps_cut_in_order_and_entered_with_the_rollouts_state():
    trainer = recurrent_trainer(num_envs=4, num_minibatches=4, update_epochs=2, sequence_length=8)
    states = recorded_rollout_states(trainer)
    seen = []
    loss = trainer.minibatch_loss
    trainer.minibatch_loss = lambda minibatch: (seen.append({k: v.clone() for k, v in minibatch.items()}),
                                                loss(minibatch))[1]
    trainer.collect_rollout()
    trainer.collect_rollout()  # its states at step 0 are carried over, not zero
    states = states[32:]
    buffer = trainer.buffer
    trainer.update(*trainer.compute_advantages())
    assert len(seen) == 2 * 4
    for epoch in range(2):
        pieces = []
        for minibatch in seen[epoch * 4:(epoch + 1) * 4]:
            assert minibatch["obs"].shape == (4, 8, 2)  # 4 envs × 32 / 8 sequences = 16, 4 per minibatch
            for row in range(4):
                matches = [(c, n) for c in range(4) for n in range(4)
                           if torch.equal(minibatch["obs"][row], buffer.obs[8 * c:8 * c + 8, n])]
                assert len(matches) == 1  # steps 8c … 8c + 7 of one env, in order
                c, n = matches[0]
                assert torch.equal(minibatch["episode_starts"][row], buffer.episode_starts[8 * c:8 * c + 8, n])
                assert torch.equal(minibatch["initial_state"][row], states[8 * c][n])  # the state step 8c began with
                pieces.append((c, n))
        assert sorted(pieces) == [(c, n) for c in range(4) for n in range(4)]  # every step once per epoch
    assert sum(state.abs().max() > 0.01 for state in states[8::8]) == 3  # the states inside the rollout are not zero


def test_shorter_sequences_replay_the_same_log_probs_and_values_as_whole_ones():
    """Before any gradient step, cutting the rollout into sequences changes nothing the loss reads:
    each sequence starts from the state the whole replay reaches there."""
    results = {}
    for length in (None, 8):
        trainer = recurrent_trainer(num_envs=4, sequence_length=length, seed=3)
        trainer.collect_rollout()
        trainer.collect_rollout()
        samples = trainer.update_samples(*trainer.compute_advantages())
        with torch.no_grad():
            log_probs, entropy, values = trainer.model.evaluate_actions(
                columns(samples["obs"]), columns(samples["actions"]), samples["initial_state"],
                columns(samples["episode_starts"]))
        T = len(trainer.buffer.obs)
        per_step = [tensor.T.reshape(-1, 4, trainer.buffer.sequence_length).transpose(1, 2).reshape(T, 4)
                    for tensor in (log_probs, entropy, values)]  # rows (c, n) back to (T, N)
        results[length] = per_step
        torch.testing.assert_close(per_step[0], trainer.buffer.log_probs, rtol=0, atol=1e-6)
    for whole, cut in zip(results[None], results[8]):
        torch.testing.assert_close(cut, whole, rtol=0, atol=1e-6)


def test_shorter_sequences_stop_the_gradient_at_their_start():
    """With L = 8 the loss of steps 8 … 15 of an env does not reach the input of step 7; with L = T it does."""
    gradients = {}
    for length in (None, 8):
        trainer = recurrent_trainer(num_envs=4, sequence_length=length, seed=3)
        trainer.collect_rollout()
        samples = trainer.update_samples(*trainer.compute_advantages())
        obs = samples["obs"].clone().requires_grad_(True)
        log_probs, _, _ = trainer.model.evaluate_actions(columns(obs), columns(samples["actions"]),
                                                         samples["initial_state"], columns(samples["episode_starts"]))
        row, step = (0, 12) if length is None else (4, 4)  # env 0's step 12 in both layouts (row c·N + n = 1·4 + 0)
        log_probs[step, row].backward()
        gradients[length] = obs.grad
    whole_step7 = gradients[None][0, 7]
    cut_previous_row = gradients[8][0]  # env 0's steps 0 … 7 as their own sequence
    assert whole_step7.abs().sum() > 0
    assert cut_previous_row.abs().sum() == 0


def test_sequence_length_must_divide_the_rollout_and_the_sequences_the_minibatches():
    with pytest.raises(ConfigError, match="num_steps = 32 is not divisible by sequence_length = 5"):
        PPOConfig(**{**SMALL, "sequence_length": 5}).validate()
    with pytest.raises(ConfigError, match="= 12 sequences is not divisible by num_minibatches = 8"):
        PPOConfig(**{**SMALL, "num_envs": 3, "num_minibatches": 8, "sequence_length": 8,
                     "total_timesteps": 3 * 32}).validate()
    with pytest.raises(ConfigError, match=r"sequence_length = 8 has no effect with recurrent = 'none'"):
        PPOConfig(**{**SMALL, "recurrent": "none", "sequence_length": 8}).validate()
    PPOConfig(**{**SMALL, "num_envs": 3, "num_minibatches": 4, "sequence_length": 8,
                 "total_timesteps": 3 * 32}).validate()  # 12 sequences in 4 minibatches, though 3 envs do not split


def test_num_envs_must_divide_into_the_minibatches_of_sequences():
    with pytest.raises(ConfigError, match="num_envs = 6 is not divisible by num_minibatches = 4"):
        PPOConfig(**{**SMALL, "num_envs": 6, "total_timesteps": 6 * 32}).validate()
    PPOConfig(**{**SMALL, "num_envs": 6, "total_timesteps": 6 * 32, "recurrent": "none"}).validate()  # transitions: 192 / 4


# ---------------------------------------------------------------- diagnostics over real steps only

def test_update_diagnostics_are_means_over_exactly_the_real_steps():
    """approx KL, clip fraction and entropy against a slow env-by-env replay with the
    parameters each minibatch saw: one entry per real step, none more, none less."""
    trainer = recurrent_trainer(num_envs=4, num_minibatches=2, update_epochs=2, learning_rate=3e-2)
    trainer.collect_rollout()
    trainer.collect_rollout()
    buffer = trainer.buffer
    references = []  # per minibatch: (log ratio, entropy) from the slow replay
    loss = trainer.minibatch_loss

    def recording_loss(minibatch):
        for row in range(len(minibatch["obs"])):
            n = next(n for n in range(4) if torch.equal(minibatch["obs"][row], columns(buffer.obs)[n]))
            with torch.no_grad():
                log_probs, entropy, _ = replay_one_env(trainer.model, buffer.obs[:, n], buffer.actions[:, n],
                                                       buffer.episode_starts[:, n], buffer.initial_state[n:n + 1])
            references.append((log_probs - buffer.log_probs[:, n], entropy))
        return loss(minibatch)

    trainer.minibatch_loss = recording_loss
    metrics = trainer.update(*trainer.compute_advantages())
    log_ratio = torch.cat([ratio for ratio, _ in references])  # 2 epochs × 4 envs × 32 steps
    entropy = torch.cat([entropy for _, entropy in references])
    assert log_ratio.numel() == 2 * 4 * 32
    assert metrics["approx_kl"] > 1e-4  # the later minibatches moved: the check is not of zeros
    assert metrics["approx_kl"] == pytest.approx(float(kl_per_sample(log_ratio, "k3").mean()), rel=1e-4, abs=1e-8)
    clipped = float(((log_ratio.exp() - 1).abs() > trainer.clip_coef).float().mean())
    assert metrics["clip_fraction"] == pytest.approx(clipped, abs=1.5 / log_ratio.numel())
    assert metrics["entropy"] == pytest.approx(float(entropy.mean()), rel=1e-5)


# ---------------------------------------------------------------- cut recurrence = feed-forward

class ZeroStateGRU(nn.Module):
    """A GRU cell's output from a zero state, written out (torch's gate order r, z, n):
    r = σ(W_ir x + b_ir + b_hr), z = σ(W_iz x + b_iz + b_hz), n = tanh(W_in x + b_in + r ⊙ b_hn),
    h' = (1 − z) ⊙ n + z ⊙ 0."""

    def __init__(self, model: RecurrentActorCritic, core: int):
        super().__init__()
        self.weight_ih = nn.Parameter(model.cores.weight_ih[core].detach().clone())
        self.bias_ih = nn.Parameter(model.cores.bias_ih[core].detach().clone())
        self.bias_hh = nn.Parameter(model.cores.bias_hh[core].detach().clone())

    def forward(self, x):
        input_r, input_z, input_n = (x @ self.weight_ih.T + self.bias_ih).chunk(3, dim=-1)
        hidden_r, hidden_z, hidden_n = self.bias_hh.chunk(3)
        r = torch.sigmoid(input_r + hidden_r)
        z = torch.sigmoid(input_z + hidden_z)
        return (1 - z) * torch.tanh(input_n + r * hidden_n)


def feed_forward_twin(model: RecurrentActorCritic, observation_space, action_space) -> ActorCritic:
    """A feed-forward ActorCritic computing what `model` computes from a zero state:
    the same input layers and heads, the GRU cells as ZeroStateGRU."""
    import copy

    twin = ActorCritic(observation_space, action_space)
    twin.actor_body = nn.Sequential(copy.deepcopy(model.actor_body), ZeroStateGRU(model, 0))
    twin.critic_body = nn.Sequential(copy.deepcopy(model.critic_body), ZeroStateGRU(model, 1))
    twin.policy_head = copy.deepcopy(model.policy_head)
    twin.value_head = copy.deepcopy(model.value_head)
    return twin


def cut_recurrence(model: RecurrentActorCritic) -> None:
    """The planted cut: the state is zeroed before every step, as if every step began an episode."""
    model.state_kept = lambda episode_starts: torch.zeros(episode_starts.shape)


def test_with_the_recurrence_cut_the_network_is_its_feed_forward_twin():
    torch.manual_seed(3)
    observation_space, action_space = spaces.Box(-1, 1, (4,)), spaces.Discrete(2)
    model = RecurrentActorCritic(observation_space, action_space)
    twin = feed_forward_twin(model, observation_space, action_space)
    obs = torch.randn(6, 5, 4)
    actions = torch.randint(0, 2, (6, 5))
    state = torch.randn(5, 2, 64)
    cut_recurrence(model)
    log_probs, entropy, values = model.evaluate_actions(obs, actions, state, torch.zeros(6, 5, dtype=torch.bool))
    twin_log_probs, twin_entropy, twin_values = twin.evaluate_actions(obs.reshape(30, 4), actions.reshape(30))
    torch.testing.assert_close(log_probs.reshape(30), twin_log_probs, rtol=0, atol=1e-6)
    torch.testing.assert_close(entropy.reshape(30), twin_entropy, rtol=0, atol=1e-6)
    torch.testing.assert_close(values.reshape(30), twin_values, rtol=0, atol=1e-6)


def test_recurrent_ppo_with_the_recurrence_cut_trains_as_feed_forward_ppo_on_full_cartpole():
    """CartPole with its full observation needs no memory. One minibatch per epoch, so both
    update on the same samples (shuffled differently: the means differ only in rounding)."""
    settings = {**SMALL, "num_minibatches": 1, "update_epochs": 3, "learning_rate": 3e-3}
    recurrent = RecurrentPPO(PPOConfig(**settings), make_torch_vec_env("CartPole-v1", 8), progress=False)
    cut_recurrence(recurrent.model)
    feed_forward = PPO(PPOConfig(**{**settings, "recurrent": "none"}), make_torch_vec_env("CartPole-v1", 8),
                       progress=False)
    feed_forward.model = feed_forward_twin(recurrent.model, recurrent.observation_space, recurrent.action_space)
    feed_forward.optimizer = FlatAdam(feed_forward.model.parameters(), lr=settings["learning_rate"], eps=1e-5)
    initial = [parameter.detach().clone() for parameter in feed_forward.model.parameters()]
    runs = []
    for trainer in (recurrent, feed_forward):
        trainer.action_generator.manual_seed(11)  # the same action draws
        rows = []
        trainer.train(callback=lambda ppo, metrics: rows.append(metrics))
        runs.append(rows)
    names = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "episode_return_mean",
             "explained_variance")
    for recurrent_row, feed_forward_row in zip(*runs):
        for name in names:  # rounding apart (float32 sums in another order), nothing more
            assert recurrent_row[name] == pytest.approx(feed_forward_row[name], rel=1e-3, abs=1e-6), name
    twin_after = feed_forward_twin(recurrent.model, recurrent.observation_space, recurrent.action_space)
    moved = max(float((trained.detach() - start).abs().max()) for trained, start in zip(twin_after.parameters(), initial))
    assert moved > 1e-2  # the networks moved, and moved alike
    for trained, expected in zip(feed_forward.model.parameters(), twin_after.parameters()):
        torch.testing.assert_close(trained, expected, rtol=0, atol=1e-4)


# ---------------------------------------------------------------- checkpoints and resuming

def test_resumed_run_continues_bit_for_bit_with_the_hidden_states_in_the_checkpoint(tmp_path):
    config = PPOConfig(**{**SMALL, "total_timesteps": 8 * 32 * 4, "checkpoint_every": 2})
    straight = RecurrentPPO(config, PositionsOnly(8), run_dir=tmp_path / "straight", progress=False)
    straight_rows = []
    straight.train(callback=lambda ppo, metrics: straight_rows.append(metrics))

    first = RecurrentPPO(config, PositionsOnly(8), run_dir=tmp_path / "resumed", progress=False)
    first.train(callback=lambda ppo, metrics: ppo.iteration == 2)
    state = load_checkpoint(tmp_path / "resumed", required_keys=("recurrent_state", "episode_start"))  # weights_only
    assert state["recurrent_state"].shape == (8, 2, 64) and state["recurrent_state"].abs().max() > 0.01
    resumed = resume_run(tmp_path / "resumed", lambda config: PositionsOnly(config.num_envs), progress=False)
    assert isinstance(resumed, RecurrentPPO)
    assert torch.equal(resumed.recurrent_state, first.recurrent_state)
    resumed_rows = []
    resumed.train(callback=lambda ppo, metrics: resumed_rows.append(metrics))

    def comparable(row):
        return {k: v for k, v in row.items() if k not in ("time_s", "steps_per_second")
                and not (isinstance(v, float) and math.isnan(v))}

    assert [comparable(row) for row in resumed_rows] == [comparable(row) for row in straight_rows[2:]]
    for name, tensor in straight.model.state_dict().items():
        assert torch.equal(resumed.model.state_dict()[name], tensor)


# ---------------------------------------------------------------- evaluation carries the state

class PositionsOnlyObservation(gym.ObservationWrapper):
    def __init__(self, env):
        super().__init__(env)
        box = env.observation_space
        self.observation_space = spaces.Box(box.low[KEPT], box.high[KEPT], dtype=np.float32)

    def observation(self, observation):
        return observation[KEPT].astype(np.float32)


def make_positions_only():
    return PositionsOnlyObservation(gym.make("CartPole-v1"))


def reference_episode_returns(policy: Policy, copies: int, per_copy: int, seed: int) -> list[float]:
    """Copy i's episodes one after another (seeded seed + i, then reset without a seed, as
    an autoreset does), each from a zero state, carried step by step."""
    returns = []
    for i in range(copies):
        env = make_positions_only()
        obs, _ = env.reset(seed=seed + i)
        for _ in range(per_copy):
            state, start, total, done = policy.model.initial_state(1), torch.ones(1, dtype=torch.bool), 0.0, False
            while not done:
                with torch.no_grad():
                    action, state = policy.model.greedy_action(torch.as_tensor(obs)[None], state, start)
                obs, reward, terminated, truncated, _ = env.step(int(action))
                total, done, start = total + reward, terminated or truncated, torch.zeros(1, dtype=torch.bool)
            returns.append(total)
            obs, _ = env.reset()
    return returns


@pytest.mark.parametrize("mode", [gym.vector.AutoresetMode.SAME_STEP, gym.vector.AutoresetMode.NEXT_STEP])
def test_evaluation_carries_the_state_through_each_episode_and_zeroes_it_at_the_next(mode):
    torch.manual_seed(5)
    config = PPOConfig(**SMALL)
    model = RecurrentActorCritic.from_config(config, make_positions_only().observation_space, spaces.Discrete(2))
    with torch.no_grad():
        model.policy_head.logits.weight.mul_(300)  # a policy that acts on its state, not near-uniform logits
    policy = Policy(model, config, None)

    def make_env():
        return make_positions_only()

    make_env.make_vec = lambda n: gym.vector.SyncVectorEnv([make_positions_only] * n, autoreset_mode=mode)
    returns = evaluate_policy(policy, make_env, episodes=6, seed=40, num_envs=2)
    expected = reference_episode_returns(policy, copies=2, per_copy=3, seed=40)
    assert sorted(returns.tolist()) == sorted(expected)
    assert len(set(expected)) > 2  # episodes that differ: the check is not of one repeated number


# ---------------------------------------------------------------- what refuses recurrence

def test_ppo_is_recurrent_ppo_on_a_recurrent_config_and_refuses_it_under_torchrun():
    config = PPOConfig(**SMALL)
    trainer = PPO(config, PositionsOnly(8), progress=False)
    assert trainer.recurrent and trainer.buffer.sequence_states.shape[1] == 8
    with pytest.raises(ConfigError, match="recurrent = 'none': RecurrentPPO needs a recurrent core"):
        RecurrentPPO(config.replace(recurrent="none"), PositionsOnly(8), progress=False)
    with pytest.raises(ConfigError, match="recurrent = 'gru' is not supported under torchrun"):
        PPO(config.replace(num_envs=8), PositionsOnly(4), progress=False, world=World(rank=0, size=2))


@pytest.mark.parametrize("cell, overrides", [
    ("gru", {"sequence_length": 8}),  # four sequences per copy and rollout, cut for truncated BPTT
    ("lstm", {"shared_network": True}),  # one core per member
])
def test_a_recurrent_seed_batch_is_each_seeds_own_run(cell, overrides):
    """Member s of a recurrent seed batch (the members' networks mapped by vmap, the GRU's own kernel
    included) draws its run's actions, replays its run's sequences, and lands within float32 rounding
    of PPO with seed s."""
    config = PPOConfig(**{**SMALL, "env_id": "CartPoleNoVel-v1", "recurrent": cell, **overrides})
    seeds = [4, 1]
    batch = PPO(config, make_seed_batch_env(config.env_id, 2, config.num_envs, "torch"), seeds=seeds,
                progress=False)
    rows = [batch.train_iteration() for _ in range(2)]
    for member, seed in enumerate(seeds):
        single = RecurrentPPO(config.replace(seed=seed), make_vec_env(config.env_id, config.num_envs, "torch"),
                              progress=False)
        for iteration in range(2):
            metrics = single.train_iteration()
            for name in ("policy_loss", "value_loss", "entropy", "approx_kl", "grad_norm"):
                assert rows[iteration][member][name] == pytest.approx(metrics[name], rel=1e-3, abs=1e-6), name
            assert rows[iteration][member]["first_minibatch_ratio_error"] < RATIO_ONE_TOLERANCE
        columns = slice(member * config.num_envs, (member + 1) * config.num_envs)
        assert torch.equal(batch.buffer.actions[:, columns], single.buffer.actions)
        assert torch.equal(batch.buffer.episode_starts[:, columns], single.buffer.episode_starts)
        assert float((batch.optimizer.flat_params[member] - single.optimizer.flat_params).abs().max()) < 1e-4


def test_a_recurrent_seed_batch_resumes_bit_for_bit_and_its_members_alone(tmp_path):
    config = PPOConfig(**{**SMALL, "env_id": "CartPoleNoVel-v1", "recurrent": "gru", "sequence_length": 16,
                          "total_timesteps": 4 * 8 * 32})
    seeds = [2, 7]

    def envs(batch_config, count):
        return make_seed_batch_env(batch_config.env_id, count, batch_config.num_envs, "torch")

    whole = PPO(config, envs(config, 2), seeds=seeds, run_dirs=[tmp_path / "whole" / str(s) for s in seeds],
                progress=False)
    whole.train()
    folders = [tmp_path / "parts" / str(seed) for seed in seeds]
    PPO(config, envs(config, 2), seeds=seeds, run_dirs=folders, progress=False).train(
        lambda batch, metrics: batch.iteration == 2)
    resumed = PPO.resume(folders, envs, progress=False)
    resumed.train()
    assert torch.equal(resumed.optimizer.flat_params, whole.optimizer.flat_params)
    assert load_checkpoint(folders[0])["trainer"]["class"] == "PPO"
    alone = resume_run(folders[0], lambda member: make_vec_env(member.env_id, member.num_envs, "torch"),
                       progress=False)
    assert type(alone) is PPO and alone.recurrent and alone.iteration == 4


def test_ppo_train_trains_recurrent_seeds_as_one_batch(tmp_path, capsys):
    """`--recurrent gru --seeds 1,2` trains one seed batch; each folder is a recurrent PPO run's."""
    code = train.main(["--env-id", "CartPole-v1", "--recurrent", "gru", "--seeds", "1,2", "--num-envs", "4",
                       "--num-steps", "16", "--total-timesteps", "128", "--eval-episodes", "1", "--run-dir",
                       str(tmp_path / "runs"), "--no-progress", "--no-tensorboard"])
    assert code == 0
    assert "one after another" not in capsys.readouterr().out
    folders = sorted((tmp_path / "runs").glob("CartPole-v1__*"))
    assert [folder.name.rsplit("__", 1)[1] for folder in folders] == ["seed1", "seed2"]
    assert all(load_checkpoint(folder)["trainer"]["class"] == "PPO" for folder in folders)


def test_ppo_train_trains_evaluates_and_resumes_a_recurrent_run(tmp_path, capsys):
    run_dir = tmp_path / "run"
    flags = ["--env-id", "CartPole-v1", "--recurrent", "gru", "--num-envs", "8", "--num-steps", "16",
             "--total-timesteps", "256", "--eval-episodes", "4", "--no-tensorboard", "--no-progress"]
    assert train.main([*flags, "--run-dir", str(run_dir)]) == 0
    assert "mean return" in capsys.readouterr().out
    assert load_checkpoint(run_dir)["trainer"]["class"] == "PPO"
    assert train.main(["--resume", str(run_dir), "--total-timesteps", "512", "--no-progress"]) == 0
    assert load_checkpoint(run_dir)["global_step"] == 512
