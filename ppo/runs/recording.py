"""Record one episode of a trained policy as an animated GIF.

The episode runs on an env the caller makes, with ``render_mode="rgb_array"`` (the
command passes gymnasium's own): after the reset and after every step, ``env.render()``
returns the picture as an (height, width, 3) uint8 array. The policy acts exactly as in evaluation (greedy by
default, observation statistics frozen, Box actions clipped to the bounds), and the
frames are written at the env's own ``render_fps``, so the animation plays in real time.

Rendering needs packages the core install lacks (pygame for classic control and Box2D,
Pillow to write the GIF): the optional extra 'record'. On a machine without a display,
pygame uses SDL's dummy video driver and MuJoCo renders offscreen through EGL, unless
SDL_VIDEODRIVER / MUJOCO_GL say otherwise.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import gymnasium as gym
import numpy as np
import torch

from ppo.config import ConfigError
from ppo.runs.evaluation import EVAL_SEED_OFFSET, Policy

RECORD_EXTRA_HINT = "pip install -c constraints.txt -e '.[record]'"
DEFAULT_FPS = 30


def _missing_record_extra(error: Exception) -> ConfigError:
    return ConfigError(
        f"recording needs the optional extra 'record': {RECORD_EXTRA_HINT} ({str(error).splitlines()[0]})"
    )


def prepare_headless_rendering() -> None:
    """Environment variables for offscreen rendering, set only where the user set none."""
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # pygame draws off-screen; no window needed
        os.environ.setdefault("MUJOCO_GL", "egl")  # read when the first MuJoCo renderer is made


def run_rendered_episode(
    policy: Policy, make_env: Callable[[], gym.Env], seed: int, greedy: bool = True
) -> tuple[list[np.ndarray], float, int]:
    """Play one episode on `make_env()` (render_mode="rgb_array"); return (frames, return, render fps).

    frames[0] shows the start state and frames[t] the state after step t. Sampled actions
    (greedy=False) come from a torch generator seeded with `seed`, as in evaluate_policy,
    so the same seed replays the same episode. SpaceMismatch if the env's spaces are not
    those the policy was trained on.
    """
    prepare_headless_rendering()
    generator = torch.Generator().manual_seed(seed)
    env_id = policy.config.env_id
    env = make_env()
    try:
        policy.check_env_spaces(env.observation_space, env.action_space)
        obs, _ = env.reset(seed=seed)
        policy.reset_state()  # a recurrent policy starts the episode from a zero state
        try:
            frames = [env.render()]
        except (gym.error.DependencyNotInstalled, ImportError) as error:
            raise _missing_record_extra(error) from None
        except Exception as error:  # e.g. MuJoCo without an OpenGL backend; not a bug of ours
            raise ConfigError(
                f"cannot render {env_id} here ({str(error).splitlines()[0]}); for MuJoCo try MUJOCO_GL=egl or osmesa"
            ) from None
        total, done = 0.0, False
        while not done:
            action = policy.env_actions(obs[None], env.action_space, greedy, generator)[0]
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            done = terminated or truncated
            frames.append(env.render())
        fps = int(env.metadata.get("render_fps") or DEFAULT_FPS)
    finally:
        env.close()
    return frames, total, fps


def _pillow_image_module():
    try:
        from PIL import Image
    except ImportError as error:
        raise _missing_record_extra(error) from None
    return Image


def write_gif(frames: list[np.ndarray], path: str | Path, fps: int) -> Path:
    """Write (H, W, 3) uint8 frames as a looping GIF shown at `fps` frames per second."""
    Image = _pillow_image_module()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    images = [Image.fromarray(np.asarray(frame, dtype=np.uint8)) for frame in frames]
    # GIF stores frame durations in hundredths of a second; Pillow takes milliseconds.
    duration_ms = max(20, round(1000 / fps / 10) * 10)
    images[0].save(path, save_all=True, append_images=images[1:], duration=duration_ms, loop=0, optimize=False)
    return path


def record_episode(
    policy: Policy, make_env: Callable[[], gym.Env], path: str | Path, seed: int | None = None, greedy: bool = True
) -> dict:
    """Record one episode of `policy` on `make_env()` to the GIF `path`; return what was recorded.

    `seed` defaults to the first evaluation seed (the run's seed + EVAL_SEED_OFFSET).
    """
    _pillow_image_module()  # a missing extra is reported before the episode is played
    seed = policy.config.seed + EVAL_SEED_OFFSET if seed is None else seed
    frames, episode_return, fps = run_rendered_episode(policy, make_env, seed, greedy)
    write_gif(frames, path, fps)
    return {"path": str(path), "frames": len(frames), "return": episode_return, "fps": fps, "seed": seed}
