"""Per-environment presets: the hyperparameters each env id starts from, as library data.

A run's config is assembled in three layers, later ones overriding earlier ones:

    1. the PPOConfig defaults (CleanRL's discrete-action settings)
    2. PRESETS[preset]     the env's own row, the same on every backend
    3. the values given    preset_config's keyword arguments, or ppo-train's flags

    preset_config("CartPole-v1")                          # ppo-train's CartPole config
    preset_config("Pendulum-v1", seed=3, total_timesteps=50_000)
    preset_config("CartPoleNoVel-v1", preset="CartPole-v1")   # another env's row
    preset_config("Acrobot-v1", preset="none")            # the PPOConfig defaults

The preset 'auto' (the default) is the row named like the env id, if there is one. The
backend stays as given, 'auto' unless overridden: `envs.factory.make_vec_env` resolves it
(torch where the env id has a batched version, else gymnasium). The core does not know
gymnasium's registry, so the env id is checked when the envs are made; ppo-train's
`build_config` (experiments.commands.presets) checks it and resolves the backend first.

Every classic-control preset's budget is at most the SB3 zoo's for the env
(MountainCarContinuous-v0 and Pendulum-v1 excepted, where the zoo explores with gSDE: see
their rows), and each row says what it was measured to reach on the seeds it was tuned on
(1–5; CartPole and Pendulum 1–20).
`python -m experiments.benchmarks.continuous --classic-control --seeds ...` measures them
all again; `ppo-train --list-presets` prints the table.
"""

from __future__ import annotations

import dataclasses

from ppo.config import ConfigError, PPOConfig

# CleanRL's ppo_continuous_action.py: 1M steps, lr 3e-4 annealed, 1 env × 2048 steps,
# 32 minibatches × 10 epochs, γ 0.99, λ 0.95, entropy 0, obs normalisation and reward scaling.
CLEANRL_CONTINUOUS = dict(
    total_timesteps=1_000_000, num_envs=1, num_steps=2048, num_minibatches=32, update_epochs=10,
    learning_rate=3e-4, ent_coef=0.0, normalize_obs=True, normalize_reward=True,
)

# Batched CartPole: env steps are nearly free on the torch backend, so the batch is large
# (64 envs × 32 steps) and the wall-clock goes to gradient steps: 6 epochs of 4 minibatches
# (512) at lr 5e-3, 100k steps (the SB3 zoo's budget). Seeds 1–20: all 20 evaluate ≥ 491,
# and the mean of the last 20 training episodes reaches 475 after ~1.2 s of training on
# a 2-core CPU; with 4 epochs, 17 of 20 (295, 418 and 475 on seeds 13, 14 and 20); γ 0.98,
# λ 0.8 as in the zoo, 8 of 10. (At 200k steps, 4 epochs solved 10 of 10.) Chosen by
# measurement over seeds: a shared trunk fails where separate networks solve; value
# clipping off (with few, large updates it caps the critic's progress at ε per update), no
# advantage whitening and no entropy bonus (once every episode reaches 500 the advantages
# are noise; whitening scales that noise up to unit size and the policy drifts away from
# the solution). The gymnasium backend runs the same settings (64 Python envs, slower).
CARTPOLE_BATCHED = dict(
    num_envs=64, num_steps=32, num_minibatches=4, update_epochs=6, learning_rate=5e-3,
    total_timesteps=100_000, value_clip_coef=None, norm_adv=False, ent_coef=0.0,
)

# MinAtar: the Atari PPO settings that carry over (one CNN trunk shared by policy and value,
# rewards already 0/1, lr annealed, γ 0.99, λ 0.95, clip 0.2, entropy 0.01) on the batched
# torch games, 128 envs × 32 steps, 4 epochs of 8 minibatches (512) at lr 1e-3, for the
# 10M steps of the published PPO figures (gymnax-blines: Breakout 28, Space Invaders 131).
# Tuned on Breakout seed 1 over the first 1.2–2M steps (mean of the last 20 training
# episodes): 8 minibatches 12.2 at 1.2M; 4 minibatches settled on an almost deterministic
# policy (entropy 0.16 of log 3 = 1.10) at 5–6 by 400k and stayed there; 16 minibatches
# rose no faster than 8. The shared trunk halves the CNN work per sample: ~9.5k steps/s
# per run with two runs on 2 cores, against ~4.9k for one run of two trunks (4 minibatches)
# alone. Untuned seeds: the book's guide (experiments.tools.readme_figures minatar-ppo).
MINATAR = dict(
    total_timesteps=10_000_000, num_envs=128, num_steps=32, num_minibatches=8, update_epochs=4,
    learning_rate=1e-3, shared_network=True,
)

