# %% [markdown]
"""
# Lecture 16 — Seeing: images, a convolutional encoder, MinAtar, and invalid-action masking

**What it teaches.** The control tasks of the earlier lectures fed the policy a short
vector of numbers that someone had already chosen well: positions, angles, velocities. A game screen is not
like that. Its state is spread over a grid of cells, the same object means the same thing
wherever it appears, and most cells say nothing. This lecture:

1. looks at a frame of <a href="../glossary.html#term-MinAtar">MinAtar</a> Breakout (Young & Tian 2019), a 10 × 10 grid of binary
   channels, one channel per kind of object;
2. builds the convolutional encoder the library puts in front of the policy and value
   heads for such images, and checks the two properties that make it the right tool:
   the same filter at every position, and image layout and pixel scale handled once, inside it;
3. goes through the Atari implementation details of <a href="../glossary.html#term-PPO">PPO</a> ("The 37 Implementation Details
   of PPO", Huang et al. 2022, its nine Atari-specific ones) and says for each whether it
   carries over to MinAtar and why, measured on the env wherever a measurement can decide it;
4. trains PPO on MinAtar Breakout with a budget this machine can afford, with two CNN
   trunks and with one shared, against a random policy's <a href="../glossary.html#term-Return">return</a> measured as the floor,
   and evaluates the result <a href="../glossary.html#term-Greedy-evaluation">greedily</a>;
5. teaches <a href="../glossary.html#term-Action-mask">invalid-action masking</a>: the masked categorical, and an experiment with
   confidence intervals over seeds that compares it with a penalty for invalid actions.

**Prerequisites.** Lectures [6](06_ppo_cartpole.ipynb)–[8](08_implementation_details.ipynb) (the loop, seeds and intervals), [11](11_fast_environments.ipynb) (batched
environments), [15](15_memory.ipynb) (<a href="../glossary.html#term-Frame-stacking">frame stacking</a>, and why a velocity needs two frames).

**Library.** `ppo/models/encoders.py` (`MinAtarCNN`, `NatureCNN`, `resolve_encoder`, channel-last
layout and uint8 scaling), `ppo/algorithm/distributions.py` (`MaskedCategoricalDistribution`),
`envs/minatar/` (`TorchBreakout`, `TorchSpaceInvaders`, `make_minatar_vec_env`, the
gymnasium registration), `envs/toy_masked.py` (the masking task),
`experiments/studies/masking_experiment.py`, `experiments/studies/learning_curves.py`,
`experiments/commands/statistics.py` (`interval_estimates`), `experiments/studies/iteration_profile.py`.
"""

# %%
import gymnasium as gym
import numpy as np
import torch

from _common import Lecture, plt, print_table
from envs.minatar import TorchBreakout, make_minatar_vec_env
from envs.minatar.gymnasium_env import drawing_channels, grid_picture
from experiments.commands.evaluation import UNLIMITED_ENV_STEP_LIMIT, evaluation_env_factory
from experiments.studies.iteration_profile import iteration_clock, time_iteration
from experiments.studies.learning_curves import curve_intervals, plot_learning_curves
from experiments.studies.masking_experiment import (SETTINGS, build_parser, curve_table, interval_text, parse_seed_list,
                                            separation, train_one)
from experiments.commands.presets import build_config
from experiments.commands.statistics import interval_estimates
from ppo.config import PPOConfig
from ppo.algorithm.distributions import MaskedCategoricalDistribution
from ppo.models.encoders import MLPEncoder, NatureCNN, make_encoder, resolve_encoder
from ppo.runs.evaluation import Policy, evaluate_policy
from ppo.trainers.ppo import PPO

lecture = Lecture("16_seeing", __doc__)
BREAKOUT = TorchBreakout.env_id

# %% [markdown]
"""
## 1. A frame of MinAtar Breakout

`make_minatar_vec_env("MinAtar/Breakout-v1", N)` steps N games as tensor code
(`envs/minatar/`, checked step for step against the `minatar` package in
`tests/test_minatar.py`). An observation is (N, 4, 10, 10) float32, channel-first, one
binary channel each for the paddle, the ball, the ball's *trail* (the cell it was in on
the previous step) and the bricks. Three actions: no-op, left, right. Below: the first
frames of one game, printed as text (`=` paddle, `o` ball, `.` trail, `#` brick) and drawn.
"""

# %%
SYMBOLS = {"paddle": "=", "ball": "o", "trail": ".", "brick": "#"}
COLOURS = {"paddle": (0.2, 0.4, 1.0), "ball": (1.0, 0.2, 0.2), "trail": (1.0, 0.7, 0.5), "brick": (0.6, 0.6, 0.6)}
CHANNELS = TorchBreakout.channels


DRAWING_ORDER = drawing_channels(TorchBreakout)  # brick, trail, paddle, ball: the ball starts inside a brick's cell


def frame_text(frame: torch.Tensor) -> list[str]:
    """(4, 10, 10) Breakout frame → 10 lines of characters."""
    lines = [["·"] * frame.shape[2] for _ in range(frame.shape[1])]
    for channel in DRAWING_ORDER:
        for y, x in torch.nonzero(frame[channel]).tolist():
            lines[y][x] = SYMBOLS[CHANNELS[channel]]
    return ["".join(line) for line in lines]


def frame_picture(frame: torch.Tensor) -> np.ndarray:
    """(4, 10, 10) → (10, 10, 3) RGB: the grid `ppo-eval --record` draws, one pixel a cell, in these colours."""
    colours = np.array([[round(255 * part) for part in COLOURS[name]] for name in CHANNELS], dtype=np.uint8)
    return grid_picture(frame.numpy(), cell_pixels=1, order=DRAWING_ORDER, colours=colours)


show_env = make_minatar_vec_env(BREAKOUT, 1, sticky_action_prob=0.0)
frames = [show_env.reset(seed=3)[0]]
for action in (2, 2, 1):  # right, right, left
    frames.append(show_env.step(torch.tensor([action])).final_obs[0])
print(f"observation space {show_env.single_observation_space}, channels {CHANNELS}, "
      f"actions {TorchBreakout.action_names}")
for row in range(10):
    print("    ".join(frame_text(frame)[row] for frame in frames))

figure, axes = plt.subplots(1, len(frames), figsize=(11, 3))
for step, (axis, frame) in enumerate(zip(axes, frames)):
    axis.imshow(frame_picture(frame), interpolation="nearest")
    axis.set_title(f"step {step}")
    axis.set_xticks([])
    axis.set_yticks([])
axes[-1].legend(handles=[plt.Rectangle((0, 0), 1, 1, color=colour) for colour in COLOURS.values()],
                labels=list(COLOURS), fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0))
lecture.save_figure(figure, "breakout_frames.png")

