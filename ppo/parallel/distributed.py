"""Data-parallel PPO: K processes, one run (DD-PPO, Wijmans et al., ICLR 2020).

Every process collects rollouts from its own share of the environments, computes its
advantages locally and its gradients on its own minibatches; at every minibatch the
gradients are averaged over the processes with one all-reduce of the flat gradient
vector, so every process takes the same Adam step and all hold identical parameters.

    g = (1/K) Σ_k g_k        g_k = ∇L on process k's minibatch of b/K samples

With equal shares this is the gradient of the mean loss over the K·(b/K) = b samples,
i.e. the gradient one process would compute on the whole minibatch. What else must
agree across processes is agreed the same way, and nothing more:

* advantage whitening uses the mean and variance over all processes' minibatches;
* the early stop on approx KL compares the mean over processes with target_kl;
* the observation and return statistics of the normalisers merge all processes' batches;
* the finished episodes are gathered, so the logged returns are the run's;
* a stop request (Ctrl-C) on any process stops all after the same iteration.

`World()` is one process: every method is then a no-op that returns its input, so a
run without torchrun computes exactly what it computed before this module existed.
Start K processes with `torchrun --nproc-per-node K -m experiments.commands.train ...`;
`init_world()` reads the RANK / WORLD_SIZE variables torchrun sets.

A process group serves tensors on its own device only: gloo takes CPU tensors, NCCL
CUDA ones (a CPU tensor there fails with "No backend type associated with device type
cpu"). The World knows that device (`World.device`) and every collective runs on it:
numbers it is handed (`mean_of`, `any`) become tensors there, and a tensor that lives
elsewhere (statistics kept on the CPU while the group is NCCL) is reduced through a
copy on the group's device and copied back.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass

import torch

from ppo.config import ConfigError
from ppo.algorithm.losses import normalize_advantages

COLLECTIVE_TIMEOUT_SECONDS = 600  # a lost peer is usually reported at once; a hung one after this

# What gloo, NCCL and the rendezvous store say when the process at the other end is gone or hangs.
PEER_FAILURE_SIGNS = (
    "closed by peer", "reset by peer", "broken pipe", "connection refused",  # gloo's TCP pairs, the store
    "remote process", "remote peer", "network error", "communicator was aborted",  # NCCL
    "timed out", "timing out", "timeout",  # a peer that hangs past COLLECTIVE_TIMEOUT_SECONDS
)


class PeerFailure(Exception):
    """Another process of the run stopped; one-line message."""


def is_peer_failure(error: BaseException) -> bool:
    """Did a collective fail because another process stopped (or the network to it)?

    Only then is the error reported as a PeerFailure; anything else (a tensor on a device
    the group does not serve, a wrong argument) is this process's own bug and keeps its
    message and traceback.
    """
    import torch.distributed as dist

    if isinstance(error, (ConnectionError, dist.DistNetworkError, dist.DistStoreError)):
        return True
    message = str(error).lower()
    return isinstance(error, RuntimeError) and any(sign in message for sign in PEER_FAILURE_SIGNS)


@dataclass(frozen=True)
class World:
    """This process's place among the K processes of one run (rank 0 of 1 by default)."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")  # where the process group takes its tensors (CUDA for NCCL)

    @property
    def is_main(self) -> bool:
        """Process 0 alone writes the run folder, the logs and the checkpoints."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.size > 1

    def _collective(self, operation, *args, **kwargs):
        try:
            return operation(*args, **kwargs)
        except Exception as error:
            if not is_peer_failure(error):
                raise
            reason = str(error).splitlines()[0] if str(error) else type(error).__name__
            reason = reason.split("] ", 1)[-1][:120]  # drop the "[source file:line]" prefix of gloo's messages
            raise PeerFailure(f"process {self.rank}: another process of this run stopped ({reason})") from None

    def _in_place(self, operation, tensor: torch.Tensor, **kwargs) -> torch.Tensor:
        """Apply an in-place collective to `tensor`, through a copy on self.device if it lives elsewhere."""
        on_device = tensor.to(self.device)  # `tensor` itself when it is already there
        self._collective(operation, on_device, **kwargs)
        if on_device is not tensor:
            tensor.copy_(on_device)
        return tensor

    def average_(self, tensor: torch.Tensor) -> torch.Tensor:
        """In place: tensor ← (1/K) Σ_k tensor_k."""
        if self.distributed:
            self.sum_(tensor).div_(self.size)
        return tensor

    def sum_(self, tensor: torch.Tensor) -> torch.Tensor:
        """In place: tensor ← Σ_k tensor_k."""
        if self.distributed:
            import torch.distributed as dist

            self._in_place(dist.all_reduce, tensor, op=dist.ReduceOp.SUM)
        return tensor

    def broadcast_(self, tensor: torch.Tensor, source: int = 0) -> torch.Tensor:
        """In place: every process gets process `source`'s tensor."""
        if self.distributed:
            import torch.distributed as dist

            self._in_place(dist.broadcast, tensor, src=source)
        return tensor

    def any(self, flag: bool) -> bool:
        """True on every process if it is True on one."""
        if not self.distributed:
            return flag
        return bool(self.sum_(torch.tensor([float(flag)], device=self.device)).item() > 0)

    def whiten(self, advantages: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Advantage whitening over all processes' shares (`whiten_across`); for one process
        exactly ppo.algorithm.losses.normalize_advantages."""
        if not self.distributed:
            return normalize_advantages(advantages, mask)
        return whiten_across(self, advantages, mask)

    def mean_of(self, value: float) -> float:
        """(1/K) Σ_k value_k of a Python number."""
        if not self.distributed:
            return value
        return float(self.average_(torch.tensor([value], dtype=torch.float64, device=self.device)).item())

    def gather(self, value) -> list:
        """[value of process 0, value of process 1, ...] on every process (any picklable value).

        torch pickles through a byte tensor on the group's device (the current GPU for NCCL,
        which init_world sets to self.device)."""
        if not self.distributed:
            return [value]
        import torch.distributed as dist

        values: list = [None] * self.size
        self._collective(dist.all_gather_object, values, value)
        return values

    def concatenate(self, tensors: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
        """Each 1-D tensor of `tensors` joined with the other processes' in rank order (one gather);
        the tensors themselves for a single process."""
        if not self.distributed:
            return tensors
        parts = self.gather(tuple(tensor.cpu() for tensor in tensors))
        return tuple(torch.cat([part[index] for part in parts]).to(tensors[index].device)
                     for index in range(len(tensors)))

    def share(self, count: int, what: str) -> int:
        """count / K, or a ConfigError naming `what` if it does not divide."""
        if count % self.size:
            raise ConfigError(f"{what} = {count} is not divisible by the {self.size} processes")
        return count // self.size

    def seed(self, seed: int) -> int:
        """A seed of this process's own random stream (`seed` itself for a single process)."""
        return seed if not self.distributed else seed + 1_000_003 * self.rank


