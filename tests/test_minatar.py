"""The batched MinAtar games step exactly like the `minatar` package's.

The lockstep tests run N of the package's v1 gymnasium envs (`minatar.gym.BaseEnv`, built
directly, so gymnasium's registry keeps this project's ids) side by side with one batched
env of N copies, sticky actions off: same state, same random actions, and at every step
the whole observation, the reward, the termination and the whole hidden state (timers,
directions, the struck-a-brick flag) must be equal. Everything is integer arithmetic, so
equality is exact.

Randomness the two sides cannot share: Breakout's ball start. When a copy's episode ends,
the batched env has already drawn a fresh start; the test checks it is one of the
package's start states, resets the package's copy and writes that start into it. The
"planted" runs instead draw random mid-game states (few bricks, few aliens, bullets in
flight, a faster formation) and write them into both sides, so that the rare events of
random play (all bricks cleared, a wave cleared, the formation reaching the bottom) come
often. The `minatar` package is GPL-licensed: an optional test dependency (the extra
`minatar`); without it these tests skip.
"""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch

from envs.factory import check_env_id, gymnasium_env_factory, make_vec_env, resolve_backend
from envs.minatar import MINATAR_ENV_IDS, TorchBreakout, TorchSpaceInvaders, make_minatar_vec_env
from envs.minatar.gymnasium_env import MinAtarGymnasiumEnv

GAMES = {"MinAtar/Breakout-v1": "breakout", "MinAtar/SpaceInvaders-v1": "space_invaders"}
BREAKOUT_DIRECTIONS = {0: (-1, -1), 1: (1, -1), 2: (1, 1), 3: (-1, 1)}  # the package's ball_dir → (dx, dy)
POWERS = 1 << np.arange(10)


@pytest.fixture
def reference():
    """A function making one of the `minatar` package's v1 gymnasium envs (skips without the package)."""
    minatar_gym = pytest.importorskip("minatar.gym")

    def make(env_id: str, sticky_action_prob: float = 0.0):
        return minatar_gym.BaseEnv(GAMES[env_id], use_minimal_action_set=True, sticky_action_prob=sticky_action_prob)

    return make


# ----- the package's game state as the batched env's state row, and back -------------------


def bitboard(cells: np.ndarray) -> list[int]:
    """(rows, 10) 0/1 map → one integer per row, bit x = column x."""
    return [int(v) for v in (np.asarray(cells).astype(np.int64) * POWERS).sum(1)]


def cells(rows) -> np.ndarray:
    """The inverse of `bitboard`: integers → (len(rows), 10) float map."""
    return ((np.asarray(rows, dtype=np.int64)[:, None] >> np.arange(10)) & 1).astype(float)


def read_breakout(game) -> list[int]:
    assert not game.brick_map[[0, 4, 5, 6, 7, 8, 9]].any()  # bricks only ever lie in rows 1-3
    dx, dy = BREAKOUT_DIRECTIONS[game.ball_dir]
    return [game.ball_x, game.ball_y, dx, dy, game.pos, game.last_x, game.last_y, int(game.strike), 0,
            *bitboard(game.brick_map[1:4])]


def write_breakout(game, row) -> None:
    game.ball_x, game.ball_y, dx, dy, game.pos, game.last_x, game.last_y, strike, _ = (int(v) for v in row[:9])
    game.ball_dir = {direction: code for code, direction in BREAKOUT_DIRECTIONS.items()}[(dx, dy)]
    game.strike = bool(strike)
    game.brick_map = np.zeros((10, 10))
    game.brick_map[1:4] = cells(row[9:12])


def plant_breakout(game, rng) -> None:
    """A random mid-game state: a sparse wall (or none), the ball anywhere above the paddle row."""
    game.brick_map = np.zeros((10, 10))
    game.brick_map[1:4] = rng.random((3, 10)) < rng.choice([0.0, 0.05, 0.2, 0.5])
    game.ball_x, game.ball_y, game.ball_dir = int(rng.integers(10)), int(rng.integers(9)), int(rng.integers(4))
    game.last_x, game.last_y, game.pos, game.strike = game.ball_x, game.ball_y, int(rng.integers(10)), False