# %% [markdown]
r"""
## 2. The convolutional encoder

An MLP reads the 400 numbers of a frame as a flat list: the weight from "ball at (3, 4)"
has nothing to do with the weight from "ball at (3, 5)", and the network must learn what a
ball is at each of the 100 cells separately. A **convolution** slides one small filter over
the image, so the same weights look at every 3 × 3 neighbourhood: what it learns about a
ball in one place holds everywhere. `resolve_encoder("auto", space)` (`ppo/models/encoders.py`)
picks a CNN for any 3-D Box:

* `MinAtarCNN` (Young & Tian 2019) for small images: one convolution, 16 filters of
  3 × 3, then a linear layer of 128 units, ReLU after each; 10 × 10 shrinks to 8 × 8;
* `NatureCNN` (Mnih et al. 2015; CleanRL's and SB3's Atari encoder) for images of at
  least 36 × 36: three convolutions (8 × 8 stride 4, 4 × 4 stride 2, 3 × 3 stride 1)
  and 512 units.

The policy and value heads read the encoder's features as they read the MLP's.
Below, a batch of Breakout frames through the MinAtar CNN, layer by layer, and each
encoder's parameter count. Most of a CNN's parameters are in its linear layer, not in
its filters: the linear layer holds 99.6% of the MinAtar CNN's and 95.4% of NatureCNN's,
and the MinAtar CNN's convolution 592 of its 131,792. It has more parameters than the (64, 64)
MLP on the same 400 inputs (29,824), because its linear layer reads $16 \times 8 \times 8 = 1{,}024$
features; NatureCNN on four 84 × 84 frames has more than ten times as many again
(1,684,128).
"""

# %%
space = show_env.single_observation_space
chosen = resolve_encoder("auto", space)
torch.manual_seed(0)  # the encoders' initial weights, so that the numbers below reproduce
encoder = make_encoder("auto", space, (64, 64), "tanh", True)
print(f"encoder 'auto' for {tuple(space.shape)} resolves to {chosen!r}: {type(encoder).__name__}")
batch = torch.stack(frames)  # (4, 4, 10, 10)
features = encoder.prepare(batch)
print(f"  {'input':<22} {tuple(features.shape)}")
for layer in encoder.body:
    features = layer(features)
    print(f"  {type(layer).__name__:<22} {tuple(features.shape)}")


def parameter_count(module: torch.nn.Module) -> int:
    return sum(parameter.numel() for parameter in module.parameters())


atari_channels_last = gym.spaces.Box(0, 255, (84, 84, 4), dtype=np.uint8)  # four stacked 84 × 84 grey frames
encoders = {
    "MLP (64, 64) on the 400 numbers": MLPEncoder(tuple(space.shape), (64, 64), "tanh", True),
    "MinAtarCNN on (4, 10, 10)": encoder,
    "NatureCNN on (84, 84, 4)": make_encoder("auto", atari_channels_last, (64, 64), "tanh", True),
}
conv_parameters = parameter_count(encoder.body[0])
counts = {name: parameter_count(module) for name, module in encoders.items()}
print_table([{"encoder": name, "parameters": f"{count:,}", "features out": module.out_dim}
             for (name, module), count in zip(encoders.items(), counts.values())],
            title="Encoders and their parameters")
flat_features = encoder.body[3].in_features
mlp_count, minatar_count, nature_count = counts.values()
print(f"MinAtarCNN: its linear layer reads {flat_features:,} features; convolution {conv_parameters:,} parameters "
      f"({conv_parameters / minatar_count:.2%}), linear layer {parameter_count(encoder.body[3]):,}")
linear_shares = {name: sum(parameter_count(layer) for layer in module.modules() if isinstance(layer, torch.nn.Linear))
                 / counts[name] for name, module in encoders.items() if "CNN" in name}
print("the linear layer's share of the parameters: "
      + ", ".join(f"{name} {share:.1%}" for name, share in linear_shares.items()))

# %% [markdown]
"""
**The same filter everywhere.** Move the whole picture one cell to the right and the
convolution's output moves one cell to the right with it: every filter responds to a
ball's (or a brick's) new neighbourhood exactly as it did to the old one. The run checks
it on the frame of step 2 with the untrained, randomly initialised filters: in the columns where
both pictures are inside the image, the shifted input's feature map equals the
feature map shifted, to float32 rounding (within $10^{-6}$). An MLP has no such property:
the shifted frame is a different input to its first layer, whose output changes (by
more than 0.1 in some unit, printed below) with nothing to say that the picture merely
moved.

**Layout and scale, once.** Atari pipelines store frames as uint8 in 0..255, often
channel-last, (84, 84, 4); convolutions want float channel-first (4, 84, 84) in about
[0, 1]. The library decides both from the observation space when it builds the encoder
(`channels_last`, `scale`) and does them inside `forward`, so the <a href="../glossary.html#term-Rollout">rollout</a> buffer can
keep uint8 frames (a quarter of the memory) and the update sees exactly what the rollout
saw. Checked: a random uint8 frame given channel-last to a NatureCNN built for
(84, 84, 4) uint8, and the same frame permuted to channel-first and divided by 255 given
to a NatureCNN built for a float (4, 84, 84) space with the same weights, give the same
features (within $10^{-5}$). MinAtar's frames are already float 0/1, channel-first: its encoder
neither scales nor permutes.
"""

# %%
conv = encoder.body[0]
step2 = frames[2].unsqueeze(0)  # (1, 4, 10, 10)
shifted = torch.roll(step2, shifts=1, dims=3)
shifted[..., 0] = 0.0  # nothing wraps round: the column entering on the left is empty
with torch.no_grad():
    response, shifted_response = conv(step2), conv(shifted)  # (1, 16, 8, 8)
# output column j sees input columns j..j+2; shifted output column j+1 sees original columns j..j+2
equivariance_error = float((shifted_response[..., 1:] - response[..., :-1]).abs().max())
mlp_first = encoders["MLP (64, 64) on the 400 numbers"][0]
with torch.no_grad():
    mlp_change = float((mlp_first(shifted.flatten(1)) - mlp_first(step2.flatten(1))).abs().max())
print(f"largest |conv(shifted frame) − shifted conv(frame)| over the interior columns: {equivariance_error:.1e}; "
      f"the MLP's first layer moves by up to {mlp_change:.2f}")

atari_channels_first = gym.spaces.Box(0.0, 1.0, (4, 84, 84), dtype=np.float32)
uint8_encoder = encoders["NatureCNN on (84, 84, 4)"]
float_encoder = NatureCNN(atari_channels_first)
float_encoder.load_state_dict(uint8_encoder.state_dict())
pixels = torch.randint(0, 256, (2, 84, 84, 4), generator=torch.Generator().manual_seed(0), dtype=torch.uint8)
with torch.no_grad():
    from_uint8 = uint8_encoder(pixels)
    from_float = float_encoder(pixels.permute(0, 3, 1, 2).to(torch.float32) / 255.0)
layout_error = float((from_uint8 - from_float).abs().max())
print(f"NatureCNN on uint8 (84, 84, 4): channel-last {uint8_encoder.channels_last}, scale {uint8_encoder.scale:.6f} "
      f"(1/255); the MinAtar CNN: channel-last {encoder.channels_last}, scale {encoder.scale}")