SINGLE_PROCESS = World()


def whiten_across(world: World, advantages: torch.Tensor, mask: torch.Tensor | None = None,
                  eps: float = 1e-8) -> torch.Tensor:
    """(Â − μ) / (σ + eps) with μ and the unbiased σ² of all processes' samples together.

    From the summed moments: n = Σ n_k, μ = Σ S_k / n, σ² = (Σ Q_k − n μ²) / (n − 1), with
    S_k, Q_k the sum and the sum of squares of the (masked) entries on process k
    (ppo.algorithm.losses.normalize_advantages for one process). Masked entries come out as 0.
    """
    x = advantages.to(torch.float64)
    weight = torch.ones_like(x) if mask is None else mask.to(torch.float64)
    moments = world.sum_(torch.stack([(x * weight).sum(), (x * x * weight).sum(), weight.sum()]))
    total, squares, count = moments
    mean = total / count.clamp(min=1.0)
    variance = (squares - count * mean * mean) / (count - 1).clamp(min=1.0)
    whitened = (x - mean) / (variance.clamp(min=0.0).sqrt() + eps)
    return (whitened * weight).to(advantages.dtype)


def init_world(device: str = "cpu") -> World:
    """Join the run's process group if torchrun started this process, else one process.

    Backend gloo on CPU, NCCL on CUDA (each process on GPU LOCAL_RANK, the World's device).
    """
    size = int(os.environ.get("WORLD_SIZE", "1"))
    if size <= 1:
        return SINGLE_PROCESS
    import torch.distributed as dist

    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    cuda = str(device).startswith("cuda") or (device == "auto" and torch.cuda.is_available())
    if cuda:
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if gpus == 0:
            raise ConfigError(f"device = {device!r} but CUDA is not available here; use --device cpu")
        if local_rank >= gpus:
            raise ConfigError(f"device = {device!r}: process {local_rank} of this machine needs GPU {local_rank} but "
                              f"{gpus} are visible; start at most {gpus} per machine (--nproc-per-node {gpus})")
        torch.cuda.set_device(local_rank)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if cuda else "gloo",
                                timeout=datetime.timedelta(seconds=COLLECTIVE_TIMEOUT_SECONDS))
    return World(rank=rank, size=size, local_rank=local_rank,
                 device=torch.device("cuda", local_rank) if cuda else torch.device("cpu"))


def close_world(world: World) -> None:
    if world.distributed:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
