"""Supervised pretraining (SFT) of the tiny GPT on a corpus of sentences.

The model learns next-token prediction by minimising the cross-entropy

    L = -(1/N) * sum_t log softmax(z_t)[y_t]        (sum over the N non-PAD targets y_t)

with AdamW and a warmup + cosine learning-rate schedule. The trained model is the
reference policy that PPO later fine-tunes; `load_or_pretrain_sft` trains it once per
configuration and corpus and caches the checkpoint on disk.

The corpus comes from the caller: anything with the `TextCorpus` methods (the food
corpus of `envs/corpus.py` is one).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Protocol

import torch
import torch.nn.functional as F

from ppo.trainers.base import TrainingDiverged
from ppo.runs.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from ppo.config import (
    ConfigBase,
    ConfigError,
    require_count,
    require_fraction,
    require_non_negative,
    require_positive,
    require_seed,
)
from ppo.lm.models.gpt import GPT, GPTConfig
from ppo.lm.models.tokenizer import CharTokenizer

CHECKPOINT_FORMAT = 2


class TextCorpus(Protocol):
    """What pretraining needs from a corpus."""

    def characters(self) -> str:
        """Every character a sentence can contain (the tokenizer's vocabulary)."""

    def sample(self, n: int, seed: int) -> list[str]:
        """n sentences; the same seed gives the same list."""

    def fingerprint(self) -> dict:
        """Plain data that changes whenever the corpus's distribution does (part of the cache key)."""


@dataclass(frozen=True)
class PretrainConfig(ConfigBase):
    """Every setting of a pretraining run.

    The defaults train in about a minute of one CPU core and give a model whose
    distribution over foods is within total variation ~0.02 of the corpus table. Gradient
    noise limits that calibration: more steps and more sentences buy precision, a bigger
    model does not.
    """

    seed: int = field(default=0, metadata={"help": "seed of the corpus draw, the weight init and the batch order"})
    corpus_size: int = field(default=800_000, metadata={"help": "sentences drawn from the corpus (train + validation)"})
    val_size: int = field(default=4_096, metadata={"help": "of which held out for the validation loss"})
    steps: int = field(default=2_000, metadata={"help": "optimizer steps"})
    batch_size: int = field(default=512, metadata={"help": "sentences per step"})
    learning_rate: float = field(default=5e-3, metadata={"help": "peak learning rate"})
    min_lr_ratio: float = field(
        default=0.0,
        metadata={"help": "final learning rate as a fraction of the peak (cosine decay; 0 stills the weights' jitter)"},
    )
    warmup_steps: int = field(default=50, metadata={"help": "steps of linear warmup from 0 to the peak"})
    weight_decay: float = field(default=0.01, metadata={"help": "AdamW decoupled weight decay on matrices and embeddings"})
    beta1: float = field(default=0.9, metadata={"help": "AdamW first-moment decay"})
    beta2: float = field(default=0.99, metadata={"help": "AdamW second-moment decay"})
    max_grad_norm: float | None = field(
        default=1.0, metadata={"help": "clip the global gradient norm to this; none = off"}
    )
    eval_interval: int = field(default=250, metadata={"help": "steps between validation-loss measurements"})
    n_layer: int = field(default=1, metadata={"help": "transformer blocks (one attention layer can look back at the name)"})
    n_head: int = field(default=2, metadata={"help": "attention heads per block"})
    n_embd: int = field(default=32, metadata={"help": "width of the residual stream"})
    dropout: float = field(default=0.0, metadata={"help": "dropout probability (800k sentences, 160 distinct: nothing to overfit)"})
    block_size: int = field(default=32, metadata={"help": "longest sequence the model accepts, in tokens"})

    def validate(self) -> PretrainConfig:
        """Raise ConfigError naming the first impossible value; return self when all is well."""
        self.check_types()
        for name in ("corpus_size", "val_size", "steps", "batch_size", "eval_interval", "n_layer", "n_head",
                     "n_embd", "block_size"):
            require_count(name, getattr(self, name))
        require_seed("seed", self.seed)
        require_count("warmup_steps", self.warmup_steps, minimum=0)
        if self.warmup_steps >= self.steps:
            raise ConfigError(f"warmup_steps = {self.warmup_steps} must be less than steps = {self.steps}: the "
                              f"learning rate rises to its peak over the warmup, then decays over the steps left")
        if self.val_size >= self.corpus_size:
            raise ConfigError(f"val_size = {self.val_size} must be smaller than corpus_size = {self.corpus_size}")
        require_positive("learning_rate", self.learning_rate)
        if self.max_grad_norm is not None:
            require_positive("max_grad_norm", self.max_grad_norm)
        require_non_negative("weight_decay", self.weight_decay)
        require_fraction("min_lr_ratio", self.min_lr_ratio)
        for name in ("dropout", "beta1", "beta2"):
            require_fraction(name, getattr(self, name), upper_open=True)
        if self.n_embd % self.n_head != 0:
            raise ConfigError(f"n_embd = {self.n_embd} is not divisible by n_head = {self.n_head}")
        self.check_effects()
        return self

    def gpt_config(self, vocab_size: int) -> GPTConfig:
        return GPTConfig(vocab_size=vocab_size, block_size=self.block_size, n_layer=self.n_layer,
                         n_head=self.n_head, n_embd=self.n_embd, dropout=self.dropout)

    def short_hash(self, corpus: TextCorpus) -> str:
        """10 hex digits identifying this config, the corpus and the checkpoint format."""
        key = {"config": asdict(self), "corpus": corpus.fingerprint(), "format": CHECKPOINT_FORMAT}
        return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:10]