print(f"largest feature difference, uint8 (84, 84, 4) against float (4, 84, 84) / 255: {layout_error:.1e}")

# %% tags=["claims"]
lecture.claim("in both CNNs the linear layer holds more than 90% of the parameters", min(linear_shares.values()) > 0.9,
              measured=", ".join(f"{share:.1%}" for share in linear_shares.values()))
lecture.claim("the MinAtar CNN's convolution holds less than 1% of its parameters",
              conv_parameters < 0.01 * minatar_count, measured=f"{conv_parameters:,} of {minatar_count:,}")
lecture.claim("the MinAtar CNN has more parameters than the (64, 64) MLP on the same inputs, because its linear "
              "layer reads 16 × 8 × 8 = 1,024 features", minatar_count > mlp_count and flat_features == 1024,
              measured=f"{minatar_count:,} against {mlp_count:,}; the linear layer reads {flat_features:,}")
lecture.claim("NatureCNN on four 84 × 84 frames has more than ten times as many again",
              nature_count > 10 * minatar_count, measured=f"{nature_count:,} against {minatar_count:,}")
lecture.claim("the shifted input's feature map equals the feature map shifted, within 10⁻⁶",
              equivariance_error < 1e-6, measured=f"largest difference {equivariance_error:.1e}")
lecture.claim("the MLP's first-layer output changes by more than 0.1 in some unit", mlp_change > 0.1,
              measured=f"largest change {mlp_change:.2f}")
lecture.claim("the uint8 channel-last frame and the float channel-first frame / 255 give the same features "
              "(within 10⁻⁵)",
              layout_error < 1e-5, measured=f"largest difference {layout_error:.1e}")
uint8_share = torch.empty(0, dtype=torch.uint8).element_size() / torch.empty(0, dtype=torch.float32).element_size()
lecture.claim("the rollout buffer can keep uint8 frames (a quarter of the memory)", uint8_share == 0.25,
              measured=f"a uint8 element takes {uint8_share} of a float32's bytes")
lecture.claim("MinAtar's encoder neither scales nor permutes",
              encoder.scale is None and not encoder.channels_last,
              measured=f"scale {encoder.scale}, channels_last {encoder.channels_last}")

# %% [markdown]
r"""
## 3. What changes in PPO with pixels: the Atari details, on MinAtar

CleanRL's `ppo_atari.py`, which "The 37 Implementation Details of PPO" (Huang et al.
2022) walks through, wraps every Atari game in a stack of preprocessing wrappers and
gives PPO a shared Nature CNN. Nine details in all. Each exists to fix something about
the Arcade Learning Environment's 210 × 160 RGB screens at 60 frames a second; the
question for each is whether MinAtar has that something. Measured below on
random play (uniform actions, 256 copies), where a measurement can decide it:

* **frame skip 4 with a max over the last two frames** (`MaxAndSkipEnv`): Atari
  frames 1/60 s apart barely differ, so the agent acts every 4th frame; some games
  draw a sprite only on every other frame (flicker), so the max of the last two frames
  shows it. A MinAtar step is already one move of every object: the ball and its trail
  are at most one cell apart in every frame (it moves one cell a step), and the ball
  and the paddle are each present, exactly once, in every frame. Does not carry over.
* **grey scale and 84 × 84** (`WarpFrame`): turns the 210 × 160 colour screen into an
  84 × 84 grey picture, a fraction of the numbers. MinAtar's 10 × 10 grid is already
  smaller than 84 × 84, and its channels are kinds of objects, not colours; every value
  in every frame is 0 or 1. Does not carry over.
* **a stack of the last 4 frames** (`FrameStack`): one Atari frame shows where the ball
  is, not where it is going ([lecture 15](15_memory.ipynb): a velocity needs two positions). MinAtar draws
  the ball's previous cell in the trail channel, so one frame holds two positions.
  Whether that settles the ball's direction is measured in section 4, on the states a
  trained agent visits: random play rarely keeps the ball up long enough for the
  question to be hard (section 4's table has it too). Does not carry over: the trail
  does the stack's work.
* **no-ops at reset** (`NoopResetEnv`: up to 30 no-op frames): the ALE without sticky
  actions is deterministic, so a fixed policy would replay one episode; random no-ops
  vary the start. MinAtar Breakout draws its start (the ball from the left or the right
  wall: both occur, each in 45–55% of the starts measured) and, as MinAtar v1 is
  registered, repeats the previous action with probability 0.1 (sticky actions, Machado et
  al. 2018): under random play the executed action differs from the chosen one on a
  share of steps close to $0.1 \times 2/3 \approx 0.067$ (within 0.01 of it). Does not carry over:
  the env is stochastic already.
* **a lost life ends the episode for training** (`EpisodicLifeEnv`): Atari Breakout has
  five lives, and ending the training episode at a lost life gives a <a href="../glossary.html#term-Termination">terminal</a> signal
  for the mistake. MinAtar Breakout has one: by its rules (`envs/minatar/breakout.py`)
  the episode ends when the ball falls past the paddle. Nothing to carry over.
* **press FIRE at reset** (`FireResetEnv`): Atari Breakout waits for FIRE to launch the
  ball. MinAtar has no FIRE in Breakout's action set, and the ball moves on the first
  step of every episode measured. Does not carry over.
* **rewards clipped to their sign** (`ClipRewardEnv`): Atari scores range over orders of
  magnitude between games, and one set of hyperparameters must serve all. In MinAtar a
  step's reward is 0 or 1 (one brick, one alien): random play in Breakout and Space
  Invaders gives no other value, so the sign is the reward itself. Clipping would do
  nothing; the library does not clip (its optional `normalize_reward` scales instead).
* **pixels divided by 255**: carries over in the encoder (section 2) for any uint8 image;
  MinAtar's frames are 0/1 floats already.
* **one CNN trunk shared by the policy and the value heads**: carries over as an option,
  `shared_network = True`. The library's default is two trunks: [lecture 8](08_implementation_details.ipynb) showed the
  <a href="../glossary.html#term-Value-loss">value loss</a> on raw returns swamping the policy's gradient on a shared trunk, and [lecture
  14](14_debugging_a_run.ipynb) what that does to a run (CleanRL's Atari agent shares its trunk with rewards clipped
  to ±1). What sharing saves is measured after the table.
"""