def read_space_invaders(game) -> list[int]:
    assert game.ramp_index == 12 - game.enemy_move_interval
    return [game.pos, game.alien_dir, game.enemy_move_interval, game.alien_move_timer, game.alien_shot_timer,
            game.shot_timer, 0, *bitboard(game.alien_map), *bitboard(game.f_bullet_map), *bitboard(game.e_bullet_map)]


def write_space_invaders(game, row) -> None:
    (game.pos, game.alien_dir, game.enemy_move_interval, game.alien_move_timer, game.alien_shot_timer,
     game.shot_timer) = (int(v) for v in row[:6])
    game.ramp_index = 12 - game.enemy_move_interval
    game.alien_map, game.f_bullet_map, game.e_bullet_map = cells(row[7:17]), cells(row[17:27]), cells(row[27:37])


def plant_space_invaders(game, rng) -> None:
    """A random mid-game state: a few aliens anywhere, bullets in flight, timers and speed at random."""
    game.alien_map = (rng.random((10, 10)) < rng.choice([0.03, 0.1, 0.3])).astype(float)
    game.alien_map[int(rng.integers(9)), int(rng.integers(10))] = 1  # at least one alien
    game.f_bullet_map = (rng.random((10, 10)) < 0.05).astype(float)
    game.f_bullet_map[9] = 0  # the cannon's bullets never rest on the bottom row between steps
    game.e_bullet_map = (rng.random((10, 10)) < 0.05).astype(float)
    game.alien_dir = int(rng.choice([-1, 1]))
    game.enemy_move_interval = int(rng.integers(6, 13))
    game.ramp_index = 12 - game.enemy_move_interval
    game.alien_move_timer = int(rng.integers(game.enemy_move_interval + 1))
    game.alien_shot_timer = int(rng.integers(11))
    game.shot_timer, game.pos = int(rng.integers(5)), int(rng.integers(10))


STATE_CODEC = {
    "MinAtar/Breakout-v1": (read_breakout, write_breakout, plant_breakout),
    "MinAtar/SpaceInvaders-v1": (read_space_invaders, write_space_invaders, plant_space_invaders),
}


def compared_columns(env) -> list[int]:
    """Every state row but the last executed action (the package keeps it outside the game)."""
    return [row for row in range(env.state_dim) if row != env.last_action_row]


def reference_start_states(make_reference, env_id: str) -> set[tuple[int, ...]]:
    """The package's start states (two for Breakout, one for Space Invaders) over 40 seeded resets."""
    read = STATE_CODEC[env_id][0]
    starts = set()
    for seed in range(40):
        env = make_reference(env_id)
        env.reset(seed=seed)
        starts.add(tuple(read(env.game.env)))
    return starts


# ----- lockstep -------------------------------------------------------------------------------


