"""Supervised pretraining (SFT) of the tiny GPT on the synthetic food corpus.

The model learns next-token prediction by minimising the cross-entropy

    L = -(1/N) * sum_t log softmax(z_t)[y_t]        (sum over the N non-PAD targets y_t)

with AdamW and a warmup + cosine learning-rate schedule. The trained model is the
reference policy that PPO later fine-tunes; `load_or_pretrain_sft` trains it once per
configuration and caches the checkpoint on disk.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F

from envs import corpus
from ppo.checkpoint import CheckpointError
from ppo.checkpoint import load_checkpoint as load_state
from ppo.checkpoint import save_checkpoint as save_state
from ppo.lm.model import GPT, GPTConfig
from ppo.lm.tokenizer import CharTokenizer

CHECKPOINT_FORMAT = 1


@dataclass(frozen=True)
class PretrainConfig:
    """Every setting of a pretraining run.

    The defaults train in about 110 s of one CPU core and give a model whose distribution
    over foods is within total variation ~0.02 of the corpus table. Gradient noise limits
    that calibration: more steps and more sentences buy precision, a bigger model does not.
    """

    seed: int = 0  # seeds the corpus draw, the weight init and the batch order
    corpus_size: int = 800_000  # sentences drawn from the known distribution (train + validation)
    val_size: int = 4_096  # of which held out for validation
    steps: int = 2_000  # optimizer steps (steps * batch_size = 1.3 passes over the corpus)
    batch_size: int = 512  # sentences per step
    lr: float = 5e-3  # peak learning rate
    min_lr_ratio: float = 0.0  # final lr = lr * min_lr_ratio; decaying to 0 stills the weights' jitter
    warmup_steps: int = 50  # linear warmup from 0 to lr
    weight_decay: float = 0.01  # AdamW decoupled weight decay on weight matrices and embeddings
    beta1: float = 0.9  # AdamW first-moment decay
    beta2: float = 0.99  # AdamW second-moment decay
    grad_clip: float = 1.0  # clip the global gradient norm to this (0 = off)
    eval_interval: int = 250  # steps between validation-loss measurements
    n_layer: int = 1  # transformer blocks; one attention layer can already look back at the name
    n_head: int = 2  # attention heads per block
    n_embd: int = 32  # width of the residual stream
    dropout: float = 0.0  # dropout probability (800k sentences, 160 distinct: nothing to overfit)
    block_size: int = 32  # longest sequence the model accepts, in tokens

    def __post_init__(self):
        positive = ["corpus_size", "val_size", "steps", "batch_size", "eval_interval",
                    "n_layer", "n_head", "n_embd", "block_size"]
        for name in positive:
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if self.val_size >= self.corpus_size:
            raise ValueError(f"val_size ({self.val_size}) must be smaller than corpus_size ({self.corpus_size})")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if not 0 <= self.min_lr_ratio <= 1:
            raise ValueError(f"min_lr_ratio must be in [0, 1], got {self.min_lr_ratio}")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        for name in ("warmup_steps", "weight_decay", "grad_clip"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        for name in ("beta1", "beta2"):
            if not 0 <= getattr(self, name) < 1:
                raise ValueError(f"{name} must be in [0, 1), got {getattr(self, name)}")
        if self.n_embd % self.n_head != 0:
            raise ValueError(f"n_embd ({self.n_embd}) must be divisible by n_head ({self.n_head})")
        needed = corpus.longest_sentence_length() + 2  # + BOS and EOS
        if self.block_size < needed:
            raise ValueError(f"block_size must be >= {needed} (longest sentence + BOS + EOS), got {self.block_size}")

    def gpt_config(self, vocab_size: int) -> GPTConfig:
        return GPTConfig(vocab_size=vocab_size, block_size=self.block_size, n_layer=self.n_layer,
                         n_head=self.n_head, n_embd=self.n_embd, dropout=self.dropout)

    def short_hash(self) -> str:
        """10 hex digits identifying this config, the corpus table and the checkpoint format."""
        key = {"config": asdict(self), "corpus": corpus.PERCENT_TABLE, "people": corpus.PEOPLE,
               "foods": corpus.FOODS, "format": CHECKPOINT_FORMAT}
        return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:10]


@dataclass
class PretrainResult:
    """What `pretrain` returns: the trained model (eval mode), its tokenizer and the loss curve."""

    model: GPT
    tokenizer: CharTokenizer
    history: list[dict] = field(default_factory=list)  # one {"step", "lr", "train_loss", "val_loss"} per eval
    val_loss: float = float("nan")
    seconds: float = 0.0


@dataclass
class SFTCheckpoint:
    """What `load_checkpoint` returns."""

    model: GPT
    tokenizer: CharTokenizer
    pretrain_config: PretrainConfig | None
    metrics: dict


# ---------------------------------------------------------------- data


def corpus_tokenizer() -> CharTokenizer:
    """The tokenizer of the food corpus: BOS/EOS/PAD + every character a sentence can contain."""
    return CharTokenizer(corpus.corpus_characters())


def encode_corpus(sentences: list[str], tokenizer: CharTokenizer, block_size: int) -> torch.Tensor:
    """Sentences -> (N, S) ids: BOS + characters + EOS, right-padded with PAD to a common length S."""
    distinct = sorted(set(sentences))  # the corpus repeats a few hundred distinct sentences
    encoded = [tokenizer.encode(s, add_bos=True, add_eos=True) for s in distinct]
    length = max(len(ids) for ids in encoded)
    if length > block_size:
        raise ValueError(f"a sentence needs {length} tokens but block_size is {block_size}")
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


def learning_rate(step: int, config: PretrainConfig) -> float:
    """lr_t = lr * t / warmup during warmup, then cosine decay to lr * min_lr_ratio at the last step:

    lr_t = lr_min + (lr - lr_min) * (1 + cos(pi * progress)) / 2,   progress = (t - warmup) / (steps - warmup)
    """
    if step < config.warmup_steps:
        return config.lr * (step + 1) / config.warmup_steps
    progress = (step - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
    min_lr = config.lr * config.min_lr_ratio
    return min_lr + (config.lr - min_lr) * 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))


def make_optimizer(model: GPT, config: PretrainConfig) -> torch.optim.AdamW:
    """AdamW; weight decay only on matrices and embeddings (dim >= 2), not on biases or LayerNorm gains."""
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": config.weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=config.lr, betas=(config.beta1, config.beta2))


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


def pretrain(config: PretrainConfig | None = None, verbose: bool = True) -> PretrainResult:
    """Train a GPT from scratch on sentences of envs.corpus; returns the model in eval mode."""
    config = config or PretrainConfig()
    start_time = time.perf_counter()
    tokenizer = corpus_tokenizer()
    sentences = corpus.sample_sentences(config.corpus_size, seed=config.seed)
    data = encode_corpus(sentences, tokenizer, config.block_size)  # (N, S)
    train_data, val_data = data[config.val_size :], data[: config.val_size]  # (N_train, S), (N_val, S)

    generator = torch.Generator().manual_seed(config.seed)
    model = GPT(config.gpt_config(tokenizer.vocab_size), generator=generator)
    optimizer = make_optimizer(model, config)
    if verbose:
        print(f"pretraining a {model.num_parameters():,}-parameter GPT on {len(train_data):,} sentences "
              f"({config.steps} steps x {config.batch_size}); "
              f"uniform loss log V = {math.log(tokenizer.vocab_size):.3f}")

    result = PretrainResult(model=model, tokenizer=tokenizer)
    running_loss = []
    model.train()
    for step in range(config.steps):
        lr = learning_rate(step, config)
        for group in optimizer.param_groups:
            group["lr"] = lr
        rows = torch.randint(len(train_data), (config.batch_size,), generator=generator)  # (B,)
        loss = next_token_loss(model, train_data[rows], tokenizer.pad_id)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if config.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        optimizer.step()
        running_loss.append(loss.item())

        last_step = step == config.steps - 1
        if (step + 1) % config.eval_interval == 0 or last_step:
            val_loss = evaluate_loss(model, val_data, tokenizer.pad_id)
            train_loss = sum(running_loss) / len(running_loss)
            running_loss.clear()
            result.history.append({"step": step + 1, "lr": lr, "train_loss": train_loss, "val_loss": val_loss})
            if verbose:
                print(f"step {step + 1:5d}/{config.steps}  lr {lr:.2e}  train loss {train_loss:.4f}  "
                      f"val loss {val_loss:.4f}  ({time.perf_counter() - start_time:.1f}s)")
    model.eval()
    result.val_loss = result.history[-1]["val_loss"]
    result.seconds = time.perf_counter() - start_time
    return result


# ---------------------------------------------------------------- checkpoints


def save_checkpoint(path: str | os.PathLike, model: GPT, tokenizer: CharTokenizer,
                    config: PretrainConfig | None = None, metrics: dict | None = None) -> Path:
    """Write model weights + configs + tokenizer atomically, through `ppo.checkpoint`.

    Everything besides tensors is a plain dict/list/str/number, so torch.load(weights_only=True) can read it.
    """
    path = Path(path)
    payload = {
        "sft_format": CHECKPOINT_FORMAT,
        "model_state": model.state_dict(),
        "gpt_config": asdict(model.config),
        "tokenizer": tokenizer.state_dict(),
        "pretrain_config": None if config is None else asdict(config),
        "metrics": dict(metrics or {}),
    }
    save_state(payload, path)
    return path


SFT_KEYS = ("sft_format", "model_state", "gpt_config", "tokenizer", "pretrain_config", "metrics")


def load_checkpoint(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> SFTCheckpoint:
    """Read a checkpoint written by save_checkpoint; raises CheckpointError if it is corrupt or inconsistent."""
    path = Path(path)
    payload = load_state(path, required_keys=SFT_KEYS)
    if payload["sft_format"] != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{path} has SFT checkpoint format {payload['sft_format']}, expected {CHECKPOINT_FORMAT}")
    try:
        gpt_config = GPTConfig(**payload["gpt_config"])
        tokenizer = CharTokenizer.from_state_dict(payload["tokenizer"])
        stored = payload["pretrain_config"]
        pretrain_config = None if stored is None else PretrainConfig(**stored)
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


def cached_checkpoint_path(config: PretrainConfig, cache_dir: str | os.PathLike | None = None) -> Path:
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    return cache_dir / f"sft-{config.short_hash()}.pt"


def load_or_pretrain_sft(config: PretrainConfig | None = None, cache_dir: str | os.PathLike | None = None,
                         verbose: bool = True) -> tuple[GPT, CharTokenizer]:
    """The pretrained reference model for this config: loaded from the cache, or trained and cached.

    The cache file name holds a hash of the config (and of the corpus table), so changing any
    setting trains a new model. Returns (model in eval mode, tokenizer).
    """
    config = config or PretrainConfig()
    path = cached_checkpoint_path(config, cache_dir)
    if path.exists():
        try:
            checkpoint = load_checkpoint(path)
        except CheckpointError as exc:
            raise CheckpointError(f"{exc} (delete the file to retrain)") from exc
        if checkpoint.pretrain_config != config:
            raise CheckpointError(f"{path} was trained with a different PretrainConfig; delete it to retrain")
        if verbose:
            val_loss = checkpoint.metrics.get("val_loss", float("nan"))
            print(f"loaded pretrained model from {path} (val loss {val_loss:.4f})")
        return checkpoint.model, checkpoint.tokenizer
    result = pretrain(config, verbose=verbose)
    save_checkpoint(path, result.model, result.tokenizer, config,
                    metrics={"val_loss": result.val_loss, "seconds": result.seconds})
    if verbose:
        print(f"saved pretrained model to {path}")
    return result.model, result.tokenizer