# %%
def direction_keys(state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """From Breakout states (N, state_dim): a key for the cells of ball, trail and paddle, one for
    ball and paddle only, and the ball's direction (dx, dy) as 0..3."""
    ball = state[:, TorchBreakout.BALL_Y] * 10 + state[:, TorchBreakout.BALL_X]
    trail = state[:, TorchBreakout.TRAIL_Y] * 10 + state[:, TorchBreakout.TRAIL_X]
    paddle = state[:, TorchBreakout.PADDLE_X]
    direction = (state[:, TorchBreakout.BALL_DX] + 1) + (state[:, TorchBreakout.BALL_DY] + 1) // 2
    return (ball * 100 + trail) * 10 + paddle, ball * 10 + paddle, direction


def best_guess_accuracy(keys: torch.Tensor, targets: torch.Tensor, classes: int = 4) -> float:
    """Share of steps whose target is the most frequent target of their key (scored on the same steps)."""
    _, key_index = torch.unique(keys, return_inverse=True)
    table = torch.zeros(int(key_index.max()) + 1, classes, dtype=torch.int64)
    table.index_put_((key_index, targets), torch.ones_like(targets), accumulate=True)
    return float(table.amax(1).sum() / len(targets))


RANDOM_ENVS = 256
RANDOM_STEPS = lecture.choose(full=1000, quick=100)
EPISODES_PER_COPY = lecture.choose(full=40, quick=4)  # each copy's first episodes make the random floor
BALL, PADDLE, TRAIL = (CHANNELS.index(name) for name in ("ball", "paddle", "trail"))
play_env = make_minatar_vec_env(BREAKOUT, RANDOM_ENVS)
obs = play_env.reset(seed=0)
action_generator = torch.Generator().manual_seed(0)
starts = torch.ones(RANDOM_ENVS, dtype=torch.bool)
running_return, running_length = torch.zeros(RANDOM_ENVS), torch.zeros(RANDOM_ENVS)
episode_returns = [[] for _ in range(RANDOM_ENVS)]  # per copy, its finished episodes' (return, length) in order
rewards, ball_counts, paddle_counts, trail_gaps, start_columns, first_moves = [], [], [], [], [], []
sticky_changed, random_keys = [], []
nonbinary = 0
for _ in range(RANDOM_STEPS):
    ball_counts.append(obs[:, BALL].flatten(1).sum(1))
    paddle_counts.append(obs[:, PADDLE].flatten(1).sum(1))
    nonbinary += int(((obs != 0) & (obs != 1)).sum())
    seen_ball = torch.nonzero(obs[:, BALL])  # (N, 3): copy, y, x, one row per copy (one ball each)
    seen_trail = torch.nonzero(obs[:, TRAIL])
    trail_gaps.append((seen_ball[:, 1:] - seen_trail[:, 1:]).abs().amax(1))
    start_columns.append(play_env.state[:, TorchBreakout.BALL_X][starts])
    random_keys.append(direction_keys(play_env.state))
    chosen = torch.randint(3, (RANDOM_ENVS,), generator=action_generator)
    result = play_env.step(chosen)
    sticky_changed.append(play_env.executed_actions != chosen)
    first_moves.append((result.final_obs[:, BALL] != obs[:, BALL]).flatten(1).any(1)[starts])
    rewards.append(result.reward)
    running_return += result.reward
    running_length += 1
    ended = result.terminated | result.truncated
    for copy in torch.nonzero(ended).flatten().tolist():
        episode_returns[copy].append((float(running_return[copy]), float(running_length[copy])))
    running_return[ended], running_length[ended] = 0.0, 0.0
    starts, obs = ended, result.obs


rewards = torch.cat(rewards)
breakout_reward_values = sorted(set(rewards.tolist()))
shortest_quota = min(len(episodes) for episodes in episode_returns)
random_episodes = np.array([episode for episodes in episode_returns for episode in episodes[:EPISODES_PER_COPY]])
random_returns, random_lengths = random_episodes[:, 0], random_episodes[:, 1]
start_columns, first_moves = torch.cat(start_columns), torch.cat(first_moves)
left_share = float((start_columns == 0).double().mean())
sticky_share = float(torch.cat(sticky_changed).double().mean())
largest_gap = int(torch.cat(trail_gaps).max())
ball_counts, paddle_counts = torch.cat(ball_counts), torch.cat(paddle_counts)

invaders = make_minatar_vec_env("MinAtar/SpaceInvaders-v1", RANDOM_ENVS)
invaders.reset(seed=0)
invader_rewards = torch.cat([invaders.step(torch.randint(4, (RANDOM_ENVS,), generator=action_generator)).reward
                             for _ in range(RANDOM_STEPS)])
invader_reward_values = sorted(set(invader_rewards.tolist()))
frames_seen = RANDOM_ENVS * RANDOM_STEPS
print(f"random play: {RANDOM_ENVS} copies × {RANDOM_STEPS} steps = {frames_seen:,} frames of each game")
print(f"Breakout rewards seen: {breakout_reward_values} ({int((rewards > 0).sum()):,} bricks); "
      f"Space Invaders: {invader_reward_values} ({int((invader_rewards > 0).sum()):,} aliens)")
print(f"balls per frame: {sorted(set(ball_counts.long().tolist()))}; paddles per frame: "
      f"{sorted(set(paddle_counts.long().tolist()))}; largest ball–trail distance: {largest_gap} cell(s); "
      f"values other than 0 and 1: {nonbinary}")
print(f"{len(start_columns):,} episode starts: ball from the left wall in {left_share:.1%}; the ball moved on the "
      f"first step in {float(first_moves.double().mean()):.1%}; executed ≠ chosen action on {sticky_share:.4f} "
      "of steps")
print(f"random policy: {len(random_returns):,} episodes (each copy's first {EPISODES_PER_COPY}), mean return "
      f"{random_returns.mean():.3f}, largest {random_returns.max():.0f}; mean length {random_lengths.mean():.1f} steps")

MEASURED = {
    "frame skip 4, max of 2": f"ball–trail ≤ {largest_gap} cell; one ball in every frame: "
                              f"{bool((ball_counts == 1).all())}",
    "grey scale, 84 × 84": f"(4, 10, 10), values 0/1 only ({nonbinary} others)",
    "stack of 4 frames": "the trail channel: section 4",
    "no-ops at reset": f"left start {left_share:.1%}; sticky {sticky_share:.3f}",
    "lost life = episode end": "one life (the rules)",
    "FIRE at reset": f"no FIRE; ball moved at step 1: {float(first_moves.double().mean()):.0%}",
    "rewards clipped to sign": f"rewards {breakout_reward_values} / {invader_reward_values}",
    "pixels / 255": f"float 0/1; scale {encoder.scale}",
    "shared CNN trunk": "option; cost measured below",
}
CARRIES = {"pixels / 255": "in the encoder", "shared CNN trunk": "an option"}
print_table([{"Atari detail": detail, "carries over": CARRIES.get(detail, "no"), "measured on MinAtar": measured}
             for detail, measured in MEASURED.items()],
            title="The Atari wrappers and network of CleanRL's ppo_atari.py, on MinAtar")


# %% [markdown]
"""
**The shared trunk, measured.** The configuration of section 4 (128 envs × 32 steps,
4 <a href="../glossary.html#term-Epoch">epochs</a> of 4 <a href="../glossary.html#term-Minibatch">minibatches</a>) with two CNN trunks, the library's default, and with one
shared by both heads. Sharing removes one CNN's parameters (the whole of one trunk,
131,792) and one CNN forward and backward pass per sample. The timing takes
<a href="../glossary.html#term-Iteration">iterations</a> in turn from each layout (`experiments.studies.iteration_profile.time_iteration`, the
timers [lecture 11](11_fast_environments.ipynb) uses; `python -m experiments.studies.iteration_profile --env-id
MinAtar/Breakout-v1` prints the same split from the shell): the shared trunk's update
takes less time than the two trunks' (less than 0.85 of it, the median over the
iterations), and its whole iteration too. Whether it learns as well is measured in
section 4, where both layouts train.
"""

# %%
BREAKOUT_CONFIG = PPOConfig(
    env_id=BREAKOUT, num_envs=128, num_steps=32, num_minibatches=4, update_epochs=4, learning_rate=1e-3,
    total_timesteps=lecture.choose(full=40, quick=2) * 128 * 32, tensorboard=False, checkpoint_every=0,
)
TIMED_ROUNDS = lecture.choose(full=4, quick=1)
layouts = {"two trunks": BREAKOUT_CONFIG, "shared trunk": BREAKOUT_CONFIG.replace(shared_network=True)}
trainers, timers, parts = {}, {}, {name: [] for name in layouts}
for name, config in layouts.items():
    trainers[name] = PPO(config, make_minatar_vec_env(BREAKOUT, config.num_envs), progress=False)
    timers[name] = iteration_clock(trainers[name])
    trainers[name].train_iteration()  # warm-up, untimed
for _ in range(TIMED_ROUNDS):
    for name in layouts:
        parts[name].append(time_iteration(trainers[name], timers[name]))
layout_rows = {}
for name in layouts:
    update_ms = 1e3 * float(np.median([row["update"] for row in parts[name]]))
    iteration_ms = 1e3 * float(np.median([sum(row.values()) for row in parts[name]]))
    layout_rows[name] = {"layout": name, "parameters": f"{parameter_count(trainers[name].model):,}",
                         "update ms": update_ms, "iteration ms": iteration_ms}
print_table(list(layout_rows.values()), title=f"One iteration of {BREAKOUT_CONFIG.batch_size:,} steps, median of "
                                              f"{TIMED_ROUNDS} (one torch thread)")

# %% tags=["claims"]
lecture.claim("the ball and its trail are at most one cell apart in every frame", largest_gap <= 1,
              measured=f"largest distance {largest_gap} over {frames_seen:,} frames")
lecture.claim("the ball and the paddle are each present, exactly once, in every frame",
              bool((ball_counts == 1).all() & (paddle_counts == 1).all()),
              measured=f"balls per frame {sorted(set(ball_counts.long().tolist()))}, paddles "
                       f"{sorted(set(paddle_counts.long().tolist()))}")
lecture.claim("every value in every frame is 0 or 1", nonbinary == 0, measured=f"{nonbinary} other values")
lecture.claim("both starts occur, each in 45–55% of the starts measured", 0.45 <= left_share <= 0.55,
              measured=f"from the left in {left_share:.1%} of {len(start_columns):,}")
lecture.claim("the executed action differs from the chosen one on a share of steps within 0.01 of 0.1 × 2/3",
              abs(sticky_share - 0.1 * 2 / 3) < 0.01, measured=f"{sticky_share:.4f}")
lecture.claim("the ball moves on the first step of every episode measured", bool(first_moves.all()),
              measured=f"{int(first_moves.sum()):,} of {len(first_moves):,} first steps")
lecture.claim("random play in Breakout and Space Invaders gives no reward but 0 and 1",
              set(breakout_reward_values) <= {0.0, 1.0} and set(invader_reward_values) <= {0.0, 1.0},
              measured=f"Breakout {breakout_reward_values}, Space Invaders {invader_reward_values}")
lecture.claim(f"every copy finished its first {EPISODES_PER_COPY} episodes (the random floor takes those)",
              shortest_quota >= EPISODES_PER_COPY, measured=f"fewest finished by one copy: {shortest_quota}",
              quick=False)
saved_parameters = parameter_count(trainers["two trunks"].model) - parameter_count(trainers["shared trunk"].model)
update_ratio = layout_rows["shared trunk"]["update ms"] / layout_rows["two trunks"]["update ms"]
iteration_ratio = layout_rows["shared trunk"]["iteration ms"] / layout_rows["two trunks"]["iteration ms"]
lecture.claim("sharing removes one CNN's parameters (131,792)", saved_parameters == minatar_count == 131_792,
              measured=f"{saved_parameters:,} fewer")
lecture.claim("the shared trunk's update takes less than 0.85 of the two trunks' time, and its whole iteration "
              "less than theirs", update_ratio < 0.85 and iteration_ratio < 1.0,
              measured=f"update ratio {update_ratio:.2f}, iteration ratio {iteration_ratio:.2f}", quick=False)

# %% [markdown]
r"""
## 4. PPO on MinAtar Breakout

The configuration above: the library's PPO with its defaults (CleanRL's: clip ε = 0.2,
<a href="../glossary.html#term-Value-clipping">value clipping</a>, <a href="../glossary.html#term-Entropy-bonus">entropy bonus</a> 0.01, γ = 0.99, λ = 0.95, Adam with $\varepsilon = 10^{-5}$, learning rate
<a href="../glossary.html#term-Learning-rate-annealing">annealed</a> to 0, <a href="../glossary.html#term-Advantage-normalisation">advantages whitened</a> per minibatch) and `encoder = "auto"`, which picks
the MinAtar CNN, with 128 envs × 32 steps per rollout and a learning rate of $10^{-3}$. The
layout and the learning rate were chosen on seeds 1–3 with two trunks (on seed 1, $10^{-3}$
rose faster than $5 \cdot 10^{-4}$, and 8 minibatches without value clipping did no better); the runs
below use seeds 11–13, never used to choose anything. The budget is 40 iterations,
163,840 steps per run, about sixty times less than the 10 million steps of the
gymnax-blines PPO run on Breakout-MinAtar (gymnax's JAX version of the game, read by an
MLP), whose checkpoint the gymnax README lists with a return of 28 (quoted, not run
here).

Each seed trains twice, with two trunks (the library's default) and with a shared
trunk, the two runs taking iterations in turn so that the machine's load falls on both
alike. Each run's curve is the mean return of its last 20 training episodes (sampled
actions) against env steps; the floor is the random policy's mean return from section 3.
At the end each run is evaluated greedily (the most likely action, sticky actions still
on) on 50 episodes of the gymnasium env `MinAtar/Breakout-v1`, the same game behind the
interface that `ppo-eval` uses, under `ppo-eval`'s step limit: MinAtar registers no time
limit, and a greedy policy that never misses would never end, so an episode of a game
registered without one stops after 1,000 steps, the length of gymnax's MinAtar episodes
on which the published PPO figures were measured.

What the run shows (the numbers are this run's): every run's curve ends at 3.65 to 4.80 bricks per episode, 9 to 12 times the
random floor of 0.39, and every run's greedy
mean is between 4.7 and 5.9. The two layouts' mean greedy returns over the
seeds, 5.15 with two trunks and 5.48 shared, are within 1 of each other, and the shared
trunk trained in 0.55 of the two trunks' time. On MinAtar, whose rewards
are 0 and 1 as clipped Atari rewards are, sharing costs nothing this run can see at this
budget, and it saves compute. (`PPOConfig`'s default stays two trunks, the safe choice on
rewards of any size; the MinAtar <a href="../glossary.html#term-Preset">preset</a>, `ppo-train --env-id MinAtar/Breakout-v1` with no
other flag, shares the trunk and trains for the published budget of 10 million steps
(`total_timesteps` 10,000,000: 2,441 iterations of 128 × 32 steps, 9,998,336 steps);
`python -m experiments.benchmarks.minatar_ppo` runs it, and the guide (its page on images and MinAtar) gives what it
reaches on seeds never used to choose it.) The table gives each run's steps per second on one
core; [lecture 11](11_fast_environments.ipynb) showed where an iteration's time goes, and here, in the table of
section 3, more than half of it is the update, the CNNs' forward and backward passes
over 4 epochs.
"""

# %%
SEEDS = lecture.choose(full=[11, 12, 13], quick=[11])
MINATAR_PRESET = build_config({"env_id": BREAKOUT})
EVAL_EPISODES = lecture.choose(full=50, quick=4)
random_floor = float(random_returns.mean())
curves = {name: {} for name in layouts}  # layout → seed → [(env steps, last-20 return)]
results = []
breakout_trainers = {}  # the two-trunk agents, for the next cell
for seed in SEEDS:
    trainers = {name: PPO(config.replace(seed=seed), make_minatar_vec_env(BREAKOUT, config.num_envs), progress=False)
                for name, config in layouts.items()}
    for name in layouts:
        curves[name][seed] = []
    for _ in range(BREAKOUT_CONFIG.num_iterations):  # the layouts take turns, so load hits both alike
        for name, trainer in trainers.items():
            metrics = trainer.train_iteration()
            curves[name][seed].append((trainer.global_step, metrics["episode_return_recent"]))
    for name, trainer in trainers.items():
        returns = evaluate_policy(Policy(trainer.model, trainer.config, None),
                                  evaluation_env_factory(BREAKOUT), episodes=EVAL_EPISODES)
        rate = trainer.global_step / trainer.train_seconds
        results.append({"layout": name, "seed": seed, "steps": f"{trainer.global_step:,}",
                        "train s": trainer.train_seconds, "steps/s": f"{rate:,.0f}",
                        "last-20 return": trainer.recent_return(), "greedy mean": float(returns.mean()),
                        "greedy min": float(returns.min()), "greedy max": float(returns.max())})
    breakout_trainers[seed] = trainers["two trunks"]
print_table(results, title=f"PPO on {BREAKOUT}, random policy's mean return {random_floor:.3f}; greedy over "
                           f"{EVAL_EPISODES} episodes per run")


def per_layout(column: str, name: str) -> list[float]:
    return [row[column] for row in results if row["layout"] == name]


greedy_means = {name: float(np.mean(per_layout("greedy mean", name))) for name in layouts}
time_share = sum(per_layout("train s", "shared trunk")) / sum(per_layout("train s", "two trunks"))
print(f"mean greedy return over the seeds: " + ", ".join(f"{name} {value:.2f}" for name, value in greedy_means.items())
      + f"; the shared trunk's training time / the two trunks': {time_share:.2f}")

# %%
figure, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
for axis, name in zip(axes, layouts):
    for seed in SEEDS:
        greedy_mean = next(row["greedy mean"] for row in results if row["layout"] == name and row["seed"] == seed)
        axis.plot([step for step, _ in curves[name][seed]], [value for _, value in curves[name][seed]], lw=1.5,
                  label=f"seed {seed}: greedy {greedy_mean:.1f} at the end")
    axis.axhline(random_floor, color="black", ls=":", lw=1, label=f"random policy ({random_floor:.2f})")
    axis.set_xlabel("environment steps")
    axis.set_title(f"{name}")
    axis.set_ylim(bottom=0)
    axis.legend(fontsize=8, loc="upper left")
axes[0].set_ylabel("return, last 20 training episodes")
figure.suptitle(f"PPO on {BREAKOUT}: MinAtar CNN, {BREAKOUT_CONFIG.num_envs} envs × {BREAKOUT_CONFIG.num_steps} steps")
lecture.save_figure(figure, "breakout_learning_curves.png")

# %% [markdown]
"""
**What one frame knows, on a trained agent's states.** Section 3 left one question: does
the trail channel give the ball's direction, so that no stack of frames is needed? Each
seed's two-trunk agent plays 64 copies for 400 steps (sampled actions, as in training).
Every step is grouped by the cells of the ball, the trail and the paddle in its frame,
and the ball's direction (dx, dy) is read from the env's hidden state. The best any
function of those cells can do is to answer each group's most frequent direction
(scored on the very same steps, an upper bound). With the trail, that guess is right on
every step, for every seed's agent (and in random play): the frame settles the
direction. Without the trail channel (ball and paddle only), it is wrong on more than a
fifth of the steps for every agent (right on 70% to 77% of them in the run shown): a
ball at a given cell may be going up or down. In random play, whose episodes last 10
steps on average, ball and paddle alone give the direction on 94.7% of the steps: the question only becomes hard
once an agent keeps the ball in play. The trail is the second frame of [lecture 15](15_memory.ipynb)'s
stack, drawn into the first.
"""

# %%
TRAIL_STEPS = lecture.choose(full=400, quick=40)


def direction_row(label: str, keyed: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]) -> dict:
    with_trail, without_trail, directions = (torch.cat(column) for column in zip(*keyed))
    return {"states of": label, "steps": len(directions),
            "ball, trail, paddle": best_guess_accuracy(with_trail, directions),
            "ball, paddle": best_guess_accuracy(without_trail, directions)}