@dataclass
class PretrainResult:
    """What `pretrain` returns: the trained model (eval mode), its tokenizer and the loss curve."""

    model: GPT
    tokenizer: CharTokenizer
    history: list[dict] = field(default_factory=list)  # one {"step", "lr", "train_loss", "val_loss"} per eval
    val_loss: float = float("nan")
    seconds: float = 0.0


class PretrainingInterrupted(Exception):
    """Pretraining stopped on request after a whole step; `partial_path` (if any) resumes it."""

    def __init__(self, step: int, partial_path: Path | None):
        self.step, self.partial_path = step, partial_path
        saved = f"progress saved to {partial_path}" if partial_path else "nothing saved"
        super().__init__(f"pretraining stopped after step {step}; {saved}")


@dataclass
class SFTCheckpoint:
    """What `load_sft_checkpoint` returns."""

    model: GPT
    tokenizer: CharTokenizer
    pretrain_config: PretrainConfig | None
    metrics: dict


# ---------------------------------------------------------------- data


def corpus_tokenizer(corpus: TextCorpus) -> CharTokenizer:
    """The tokenizer of a corpus: BOS/EOS/PAD + every character a sentence can contain."""
    return CharTokenizer(corpus.characters())


def encode_corpus(sentences: list[str], tokenizer: CharTokenizer, block_size: int) -> torch.Tensor:
    """Sentences -> (N, S) ids: BOS + characters + EOS, right-padded with PAD to a common length S."""
    distinct = sorted(set(sentences))  # the corpus repeats a few hundred distinct sentences
    encoded = [tokenizer.encode(s, add_bos=True, add_eos=True) for s in distinct]
    length = max(len(ids) for ids in encoded)
    if length > block_size:
        raise ConfigError(f"block_size = {block_size} is too small: a sentence needs {length} tokens (BOS and EOS included)")
    table = torch.full((len(distinct), length), tokenizer.pad_id, dtype=torch.long)  # (U, S)
    for row, ids in enumerate(encoded):
        table[row, : len(ids)] = torch.tensor(ids)
    row_of = {s: row for row, s in enumerate(distinct)}
    return table[torch.tensor([row_of[s] for s in sentences], dtype=torch.long)]  # (N, S)


# ---------------------------------------------------------------- training


