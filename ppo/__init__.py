"""PPO from scratch: the core library.

Read it in this order; each folder is one role, each module one idea.

    config.py          every hyperparameter of a run, with its default, meaning and checks
    presets.py         the hyperparameters each env id starts from (ppo-train's presets), and preset_config
    vec_env.py         the one interface a batched environment offers (envs/ implements it)
    algorithm/         the mathematics and the data of one update
        advantages.py       GAE(γ, λ): Â_t = Σ_l (γλ)^l δ_{t+l}, and the returns Â + V
        losses.py           the clipped surrogate, the value loss, entropy, approx KL, clip fraction
        storage.py          the rollout buffer: one tensor per quantity, T steps × N envs
        sequence_storage.py the same for a recurrent policy, with what replaying needs
        distributions.py    categorical (with action masks) and Gaussian action distributions
        update.py           K epochs of shuffled minibatches, one gradient step each
    models/            the networks
        encoders.py         what turns an observation into features (MLP, CNNs)
        networks.py         ActorCritic: shared layers, a policy head and a value head
        recurrent_networks.py, gru_sequence.py   the same with a GRU or LSTM, and its BPTT kernel
        member_networks.py  S networks of one architecture as one batched computation (vmap of their own methods)
        normalize.py        running observation and reward statistics
    trainers/          the loops
        base.py             the lifecycle every trainer shares: construct, train, save, resume
        ppo.py              PPO: collect a rollout, estimate advantages, update for K epochs (any network)
        settings.py         an algorithm's own settings, declared once (default, meaning, allowed values)
        registry.py         the algorithms by name (--algorithm), each registered where it is defined
        variants.py         PPO-Penalty, adaptive clipping and dual-clip: a loss, a rule, their settings
        seed_batch.py       any trainer class with a member axis: many seeds as one batched computation
        processes.py        what each process of a data-parallel run holds (its copies, streams, checkpoint)
        recurrent.py        RecurrentPPO, the old name of PPO on a recurrent network
        choice.py           which trainer trains a run or a batch, and resuming it
    runs/              what a run leaves behind: checkpoints, the metrics log, the plot,
                       evaluation of a saved policy, recordings
    parallel/          speed and scale: processes of one run (torchrun), the flat Adam,
                       memory kept in the process
    lm/                the same PPO core on token generation by a tiny language model

The names below are the public API: `from ppo import PPO, PPOConfig`.
"""

from ppo.algorithm.advantages import compute_gae
from ppo.algorithm.losses import clip_fraction, clipped_surrogate_loss, explained_variance, kl_estimate, value_loss
from ppo.algorithm.storage import RolloutBuffer
from ppo.config import ConfigError, PPOConfig
from ppo.presets import preset_config
from ppo.models.networks import ActorCritic
from ppo.runs.checkpoint import CheckpointError, load_checkpoint
from ppo.runs.evaluation import evaluate_policy, load_policy
from ppo.trainers.base import TrainingDiverged
from ppo.trainers.choice import build_seed_batch, build_trainer, resume_run
from ppo.trainers.ppo import PPO
from ppo.trainers.recurrent import RecurrentPPO
from ppo.trainers.registry import register_algorithm
from ppo.trainers.seed_batch import SeedBatch
from ppo.trainers.settings import Setting
from ppo.trainers.variants import AdaptiveClipPPO, DualClipPPO, PPOPenalty
from ppo.vec_env import StepResult, VecEnv

__all__ = [
    "PPO",
    "ActorCritic",
    "AdaptiveClipPPO",
    "CheckpointError",
    "ConfigError",
    "DualClipPPO",
    "PPOConfig",
    "PPOPenalty",
    "RecurrentPPO",
    "RolloutBuffer",
    "SeedBatch",
    "Setting",
    "StepResult",
    "TrainingDiverged",
    "VecEnv",
    "build_seed_batch",
    "build_trainer",
    "resume_run",
    "clip_fraction",
    "clipped_surrogate_loss",
    "compute_gae",
    "evaluate_policy",
    "explained_variance",
    "kl_estimate",
    "load_checkpoint",
    "load_policy",
    "preset_config",
    "register_algorithm",
    "value_loss",
]