direction_rows = []
for seed in SEEDS:
    trail_env = make_minatar_vec_env(BREAKOUT, 64)
    obs = trail_env.reset(seed=20_000 + seed)  # not a training seed's stream
    policy = Policy(breakout_trainers[seed].model, BREAKOUT_CONFIG, None)
    generator = torch.Generator().manual_seed(20_000 + seed)
    keyed = []
    for _ in range(TRAIL_STEPS):
        keyed.append(direction_keys(trail_env.state))  # the hidden state behind `obs`
        obs = trail_env.step(policy.act(obs, greedy=False, generator=generator)).obs
    direction_rows.append(direction_row(f"seed {seed}'s agent", keyed))
random_row = direction_row("random play (section 3)", random_keys)
print_table(direction_rows + [random_row], digits=4,
            title="Best-guess accuracy of the ball's direction from the cells of one frame")

# %% tags=["claims"]
def listed(column: str) -> str:
    return "; ".join(f"{name}: " + ", ".join(f"{value:.2f}" for value in per_layout(column, name)) for name in layouts)


steps_per_run = BREAKOUT_CONFIG.num_iterations * BREAKOUT_CONFIG.batch_size
two_trunks = layout_rows["two trunks"]
lecture.claim("more than half of an iteration is the update",
              two_trunks["update ms"] > 0.5 * two_trunks["iteration ms"],
              measured=f"update {two_trunks['update ms']:.0f} ms of {two_trunks['iteration ms']:.0f} ms")
