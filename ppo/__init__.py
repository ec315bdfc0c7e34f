"""PPO from scratch: the core library.

Read it in this order; each folder is one role, each module one idea.

    config.py          every hyperparameter of a run, with its default, meaning and checks
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
        stacked_networks.py S actor-critics of one architecture as one batched computation
        stacked_recurrent.py the same for recurrent actor-critics: S·K cores of one kernel
        normalize.py        running observation and reward statistics
    trainers/          the loops
        base.py             the lifecycle every trainer shares: construct, train, save, resume
        ppo.py              PPO: collect a rollout, estimate advantages, update for K epochs
        processes.py        what each process of a data-parallel run holds (its copies, streams, checkpoint)
        seed_batch.py       PPO with a member axis: many seeds trained as one batched computation
        recurrent.py        recurrent PPO, for one seed or a batch
        variants.py         PPO-Penalty and adaptive clipping, for one seed or a batch
        choice.py           which of them trains a run or a batch (clip, penalty, adaptive-clip), and resuming it
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
from ppo.models.networks import ActorCritic
from ppo.runs.checkpoint import CheckpointError, load_checkpoint
from ppo.runs.evaluation import evaluate_policy, load_policy
from ppo.trainers.base import TrainingDiverged
from ppo.trainers.choice import build_seed_batch, build_trainer, resume_run
from ppo.trainers.ppo import PPO
from ppo.trainers.recurrent import RecurrentPPO, SeedBatchRecurrent
from ppo.trainers.seed_batch import SeedBatchPPO
from ppo.trainers.variants import AdaptiveClipPPO, PPOPenalty, SeedBatchAdaptiveClip, SeedBatchPenalty
from ppo.vec_env import StepResult, VecEnv

__all__ = [
    "PPO",
    "ActorCritic",
    "AdaptiveClipPPO",
    "CheckpointError",
    "ConfigError",
    "PPOConfig",
    "PPOPenalty",
    "RecurrentPPO",
    "RolloutBuffer",
    "SeedBatchAdaptiveClip",
    "SeedBatchPPO",
    "SeedBatchPenalty",
    "SeedBatchRecurrent",
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
    "value_loss",
]