def run_lockstep(make_reference, env_id, num_envs, steps, seed, planted=False, reset_by_index=True):
    """Step both sides together, compare everything; returns our states before and after every step."""
    read, write, plant = STATE_CODEC[env_id]
    ours = make_minatar_vec_env(env_id, num_envs, seed=seed, sticky_action_prob=0.0)
    ours.reset_by_index = reset_by_index
    ours.reset(seed=seed)
    references = [make_reference(env_id) for _ in range(num_envs)]
    starts = reference_start_states(make_reference, env_id)
    rng = np.random.default_rng(seed)
    columns = compared_columns(ours)

    def start_episode(i, our_row):
        references[i].reset(seed=seed + i)
        if planted:
            plant(references[i].game.env, rng)
        else:
            assert tuple(our_row[columns]) in {tuple(np.asarray(start)[columns]) for start in starts}
            write(references[i].game.env, our_row)

    for i in range(num_envs):
        start_episode(i, ours.state[i].numpy())
    ours.set_state(torch.tensor([read(env.game.env) for env in references]))
    expected = np.stack([env.game.state() for env in references]).transpose(0, 3, 1, 2)
    np.testing.assert_array_equal(ours._observe(ours._state).numpy(), expected)

    transitions = []
    for _ in range(steps):
        before = ours.state.clone()
        actions = rng.integers(ours.single_action_space.n, size=num_envs)
        result = ours.step(torch.as_tensor(actions))
        outcomes = [env.step(int(action)) for env, action in zip(references, actions)]

        reference_obs = np.stack([o[0] for o in outcomes]).transpose(0, 3, 1, 2)  # (N, C, 10, 10)
        np.testing.assert_array_equal(result.final_obs.numpy(), reference_obs.astype(np.float32))
        np.testing.assert_array_equal(result.reward.numpy(), np.array([o[1] for o in outcomes], dtype=np.float32))
        np.testing.assert_array_equal(result.terminated.numpy(), [o[2] for o in outcomes])
        assert not result.truncated.any()  # no time limit, as registered
        ended = np.flatnonzero(result.terminated.numpy())
        running = np.flatnonzero(~result.terminated.numpy())
        reference_state = np.array([read(env.game.env) for env in references])
        np.testing.assert_array_equal(ours.state.numpy()[np.ix_(running, columns)],
                                      reference_state[np.ix_(running, columns)])
        transitions.append((before, ours.state.clone(), result))

        if len(ended):
            for i in ended:
                start_episode(i, ours.state[i].numpy())
            fresh = np.array([read(env.game.env) for env in references])
            if planted:
                ours.set_state(torch.as_tensor(fresh))
            else:  # the batched env's own restart, observed as the package observes it
                expected = np.stack([references[i].game.state() for i in ended]).transpose(0, 3, 1, 2)
                np.testing.assert_array_equal(result.obs.numpy()[ended], expected.astype(np.float32))
    return transitions


def events(env_id, transitions) -> dict[str, int]:
    """How often the rules' rarer branches fired in a lockstep run (from the batched env's states)."""
    counts = {"terminations": 0, "rewards": 0}
    for before, after, result in transitions:
        counts["terminations"] += int(result.terminated.sum())
        counts["rewards"] += int(result.reward.sum())
        running = ~result.terminated
        if env_id == "MinAtar/Breakout-v1":
            bricks_before, bricks_after = before[:, TorchBreakout.BRICKS], after[:, TorchBreakout.BRICKS]
            relaid = (bricks_before == 0).all(1) & (bricks_after == 1023).all(1) & running
            struck_twice = (before[:, TorchBreakout.STRUCK] == 1) & (after[:, TorchBreakout.STRUCK] == 1) & running
            counts["walls relaid"] = counts.get("walls relaid", 0) + int(relaid.sum())
            counts["bricks entered"] = counts.get("bricks entered", 0) + int(struck_twice.sum())
        else:
            interval = TorchSpaceInvaders.MOVE_INTERVAL
            faster = (after[:, interval] < before[:, interval]) & running
            turned = (after[:, TorchSpaceInvaders.DIRECTION] != before[:, TorchSpaceInvaders.DIRECTION]) & running
            counts["waves cleared faster"] = counts.get("waves cleared faster", 0) + int(faster.sum())
            counts["formation turns"] = counts.get("formation turns", 0) + int(turned.sum())
    return counts


@pytest.mark.parametrize("env_id", MINATAR_ENV_IDS)
def test_lockstep_from_start_states(reference, env_id):
    """16 copies × 700 random steps (11,200 env steps) from the games' own start states."""
    counts = events(env_id, run_lockstep(reference, env_id, num_envs=16, steps=700, seed=1))
    assert counts["terminations"] > 30 and counts["rewards"] > 30, counts


@pytest.mark.parametrize("env_id", MINATAR_ENV_IDS)
def test_lockstep_from_planted_mid_game_states(reference, env_id):
    """16 copies × 700 random steps from random mid-game states: relaid walls, bricks entered
    on the step after a strike, cleared waves that speed the next one up, formation turns."""
    counts = events(env_id, run_lockstep(reference, env_id, num_envs=16, steps=700, seed=2, planted=True))
    assert all(count > 5 for count in counts.values()), counts


@pytest.mark.slow
@pytest.mark.parametrize("env_id", MINATAR_ENV_IDS)
def test_lockstep_long(reference, env_id):
    """64 copies × 2,000 steps each way (256,000 env steps per game)."""
    run_lockstep(reference, env_id, num_envs=64, steps=2000, seed=11)
    run_lockstep(reference, env_id, num_envs=64, steps=2000, seed=12, planted=True)