lecture.claim("the budget is 40 iterations, 163,840 steps per run, about sixty times less than 10 million",
              (BREAKOUT_CONFIG.num_iterations, steps_per_run) == (40, 163_840) and 55 < 1e7 / steps_per_run < 65,
              measured=f"{BREAKOUT_CONFIG.num_iterations} iterations, {steps_per_run:,} steps, "
                       f"10M / steps = {1e7 / steps_per_run:.1f}", quick=False)
lecture.claim("an evaluation episode of a game registered without a time limit stops after 1,000 steps",
              gym.spec(BREAKOUT).max_episode_steps is None and UNLIMITED_ENV_STEP_LIMIT == 1_000,
              measured=f"registered limit {gym.spec(BREAKOUT).max_episode_steps}, step limit {UNLIMITED_ENV_STEP_LIMIT:,}")
lecture.claim("the MinAtar preset shares the trunk and trains for 10 million steps (total_timesteps 10,000,000: "
              "2,441 iterations of 128 × 32 steps, 9,998,336 steps)",
              (MINATAR_PRESET.shared_network, MINATAR_PRESET.total_timesteps, MINATAR_PRESET.num_iterations,
               MINATAR_PRESET.batch_size) == (True, 10_000_000, 2_441, 128 * 32),
              measured=f"shared_network {MINATAR_PRESET.shared_network}, total_timesteps "
                       f"{MINATAR_PRESET.total_timesteps:,}: {MINATAR_PRESET.num_iterations:,} iterations of "
                       f"{MINATAR_PRESET.batch_size:,}, {MINATAR_PRESET.num_iterations * MINATAR_PRESET.batch_size:,} steps")
