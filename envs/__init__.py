"""Environments the lectures and experiments need that gymnasium lacks.

Importing `envs` registers the ids it adds with gymnasium, so that `gymnasium.make`
knows them: CartPoleNoVel-v1 and PendulumNoVel-v1 (`envs.partially_observable`) and
CueMemory-v0 (`envs.cue_memory`). Their batched torch versions are in the registry of
`envs.classic`, which is imported first: the modules of those three envs build on it.
"""

import envs.classic  # noqa: F401  (first: envs.classic imports the modules below, which import it)
from envs import cue_memory, partially_observable

partially_observable.register_with_gymnasium()
cue_memory.register_with_gymnasium()
