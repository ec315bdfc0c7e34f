"""PPO with action masks and image observations: the masks are stored and replayed (ratio = 1
on the first minibatch), a masked policy never takes an invalid action, learns the toy task,
and its checkpoint evaluates under the mask; spaces the trainer cannot take are refused."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from envs.toy_masked import MaskedChoiceVecEnv
from ppo.config import ConfigError, PPOConfig
from ppo.runs.evaluation import load_policy
from envs.stacked_vec_env import StackedVecEnv
from ppo.trainers.ppo import PPO, check_spaces
from ppo.vec_env import StepResult

# as tests/test_trainer.py: a few float32 ulps of 1.0 from batch-shape-dependent rounding
RATIO_ONE_TOLERANCE = 32 * torch.finfo(torch.float32).eps

MASKED = dict(env_id="MaskedChoice", num_envs=8, num_steps=32, num_minibatches=4, total_timesteps=8 * 32 * 3,
              tensorboard=False)


class MaskedImageVecEnv:
    """N copies of a random task on uint8 channel-last images (10, 10, 3) with an action mask,
    and MultiDiscrete([3, 4]) actions: reward 1 when the first action names the brightest
    channel. Each step draws new images and a new mask (sub-space 2 always allows action 0)."""

    def __init__(self, num_envs: int):
        self.num_envs, self.device = num_envs, torch.device("cpu")
        self.single_observation_space = gym.spaces.Dict({
            "image": gym.spaces.Box(0, 255, (10, 10, 3), dtype=np.uint8),
            "action_mask": gym.spaces.MultiBinary(7),
        })
        self.single_action_space = gym.spaces.MultiDiscrete([3, 4])
        self.generator = torch.Generator()

    def _observation(self):
        images = torch.randint(0, 256, (self.num_envs, 10, 10, 3), dtype=torch.uint8, generator=self.generator)
        mask = torch.rand(self.num_envs, 7, generator=self.generator) < 0.5
        mask[:, 0] = True  # sub-space 1 keeps action 0
        mask[:, 3] = True  # sub-space 2 keeps action 0
        self.images, self.mask = images, mask
        return {"image": images, "action_mask": mask}

    def reset(self, seed=None):
        self.generator.manual_seed(seed or 0)
        return self._observation()

    def step(self, actions):
        valid = self.mask[:, :3].gather(1, actions[:, :1]).all(1) & self.mask[:, 3:].gather(1, actions[:, 1:]).all(1)
        assert bool(valid.all()), "an invalid action reached the env"
        brightest = self.images.float().mean(dim=(1, 2)).argmax(1)
        reward = (actions[:, 0] == brightest).float()
        done = torch.zeros(self.num_envs, dtype=torch.bool)
        obs = self._observation()
        return StepResult(obs=obs, reward=reward, terminated=done, truncated=done, final_obs=obs)

    def close(self):
        pass


def test_masked_choice_env_marks_num_valid_actions_and_a_valid_target():
    env = MaskedChoiceVecEnv(64, num_actions=16, num_valid=3)
    obs = env.reset(seed=0)
    assert obs["action_mask"].sum(1).eq(3).all()
    target = obs["observation"].argmax(1)
    assert obs["action_mask"].gather(1, target.unsqueeze(1)).all()
    result = env.step(target)
    assert torch.equal(result.reward, torch.ones(64))


@pytest.mark.parametrize("make_envs, config", [
    (lambda: MaskedChoiceVecEnv(8), PPOConfig(**MASKED)),
    (lambda: MaskedImageVecEnv(8), PPOConfig(**{**MASKED, "env_id": "MaskedImage"})),
])
def test_first_minibatch_ratio_is_one_with_masks_and_images(make_envs, config):
    trainer = PPO(config, make_envs(), progress=False)
    errors = []
    trainer.train(callback=lambda ppo, metrics: errors.append(metrics["first_minibatch_ratio_error"]))
    assert len(errors) == 3 and max(errors) <= RATIO_ONE_TOLERANCE
    buffer = trainer.buffer
    assert buffer.action_masks is not None and buffer.action_masks.shape[:2] == (32, 8)
    # the stored masks matter: without them the stored actions' log-probs are not the rollout's
    obs, actions = buffer.obs.flatten(0, 1), buffer.actions.flatten(0, 1)  # (T·N, ...)
    with torch.no_grad():
        unmasked, _, _ = trainer.model.evaluate_actions(obs, actions)
        masked, _, _ = trainer.model.evaluate_actions(obs, actions, buffer.action_masks.flatten(0, 1))
    assert (unmasked - masked).abs().max() > 1e-2


def test_uint8_images_are_stored_raw_and_scaled_only_in_the_encoder():
    trainer = PPO(PPOConfig(**{**MASKED, "env_id": "MaskedImage", "total_timesteps": 256}), MaskedImageVecEnv(8),
                  progress=False)
    trainer.train()
    assert trainer.buffer.obs.dtype == torch.uint8 and trainer.buffer.obs.shape == (32, 8, 10, 10, 3)
    assert trainer.buffer.obs.max() > 200  # raw pixels, not pre-scaled ones
    obs, mask = trainer.buffer.obs[-1], trainer.buffer.action_masks[-1]
    encoder = trainer.model.actor_body
    by_hand = encoder.body(obs.float().permute(0, 3, 1, 2) / 255.0)  # one scaling, channel-first
    assert torch.allclose(encoder(obs), by_hand, atol=1e-6)


def test_masked_ppo_learns_the_toy_task_and_never_takes_an_invalid_action():
    # random over the 3 valid actions earns 8 / 3 ≈ 2.7 per episode, the best policy 8; the env
    # raises if an invalid action reaches it, so finishing the run shows none did
    config = PPOConfig(env_id="MaskedChoice", num_envs=16, num_steps=32, total_timesteps=16 * 32 * 30,
                       learning_rate=2.5e-3, tensorboard=False, seed=3)
    trainer = PPO(config, MaskedChoiceVecEnv(16), progress=False)
    trainer.train()
    assert trainer.recent_return() > 6.0


def test_a_masked_checkpoint_evaluates_under_the_mask(tmp_path):
    config = PPOConfig(**{**MASKED, "total_timesteps": 256})
    PPO(config, MaskedChoiceVecEnv(8), run_dir=tmp_path, progress=False).train()
    raw = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    assert raw["spaces"]["observation"]["type"] == "dict"
    policy = load_policy(tmp_path)
    env = MaskedChoiceVecEnv(500)
    obs = env.reset(seed=1)
    for greedy in (True, False):
        actions = policy.act(obs, greedy=greedy, generator=torch.Generator().manual_seed(0))
        assert bool(obs["action_mask"].gather(1, actions.unsqueeze(1)).all())
    numpy_obs = {key: value.numpy() for key, value in obs.items()}  # as a gymnasium vector env gives them
    actions = policy.env_actions(numpy_obs, env.single_action_space, greedy=False,
                                 generator=torch.Generator().manual_seed(0))
    assert np.take_along_axis(numpy_obs["action_mask"], actions[:, None], 1).all()


MASK = gym.spaces.MultiBinary(4)
BOX = gym.spaces.Box(-1, 1, (3,))


@pytest.mark.parametrize("observation_space, action_space, message", [
    (gym.spaces.Dict({"observation": BOX, "action_mask": MASK}), gym.spaces.Discrete(5),
     "action_mask has 4 entries but action space Discrete.5. needs one per action .5."),
    (gym.spaces.Dict({"observation": BOX, "action_mask": MASK}), gym.spaces.Box(-1, 1, (4,)),
     "a mask goes with Discrete and MultiDiscrete"),
    (gym.spaces.Dict({"observation": BOX, "vector": BOX, "action_mask": MASK}), gym.spaces.Discrete(4),
     "exactly two keys"),
    (BOX, gym.spaces.MultiDiscrete([[2, 2]]), "MultiDiscrete .1-D, from 0."),
])
def test_spaces_the_trainer_cannot_take_are_refused_in_one_line(observation_space, action_space, message):
    with pytest.raises(ConfigError, match=message):
        check_spaces(observation_space, action_space, "Toy-v0")


@pytest.mark.parametrize("make_envs, config", [
    (MaskedChoiceVecEnv, PPOConfig(**MASKED)),
    # uint8 channel-last images read by the CNN, a mask over MultiDiscrete([3, 4]) actions
    (MaskedImageVecEnv, PPOConfig(**{**MASKED, "env_id": "MaskedImage"})),
])
def test_a_seed_batch_of_masked_and_image_runs_is_each_seeds_own_run(make_envs, config):
    """The stack maps each member's network over its own copies (MemberNetworks): one iteration of
    member s lands within float32 rounding of seed s's single run, with the same draws and steps."""
    seeds = [5, 2]
    envs = StackedVecEnv([make_envs(config.num_envs) for _ in seeds])
    batch = PPO(config, envs, seeds=seeds, progress=False)
    assert type(batch.model).__name__ == "MemberNetworks"
    batch_metrics = batch.train_iteration()
    for member, seed in enumerate(seeds):
        single = PPO(config.replace(seed=seed), make_envs(config.num_envs), progress=False)
        metrics = single.train_iteration()
        assert torch.equal(batch.buffer.actions[:, member * 8:(member + 1) * 8], single.buffer.actions), seed
        assert torch.equal(batch.buffer.action_masks[:, member * 8:(member + 1) * 8], single.buffer.action_masks)
        for name in ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "grad_norm"):
            assert batch_metrics[member][name] == pytest.approx(metrics[name], rel=1e-4, abs=1e-6), (seed, name)
        assert batch_metrics[member]["gradient_steps"] == metrics["gradient_steps"]
        difference = (batch.optimizer.flat_params[member] - single.optimizer.flat_params).abs().max()
        assert float(difference) < 1e-5, seed


@pytest.mark.parametrize("overrides, message", [
    ({"normalize_obs": True}, "uint8 images.*normalize_obs"),
    ({"recurrent": "gru"}, "recurrent = 'gru' supports 1-D Box"),
    ({"encoder": "nature-cnn"}, "nature-cnn.*at least 36"),
])
def test_settings_that_cannot_read_images_are_refused(overrides, message):
    with pytest.raises(ConfigError, match=message):
        PPO(PPOConfig(**{**MASKED, "env_id": "MaskedImage", **overrides}), MaskedImageVecEnv(8), progress=False)
