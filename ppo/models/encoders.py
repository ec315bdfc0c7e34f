"""Encoders: what turns an observation into the features the policy and value heads read.

    1-D Box (or any Box read flat)   s → MLP → h                         (MLPEncoder)
    3-D Box, images ≥ 36 × 36        s → NatureCNN → h ∈ ℝ^512            (Mnih et al. 2015)
    3-D Box, smaller images          s → MinAtarCNN → h ∈ ℝ^128           (Young & Tian 2019)

`encoder = "auto"` (PPOConfig) picks by the observation space: a 3-D Box is an image, read
by NatureCNN if both its sides are at least 36 (the smallest input its three convolutions
reduce to one cell) and by MinAtarCNN otherwise; every other Box is flattened into the MLP.
"mlp", "nature-cnn" and "minatar-cnn" force one (`resolve_encoder` refuses a CNN for a
Box that is not an image it can read).

The two CNNs follow their papers:
  NatureCNN  conv 32 × 8×8 stride 4 → ReLU → conv 64 × 4×4 stride 2 → ReLU → conv 64 × 3×3
             stride 1 → ReLU → linear 512 → ReLU    (the DQN network of Mnih et al., Nature 2015,
             as CleanRL's and SB3's Atari PPO use it)
  MinAtarCNN conv 16 × 3×3 stride 1 → ReLU → linear 128 → ReLU    (the network of Young & Tian,
             "MinAtar", 2019, section 4, whose 10 × 10 × C input keeps its size: padding 0 gives 8 × 8)
Their layers are initialised as the MLP's (orthogonal, gain √2, zero bias). `hidden_sizes`
and `activation` shape the MLP only; the CNNs end in their own linear layer, with ReLU.
`shared_network` applies to a CNN as to the MLP: off (the default) the actor and the critic
each get one, twice the convolutions; CleanRL's and SB3's Atari agents share one.

An image is prepared once, inside the CNN's `forward`, so no caller does it again:
  * layout: of a 3-D shape (a, b, c), the channels are the axis that differs from two
    equal ones: (C, H, H) is channel-first and (H, H, C) channel-last whatever C is
    ((4, 84, 84) and (84, 84, 4); this project's MinAtar (C, 10, 10) and MinAtar's
    gymnasium (10, 10, C), 16 channels or 4). A rectangular image takes the shorter end
    axis as its channels (c < a: channel-last), and a cube (a = b = c) reads as
    channel-first, so an env whose images break this rule must transpose them itself.
    The rule is applied to the space when the encoder is built (`channels_last`); `forward`
    permutes a channel-last batch to (B, C, H, W).
  * scale: a uint8 space holds integers 0..high; its CNN multiplies by 1/high, the space's
    largest bound (1/255 for pixels; nothing for 0/1 planes), decided from the space, not
    from the tensor, so the rollout buffer can keep uint8 and the update sees what the
    rollout saw. Other dtypes (float, bool) are read as they are.

Observations with an action mask. A Dict observation space is accepted in one layout,

    Dict({"observation" or "image": Box, "action_mask": MultiBinary(n) or Box(n,)})

where n is the number of action logits (Discrete(n): n; MultiDiscrete(nvec): Σ nvec) and
action_mask[i] = 1 marks action (or sub-action) i as valid (gymnasium's convention, as in
its `action_mask` keys). `split_observation_space` and `split_observation` take the
encoder's part and the mask apart; the network sees the Box, the policy head the mask.
Extra keys (vectors beside an image) are not supported.
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from ppo.config import ENCODERS

ACTIVATION_LAYERS = {"tanh": nn.Tanh, "relu": nn.ReLU}
NATURE_CNN_MIN_SIDE = 36  # 36 → 8 → 3 → 1 through the three convolutions
MASK_KEY = "action_mask"
OBSERVATION_KEYS = ("observation", "image")


def init_layer(layer: nn.Module, gain: float, ortho_init: bool = True) -> nn.Module:
    """Orthogonal weights scaled by `gain` and zero bias (left as PyTorch's default if off);
    a convolution's weight is orthogonal as the (out, in·k·k) matrix it flattens to."""
    if ortho_init:
        nn.init.orthogonal_(layer.weight, gain)
        nn.init.zeros_(layer.bias)
    return layer


class ObservationShapeError(ValueError):
    """An observation whose trailing axes are not the shape the network was built for (one line)."""


def check_observation_shape(obs: torch.Tensor, obs_shape: tuple[int, ...]) -> None:
    """ObservationShapeError unless obs has shape (..., *obs_shape): leading axes are the batch's."""
    if tuple(obs.shape[obs.dim() - len(obs_shape):]) != obs_shape or obs.dim() < len(obs_shape):
        raise ObservationShapeError(
            f"observations of shape {tuple(obs.shape)} do not end in the shape {obs_shape} this network was "
            f"built for (its observation space); give it the observations of the env it was trained on")


def mlp(in_dim: int, hidden_sizes: tuple[int, ...], activation: str, ortho_init: bool) -> nn.Sequential:
    layers: list[nn.Module] = []
    for width in hidden_sizes:
        layers += [init_layer(nn.Linear(in_dim, width), math.sqrt(2), ortho_init), ACTIVATION_LAYERS[activation]()]
        in_dim = width
    return nn.Sequential(*layers)


class MLPEncoder(nn.Sequential):
    """The MLP of `mlp`, reading an observation of shape `obs_shape` as one flat vector.

    A 1-D observation goes in untouched (the layers, their names and their arithmetic are
    exactly `mlp`'s); a Box of more dimensions is flattened over its last len(obs_shape) axes.
    """

    def __init__(self, obs_shape: tuple[int, ...], hidden_sizes: tuple[int, ...], activation: str, ortho_init: bool):
        super().__init__(*mlp(int(np.prod(obs_shape)), hidden_sizes, activation, ortho_init))
        self.obs_shape = tuple(obs_shape)
        self.obs_ndim = len(obs_shape)
        self.out_dim = hidden_sizes[-1]

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        check_observation_shape(obs, self.obs_shape)
        if not obs.is_floating_point():  # integer or bool observations (a uint8 RAM state) are read as numbers
            obs = obs.to(torch.float32)
        if self.obs_ndim > 1:
            obs = obs.flatten(start_dim=obs.dim() - self.obs_ndim)
        return super().forward(obs)


def channels_last(shape: tuple[int, ...]) -> bool:
    """Whether a 3-D image shape (a, b, c) is channel-last: (H, H, C) with C ≠ H, or, when no
    two axes are equal, c < a (see the module docstring)."""
    a, b, c = shape
    if a == b != c:
        return True
    if b == c or a == c:
        return False
    return c < a


def pixel_scale(space: gym.spaces.Box) -> float | None:
    """1 / high for a uint8 space whose largest value is high > 1 (1/255 for pixels); None otherwise."""
    if space.dtype != np.uint8:
        return None
    high = int(np.max(space.high))
    return 1.0 / high if high > 1 else None


class ImageEncoder(nn.Module):
    """Image preparation (layout and scale, once) before a CNN `body` producing `out_dim` features."""

    def __init__(self, observation_space: gym.spaces.Box, body_layers, out_dim: int):
        super().__init__()
        shape = tuple(observation_space.shape)
        self.channels_last = channels_last(shape)
        self.obs_shape = shape
        self.scale = pixel_scale(observation_space)
        self.body = nn.Sequential(*body_layers)
        self.out_dim = out_dim

    def prepare(self, obs: torch.Tensor) -> torch.Tensor:
        """(..., *obs_shape) any dtype → (B, C, H, W) float32, channel-first, uint8 scaled by 1/high."""
        check_observation_shape(obs, self.obs_shape)
        images = obs.reshape(-1, *self.obs_shape).to(torch.float32)
        if self.channels_last:
            images = images.permute(0, 3, 1, 2)
        if self.scale is not None:
            images = images * self.scale
        return images

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        lead = obs.shape[: obs.dim() - 3]
        return self.body(self.prepare(obs)).reshape(*lead, self.out_dim)


def _conv_output_size(channels: int, height: int, width: int, convs: list[nn.Module]) -> int:
    with torch.no_grad():
        return int(nn.Sequential(*convs)(torch.zeros(1, channels, height, width)).numel())


class NatureCNN(ImageEncoder):
    """Mnih et al. 2015's convolutions and 512-unit layer; see the module docstring."""

    def __init__(self, observation_space: gym.spaces.Box, ortho_init: bool = True, features: int = 512):
        channels, height, width = _image_shape(observation_space)
        convs = [init_layer(nn.Conv2d(in_channels, out_channels, kernel, stride), math.sqrt(2), ortho_init)
                 for in_channels, out_channels, kernel, stride in [(channels, 32, 8, 4), (32, 64, 4, 2), (64, 64, 3, 1)]]
        flat = _conv_output_size(channels, height, width, convs)
        layers = [convs[0], nn.ReLU(), convs[1], nn.ReLU(), convs[2], nn.ReLU(), nn.Flatten(),
                  init_layer(nn.Linear(flat, features), math.sqrt(2), ortho_init), nn.ReLU()]
        super().__init__(observation_space, layers, features)


class MinAtarCNN(ImageEncoder):
    """Young & Tian 2019's network for 10 × 10 × C MinAtar images: 16 3×3 filters, 128 units."""

    def __init__(self, observation_space: gym.spaces.Box, ortho_init: bool = True, features: int = 128):
        channels, height, width = _image_shape(observation_space)
        conv = init_layer(nn.Conv2d(channels, 16, 3, 1), math.sqrt(2), ortho_init)
        flat = _conv_output_size(channels, height, width, [conv])
        layers = [conv, nn.ReLU(), nn.Flatten(), init_layer(nn.Linear(flat, features), math.sqrt(2), ortho_init),
                  nn.ReLU()]
        super().__init__(observation_space, layers, features)


def _image_shape(space: gym.spaces.Box) -> tuple[int, int, int]:
    """(C, H, W) of a 3-D image space, whichever its layout."""
    a, b, c = space.shape
    return (c, a, b) if channels_last(tuple(space.shape)) else (a, b, c)


def resolve_encoder(name: str, observation_space: gym.spaces.Box) -> str:
    """The encoder `name` ("auto" or one of ENCODERS) means for this Box; ValueError if it cannot read it."""
    if name not in ENCODERS:
        raise ValueError(f"encoder = {name!r} is not one of {', '.join(ENCODERS)}")
    shape = tuple(observation_space.shape)
    image = len(shape) == 3
    if name == "auto":
        if not image:
            return "mlp"
        _, height, width = _image_shape(observation_space)
        return "nature-cnn" if min(height, width) >= NATURE_CNN_MIN_SIDE else "minatar-cnn"
    if name != "mlp" and not image:
        raise ValueError(f"encoder = {name!r} reads 3-D image observations, not shape {shape}")
    if name == "nature-cnn" and min(_image_shape(observation_space)[1:]) < NATURE_CNN_MIN_SIDE:
        raise ValueError(f"encoder = 'nature-cnn' needs images of at least {NATURE_CNN_MIN_SIDE} × "
                         f"{NATURE_CNN_MIN_SIDE}, not shape {shape}; use 'minatar-cnn'")
    return name


def make_encoder(name: str, observation_space: gym.spaces.Box, hidden_sizes: tuple[int, ...], activation: str,
                 ortho_init: bool) -> nn.Module:
    """The encoder `name` resolves to for this Box; its output width is `.out_dim`."""
    kind = resolve_encoder(name, observation_space)
    if kind == "nature-cnn":
        return NatureCNN(observation_space, ortho_init)
    if kind == "minatar-cnn":
        return MinAtarCNN(observation_space, ortho_init)
    return MLPEncoder(tuple(observation_space.shape), hidden_sizes, activation, ortho_init)


# ---------------------------------------------------------------------- observations with an action mask
def split_observation_space(space: gym.Space) -> tuple[gym.Space, gym.Space | None]:
    """(the encoder's Box, the mask's space or None) of an observation space; a Box is returned
    as it is. ValueError for a Dict outside the layout of the module docstring."""
    if not isinstance(space, gym.spaces.Dict):
        return space, None
    keys = set(space.spaces)
    observation_keys = [key for key in OBSERVATION_KEYS if key in keys]
    if MASK_KEY not in keys or len(observation_keys) != 1 or len(keys) != 2:
        raise ValueError(f"a Dict observation must hold exactly two keys, {MASK_KEY!r} and one of "
                         f"{' or '.join(map(repr, OBSERVATION_KEYS))}; got {sorted(keys)}")
    mask_space = space.spaces[MASK_KEY]
    if not isinstance(mask_space, (gym.spaces.MultiBinary, gym.spaces.Box)) or len(mask_space.shape) != 1:
        raise ValueError(f"{MASK_KEY!r} must be a 1-D MultiBinary or Box, not {mask_space}")
    return space.spaces[observation_keys[0]], mask_space


def split_observation(raw_obs) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(observation, action mask as bool or None) of one batch: a tensor, or a dict in the
    layout of the module docstring (tensors or numpy arrays)."""
    if not isinstance(raw_obs, dict):
        return raw_obs, None
    key = next(key for key in OBSERVATION_KEYS if key in raw_obs)
    return torch.as_tensor(raw_obs[key]), torch.as_tensor(raw_obs[MASK_KEY]).bool()
