"""Recurrent PPO: the PPO loop of ppo.trainers.ppo with a GRU or LSTM policy (ppo.models.recurrent_networks).

What changes against feed-forward PPO, and nothing else does:

    rollout   each env carries a state h; before o_t is read, h ← h · (1 − start_t), where
              start_t marks an episode's first observation (the first reset, and the SAME_STEP
              autoreset step). The buffer keeps start_t per step and the state each env
              enters each sequence with (ppo.algorithm.sequence_storage).
    bootstrap V(next obs) with the state the rollout ended with; V(final obs) of a truncated
              episode with the state after its last step, computed during the rollout.
    update    each env's T steps are cut into T / L sequences of L steps (L = sequence_length,
              T by default); a minibatch is an M-th of the N·T / L sequences, each whole and
              in order, shuffled as rows; each is replayed from the state the rollout entered
              it with, with the same resets, so on the first minibatch the recomputed
              log-probs equal the stored ones (r_t = 1 up to rounding). Every one of the b·L
              steps is real: no padding, no mask. With L < T, gradients through the state
              stop at each sequence's start (truncated backpropagation through time) and
              the loop over t is L steps long instead of T: fewer, wider operations.
    resume    the checkpoint holds every env's state and episode-start flag, so a run on the
              torch backend continues bit for bit.

Not supported, refused in one line: data-parallel runs (torchrun).

`SeedBatchRecurrent` is the same for a batch of seeds: `ppo.trainers.seed_batch.SeedBatchPPO`
with each member's state, episode starts and sequences, its networks stacked as S·K cores
of one kernel (`ppo.models.stacked_recurrent`). Member s's sequences are its run's, in its
run's order, and it shuffles them with its own generator.
"""

from __future__ import annotations

import gymnasium as gym
import torch

from ppo.algorithm.sequence_storage import SequenceRolloutBuffer
from ppo.algorithm.update import MinibatchLoss
from ppo.config import ConfigError
from ppo.models.recurrent_networks import RecurrentActorCritic
from ppo.models.stacked_recurrent import StackedRecurrentActorCritic
from ppo.trainers.ppo import PPO
from ppo.trainers.seed_batch import SeedBatchPPO

SEQUENCE_FIELDS = ("log_probs", "values", "advantages", "returns")  # per step, flattened for the loss


def columns(tensor: torch.Tensor) -> torch.Tensor:
    """(T, N, ...) steps × envs → (N, T, ...) one row per env sequence (and back)."""
    return tensor.transpose(0, 1)


