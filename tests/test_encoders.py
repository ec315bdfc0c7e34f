"""Encoders: the CNN is chosen from the observation space, a channel-last image is read as
its channel-first twin, uint8 pixels are scaled by 1/255 exactly once, and spaces with
shape survive a weights_only checkpoint."""

import io

import gymnasium as gym
import numpy as np
import pytest
import torch

from ppo.config import ConfigError, PPOConfig
from ppo.models.encoders import (
    MinAtarCNN,
    MLPEncoder,
    NatureCNN,
    channels_last,
    make_encoder,
    mlp,
    resolve_encoder,
    split_observation_space,
)
from ppo.models.networks import ActorCritic, spaces_from_dict, spaces_to_dict

ATARI = gym.spaces.Box(0, 255, (84, 84, 4), dtype=np.uint8)  # channel-last frames
MINATAR = gym.spaces.Box(0.0, 1.0, (4, 10, 10), dtype=np.float32)  # this project's MinAtar: channel-first


def build(name, space):
    return make_encoder(name, space, (64, 64), "tanh", ortho_init=True)


@pytest.mark.parametrize("shape, expected", [((84, 84, 4), True), ((4, 84, 84), False), ((10, 10, 7), True),
                                             ((7, 10, 10), False), ((10, 10, 10), False),
                                             ((16, 10, 10), False), ((10, 10, 16), True),  # more channels than rows
                                             ((210, 160, 3), True), ((3, 210, 160), False)])
def test_channels_last_rule(shape, expected):
    assert channels_last(shape) is expected


@pytest.mark.parametrize("high, dtype, scale", [(255, np.uint8, 1 / 255), (1, np.uint8, None), (15, np.uint8, 1 / 15),
                                                (1.0, np.float32, None)])
def test_integer_images_are_scaled_by_their_spaces_largest_value(high, dtype, scale):
    """A uint8 image of 0/1 planes is read as it is, not divided by 255."""
    encoder = build("minatar-cnn", gym.spaces.Box(0, high, (4, 10, 10), dtype=dtype))
    assert encoder.scale == scale
    planes = torch.randint(0, 2, (2, 4, 10, 10), dtype=torch.uint8 if dtype == np.uint8 else torch.float32)
    prepared = encoder.prepare(planes)
    assert torch.equal(prepared, planes.float() * (scale if scale is not None else 1.0))


@pytest.mark.parametrize("space, kind", [(gym.spaces.Box(-1, 1, (4,)), "mlp"), (ATARI, "nature-cnn"),
                                         (MINATAR, "minatar-cnn"),
                                         (gym.spaces.Box(0, 1, (10, 10, 6), dtype=np.float32), "minatar-cnn"),
                                         (gym.spaces.Box(-1, 1, (3, 5)), "mlp")])
def test_auto_picks_the_encoder_from_the_space(space, kind):
    assert resolve_encoder("auto", space) == kind


def test_a_cnn_the_space_cannot_feed_is_refused_in_one_line():
    with pytest.raises(ValueError, match="nature-cnn.*at least 36"):
        resolve_encoder("nature-cnn", MINATAR)
    with pytest.raises(ValueError, match="3-D image"):
        resolve_encoder("minatar-cnn", gym.spaces.Box(-1, 1, (4,)))
    with pytest.raises(ConfigError, match="encoder = 'resnet'"):
        PPOConfig(encoder="resnet").validate()


def test_output_shapes_and_leading_axes():
    torch.manual_seed(0)
    nature, small = build("auto", ATARI), build("auto", MINATAR)
    assert isinstance(nature, NatureCNN) and isinstance(small, MinAtarCNN)
    assert nature(torch.randint(0, 256, (3, 84, 84, 4), dtype=torch.uint8)).shape == (3, 512)
    assert small(torch.rand(5, 4, 10, 10)).shape == (5, 128)
    assert small(torch.rand(2, 5, 4, 10, 10)).shape == (2, 5, 128)  # (T, B, ...) as well as (B, ...)