def test_lockstep_with_mask_autoreset(reference):
    """The mask autoreset (the default off CPU) restarts image observations correctly too."""
    transitions = run_lockstep(reference, "MinAtar/Breakout-v1", num_envs=10, steps=300, seed=3, reset_by_index=False)
    counts = events("MinAtar/Breakout-v1", transitions)
    assert counts["terminations"] > 10


# ----- sticky actions -------------------------------------------------------------------------


def repeat_rate(executed: np.ndarray, chosen: np.ndarray, ended: np.ndarray) -> tuple[float, int]:
    """(fraction, count) of steps whose chosen action differed from the previous executed
    one and that executed the previous one all the same: the sticky probability. Steps
    next to an episode's end are left out (a restart sets the previous action to no-op)."""
    previous, now, wanted = executed[:-1], executed[1:], chosen[1:]
    counted = (wanted != previous) & ~ended[:-1] & ~ended[1:]
    return float((now[counted] == previous[counted]).mean()), int(counted.sum())


@pytest.mark.parametrize("env_id", MINATAR_ENV_IDS)
@pytest.mark.parametrize("p", [0.1, 0.4])
def test_sticky_actions_repeat_with_probability_p(env_id, p):
    env = make_minatar_vec_env(env_id, 2048, seed=4, sticky_action_prob=p)
    env.reset(seed=4)
    rng = np.random.default_rng(4)
    chosen, executed, ended = [], [], []
    for _ in range(40):
        actions = rng.integers(env.single_action_space.n, size=env.num_envs)
        ended.append(env.step(torch.as_tensor(actions)).terminated.numpy())
        chosen.append(actions)
        executed.append(env.executed_actions.numpy())
    rate, count = repeat_rate(np.stack(executed), np.stack(chosen), np.stack(ended))
    assert abs(rate - p) < 5 * np.sqrt(p * (1 - p) / count), (rate, count)  # 5 standard errors


def test_the_packages_sticky_actions_repeat_with_the_same_probability(reference):
    """The same statistic, measured on the package, agrees with p (so both follow one rule)."""
    env = reference("MinAtar/SpaceInvaders-v1", sticky_action_prob=0.4)  # episodes long enough not to reset often
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    chosen, executed, ended = [], [], []
    for _ in range(6000):
        action = int(rng.integers(4))
        ended.append(env.step(action)[2])
        if ended[-1]:
            env.reset()
        chosen.append(env.action_set[action])
        executed.append(env.game.last_action)
    rate, count = repeat_rate(np.array(executed), np.array(chosen), np.array(ended))
    assert abs(rate - 0.4) < 5 * np.sqrt(0.4 * 0.6 / count), (rate, count)


@pytest.mark.parametrize("env_id", MINATAR_ENV_IDS)
def test_a_sticky_step_is_the_step_of_the_repeated_action(reference, env_id):
    """With p = 0.5, the package fed the actions our env executed (its sticky actions off)
    gives the same observations: stickiness acts on the game, not only on the record."""
    read, write, _ = STATE_CODEC[env_id]
    ours = make_minatar_vec_env(env_id, 8, seed=5, sticky_action_prob=0.5)
    ours.reset(seed=5)
    references = [reference(env_id) for _ in range(8)]
    for i, env in enumerate(references):
        env.reset(seed=i)
        write(env.game.env, ours.state[i].numpy())
    rng = np.random.default_rng(5)
    for _ in range(300):
        result = ours.step(torch.as_tensor(rng.integers(ours.single_action_space.n, size=8)))
        executed = ours.executed_actions.numpy()
        for i, env in enumerate(references):
            obs, reward, terminated, _, _ = env.step(int(executed[i]))
            np.testing.assert_array_equal(result.final_obs[i].numpy(), obs.transpose(2, 0, 1))
            assert reward == result.reward[i] and terminated == result.terminated[i]
            if terminated:
                assert ours.state[i, ours.last_action_row] == 0  # a new episode starts after a no-op
                env.reset()
                write(env.game.env, ours.state[i].numpy())