lecture.claim("the floor is below 0.5 bricks per episode", random_floor < 0.5, measured=f"{random_floor:.3f}")
lecture.claim("every run's curve ends more than five times above the random floor",
              min(row["last-20 return"] for row in results) > 5 * random_floor,
              measured=listed("last-20 return") + f"; floor {random_floor:.3f}", quick=False)
lecture.claim("every run's greedy mean is above 3", min(row["greedy mean"] for row in results) > 3,
              measured=listed("greedy mean"), quick=False)
lecture.claim("the two layouts' mean greedy returns over the seeds are within 1 of each other",
              abs(greedy_means["shared trunk"] - greedy_means["two trunks"]) < 1,
              measured=", ".join(f"{name} {value:.2f}" for name, value in greedy_means.items()), quick=False)
lecture.claim("the shared trunk trained in less than 0.8 of the two trunks' time", time_share < 0.8,
              measured=f"{time_share:.2f}", quick=False)
lecture.claim("with the trail, that guess is right on every step, for every seed's agent (and in random play)",
              all(row["ball, trail, paddle"] == 1.0 for row in direction_rows + [random_row]),
              measured=", ".join(f"{row['ball, trail, paddle']:.4f}" for row in direction_rows + [random_row]))
lecture.claim("without the trail channel it is wrong on more than a fifth of the steps for every agent",
              max(row["ball, paddle"] for row in direction_rows) < 0.8,
              measured=", ".join(f"{row['ball, paddle']:.4f}" for row in direction_rows), quick=False)
lecture.claim("random episodes last fewer than 20 steps on average", random_lengths.mean() < 20,
              measured=f"{random_lengths.mean():.1f} steps")
lecture.claim("in random play, ball and paddle alone give the direction on more than 90% of the steps",
              random_row["ball, paddle"] > 0.9, measured=f"{random_row['ball, paddle']:.4f}")

# %% [markdown]
r"""
## 5. Invalid-action masking

In many games some actions are impossible in some states: a unit that cannot move
there, a card not in hand, FIRE while the cannon cools down. Two ways to handle them:

* **a penalty**: let the policy choose any action and answer an invalid one with a
  negative reward (and no effect). The policy must learn, from rewards alone, which
  actions are valid in which state, and meanwhile it spends samples on them.
* **a mask** (Huang & Ontañón 2022; sb3-contrib's `MaskablePPO`): the env says which
  actions are valid, and the policy's logits of the others are replaced by the most
  negative float before the softmax (`ppo.algorithm.distributions.MaskedCategoricalDistribution`):

  $$
  \pi(a \mid s) = \operatorname{softmax}(\tilde z)_a, \qquad
  \tilde z_a = \begin{cases} z_a & \text{if } a \text{ is valid},\\ -3.4 \cdot 10^{38} & \text{else,} \end{cases}
  $$

  so an invalid action has probability exactly 0 and is never sampled; the entropy sums
  over the valid actions only; and no gradient reaches an invalid action's logit (the
  replacement is a `torch.where`). The same mask goes into the rollout's sampling, the
  update's recomputed $\log \pi$ and entropy, and evaluation, so the <a href="../glossary.html#term-Importance-ratio">ratio</a> $r_t(\theta)$ compares
  like with like. An env offers a mask as a Dict observation, `{"observation": ...,
  "action_mask": ...}` (gymnasium's convention), and the trainer applies it
  (`ppo/models/encoders.py`, `split_observation`).

First the distribution on one state with four actions, two of them valid: the invalid
actions' probabilities and their logits' gradients are exactly 0, and the entropy is the
entropy of the two valid actions' renormalised probabilities.
"""

# %%
logits = torch.tensor([[2.0, 0.5, -1.0, 1.0]], requires_grad=True)
valid = torch.tensor([[True, False, True, False]])
masked = MaskedCategoricalDistribution(logits, valid)
masked.log_prob(torch.tensor([0])).sum().backward()
masked_entropy = float(masked.entropy().detach())
renormalised = torch.softmax(logits.detach()[valid], dim=0)
expected_entropy = float(-(renormalised * renormalised.log()).sum())
print(f"logits {logits.detach()[0].tolist()}, valid {valid[0].tolist()}")
print(f"π = {[round(p, 4) for p in masked.probs.detach()[0].tolist()]}; entropy {masked_entropy:.6f} "
      f"(of the valid pair alone: {expected_entropy:.6f}); ∂ log π(a=0) / ∂z = "
      f"{[round(g, 4) for g in logits.grad[0].tolist()]}")

