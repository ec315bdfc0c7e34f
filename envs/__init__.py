"""Environments the lectures and experiments need that gymnasium lacks.

Importing `envs` registers the ids it adds with gymnasium, so that `gymnasium.make`
knows them: CartPoleNoVel-v1 and PendulumNoVel-v1 (`envs.partially_observable`) and
CueMemory-v0 (`envs.cue_memory`). Their batched torch versions are in the registry of
`envs.classic`, which is imported first: the modules of those three envs build on it.
It also registers MinAtar/Breakout-v1 and MinAtar/SpaceInvaders-v1, one copy of the
batched games of `envs.minatar` each, so that those ids work without the `minatar` package.
"""

import envs.classic  # noqa: F401  (first: envs.classic imports the modules below, which import it)
from envs import cue_memory, partially_observable
from envs.minatar import MINATAR_ENV_IDS
from envs.minatar.gymnasium_env import register_with_gymnasium as register_minatar

partially_observable.register_with_gymnasium()
cue_memory.register_with_gymnasium()
register_minatar(MINATAR_ENV_IDS)