# ----- seeding, groups, checkpoints, start states ------------------------------------------------


@pytest.mark.parametrize("env_id", MINATAR_ENV_IDS)
def test_seed_groups_draw_what_each_group_alone_would(env_id):
    """Two seed groups of 8: each block's observations equal an 8-copy env seeded alone
    (start states and sticky draws both come from the group's own generator)."""
    both = make_minatar_vec_env(env_id, 16, groups=2)
    both.reset(seed=[10, 20])
    alone = [make_minatar_vec_env(env_id, 8) for _ in range(2)]
    for env, seed in zip(alone, (10, 20)):
        env.reset(seed=seed)
    rng = np.random.default_rng(6)
    for _ in range(200):
        actions = torch.as_tensor(rng.integers(both.single_action_space.n, size=16))
        joint = both.step(actions)
        for block, env in enumerate(alone):
            part = env.step(actions[8 * block:8 * block + 8])
            assert torch.equal(joint.obs[8 * block:8 * block + 8], part.obs)
            assert torch.equal(joint.reward[8 * block:8 * block + 8], part.reward)


@pytest.mark.parametrize("env_id", MINATAR_ENV_IDS)
def test_state_dict_resumes_bit_for_bit(env_id):
    env = make_minatar_vec_env(env_id, 32, seed=7)
    env.reset(seed=7)
    rng = np.random.default_rng(7)
    for _ in range(30):
        env.step(torch.as_tensor(rng.integers(env.single_action_space.n, size=32)))
    saved = env.state_dict()
    actions = [torch.as_tensor(rng.integers(env.single_action_space.n, size=32)) for _ in range(100)]
    first = [env.step(a).obs for a in actions]
    resumed = make_minatar_vec_env(env_id, 32)
    resumed.load_state_dict(saved)
    assert all(torch.equal(a, resumed.step(b).obs) for a, b in zip(first, actions))


def test_breakout_ball_starts_on_either_side_with_probability_one_half():
    env = make_minatar_vec_env("MinAtar/Breakout-v1", 4096, seed=8)
    env.reset(seed=8)
    from_right = (env.state[:, TorchBreakout.BALL_X] == 9).float().mean().item()
    assert abs(from_right - 0.5) < 5 * 0.5 / np.sqrt(4096)


# ----- spaces, registration, errors ---------------------------------------------------------------


@pytest.mark.parametrize("env_id", MINATAR_ENV_IDS)
def test_spaces_and_defaults_are_the_packages_with_channels_first(env_id):
    minatar_gym = pytest.importorskip("minatar.gym")
    ours = make_minatar_vec_env(env_id, 2)
    theirs = minatar_gym.BaseEnv(GAMES[env_id], use_minimal_action_set=True)  # as its v1 registration makes it
    assert ours.single_action_space == theirs.action_space
    height, width, channels = theirs.observation_space.shape
    assert ours.single_observation_space == gym.spaces.Box(0.0, 1.0, (channels, height, width), np.float32)
    assert ours.sticky_action_prob == theirs.game.sticky_action_prob == 0.1


@pytest.mark.parametrize("env_id", MINATAR_ENV_IDS)
def test_ids_are_registered_and_pick_the_batched_env(env_id):
    check_env_id(env_id)  # known to gymnasium without the `minatar` package
    assert resolve_backend(env_id, "auto") == "torch"
    envs = make_vec_env(env_id, 4)
    assert isinstance(envs, (TorchBreakout, TorchSpaceInvaders)) and envs.env_id == env_id
    single = gym.make(env_id)
    assert single.spec.max_episode_steps is None  # no time limit, as the package registers them
    assert single.observation_space == envs.single_observation_space
    obs, _ = single.reset(seed=0)
    assert obs.shape == single.observation_space.shape and obs.dtype == np.float32
    for _ in range(2000):  # steps through whole episodes: the final observation, then reset
        obs, reward, terminated, truncated, _ = single.step(single.action_space.sample())
        assert single.observation_space.contains(obs)
        if terminated:
            break
    assert terminated