# %% [markdown]
r"""
**The experiment** (`experiments/studies/masking_experiment.py`, whose functions run here). A
toy task (`envs/toy_masked.py`): each step, 3 of 32 actions are valid, drawn afresh, and
one of them is the target, shown as a one-hot vector; choosing it earns 1, an episode is
8 steps. With the mask the policy sees the target and the env's mask; with the penalty it
sees the target and the valid set as 32 more inputs, and an invalid action earns −0.1.
The same PPO (16 envs × 32 steps, learning rate $2.5 \cdot 10^{-3}$), the same budget of 15,360
steps; seeds 200–204 (the module chose its budget and learning rate on seeds 1–3, and the
sentences below were written from a run on seeds 100–104). Each run is scored greedily
at 11 points of its training, from before the first update to the end: the share of
steps on which it chose the target (1 at best; a uniform choice
among the valid actions gets $1/3$). The tables give the <a href="../glossary.html#term-IQM">IQM</a> over the 5 seeds with 95%
<a href="../glossary.html#term-Bootstrap-confidence-interval">stratified-bootstrap intervals</a> (`experiments.commands.statistics.interval_estimates`, [lecture 7](07_diagnostics_and_tuning.ipynb)),
the curve's intervals from `experiments.studies.learning_curves.curve_intervals`.

What the run shows: with the mask, the IQM is above 0.95 from the second point on (after
3 iterations; 0.977 in the run shown) and ends at 1; the penalty ends far below, at
0.678 [0.636, 0.725], and its interval lies below the mask's at
every point, the first by construction (the untrained masked policy already chooses
among the valid actions only). At the end the penalty's policy still chooses an invalid
action on 9.1% of the steps, fewer than the 91.9% at the start.
"""

# %%
MASK_SEEDS = lecture.choose(full="200-204", quick="200-201")
mask_args = build_parser().parse_args(
    ["--seeds", MASK_SEEDS] + lecture.choose(full=[], quick=["--total-timesteps", "1536", "--curve-points", "4",
                                                              "--eval-envs", "200", "--curve-eval-envs", "100"]))
mask_seeds = parse_seed_list(mask_args.seeds)
runs = {setting: [train_one(mask_args, setting, seed) for seed in mask_seeds] for setting in SETTINGS}
final_intervals = interval_estimates({setting: np.array([run["target_rate"] for run in results])
                                      for setting, results in runs.items()})
print_table([{"setting": setting, "IQM [95% CI]": interval_text(final_intervals[setting], "iqm"),
              "mean [95% CI]": interval_text(final_intervals[setting], "mean"),
              "invalid rate (mean)": float(np.mean([run["invalid_rate"] for run in runs[setting]]))}
             for setting in SETTINGS],
            title=f"{mask_args.num_actions} actions, {mask_args.num_valid} valid per step, "
                  f"{mask_args.total_timesteps:,} steps per run, seeds {mask_seeds[0]}–{mask_seeds[-1]}: greedy "
                  f"target rate at the end ({mask_args.eval_envs} episodes per run)")
target_curves = {setting: np.array([[point["target_rate"] for point in run["curve"]] for run in results])
                 for setting, results in runs.items()}
curve_rows = curve_intervals(target_curves)
print(f"\nlearning curves: greedy target rate, IQM [95% CI] over the {len(mask_seeds)} seeds; the penalty's "
      f"invalid rate (mean); {mask_args.curve_eval_envs} episodes per point, the last {mask_args.eval_envs}")
print("\n".join(curve_table(runs, curve_rows)))
curve_steps = [point["env_steps"] for point in runs[SETTINGS[0]][0]["curve"]]
plot_path = plot_learning_curves(lecture.path("masking_curves.png"), curve_steps, curve_rows, len(mask_seeds),
                                 "greedy target rate", f"{mask_args.num_actions} actions, {mask_args.num_valid} valid "
                                 "per step", 1 / mask_args.num_valid)
lecture.wrote(plot_path)


# %% [markdown]
"""
Why the gap. The masked policy's first sample is already a valid action, and every
update is spent telling the target from two other candidates. The penalised policy
starts with 29 of 32 actions wrong in every state and must learn the valid set itself, a
different set each step, from a small negative reward; its samples on invalid actions
teach it only what not to do. The mask removes that whole part of the problem; it needs
the env to know which actions are valid, which games and simulators usually do.
"""

# %% tags=["claims"]
lecture.claim("the invalid actions' probabilities and their logits' gradients are exactly 0",
              bool((masked.probs.detach()[~valid] == 0).all() & (logits.grad[~valid] == 0).all()),
              measured=f"probabilities {masked.probs.detach()[~valid].tolist()}, "
                       f"gradients {logits.grad[~valid].tolist()}")
lecture.claim("the entropy is that of the valid actions' renormalised probabilities (within 10⁻⁶)",
              abs(masked_entropy - expected_entropy) < 1e-6,
              measured=f"{masked_entropy:.7f} against {expected_entropy:.7f}")
mask_iqm = [row["iqm"] for row in curve_rows["mask"]]
penalty_invalid = np.mean([[point["invalid_rate"] for point in run["curve"]] for run in runs["penalty"]], axis=0)
apart = [separation(penalty_row, mask_row) for mask_row, penalty_row in zip(curve_rows["mask"], curve_rows["penalty"])]
lecture.claim("with the mask, the IQM is above 0.95 from the second point on and ends at 1",
              min(mask_iqm[1:]) > 0.95 and mask_iqm[-1] == 1.0,
              measured="IQM " + ", ".join(f"{value:.3f}" for value in mask_iqm), quick=False)
lecture.claim("the penalty ends far below, under 0.8", final_intervals["penalty"]["iqm"] < 0.8,
              measured=f"IQM {interval_text(final_intervals['penalty'], 'iqm')}", quick=False)
lecture.claim("its interval lies below the mask's at every point", all(apart),
              measured=f"apart at {sum(apart)} of {len(apart)} points", quick=False)
lecture.claim("at the end the penalty's policy still chooses an invalid action on more than 5% of the steps, fewer "
              "than at the start", 0.05 < penalty_invalid[-1] < penalty_invalid[0],
              measured=f"invalid rate {penalty_invalid[0]:.3f} at the start, {penalty_invalid[-1]:.3f} at the end",
              quick=False)

# %% [markdown]
"""
## What to take away

* A CNN reads an image with the same filters at every position; the library picks one
  from the observation space (`encoder = "auto"`), and handles layout and uint8 scale once,
  inside the encoder.
* The Atari preprocessing exists for the Atari screen: 60 Hz frames, flicker, colour at
  210 × 160, one frame without motion, deterministic starts, a FIRE to launch, five
  lives, scores of any size. MinAtar has none of these (measured above wherever a
  measurement could decide), so none of those wrappers is needed; the shared trunk
  remains a choice, cheaper per update and, on MinAtar's rewards of 0 and 1, within 1
  brick of two trunks' greedy return at this budget.
* PPO with the MinAtar CNN learns Breakout on one CPU core well above a random player in
  164 thousand steps, still far from what 10 million steps reach.
* Where the env knows the valid actions, mask them: the masked policy solves the toy
  task in a few iterations, while a penalty leaves the same PPO far behind.

Exercises: train Breakout for 1 million steps with the preset (`ppo-train --env-id
MinAtar/Breakout-v1 --total-timesteps 1000000`, its shared trunk) and with
`--no-shared-network` added, and see whether the two layouts part; train
`MinAtar/SpaceInvaders-v1` the same way; run `python -m
experiments.studies.masking_experiment` with `--num-valid 8` or a larger `--penalty` and see how
the gap changes.
"""

# %%
lecture.finish()
