"""Run a trained policy on gymnasium environments and report its returns.

    policy = load_policy("runs/CartPole-v1__seed1")                    # network, config, frozen obs statistics
    returns = evaluate_policy(policy, lambda: gym.make("CartPole-v1"), episodes=100)

The caller says which environment with a function that makes one copy (the commands use
gymnasium's own implementation of the env, whatever backend trained the policy; for
CartPole-v1 gymnasium's numpy-vectorised version, offered by the function's `make_vec`).
Observation statistics stay frozen as they were at the end of training. Episodes are
split evenly over parallel copies, each running a fixed quota, so short episodes are not
over-counted (taking "the first n episodes to finish" from parallel envs would bias the
mean towards short ones). A recurrent policy (ppo.models.recurrent_networks) carries its state
through each episode, zeroed at every episode's first observation. Sampled actions (greedy=False) come from a generator seeded
with the evaluation's seed, so the same seed gives the same returns.

A policy loaded from a checkpoint keeps the spaces it was trained on, and is refused, in one
line (SpaceMismatch), an env whose spaces differ from them (`same_space`): an env changed
since training, or another env than the run's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import gymnasium as gym
import numpy as np
import torch

from ppo.runs.checkpoint import CheckpointError, load_checkpoint
from ppo.config import ConfigError, PPOConfig
from ppo.algorithm.distributions import GUMBEL_SAMPLED
from ppo.models.encoders import MASK_KEY, split_observation, split_observation_space
from ppo.models.networks import ActorCritic, spaces_from_dict
from ppo.models.normalize import ObservationNormalizer
from ppo.models.recurrent_networks import RecurrentActorCritic, actor_critic_from_config

EVAL_SEED_OFFSET = 10_000  # evaluation episodes never reuse the training seeds


@dataclass
class Policy:
    """What acting needs from a run: the network, its config, frozen obs statistics, and for
    a recurrent network the state of the copies it is acting in (`reset_state` forgets it)."""

    model: ActorCritic | RecurrentActorCritic
    config: PPOConfig
    obs_normalizer: ObservationNormalizer | None
    state: torch.Tensor | None = field(default=None, repr=False)  # (B, K, S) recurrent state
    observation_space: gym.Space | None = field(default=None, repr=False)  # the spaces it was trained on,
    action_space: gym.Space | None = field(default=None, repr=False)  # where known (load_policy)

    def check_env_spaces(self, observation_space: gym.Space, action_space: gym.Space) -> None:
        """SpaceMismatch (one line, naming both spaces) if an env with these spaces is not one the
        policy was trained on (`same_space`); a policy whose spaces are unknown accepts any."""
        differences = [
            f"the env has {kind} space {one_line(given)}, but the policy was trained on "
            f"{self.config.env_id} with {kind} space {one_line(trained)}"
            for kind, trained, given, bounds in (("observation", self.observation_space, observation_space, False),
                                                 ("action", self.action_space, action_space, True))
            if trained is not None and not same_space(trained, given, bounds)
        ]
        if differences:
            raise SpaceMismatch("; ".join(differences))

    def reset_state(self) -> None:
        """Forget the recurrent state: the next call starts new episodes in every copy."""
        self.state = None

    @torch.inference_mode()
    def act(self, raw_obs: torch.Tensor, greedy: bool = True, generator: torch.Generator | None = None,
            episode_start: torch.Tensor | None = None) -> torch.Tensor:
        """The greedy action, or a ~ π(· | s) drawn with `generator` (torch's global one if None).

        A recurrent policy reads `raw_obs` (B, ...) as the next step of B copies: their state
        goes on, zeroed where `episode_start` (B,) is set (in every copy at the first call,
        or after `reset_state`, or when B changes). A Dict observation's action mask is applied.
        """
        raw_obs, mask = split_observation(raw_obs)
        obs = raw_obs if self.obs_normalizer is None else self.obs_normalizer.normalize(raw_obs)
        if not isinstance(self.model, RecurrentActorCritic):
            masked = {} if mask is None else {"mask": mask}
            if greedy:
                return self.model.greedy_action(obs, **masked)
            return sample_action(self.model.distribution(obs, **masked), generator)
        if self.state is None or len(self.state) != len(obs):
            self.state = self.model.initial_state(len(obs), obs.device)
            episode_start = torch.ones(len(obs), dtype=torch.bool, device=obs.device)
        elif episode_start is None:
            episode_start = torch.zeros(len(obs), dtype=torch.bool, device=obs.device)
        if greedy:
            action, self.state = self.model.greedy_action(obs, self.state, episode_start)
            return action
        distribution, self.state = self.model.distribution(obs, self.state, episode_start)
        return sample_action(distribution, generator)

    def env_actions(self, raw_obs: np.ndarray, action_space: gym.Space, greedy: bool = True,
                    generator: torch.Generator | None = None, episode_start: np.ndarray | None = None) -> np.ndarray:
        """Actions for a batch of gymnasium observations, as numpy; Box actions are
        clipped to the bounds (the Gaussian is unbounded, the env is not). `episode_start`
        (B,) marks the copies whose observation is an episode's first (recurrent policies)."""
        starts = None if episode_start is None else torch.as_tensor(episode_start, dtype=torch.bool)
        if isinstance(raw_obs, dict):  # an observation with an action mask (ppo.models.encoders)
            raw_obs = {key: torch.as_tensor(value, dtype=torch.bool if key == MASK_KEY else torch.float32)
                       for key, value in raw_obs.items()}
        else:
            raw_obs = torch.as_tensor(raw_obs, dtype=torch.float32)
        action = self.act(raw_obs, greedy, generator, starts).numpy()
        if isinstance(action_space, gym.spaces.Box):
            action = np.clip(action, action_space.low, action_space.high)
        return action


class SpaceMismatch(CheckpointError):
    """A policy was given an env whose spaces differ from those it was trained on; one-line message."""


def same_space(trained: gym.Space, given: gym.Space, bounds: bool = False) -> bool:
    """Whether a policy trained on space `trained` can act in space `given`, compared structurally:
    the same type, and the same shape and dtype (Box), n (Discrete, MultiBinary), nvec
    (MultiDiscrete), or keys with the same spaces under them (Dict). With `bounds`, a Box's low
    and high must be equal too: that of an action space, since actions are clipped to them."""
    if type(trained) is not type(given):
        return False
    if isinstance(trained, gym.spaces.Dict):
        return set(trained.keys()) == set(given.keys()) and all(
            same_space(trained[key], given[key], bounds) for key in trained.keys())
    if isinstance(trained, gym.spaces.Box):
        return trained.shape == given.shape and trained.dtype == given.dtype and (
            not bounds or (np.array_equal(trained.low, given.low) and np.array_equal(trained.high, given.high)))
    if isinstance(trained, gym.spaces.MultiDiscrete):
        return np.array_equal(trained.nvec, given.nvec)
    if isinstance(trained, (gym.spaces.Discrete, gym.spaces.MultiBinary)):
        return np.array_equal(trained.n, given.n)
    return trained == given


def one_line(space: gym.Space) -> str:
    """gymnasium's text for `space` on one line (numpy wraps long bounds over several)."""
    return " ".join(str(space).split())


def sample_action(distribution, generator: torch.Generator | None = None) -> torch.Tensor:
    """a ~ π(· | s) with randomness from `generator`: the Gumbel-max draw of a categorical
    π (U ~ U(0, 1) per logit), or μ + σ·z, z ~ N(0, I), for the Gaussian of Box actions."""
    if isinstance(distribution, GUMBEL_SAMPLED):  # categorical, masked or multi-discrete
        logits = distribution.log_probs  # (B, n)
        uniform = torch.rand(logits.shape, generator=generator, dtype=logits.dtype)  # on the generator's device
        return distribution.sample(uniform.to(logits.device))
    normal = distribution.base_dist  # Independent(Normal(μ, σ), 1)
    noise = torch.randn(normal.loc.shape, generator=generator, dtype=normal.loc.dtype)
    return normal.loc + normal.scale * noise.to(normal.loc.device)


def load_policy(path) -> Policy:
    """Rebuild the policy of a checkpoint file or run folder (CheckpointError if unusable).

    The checkpoint holds everything needed: the config, the network's weights, the
    observation and action spaces, and the observation statistics.
    """
    state = load_checkpoint(path, required_keys=("model", "config", "spaces"))
    try:
        config = PPOConfig.from_dict(state["config"]).validate()
        observation_space, action_space = spaces_from_dict(state["spaces"])
        model = actor_critic_from_config(config, observation_space, action_space)
    except (ConfigError, TypeError, ValueError) as error:
        raise CheckpointError(f"checkpoint {path} has an unusable config ({error})") from None
    try:
        model.load_state_dict(state["model"])
    except RuntimeError as error:
        raise CheckpointError(f"checkpoint {path} does not match its config ({str(error).splitlines()[0][:120]})") from None
    model.eval()
    normalizer = None
    if state.get("obs_normalizer"):
        normalizer = ObservationNormalizer(tuple(split_observation_space(observation_space)[0].shape))
        normalizer.load_state_dict(state["obs_normalizer"])
        normalizer.training = False
    return Policy(model, config, normalizer, observation_space=observation_space, action_space=action_space)


def evaluate_policy(
    policy: Policy,
    make_env: Callable[[], gym.Env],
    episodes: int = 100,
    greedy: bool = True,
    seed: int | None = None,
    num_envs: int | None = None,
) -> np.ndarray:
    """Returns of `episodes` complete episodes on copies made by `make_env` (float array).

    Copy i runs a quota of ⌊episodes / N⌋ episodes (the first episodes mod N copies one
    more), so every copy contributes a fixed number whatever their lengths. If `make_env`
    has a `make_vec(N)` that gives a gymnasium vector env (gymnasium's numpy-vectorised
    CartPole, through `envs.factory.gymnasium_env_factory`), the N copies are that one env,
    all episodes at once by default (N = episodes, at most 100), seeded with `seed`;
    otherwise N single copies (25 by default) stepped one after another, copy i seeded with
    seed + i. `seed` defaults to the run's seed + EVAL_SEED_OFFSET; sampled actions come from
    a torch generator seeded with it too. SpaceMismatch if the env's spaces are not those the
    policy was trained on (`Policy.check_env_spaces`).
    """
    seed = policy.config.seed + EVAL_SEED_OFFSET if seed is None else seed
    make_vec = getattr(make_env, "make_vec", None)
    envs = make_vec(num_envs or min(episodes, 100)) if make_vec is not None else None
    if envs is None:
        envs = gym.vector.SyncVectorEnv(
            [make_env for _ in range(num_envs or min(episodes, 25))],
            autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
        )
    try:
        policy.check_env_spaces(envs.single_observation_space, envs.single_action_space)
        return _run_episodes(policy, envs, episodes, greedy, seed)
    finally:
        envs.close()


def _run_episodes(policy: Policy, envs: gym.vector.VectorEnv, episodes: int, greedy: bool, seed: int) -> np.ndarray:
    """Step `envs` until every copy has finished its quota of episodes.

    In NEXT_STEP autoreset mode (gymnasium's vector envs), the step after an episode's
    last one only resets that copy: its reward is 0 and its action is ignored, so it
    counts towards no episode. A recurrent policy's state is zeroed at the observation
    that begins an episode: the one `reset` returns, the one after an episode's last step
    (SAME_STEP), or the one the reset step returns (NEXT_STEP).
    """
    num_envs = envs.num_envs
    quotas = np.full(num_envs, episodes // num_envs)
    quotas[: episodes % num_envs] += 1
    next_step_reset = envs.metadata.get("autoreset_mode") == gym.vector.AutoresetMode.NEXT_STEP
    obs, _ = envs.reset(seed=seed)
    policy.reset_state()
    episode_start = np.ones(num_envs, dtype=bool)  # obs is an episode's first observation
    generator = torch.Generator().manual_seed(seed)  # the actions' randomness when sampling
    running = np.zeros(num_envs)
    resetting = np.zeros(num_envs, dtype=bool)  # NEXT_STEP: this step restarts the copy
    returns: list[list[float]] = [[] for _ in range(num_envs)]
    done_counts = np.zeros(num_envs, dtype=np.int64)
    while np.any(done_counts < quotas):
        action = policy.env_actions(obs, envs.single_action_space, greedy, generator, episode_start)
        obs, reward, terminated, truncated, _ = envs.step(action)
        running += np.where(resetting, 0.0, reward)
        ended = (terminated | truncated) & ~resetting
        episode_start = resetting if next_step_reset else ended
        for i in np.flatnonzero(ended):
            if done_counts[i] < quotas[i]:
                returns[i].append(float(running[i]))
                done_counts[i] += 1
            running[i] = 0.0
        resetting = ended if next_step_reset else resetting
    return np.array([value for per_env in returns for value in per_env])
