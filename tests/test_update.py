"""The update routine both trainers share (ppo.algorithm.update): epochs, minibatches, early stop, diagnostics."""

import math

import pytest
import torch

from ppo.parallel.optim import FlatAdam, linear_annealing
from ppo.algorithm.update import MinibatchLoss, gradient_step, run_update


class Recorder:
    """A minibatch loss over one scalar parameter w that records which samples it saw.

    Its log-ratio is read from a script: call i returns `log_ratios[i]` for every sample
    (0 when the script has run out), so the early-stop rule can be steered by hand.
    """

    def __init__(self, log_ratios=()):
        self.weight = torch.nn.Parameter(torch.zeros(()))
        self.optimizer = FlatAdam([self.weight], lr=0.1)
        self.seen: list[list[int]] = []
        self.log_ratios = list(log_ratios)

    def __call__(self, minibatch):
        ids = minibatch["id"]
        self.seen.append(ids.tolist())
        value = self.log_ratios[len(self.seen) - 1] if len(self.seen) <= len(self.log_ratios) else 0.0
        loss = (self.weight - 1.0) ** 2
        return MinibatchLoss(loss=loss, log_ratio=torch.full((len(ids),), value), terms={"loss": loss})


def update(recorder, num_samples=12, epochs=3, minibatches=4, target_kl=None, clip_coef=0.2):
    samples = {"id": torch.arange(num_samples), "payload": torch.arange(num_samples) * 10}
    return run_update(samples, recorder, recorder.optimizer, update_epochs=epochs, num_minibatches=minibatches,
                      max_grad_norm=None, target_kl=target_kl, clip_coef=clip_coef,
                      generator=torch.Generator().manual_seed(0))


def test_without_early_stop_every_sample_is_visited_exactly_once_per_epoch():
    recorder = Recorder()
    metrics = update(recorder)
    assert len(recorder.seen) == 3 * 4 and all(len(ids) == 3 for ids in recorder.seen)
    for epoch in range(3):
        visited = sorted(i for ids in recorder.seen[4 * epoch : 4 * epoch + 4] for i in ids)
        assert visited == list(range(12))
    assert recorder.seen[:4] != recorder.seen[4:8]  # reshuffled every epoch
    assert metrics["gradient_steps"] == 12 and metrics["early_stopped"] == 0.0
    assert recorder.optimizer.steps == 12


def test_the_rows_of_every_tensor_stay_together():
    seen_pairs = []

    def loss(minibatch):
        seen_pairs.append((minibatch["id"] * 10 == minibatch["payload"]).all().item())
        weight = torch.zeros((), requires_grad=True)
        return MinibatchLoss(loss=weight * 0, log_ratio=torch.zeros(len(minibatch["id"])))

    samples = {"id": torch.arange(8), "payload": torch.arange(8) * 10}
    run_update(samples, loss, FlatAdam([torch.nn.Parameter(torch.zeros(1))], lr=0.1), update_epochs=2,
               num_minibatches=2, max_grad_norm=None, target_kl=None, clip_coef=0.2, generator=torch.Generator())
    assert seen_pairs == [True] * 4


def test_early_stop_is_checked_per_minibatch_before_its_step():
    # k3 of a log-ratio x is e^x − 1 − x: 0.1 → 0.00517, 0.3 → 0.0499. With target_kl = 0.02
    # the first two minibatches (x = 0, 0.1) step, the third (x = 0.3) is measured and
    # stops the update without a step of its own.
    recorder = Recorder(log_ratios=[0.0, 0.1, 0.3, 0.0])
    metrics = update(recorder, target_kl=0.02)
    assert len(recorder.seen) == 3
    assert recorder.optimizer.steps == 2 and metrics["gradient_steps"] == 2
    assert metrics["early_stopped"] == 1.0
    k3 = [math.expm1(x) - x for x in (0.0, 0.1, 0.3)]
    assert metrics["approx_kl"] == pytest.approx(sum(k3) / 3, rel=1e-6)  # the stopping minibatch is reported
    assert metrics["old_approx_kl"] == pytest.approx(-(0.0 + 0.1 + 0.3) / 3, rel=1e-6)
    # exactly at the target: not beyond it, so no stop
    recorder = Recorder(log_ratios=[0.1] * 12)
    assert update(recorder, target_kl=math.expm1(0.1) - 0.1 + 1e-7)["gradient_steps"] == 12


def test_diagnostics_by_hand_with_a_mask():
    log_ratio = torch.tensor([[math.log(1.5), math.log(0.9), 7.0], [math.log(0.7), 0.0, 7.0]])
    mask = torch.tensor([[True, True, False], [True, True, False]])  # the 7.0s are padding

    def loss(minibatch):
        weight = torch.zeros((), requires_grad=True)
        return MinibatchLoss(loss=weight * 0, log_ratio=log_ratio, mask=mask)

    metrics = run_update({"row": torch.arange(2)}, loss, FlatAdam([torch.nn.Parameter(torch.zeros(1))], lr=0.1),
                         update_epochs=1, num_minibatches=1, max_grad_norm=None, target_kl=None, clip_coef=0.2,
                         generator=torch.Generator())
    ratios = [1.5, 0.9, 0.7, 1.0]
    assert metrics["clip_fraction"] == pytest.approx(2 / 4)  # 1.5 and 0.7 lie outside [0.8, 1.2]
    assert metrics["approx_kl"] == pytest.approx(sum(r - 1 - math.log(r) for r in ratios) / 4, rel=1e-6)
    assert metrics["old_approx_kl"] == pytest.approx(-sum(math.log(r) for r in ratios) / 4, rel=1e-6)
    assert metrics["first_minibatch_ratio_error"] == pytest.approx(0.5)


def test_gradient_step_clips_the_global_norm_before_the_step():
    weight, bias = torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(1))
    optimizer = FlatAdam([weight, bias], lr=0.1)
    norm = gradient_step(optimizer, 3.0 * weight[0] + 4.0 * bias[0], max_grad_norm=1.0)  # g = (3, 0 | 4)
    assert float(norm) == pytest.approx(5.0)
    torch.testing.assert_close(optimizer.flat_grads, torch.tensor([0.6, 0.0, 0.8]), atol=1e-6, rtol=0)
    assert optimizer.steps == 1
    # a second step starts from zeroed gradients: the same loss gives the same gradient again
    gradient_step(optimizer, 3.0 * weight[0] + 4.0 * bias[0], max_grad_norm=None)
    torch.testing.assert_close(optimizer.flat_grads, torch.tensor([3.0, 0.0, 4.0]))


def test_linear_annealing_by_hand():
    assert [linear_annealing(1.0, done, 4) for done in range(4)] == [1.0, 0.75, 0.5, 0.25]
    assert linear_annealing(3e-4, 0, 20) == 3e-4
