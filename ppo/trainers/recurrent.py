"""Recurrent PPO by its old name: `PPO` itself trains a GRU or LSTM policy when `config.recurrent` is a cell.

What a recurrent core changes in the loop (the state in the rollout, sequences in the
update, the state in the checkpoint) is written in `ppo.trainers.ppo`, once, for every
variant: PPO-Penalty, adaptive clipping and dual-clip train recurrent networks as PPO-Clip
does. `RecurrentPPO` stays for the scripts and the checkpoints that name it (runs saved
by it resume with it); it is PPO that refuses a feed-forward config.
"""

from __future__ import annotations

from ppo.config import ConfigError
from ppo.trainers.ppo import SEQUENCE_FIELDS, PPO, columns  # noqa: F401 (re-exported for their old importers)
from ppo.trainers.registry import register_trainer


@register_trainer
class RecurrentPPO(PPO):
    """PPO-Clip with a recurrent actor-critic (config.recurrent 'gru' or 'lstm')."""

    def __init__(self, config, *args, **kwargs):
        if getattr(config, "recurrent", None) == "none":
            raise ConfigError("recurrent = 'none': RecurrentPPO needs a recurrent core (gru or lstm); use PPO")
        super().__init__(config, *args, **kwargs)