def test_bad_arguments_are_refused_in_one_line():
    for bad in (-0.1, 1.5, True):
        with pytest.raises(ValueError, match=f"sticky_action_prob = {bad!r}") as excinfo:
            make_minatar_vec_env("MinAtar/Breakout-v1", 2, sticky_action_prob=bad)
        assert "\n" not in str(excinfo.value)
    with pytest.raises(ValueError, match="MinAtar/Pong-v1.*MinAtar/Breakout-v1"):
        make_minatar_vec_env("MinAtar/Pong-v1", 2)
    with pytest.raises(ValueError, match="max_episode_steps = 0"):
        make_minatar_vec_env("MinAtar/Breakout-v1", 2, max_episode_steps=0)


def test_max_episode_steps_truncates():
    env = make_minatar_vec_env("MinAtar/SpaceInvaders-v1", 3, seed=0, max_episode_steps=4)
    env.reset(seed=0)
    truncated = [bool(env.step(torch.zeros(3, dtype=torch.int64)).truncated.all()) for _ in range(4)]
    assert truncated == [False, False, False, True]


def test_grid_picture_paints_each_cell_in_its_last_set_channels_colour():
    from envs.minatar.gymnasium_env import grid_picture

    observation = np.zeros((4, 10, 10), dtype=np.float32)
    observation[0, 9, 3] = 1  # channel 0 alone: hue 0, red
    observation[1, 2, 5] = observation[3, 2, 5] = 1  # channels 1 and 3: the last one set, hue 3/4, purple
    picture = grid_picture(observation, cell_pixels=2)
    assert picture.shape == (20, 20, 3) and picture.dtype == np.uint8
    assert (picture[18:20, 6:8] == [255, 0, 0]).all()
    assert (picture[4:6, 10:12] == [128, 0, 255]).all()
    assert picture.sum() == 4 * (255 + 128 + 255)  # every other cell black


@pytest.mark.parametrize("env_id", MINATAR_ENV_IDS)
def test_rgb_array_rendering_shows_the_observation_of_every_step(env_id):
    from envs.minatar.gymnasium_env import CELL_PIXELS, MinAtarGymnasiumEnv, drawing_channels, grid_picture

    env = gym.make(env_id, render_mode="rgb_array")
    observation, _ = env.reset(seed=3)
    order = drawing_channels(env.unwrapped.batched)
    for _ in range(5):
        frame = env.render()
        assert frame.shape == (10 * CELL_PIXELS, 10 * CELL_PIXELS, 3)
        assert np.array_equal(frame, grid_picture(observation, order=order)) and frame.any()
        observation, *_ = env.step(env.action_space.sample())
    with pytest.raises(ValueError, match="render_mode = 'ansi' is not one of: None, rgb_array"):
        MinAtarGymnasiumEnv(env_id, render_mode="ansi")


def test_breakout_draws_the_ball_over_the_brick_it_starts_in():
    from envs.minatar.gymnasium_env import channel_colours

    env = gym.make("MinAtar/Breakout-v1", render_mode="rgb_array")
    observation, _ = env.reset(seed=3)
    (y, x), = np.argwhere(observation[1] > 0)  # the ball's cell
    assert observation[3, y, x] == 1  # a brick shares it at the start
    frame = env.render()
    ball_colour = channel_colours(4)[1]
    assert (frame[y * 16:(y + 1) * 16, x * 16:(x + 1) * 16] == ball_colour).all()


def test_the_minatar_packages_registration_after_import_envs_leaves_the_project_on_its_own_games():
    """minatar.gym.register_envs() registers the same ids with its own envs; the factory still
    makes the project's (channel-first float32 observations), for evaluation and recording."""
    minatar_gym = pytest.importorskip("minatar.gym")
    saved = dict(gym.registry)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # gymnasium warns that it overrides the ids
            minatar_gym.register_envs()
        assert gym.spec("MinAtar/Breakout-v1").entry_point == "minatar.gym:BaseEnv"
        env = gymnasium_env_factory("MinAtar/Breakout-v1")()
        assert isinstance(env.unwrapped, MinAtarGymnasiumEnv)
        observation, _ = env.reset(seed=0)
        assert observation.shape[0] == 4 and observation.dtype == np.float32  # channel-first, as training sees it
    finally:
        gym.registry.clear()
        gym.registry.update(saved)