def next_token_loss(model: GPT, batch: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Mean cross-entropy of predicting batch[:, t+1] from batch[:, :t+1]; PAD targets are ignored."""
    inputs, targets = batch[:, :-1], batch[:, 1:]  # (B, S-1) each
    logits = model(inputs)  # (B, S-1, V)
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), ignore_index=pad_id)


def scheduled_learning_rate(step: int, config: PretrainConfig) -> float:
    """lr_t = lr * t / warmup during warmup, then cosine decay to lr * min_lr_ratio at the last step:

    lr_t = lr_min + (lr - lr_min) * (1 + cos(pi * progress)) / 2,   progress = (t - warmup) / (steps - warmup)
    """
    lr = config.learning_rate
    if step < config.warmup_steps:
        return lr * (step + 1) / config.warmup_steps
    progress = (step - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
    min_lr = lr * config.min_lr_ratio
    return min_lr + (lr - min_lr) * 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))


def make_optimizer(model: GPT, config: PretrainConfig) -> torch.optim.AdamW:
    """AdamW; weight decay only on matrices and embeddings (dim >= 2), not on biases or LayerNorm gains."""
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": config.weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=config.learning_rate, betas=(config.beta1, config.beta2))


@torch.no_grad()
def evaluate_loss(model: GPT, data: torch.Tensor, pad_id: int, chunk: int = 2048) -> float:
    """Mean next-token cross-entropy over all non-PAD targets of data (N, S)."""
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for start in range(0, len(data), chunk):
        batch = data[start : start + chunk]
        n_targets = int((batch[:, 1:] != pad_id).sum())
        total += float(next_token_loss(model, batch, pad_id)) * n_targets
        count += n_targets
    model.train(was_training)
    return total / count


def pretrain(corpus: TextCorpus, config: PretrainConfig | None = None, verbose: bool = True,
             stop: Callable[[], bool] | None = None, partial_path: Path | None = None) -> PretrainResult:
    """Train a GPT from scratch on sentences of `corpus`; returns the model in eval mode.

    Interrupting: when `stop()` turns True the current step is finished, the state
    (weights, AdamW moments, the random generator, the loss curve so far) is written to
    `partial_path`, and PretrainingInterrupted is raised. A later call with the same
    `partial_path` continues from there and ends with the same model as an uninterrupted run.
    """
    config = (config or PretrainConfig()).validate()
    start_time = time.perf_counter()
    tokenizer = corpus_tokenizer(corpus)
    sentences = corpus.sample(config.corpus_size, seed=config.seed)
    data = encode_corpus(sentences, tokenizer, config.block_size)  # (N, S)
    train_data, val_data = data[config.val_size :], data[: config.val_size]  # (N_train, S), (N_val, S)

    generator = torch.Generator().manual_seed(config.seed)
    model = GPT(config.gpt_config(tokenizer.vocab_size), generator=generator)
    optimizer = make_optimizer(model, config)
    result = PretrainResult(model=model, tokenizer=tokenizer)
    running_loss: list[float] = []
    first_step = 0
    if partial_path is not None and Path(partial_path).exists():
        first_step = _load_partial(partial_path, config, model, optimizer, generator, result, running_loss)
    if verbose:
        resumed = f", resuming at step {first_step}" if first_step else ""
        print(f"pretraining a {model.num_parameters():,}-parameter GPT on {len(train_data):,} sentences "
              f"({config.steps} steps x {config.batch_size}); "
              f"uniform loss log V = {math.log(tokenizer.vocab_size):.3f}{resumed}")

    model.train()
    for step in range(first_step, config.steps):
        lr = scheduled_learning_rate(step, config)
        for group in optimizer.param_groups:
            group["lr"] = lr
        rows = torch.randint(len(train_data), (config.batch_size,), generator=generator)  # (B,)
        loss = next_token_loss(model, train_data[rows], tokenizer.pad_id)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if config.max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm)
        optimizer.step()
        running_loss.append(loss.item())
        if not math.isfinite(running_loss[-1]):
            raise TrainingDiverged(f"pretraining step {step + 1}: loss = {running_loss[-1]}; stopped "
                                   "(try a smaller learning rate)")

        last_step = step == config.steps - 1
        if (step + 1) % config.eval_interval == 0 or last_step:
            val_loss = evaluate_loss(model, val_data, tokenizer.pad_id)
            train_loss = sum(running_loss) / len(running_loss)
            running_loss.clear()
            result.history.append({"step": step + 1, "lr": lr, "train_loss": train_loss, "val_loss": val_loss})
            if verbose:
                print(f"step {step + 1:5d}/{config.steps}  lr {lr:.2e}  train loss {train_loss:.4f}  "
                      f"val loss {val_loss:.4f}  ({time.perf_counter() - start_time:.1f}s)")
        if stop is not None and stop() and not last_step:
            if partial_path is not None:
                save_checkpoint({"pretrain_config": asdict(config), "step": step + 1, "model": model.state_dict(),
                                 "optimizer": optimizer.state_dict(), "generator": generator.get_state(),
                                 "history": result.history, "running_loss": running_loss}, partial_path)
            raise PretrainingInterrupted(step + 1, partial_path)
    model.eval().never_emit(*special_ids(tokenizer))
    result.val_loss = result.history[-1]["val_loss"]
    result.seconds = time.perf_counter() - start_time
    return result


def special_ids(tokenizer: CharTokenizer) -> tuple[int, int]:
    """BOS and PAD: tokens a pretrained model never emits into generated text (GPT.never_emit).

    They are never targets of the next-token loss (BOS only starts a sequence, PAD targets
    are masked), so the model gives them little mass; masking them makes it exactly 0.
    """
    return tokenizer.bos_id, tokenizer.pad_id


def _load_partial(path, config, model, optimizer, generator, result, running_loss) -> int:
    """Restore an interrupted pretraining; returns the step to continue from."""
    state = load_checkpoint(path, required_keys=("pretrain_config", "step", "model", "optimizer", "generator"))
    if state["pretrain_config"] != asdict(config):
        raise CheckpointError(f"{path} holds an interrupted pretraining with another config; delete it to start over")
    try:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        generator.set_state(state["generator"])
        result.history.extend(state.get("history", []))
        running_loss.extend(state.get("running_loss", []))
        return int(state["step"])
    except (RuntimeError, ValueError, KeyError, TypeError) as error:
        raise CheckpointError(f"{path} does not fit this model ({str(error).splitlines()[0][:120]})") from None


def partial_checkpoint_path(path: Path) -> Path:
    """Where an interrupted pretraining bound for `path` keeps its progress."""
    return path.with_name(path.stem + ".partial.pt")


# ---------------------------------------------------------------- checkpoints


def save_sft_checkpoint(model: GPT, tokenizer: CharTokenizer, path: str | os.PathLike,
                        config: PretrainConfig | None = None, metrics: dict | None = None) -> Path:
    """Write model weights + configs + tokenizer atomically, through `ppo.runs.checkpoint`.

    Everything besides tensors is a plain dict/list/str/number, so torch.load(weights_only=True) can read it.
    """
    path = Path(path)
    payload = {
        "sft_format": CHECKPOINT_FORMAT,
        "model_state": model.state_dict(),
        "gpt_config": asdict(model.config),
        "tokenizer": tokenizer.state_dict(),
        "pretrain_config": None if config is None else config.to_dict(),
        "metrics": dict(metrics or {}),
    }
    save_checkpoint(payload, path)
    return path


SFT_KEYS = ("sft_format", "model_state", "gpt_config", "tokenizer", "pretrain_config", "metrics")


def load_sft_checkpoint(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> SFTCheckpoint:
    """Read a checkpoint written by save_sft_checkpoint; CheckpointError if it is corrupt or inconsistent."""
    path = Path(path)
    payload = load_checkpoint(path, required_keys=SFT_KEYS)
    if payload["sft_format"] != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{path} has SFT checkpoint format {payload['sft_format']}, expected {CHECKPOINT_FORMAT}")
    try:
        gpt_config = GPTConfig(**payload["gpt_config"])
        tokenizer = CharTokenizer.from_state_dict(payload["tokenizer"])
        stored = payload["pretrain_config"]
        pretrain_config = None if stored is None else PretrainConfig.from_dict(stored).validate()
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"{path} has an invalid config: {exc}") from exc
    if tokenizer.vocab_size != gpt_config.vocab_size:
        raise CheckpointError(f"{path}: tokenizer has {tokenizer.vocab_size} tokens but the model "
                              f"expects {gpt_config.vocab_size}")
    model = GPT(gpt_config)
    try:
        model.load_state_dict(payload["model_state"])
    except RuntimeError as exc:
        reason = str(exc).splitlines()[0]
        raise CheckpointError(f"{path}: weights do not match the stored GPTConfig ({reason})") from exc
    model.to(map_location).eval()
    return SFTCheckpoint(model=model, tokenizer=tokenizer, pretrain_config=pretrain_config,
                         metrics=payload["metrics"])


# ---------------------------------------------------------------- cache


def default_cache_dir() -> Path:
    """$PPO_CACHE_DIR if set, else ~/.cache/ppo-from-scratch."""
    env = os.environ.get("PPO_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "ppo-from-scratch"


def cache_dir_source(given: str | os.PathLike | None, flag: str) -> tuple[Path, str]:
    """(the cache folder, what a message calls it): `given` under the name `flag`, else
    $PPO_CACHE_DIR when it is set, else the default folder."""
    if given is not None:
        return Path(given), flag
    if os.environ.get("PPO_CACHE_DIR"):
        return default_cache_dir(), "PPO_CACHE_DIR"
    return default_cache_dir(), "the cache folder"


def cached_checkpoint_path(corpus: TextCorpus, config: PretrainConfig,
                           cache_dir: str | os.PathLike | None = None) -> Path:
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    return cache_dir / f"sft-{config.short_hash(corpus)}.pt"


def load_or_pretrain_sft(corpus: TextCorpus, config: PretrainConfig | None = None,
                         cache_dir: str | os.PathLike | None = None, verbose: bool = True,
                         stop: Callable[[], bool] | None = None) -> tuple[GPT, CharTokenizer]:
    """The model pretrained on `corpus` with this config: loaded from the cache, or trained and cached.

    An interrupted pretraining (`stop`, see `pretrain`) keeps its progress next to the
    cache file and the next call continues it.

    The cache file name holds a hash of the config and of the corpus's fingerprint, so
    changing any setting trains a new model. Returns (model in eval mode, tokenizer).
    """
    config = (config or PretrainConfig()).validate()
    path = cached_checkpoint_path(corpus, config, cache_dir)
    if path.exists():
        try:
            checkpoint = load_sft_checkpoint(path)
        except CheckpointError as exc:
            raise CheckpointError(f"{exc} (delete the file to retrain)") from exc
        if checkpoint.pretrain_config != config:
            raise CheckpointError(f"{path} was trained with a different PretrainConfig; delete it to retrain")
        if verbose:
            val_loss = checkpoint.metrics.get("val_loss", float("nan"))
            print(f"loaded pretrained model from {path} (val loss {val_loss:.4f})")
        return checkpoint.model.never_emit(*special_ids(checkpoint.tokenizer)), checkpoint.tokenizer
    partial = partial_checkpoint_path(path)
    result = pretrain(corpus, config, verbose=verbose, stop=stop, partial_path=partial)
    save_sft_checkpoint(result.model, result.tokenizer, path, config,
                        metrics={"val_loss": result.val_loss, "seconds": result.seconds})
    partial.unlink(missing_ok=True)
    if verbose:
        print(f"saved pretrained model to {path}")
    return result.model, result.tokenizer