def test_a_channel_last_image_gives_the_features_of_its_channel_first_twin():
    torch.manual_seed(0)
    first = build("minatar-cnn", MINATAR)
    last = build("minatar-cnn", gym.spaces.Box(0.0, 1.0, (10, 10, 4), dtype=np.float32))
    last.load_state_dict(first.state_dict())
    images = torch.rand(6, 4, 10, 10)
    # the same arithmetic on a permuted (non-contiguous) input: equal to float32 rounding
    assert torch.allclose(last(images.permute(0, 2, 3, 1)), first(images), atol=1e-6)
    assert not torch.allclose(last(images.permute(0, 3, 2, 1)), first(images), atol=1e-3)  # layout matters


def test_uint8_pixels_are_scaled_once_by_one_over_255():
    torch.manual_seed(0)
    encoder = build("nature-cnn", gym.spaces.Box(0, 255, (4, 36, 36), dtype=np.uint8))
    pixels = torch.randint(0, 256, (2, 4, 36, 36), dtype=torch.uint8)
    # by hand: the first convolution's output at (0, 0) is Σ w · x/255 + b
    conv = encoder.body[0]
    window = pixels[:, :, :8, :8].to(torch.float32) / 255.0
    by_hand = (conv.weight[0] * window).sum(dim=(1, 2, 3)) + conv.bias[0]
    assert torch.allclose(conv(encoder.prepare(pixels))[:, 0, 0, 0], by_hand, atol=1e-5)
    # the float32 copy of the same pixels (an env that converts) is scaled the same: the space decides
    assert torch.equal(encoder(pixels), encoder(pixels.to(torch.float32)))
    # float images are read as they are
    float_encoder = build("minatar-cnn", MINATAR)
    images = torch.rand(2, 4, 10, 10)
    assert torch.equal(float_encoder.prepare(images), images)


def test_the_mlp_encoder_is_the_mlp_for_flat_observations_and_flattens_others():
    torch.manual_seed(3)
    encoder = MLPEncoder((4,), (8, 8), "tanh", ortho_init=True)
    torch.manual_seed(3)
    reference = mlp(4, (8, 8), "tanh", ortho_init=True)
    assert list(encoder.state_dict()) == list(reference.state_dict())  # checkpoints keep their names
    obs = torch.randn(5, 4)
    assert torch.equal(encoder(obs), reference(obs))
    flat = MLPEncoder((2, 3), (8,), "relu", ortho_init=True)
    obs = torch.randn(5, 2, 3)
    assert torch.equal(flat(obs), torch.nn.Sequential.forward(flat, obs.reshape(5, 6)))  # its layers on the flat rows


def test_dict_layout_is_checked():
    box = gym.spaces.Box(-1, 1, (3,))
    assert split_observation_space(gym.spaces.Dict({"observation": box, "action_mask": gym.spaces.MultiBinary(4)}))[0] is box
    with pytest.raises(ValueError, match="exactly two keys"):
        split_observation_space(gym.spaces.Dict({"observation": box, "extra": box, "action_mask": gym.spaces.MultiBinary(4)}))
    with pytest.raises(ValueError, match="exactly two keys"):
        split_observation_space(gym.spaces.Dict({"observation": box}))


@pytest.mark.parametrize("observation_space, action_space", [
    (ATARI, gym.spaces.Discrete(6)),
    (MINATAR, gym.spaces.MultiDiscrete([3, 2])),
    (gym.spaces.Dict({"image": MINATAR, "action_mask": gym.spaces.MultiBinary(5)}), gym.spaces.MultiDiscrete([3, 2])),
])
def test_spaces_with_shape_round_trip_through_a_weights_only_checkpoint(observation_space, action_space):
    buffer = io.BytesIO()
    torch.save(spaces_to_dict(observation_space, action_space), buffer)
    buffer.seek(0)
    loaded = spaces_from_dict(torch.load(buffer, weights_only=True))
    assert loaded == (observation_space, action_space)
    model = ActorCritic(*loaded, encoder="auto")  # the network a checkpoint rebuilds
    assert isinstance(model.actor_body, (NatureCNN, MinAtarCNN))