PRESETS: dict[str, dict] = {
    # The batched settings, on either backend (CARTPOLE_BATCHED above).
    "CartPole-v1": CARTPOLE_BATCHED,
    # CleanRL's discrete defaults: greedy −82 ± 9 on an untuned seed at 500k steps.
    "Acrobot-v1": {},
    # The SB3 zoo's MountainCar (1M steps, λ 0.98, 4 epochs, ent 0, obs normalisation) with
    # 64 envs × 16 steps, lr 1e-3 annealed (the zoo: 16 × 16, 3e-4 constant), reward
    # scaling and no value clipping. Seeds 1–5: −110 … −117 (without reward scaling and
    # with value clipping, seed 2 never found the flag: −200).
    "MountainCar-v0": dict(
        total_timesteps=1_000_000, num_envs=64, num_steps=16, num_minibatches=4, update_epochs=4,
        learning_rate=1e-3, gamma=0.99, gae_lambda=0.98, ent_coef=0.0, value_clip_coef=None,
        normalize_obs=True, normalize_reward=True,
    ),
    # The flag pays only once found, and every push costs 0.1 u²: PPO must find it before
    # the action penalty teaches the policy to stand still. 64 copies with σ = 1 i.i.d.
    # noise find it in the first episodes (~2 % of random episodes reach it), and both
    # normalisers make the +100 count in the update; the greedy policy passes 90 after
    # ~120k steps. Seeds 1–5 at 200k: 92.7 … 93.3 (at 150k: 91.7 … 94.2). More steps than
    # the SB3 zoo's 20k (88.3 ± 2.6), which explores with state-dependent noise (gSDE), an
    # option this library does not have; 200k steps take seconds on the batched env.
    "MountainCarContinuous-v0": dict(
        total_timesteps=200_000, num_envs=64, num_steps=64, num_minibatches=4, update_epochs=10,
        learning_rate=3e-4, gamma=0.99, gae_lambda=0.95, ent_coef=0.0, value_clip_coef=None,
        normalize_obs=True, normalize_reward=True,
    ),
    # 200k steps, twice the SB3 zoo's current Pendulum budget (100k, which explores with
    # gSDE, an option this library does not have; its benchmark table: 2M): 10 epochs, λ 0.95,
    # obs normalisation and reward scaling; 8 envs × 256 steps, minibatches of 256 at lr 2e-3
    # and γ 0.95 (the zoo: 4 × 1024, 64, 1e-3, γ 0.9), entropy bonus 0.01. Greedy means over
    # 100 episodes; ≥ −200 counts as solved. The earlier preset (100k, ent 0): seeds 1–10
    # 10/10 (−148 … −187), 11–20 7/10 (−208, −219, −223 missed); γ 0.9 and minibatches of 64
    # or 128 were worse on 1–5. At 200k with ent 0, 9/10 on 11–20 for γ 0.95 and for γ 0.98:
    # one seed each (19, 13) let σ shrink before it found the swing-up and stayed near −580.
    # The entropy bonus keeps σ up until then: seeds 11–20, ent 0.003 and 0.01 both 10/10
    # (0.01: −157.5 … −173.9). Untuned seeds 1001–1010: 10/10, −146.0 … −165.5.
    "Pendulum-v1": dict(
        total_timesteps=200_000, num_envs=8, num_steps=256, num_minibatches=8, update_epochs=10,
        learning_rate=2e-3, gamma=0.95, gae_lambda=0.95, ent_coef=0.01,
        normalize_obs=True, normalize_reward=True,
    ),
    # The SB3 zoo's LunarLander (16 envs × 1024 steps, γ 0.999, λ 0.98, 4 epochs, ent 0.01,
    # minibatches of 64, lr 3e-4 constant, no value clipping: with returns in the hundreds,
    # clipping V's change to ±0.2 per update held the return near 100 at 640k steps).
    "LunarLander-v3": dict(
        total_timesteps=1_000_000, num_envs=16, num_steps=1024, num_minibatches=256, update_epochs=4,
        learning_rate=3e-4, anneal_lr=False, gamma=0.999, gae_lambda=0.98, ent_coef=0.01, value_clip_coef=None,
    ),
    # CartPole with only (x, θ) observed (envs.partially_observable): a GRU of 64 after the
    # 64-64 hidden layers (ppo.trainers.recurrent) recovers the velocities. The batched CartPole
    # layout (64 envs × 32 steps, no value clipping) with each env's rollout cut into 2
    # sequences of 16 steps (4 minibatches of 32 sequences), 4 epochs at lr 2e-3 (annealed),
    # γ 0.99, λ 0.95, whitened advantages, observation normalisation (x and θ are small numbers
    # whose differences carry the velocities), an entropy bonus of 0.003, the update stopped
    # where approx KL passes 0.03, 300k steps. Greedy means over 100 episodes; ≥ 475 counts.
    # The zoo's RecurrentPPO row (8 envs × 32 steps, one minibatch, 20 epochs, γ 0.98, λ 0.8,
    # 100k) gave 221.5, 340.5, 275.3 on seeds 1–3. With 10 epochs at lr 1e-3, entropy 0.01,
    # 200k: a GRU of 64 over whole 32-step sequences solved 8 of 10 seeds (301–310); of 64
    # over 8-step sequences, 4 of 10 (101–110); of 128 over 8, 32 and 16 steps, 9, 9 and 10 of
    # 10 (101–110), but 128 over 16 steps only 6 of 401–410. Two failures recur: a curve that
    # collapses in one update (approx KL 0.5 where it is usually below 0.02), and a policy at
    # 500 whose entropy the bonus drives back up once the advantages are noise. 4 epochs at
    # lr 2e-3 for 300k: 5 of 5 hard seeds (401, 404, 409, 410, 113), 4 of 6 of 114–119; with
    # the KL stop at 0.03 and entropy 0.003: 11 of 12 (401, 404, 409, 410, 113–120; 113:
    # 444.7). That row had a GRU of 128 and raw advantages; on seeds 21–38 it solved 15 of 18
    # (an AMD EPYC, AVX2 kernels), and its failures reached 475 and fell back, one as the value
    # function broke (explained variance near 0) while the raw advantages made the first
    # minibatch pass the KL stop. Whitening the advantages and halving the GRU gives about that
    # rate, within the noise, in 0.6× the time (each command 43–57 s against 73–92 s, two at a
    # time on that machine): 25 of 30 on the seeds it was chosen on (21–50), the failures again
    # reaching 475 and falling back; on untuned seeds, on that EPYC, 14 of 20 (601–610: 8 of
    # 10; 501–510: 6 of 10); on an Intel Xeon with AVX-512 kernels 501–510 gave 10 of 10.
    # Variants that did not beat these beyond the noise of ten to thirty seeds: whitened with the
    # GRU of 128, 22 of 26 (21–36 and 501–510); the same with ε = 0.1, 14 of 16 (31–46); the same
    # at lr 1e-3, 4 of 5 (31–35); the GRU of 64 at 200k steps, 8 of 10 (21–30); one shared trunk
    # and GRU, 0 of 4 (21–24); unwhitened GRUs of 32 or 64 at 200k, in this layout or 128 envs ×
    # 16 steps, 3 of 24 (11–16). Untuned seeds: the book's guide (experiments.tools.readme_figures
    # recurrent-zoo).
    "CartPoleNoVel-v1": dict(
        recurrent="gru", recurrent_hidden_size=64, sequence_length=16, num_envs=64, num_steps=32,
        num_minibatches=4, update_epochs=4, learning_rate=2e-3, gamma=0.99, gae_lambda=0.95, ent_coef=0.003,
        target_kl=0.03, normalize_obs=True, value_clip_coef=None, norm_adv=True, total_timesteps=300_000,
    ),
    # Pendulum with only (cos θ, sin θ) observed: the Pendulum-v1 row's settings with a GRU,
    # 16 envs × 128 steps cut into 4 minibatches of 4 sequences (a recurrent minibatch is
    # whole env sequences, so the row's 8 envs × 256 steps in 8 minibatches would be one env each).
    # Greedy means over 100 episodes, seeds 1–3: −177.3, −170.4, −170.4; 11–15: −221.3, −189.1,
    # −206.3, −190.4, −229.3 (64 envs × 32 steps instead: −217.7, −196.7, −311.1 on 1–3).
    # Untuned seeds: the book's guide (experiments.tools.readme_figures recurrent-zoo).
    "PendulumNoVel-v1": dict(
        recurrent="gru", total_timesteps=200_000, num_envs=16, num_steps=128, num_minibatches=4, update_epochs=10,
        learning_rate=2e-3, gamma=0.95, gae_lambda=0.95, ent_coef=0.01, normalize_obs=True, normalize_reward=True,
    ),
    # MinAtar (envs.minatar): one preset for every game, tuned on Breakout seed 1 only.
    "MinAtar/Breakout-v1": MINATAR,
    "MinAtar/SpaceInvaders-v1": MINATAR,
    # CleanRL's continuous defaults, its MuJoCo benchmark setting.
    "HalfCheetah-v5": CLEANRL_CONTINUOUS,
    "Hopper-v5": CLEANRL_CONTINUOUS,
}