class RecurrentPPO(PPO):
    """PPO-Clip with a recurrent actor-critic; see the module docstring."""

    model: RecurrentActorCritic
    buffer: SequenceRolloutBuffer

    def build_model(self, observation_space: gym.Space, action_space: gym.Space) -> RecurrentActorCritic:
        if self.config.recurrent == "none":
            raise ConfigError("recurrent = 'none': RecurrentPPO needs a recurrent core (gru or lstm); use PPO")
        if self.world.distributed:
            raise ConfigError(f"recurrent = {self.config.recurrent!r} is not supported under torchrun; "
                              "train it in one process")
        return RecurrentActorCritic.from_config(self.config, observation_space, action_space)

    def build_buffer(self, obs_shape: tuple[int, ...], action_shape: tuple[int, ...], action_dtype: torch.dtype,
                     network: RecurrentActorCritic) -> SequenceRolloutBuffer:
        """The sequence buffer of every copy this trainer steps, with room for `network`'s state (K, S_w)."""
        return SequenceRolloutBuffer(self.config.num_steps, self.envs.num_envs, obs_shape, action_shape,
                                     action_dtype, self.device, (network.num_cores, network.state_width),
                                     self.config.sequence_length)

    def _start_episodes(self) -> None:
        """Fresh episodes, and with them a zero state that every env starts from."""
        super()._start_episodes()
        self.recurrent_state = self.model.initial_state(self.local_num_envs, self.device)  # (N, K, S)
        self.episode_start = torch.ones(self.local_num_envs, dtype=torch.bool, device=self.device)  # (N,)

    # ------------------------------------------------------------------ rollout
    def act(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One step of every env from its state (zeroed at an episode start); the state advances."""
        self.buffer.episode_starts[self.buffer.step] = self.episode_start
        self.buffer.keep_state(self.recurrent_state)
        action, log_prob, value, self.recurrent_state = self.model.act(obs, self.recurrent_state, self.episode_start,
                                                                       self.action_generator)
        return action, log_prob, value

    def after_step(self, final_obs: torch.Tensor, truncated: torch.Tensor, dones: torch.Tensor) -> None:
        """V(final obs) of the episodes truncated at this step, read with the state they ended
        with; an env whose episode ended starts the next one at its next step."""
        if truncated.any():
            t = self.buffer.step - 1
            no_start = torch.zeros(int(truncated.sum()), dtype=torch.bool, device=self.device)
            self.buffer.final_values[t, truncated] = self.model.value(final_obs[truncated],
                                                                      self.recurrent_state[truncated], no_start)
        self.episode_start = dones

    def bootstrap_values(self) -> tuple[torch.Tensor, torch.Tensor]:
        last_value = self.model.value(self.next_obs, self.recurrent_state, self.episode_start)
        return last_value, self.buffer.final_values

    # ------------------------------------------------------------------ update
    def update_samples(self, advantages: torch.Tensor, returns: torch.Tensor) -> dict[str, torch.Tensor]:
        """(N·T / L, L, ...) one row per sequence, so run_update shuffles and cuts whole sequences;
        with each, the state the rollout entered it with (N·T / L, K, S)."""
        buffer = self.buffer
        return {
            "obs": buffer.sequences(buffer.obs),
            "actions": buffer.sequences(buffer.actions),
            "log_probs": buffer.sequences(buffer.log_probs),
            "values": buffer.sequences(buffer.values),
            "advantages": buffer.sequences(advantages),
            "returns": buffer.sequences(returns),
            "episode_starts": buffer.sequences(buffer.episode_starts),
            "initial_state": buffer.sequence_states.flatten(0, 1),
        }

    def minibatch_loss(self, minibatch: dict[str, torch.Tensor]) -> MinibatchLoss:
        """L on b sequences, replayed from the states they were entered with: b·L transitions, all real."""
        new_log_probs, entropy, new_values = self.model.evaluate_actions(
            columns(minibatch["obs"]), columns(minibatch["actions"]), minibatch["initial_state"],
            columns(minibatch["episode_starts"]))  # each (L, b)
        transitions = {name: columns(minibatch[name]).reshape(-1) for name in SEQUENCE_FIELDS}  # (L·b,)
        return self.transitions_loss(new_log_probs.reshape(-1), entropy.reshape(-1), new_values.reshape(-1),
                                     transitions)

    # ------------------------------------------------------------------ checkpoints
    def process_state(self) -> dict:
        return {**super().process_state(), "recurrent_state": self.recurrent_state,
                "episode_start": self.episode_start}

    def load_process_state(self, own: dict) -> None:
        super().load_process_state(own)
        if self.continues_episodes(own):
            self.recurrent_state = own["recurrent_state"].to(self.device)
            self.episode_start = own["episode_start"].to(self.device)


class SeedBatchRecurrent(SeedBatchPPO):
    """Recurrent PPO for a batch of seeds: RecurrentPPO's rollout and update with a member axis."""

    model: StackedRecurrentActorCritic
    buffer: SequenceRolloutBuffer
    single_run = RecurrentPPO

    def check_network_kind(self, config) -> None:
        if config.recurrent == "none":
            raise ConfigError("recurrent = 'none': SeedBatchRecurrent needs a recurrent core (gru or lstm); "
                              "use SeedBatchPPO")

    def member_network(self, observation_space: gym.Space, action_space: gym.Space) -> RecurrentActorCritic:
        return RecurrentActorCritic.from_config(self.config, observation_space, action_space)

    def stack(self, members: list) -> StackedRecurrentActorCritic:
        return StackedRecurrentActorCritic(members)

    build_buffer = RecurrentPPO.build_buffer

    def _start_episodes(self) -> None:
        """Fresh episodes, and a zero state every copy starts from (S·N, K, S_w)."""
        super()._start_episodes()
        copies, (cores, width) = self.envs.num_envs, self.buffer.sequence_states.shape[2:]
        self.recurrent_state = torch.zeros(copies, cores, width, device=self.device)
        self.episode_start = torch.ones(copies, dtype=torch.bool, device=self.device)

    # ------------------------------------------------------------------ rollout
    def act(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One step of every member's copies from their states; the states advance (RecurrentPPO.act)."""
        self.buffer.episode_starts[self.buffer.step] = self.episode_start
        self.buffer.keep_state(self.recurrent_state)
        action, log_prob, value, state = self.model.act(
            self._by_member(obs), self._by_member(self.recurrent_state), self._by_member(self.episode_start),
            self.action_generators)
        self.recurrent_state = state.flatten(0, 1)
        return action.flatten(0, 1), log_prob.flatten(), value.flatten()

    def _values(self, obs: torch.Tensor, starts: torch.Tensor) -> torch.Tensor:
        """V of one step of every copy (S·N,), read with the states the copies hold now."""
        return self.model.value(self._by_member(obs), self._by_member(self.recurrent_state),
                                self._by_member(starts)).flatten()

    def after_step(self, final_obs: torch.Tensor, truncated: torch.Tensor, dones: torch.Tensor) -> None:
        """V(final obs) where an episode was truncated at this step, with the state it ended with."""
        if truncated.any():
            t = self.buffer.step - 1
            values = self._values(final_obs, torch.zeros_like(truncated))
            self.buffer.final_values[t] = torch.where(truncated, values, self.buffer.final_values[t])
        self.episode_start = dones

    def bootstrap_values(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self._values(self.next_obs, self.episode_start), self.buffer.final_values

    # ------------------------------------------------------------------ update
    def member_sequences(self, tensor: torch.Tensor) -> torch.Tensor:
        """(T, S·N, ...) per step → (S, T/L · N, L, ...): member s's sequences in its run's order."""
        S, N, T, L = self.num_members, self.member_envs, self.config.num_steps, self.buffer.sequence_length
        rows = self.buffer.sequences(tensor)  # row c·S·N + s·N + n
        return rows.view(T // L, S, N, L, *rows.shape[2:]).transpose(0, 1).reshape(S, T // L * N, L, *rows.shape[2:])

    def update_samples(self, advantages: torch.Tensor, returns: torch.Tensor) -> dict[str, torch.Tensor]:
        """RecurrentPPO's samples for every member: (S, T/L · N, L, ...) whole sequences, each with the
        state (S, T/L · N, K, S_w) the rollout entered it with."""
        buffer, S, N = self.buffer, self.num_members, self.member_envs
        states = buffer.sequence_states
        samples = {name: self.member_sequences(tensor) for name, tensor in (
            ("obs", buffer.obs), ("actions", buffer.actions), ("log_probs", buffer.log_probs),
            ("values", buffer.values), ("advantages", advantages), ("returns", returns),
            ("episode_starts", buffer.episode_starts))}
        samples["initial_state"] = states.view(states.shape[0], S, N, *states.shape[2:]).transpose(0, 1).reshape(
            S, -1, *states.shape[2:])
        return samples

    def minibatch_loss(self, minibatch: dict[str, torch.Tensor]) -> MinibatchLoss:
        """Every member's L on its b sequences (S, b, L, ...), replayed from their entering states."""
        def steps(tensor):  # (S, b, L, ...) → (S, L, b, ...)
            return tensor.transpose(1, 2)

        S = self.num_members
        new_log_probs, entropy, new_values = self.model.evaluate_actions(
            steps(minibatch["obs"]), steps(minibatch["actions"]), minibatch["initial_state"],
            steps(minibatch["episode_starts"]))  # each (S, L, b)
        transitions = {name: steps(minibatch[name]).reshape(S, -1) for name in SEQUENCE_FIELDS}  # (S, L·b)
        new_log_probs = new_log_probs.reshape(S, -1)
        losses, terms = self._member_losses(new_log_probs, entropy.reshape(S, -1), new_values.reshape(S, -1),
                                            transitions)
        return MinibatchLoss(loss=losses, log_ratio=new_log_probs.detach() - transitions["log_probs"], terms=terms)

    # ------------------------------------------------------------------ checkpoints
    def member_state_dict(self, member: int) -> dict:
        columns = slice(member * self.member_envs, (member + 1) * self.member_envs)
        return {**super().member_state_dict(member), "recurrent_state": self.recurrent_state[columns].clone(),
                "episode_start": self.episode_start[columns].clone()}

    def load_member_states(self, states) -> None:
        super().load_member_states(states)
        if self.continues_member_episodes(states):
            for member, state in enumerate(states):
                columns = slice(member * self.member_envs, (member + 1) * self.member_envs)
                self.recurrent_state[columns] = state["recurrent_state"].to(self.device)
                self.episode_start[columns] = state["episode_start"].to(self.device)
