"""keep_freed_memory: freed autograd buffers are reused instead of faulted in again."""

import os
import subprocess
import sys

import pytest

PROBE = """
import resource, sys, torch, gymnasium as gym
from ppo.parallel.malloc import keep_freed_memory
from ppo.models.networks import ActorCritic
applied = keep_freed_memory() if sys.argv[1] == "keep" else False
torch.set_num_threads(1)
model = ActorCritic(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2))
obs, actions = torch.randn(1024, 4), torch.randint(0, 2, (1024,))
def step():  # the allocation pattern of one minibatch step of the default network
    model.zero_grad()
    log_probs, entropy, values = model.evaluate_actions(obs, actions)
    (log_probs.mean() + values.pow(2).mean() - entropy.mean()).backward()
for _ in range(20):
    step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(200):  # stray faults of the rest of the process (a few hundred at most) amortised over many steps
    step()
print(applied, (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 200)
"""


# glibc's own thresholds (128 KiB), fixed: left to itself, glibc raises the mmap threshold the first time
# it frees a mapped block, so whether the default probe keeps faulting would depend on the order of its
# first allocations. Fixed, the default probe is what glibc starts with, every run.
GLIBC_DEFAULTS = {"MALLOC_MMAP_THRESHOLD_": "131072", "MALLOC_TRIM_THRESHOLD_": "131072"}


def faults_per_step(mode: str) -> tuple[bool, float]:
    output = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True,
                            env={**os.environ, **GLIBC_DEFAULTS}).stdout
    applied, faults = output.split()
    return applied == "True", float(faults)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_freed_buffers_stay_in_the_process():
    applied, kept = faults_per_step("keep")
    if not applied:
        pytest.skip("this C library has no mallopt")
    _, default = faults_per_step("default")
    assert kept < 5, f"{kept} page faults per step with keep_freed_memory()"
    assert default > 10 * max(kept, 1), f"{default} page faults per step without it, {kept} with it"
