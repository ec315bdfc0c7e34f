"""ppo-eval --record: one episode, acted as in evaluation, written as an animated GIF."""

import sys

import pytest

from envs.factory import gymnasium_env_factory
from experiments.commands.evaluate import RECORDING_NAME, main
from experiments.commands.train import training_envs
from ppo.config import ConfigError, PPOConfig
from ppo.runs.evaluation import evaluate_policy, load_policy
from ppo.runs.recording import record_episode
from ppo.trainers.ppo import PPO

CARTPOLE = gymnasium_env_factory("CartPole-v1")
RENDERED_CARTPOLE = gymnasium_env_factory("CartPole-v1", render_mode="rgb_array")
TINY_CARTPOLE = dict(env_id="CartPole-v1", env_backend="gymnasium", num_envs=4, num_steps=64, total_timesteps=512,
                     normalize_obs=True, tensorboard=False)


@pytest.fixture(scope="module")
def cartpole_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("cartpole")
    config = PPOConfig(**TINY_CARTPOLE)
    PPO(config, training_envs(config), run_dir=run_dir, progress=False).train()
    return run_dir


def test_record_writes_every_frame_of_the_greedy_evaluation_episode(cartpole_run, capsys):
    pytest.importorskip("pygame")
    image = pytest.importorskip("PIL.Image")
    assert main([str(cartpole_run), "--record", "--episodes", "1", "--seed", "123"]) == 0
    assert "recorded one greedy episode" in capsys.readouterr().out

    gif = image.open(cartpole_run / RECORDING_NAME)
    assert gif.format == "GIF" and gif.size == (600, 400)  # CartPole's screen
    # The same episode as the first greedy evaluation episode on that seed, with the
    # frozen normalisation: CartPole pays 1 per step, and there is one frame per step
    # plus the start, each shown for 20 ms (render_fps 50). Pillow merges identical
    # consecutive frames and adds their durations, so compare the total play time.
    (evaluation_return,) = evaluate_policy(load_policy(cartpole_run), CARTPOLE, episodes=1, seed=123, num_envs=1)
    play_time_ms = 0
    for index in range(gif.n_frames):
        gif.seek(index)
        play_time_ms += gif.info["duration"]
    assert play_time_ms == (int(evaluation_return) + 1) * 20


def test_recorded_return_matches_evaluation_on_the_same_seed(cartpole_run, tmp_path):
    pytest.importorskip("pygame")
    pytest.importorskip("PIL")
    policy = load_policy(cartpole_run)
    result = record_episode(policy, RENDERED_CARTPOLE, tmp_path / "episode.gif", seed=7)
    (evaluation_return,) = evaluate_policy(policy, CARTPOLE, episodes=1, seed=7, num_envs=1)
    assert result["return"] == evaluation_return
    assert result["frames"] == evaluation_return + 1 and result["fps"] == 50


def test_sampled_recording_replays_from_its_seed_alone(cartpole_run, tmp_path):
    """--record --sample: the actions' randomness comes from the seed, not torch's global generator."""
    import torch

    pytest.importorskip("pygame")
    pytest.importorskip("PIL")
    policy = load_policy(cartpole_run)
    recorded = []
    for global_seed in (0, 1):
        torch.manual_seed(global_seed)  # must not matter
        recorded.append(record_episode(policy, RENDERED_CARTPOLE, tmp_path / "episode.gif", seed=7, greedy=False))
    assert recorded[0]["return"] == recorded[1]["return"]
    # the same episode as the first sampled evaluation episode on that seed (same env seed, same generator)
    (evaluation_return,) = evaluate_policy(policy, CARTPOLE, episodes=1, seed=7, num_envs=1, greedy=False)
    assert recorded[0]["return"] == evaluation_return


def test_missing_renderer_is_one_line_naming_the_extra(cartpole_run, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pygame", None)  # `import pygame` now raises ImportError
    with pytest.raises(ConfigError, match=r"optional extra 'record'") as error:
        record_episode(load_policy(cartpole_run), RENDERED_CARTPOLE, tmp_path / "episode.gif")
    assert "\n" not in str(error.value)
    assert not (tmp_path / "episode.gif").exists()


def test_a_minatar_run_records_its_grid_at_the_games_frame_rate(tmp_path):
    """MinAtar's envs draw their grid (envs.minatar.gymnasium_env.grid_picture): one frame per step plus the
    start, 160 × 160, each shown for 100 ms (render_fps 10)."""
    image = pytest.importorskip("PIL.Image")
    config = PPOConfig(env_id="MinAtar/Breakout-v1", num_envs=8, num_steps=16, total_timesteps=128, tensorboard=False)
    PPO(config, training_envs(config), run_dir=tmp_path, progress=False).train()
    policy = load_policy(tmp_path)
    result = record_episode(policy, gymnasium_env_factory(config.env_id, render_mode="rgb_array"),
                            tmp_path / "episode.gif", seed=5)
    gif = image.open(tmp_path / "episode.gif")
    assert gif.size == (160, 160) and result["fps"] == 10
    (evaluation_return,) = evaluate_policy(policy, gymnasium_env_factory(config.env_id), episodes=1, seed=5, num_envs=1)
    assert result["return"] == evaluation_return
    play_time_ms = 0
    for index in range(gif.n_frames):
        gif.seek(index)
        play_time_ms += gif.info["duration"]
    assert play_time_ms == result["frames"] * 100