def preset_names() -> list[str]:
    """The names of the preset rows, sorted (each an env id)."""
    return sorted(PRESETS)


def preset_for(env_id: str, preset: str | None = "auto") -> str | None:
    """The row a run on `env_id` uses: for 'auto' the one named like env_id (None if there is
    none), None for None or 'none', else `preset` itself."""
    if preset == "auto":
        return env_id if env_id in PRESETS else None
    return None if preset in (None, "none") else preset


def preset_overrides(name: str | None) -> dict:
    """A copy of preset `name`'s row (an empty dict for None or 'none'); ConfigError for an unknown name."""
    if name is None or name == "none":
        return {}
    if name not in PRESETS:
        raise ConfigError(f"preset = {name!r} is not one of: none, {', '.join(preset_names())}")
    return dict(PRESETS[name])


def preset_config(env_id: str = PPOConfig.env_id, preset: str | None = "auto", **overrides) -> PPOConfig:
    """The PPOConfig of a run on `env_id`: defaults ← the preset's row ← `overrides`, validated.

    ConfigError for an unknown preset, an unknown field or a value that cannot work.
    """
    known = {field.name for field in dataclasses.fields(PPOConfig)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ConfigError(f"unknown config field(s) {', '.join(unknown)}")
    values = {**preset_overrides(preset_for(env_id, preset)), **overrides, "env_id": env_id}
    return PPOConfig(**values).validate()
