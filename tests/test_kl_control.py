"""The KL controllers: the batch estimate of the optimum's KL, the solved β, and a closed loop on a stub."""

from __future__ import annotations

import math

import pytest
import torch

from ppo.lm.algorithm.kl_control import (
    FixedKLController,
    KLFeedback,
    OptimumKLController,
    ProportionalKLController,
    effective_sample_size,
    kl_controller,
    largest_tilted_kl,
    solve_beta,
    tilted_kl,
)
from ppo.lm.exact.optimum import kl_regularised_optimum

# A stub task: four answers with these reference probabilities and scores.
REFERENCE = torch.tensor([0.5, 0.3, 0.15, 0.05], dtype=torch.float64)
SCORES = torch.tensor([0.0, 0.2, 0.5, 1.0], dtype=torch.float64)


def exact_optimum_kl(beta: float) -> float:
    """KL(π*_β ‖ π_ref) from the closed form of ppo.lm.exact.optimum (an independent implementation)."""
    names = [str(i) for i in range(len(REFERENCE))]
    optimum = kl_regularised_optimum(dict(zip(names, REFERENCE.tolist())), dict(zip(names, SCORES.tolist())), beta)
    return optimum.kl


def test_tilted_kl_of_two_equally_likely_answers_by_hand():
    """q = (1/2, 1/2), r = (1, 0): p = (e^θ, 1)/(e^θ + 1), K = Σ p log(2p)."""
    theta = 2.0
    p = math.exp(theta) / (math.exp(theta) + 1)
    by_hand = p * math.log(2 * p) + (1 - p) * math.log(2 * (1 - p))
    scores, log_ratios = torch.tensor([1.0, 0.0]), torch.zeros(2)
    assert tilted_kl(theta, scores, log_ratios) == pytest.approx(by_hand, rel=1e-12)
    assert largest_tilted_kl(scores, log_ratios) == pytest.approx(math.log(2), rel=1e-12)


@pytest.mark.parametrize("beta", [0.1, 0.3, 1.0])
def test_tilted_kl_of_a_batch_from_another_policy_estimates_the_optimum(beta):
    """Completions drawn from π ≠ π_ref, re-weighted by exp(−ℓ): K(β) → KL(π*_β ‖ π_ref) as the batch grows."""
    policy = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64)
    answers = torch.multinomial(policy, 200_000, replacement=True, generator=torch.Generator().manual_seed(0))
    log_ratios = (policy.log() - REFERENCE.log())[answers]
    estimate = tilted_kl(1 / beta, SCORES[answers], log_ratios)
    assert estimate == pytest.approx(exact_optimum_kl(beta), rel=0.02)


def test_solve_beta_finds_the_beta_whose_optimum_has_the_target_kl():
    # the whole distribution as a weighted "batch": one entry per answer with ℓ = −log(n·π_ref) makes q = π_ref
    log_ratios = -(REFERENCE * len(REFERENCE)).log()
    for target in (0.1, 0.5, 1.5):
        beta = solve_beta(SCORES, log_ratios, target)
        assert exact_optimum_kl(beta) == pytest.approx(target, rel=1e-6)
    assert largest_tilted_kl(SCORES, log_ratios) == pytest.approx(-math.log(0.05))
    assert solve_beta(SCORES, log_ratios, 3.1) is None  # above −log π_ref(best answer) = 3.0
    assert solve_beta(torch.ones(4), torch.zeros(4), 0.5) is None  # every answer scored alike


class LaggingPolicy:
    """A stub policy whose KL answers β with a lag: each iteration its logits move a fraction η
    of the way to those of π*_β ∝ π_ref·exp(r/β); the controller sees n sampled answers."""

    def __init__(self, rate: float = 0.4, batch: int = 128, seed: int = 0):
        self.logits, self.rate, self.batch = REFERENCE.log().clone(), rate, batch
        self.generator = torch.Generator().manual_seed(seed)

    def probabilities(self) -> torch.Tensor:
        return torch.softmax(self.logits, dim=0)

    def kl(self) -> float:
        p = self.probabilities()
        return float((p * (p.log() - REFERENCE.log())).sum())

    def step(self, beta: float) -> KLFeedback:
        p = self.probabilities()
        answers = torch.multinomial(p, self.batch, replacement=True, generator=self.generator)
        log_ratios = (p.log() - REFERENCE.log())[answers]
        feedback = KLFeedback(float(log_ratios.mean()), self.batch, SCORES[answers], log_ratios)
        target_logits = REFERENCE.log() + SCORES / beta
        self.logits = (1 - self.rate) * self.logits + self.rate * (target_logits - target_logits.logsumexp(0))
        return feedback


@pytest.mark.parametrize("target", [0.3, 1.0, 2.0])
def test_optimum_controller_brings_a_lagging_policy_to_the_target(target):
    policy, controller = LaggingPolicy(), OptimumKLController(beta=0.15, target=target, horizon=128)
    kls = []
    for _ in range(20):
        controller.update(policy.step(controller.beta))
        kls.append(policy.kl())
    assert all(abs(kl / target - 1) < 0.2 for kl in kls[-5:]), kls
    assert exact_optimum_kl(controller.beta) == pytest.approx(target, rel=0.2)


def test_proportional_controller_converges_on_a_stub_without_lag_within_its_horizon():
    """The KL follows β at once (the policy is π*_β): the proportional rule reaches the target
    in about log(β*/β₀)/log(1.2) iterations with n/H = 1, and stays."""
    target = 1.0
    controller = ProportionalKLController(beta=0.05, target=target, horizon=128)
    kls = []
    for _ in range(20):
        kl = exact_optimum_kl(controller.beta)
        kls.append(kl)
        controller.update(KLFeedback(kl, 128))
    assert all(abs(kl / target - 1) < 0.2 for kl in kls[-5:]), kls


def test_proportional_rule_by_hand_and_the_fallback_of_the_optimum_controller():
    assert FixedKLController(0.1).update(KLFeedback(100.0, 64)) == 0.1
    controller = ProportionalKLController(beta=0.1, target=2.0, horizon=1000)
    assert controller.update(KLFeedback(8.0, 100)) == pytest.approx(0.1 * (1 + 0.2 * 0.1))  # error clipped at +0.2
    controller = ProportionalKLController(beta=0.1, target=2.0, horizon=1000)
    assert controller.update(KLFeedback(1.8, 100)) == pytest.approx(0.1 * (1 - 0.1 * 0.1))  # e = 1.8/2 − 1 = −0.1
    # every completion scored alike: β̂ is not identified, so the proportional step is taken
    controller = OptimumKLController(beta=0.1, target=2.0, horizon=100)
    assert controller.update(KLFeedback(1.0, 100, torch.ones(100), torch.zeros(100))) == pytest.approx(0.1 * 0.8)
    assert controller.last_solution is None
    # a far-off β̂ is approached by at most a factor of 2 per iteration
    controller = OptimumKLController(beta=10.0, target=1.0, horizon=100)
    log_ratios = -(REFERENCE * len(REFERENCE)).log()
    assert controller.update(KLFeedback(0.0, 4, SCORES, log_ratios)) == pytest.approx(5.0)
    assert isinstance(kl_controller(0.1, None), FixedKLController)
    assert isinstance(kl_controller(0.1, 1.0, "proportional"), ProportionalKLController)
    with pytest.raises(ValueError, match="not one of"):
        kl_controller(0.1, 1.0, "pid")


def test_a_horizon_that_could_make_beta_negative_is_refused():
    from ppo.config import ConfigError
    from ppo.lm.trainers.rlhf_config import RLHFConfig

    assert RLHFConfig(kl_target=1.0, iterations=2, batch_size=32).effective_kl_horizon == 32  # never below B
    assert RLHFConfig(kl_target=1.0, iterations=100, batch_size=32).effective_kl_horizon == 160
    with pytest.raises(ConfigError, match="kl_horizon = 6 must be more than batch_size / 5"):
        RLHFConfig(kl_target=1.0, kl_horizon=6, batch_size=32).validate()
    with pytest.raises(ValueError, match="too short"):
        ProportionalKLController(beta=1.0, target=1.0, horizon=6).update(KLFeedback(0.0, 32))


def test_effective_sample_size_by_hand():
    assert effective_sample_size(torch.zeros(5)) == pytest.approx(5.0)
    # w = (1, 1/2): (3/2)² / (1 + 1/4) = 1.8
    assert effective_sample_size(torch.tensor([0.0, math.log(2.0)])) == pytest.approx(1.8)


def test_optimum_controller_pools_the_batches_by_their_effective_sample_size():
    log_ratios_a = -(REFERENCE * len(REFERENCE)).log()  # q = π_ref
    log_ratios_b = torch.tensor([0.3, -0.2, 0.5, 0.1], dtype=torch.float64)
    solutions = [solve_beta(SCORES, ratios, 0.5) for ratios in (log_ratios_a, log_ratios_b)]
    weights = [effective_sample_size(ratios) for ratios in (log_ratios_a, log_ratios_b)]
    controller = OptimumKLController(beta=solutions[0], target=0.5)
    controller.update(KLFeedback(0.0, 4, SCORES, log_ratios_a))
    assert controller.beta == pytest.approx(solutions[0])
    controller.update(KLFeedback(0.0, 4, SCORES, log_ratios_b))
    pooled = math.exp(sum(w * math.log(b) for w, b in zip(weights, solutions)) / sum(weights))
    assert controller.beta == pytest.approx(pooled) and solutions[0] != pytest.approx(solutions[1])
    # a batch that cannot tell adds nothing, and the pooled sums survive a checkpoint
    controller.update(KLFeedback(0.0, 4, torch.ones(4), torch.zeros(4)))
    assert controller.beta == pytest.approx(pooled)
    restored = OptimumKLController(beta=1.0, target=0.5)
    restored.load_state_dict(controller.state_dict())
    assert restored.state_dict() == controller.state_dict()


def test_top_scores_apart_by_rounding_are_a_tie_and_the_batch_adds_nothing():
    """r = (1, 1 + 1e-6, 0, …, 0) on 8 completions of π_ref: the two best are one answer. Tied, K_max = log 4 < 1.5
    = the target, so the batch cannot tell; told apart, K_max = log 8 and the root sits at the bracket's floor."""
    scores = torch.tensor([1.0, 1.0 + 1e-6, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], dtype=torch.float64)
    log_ratios = torch.zeros(8, dtype=torch.float64)
    assert largest_tilted_kl(scores, log_ratios) == pytest.approx(math.log(4), rel=1e-12)
    assert solve_beta(scores, log_ratios, target=1.5) is None
    controller = OptimumKLController(beta=0.2, target=1.5, horizon=100)
    reference = -(REFERENCE * len(REFERENCE)).log()  # q = π_ref: identifies β̂ (K_max = 3 nats)
    controller.update(KLFeedback(0.0, 4, SCORES, reference))
    pooled, beta = controller.pooled_solution, controller.beta
    controller.update(KLFeedback(0.0, 8, scores, log_ratios))
    assert controller.last_solution is None
    assert controller.pooled_solution == pooled and controller.beta == pytest.approx(min(2 * beta, pooled))


def test_one_extreme_batch_moves_the_pooled_solution_by_at_most_a_factor_m_to_its_share():
    """After a batch of π_ref (ESS 4, β̂₁), the same batch with every score divided by 1000 has β̂₂ = β̂₁/1000 (K
    depends on r/β only); it enters as β̂₁/m, so β̄ = exp((4·log β̂₁ + 4·log(β̂₁/m)) / 8) = β̂₁/√m, and the batch
    after that, β̂₁ again, enters as it is: β̄ = exp((8·log β̂₁ + 4·log(β̂₁/m)) / 12) = β̂₁ / m^(1/3)."""
    target, m = 2.0, 2.0
    log_ratios = -(REFERENCE * len(REFERENCE)).log()  # q = π_ref exactly: ESS = 4
    controller = OptimumKLController(beta=1.0, target=target, max_factor=m)
    controller.update(KLFeedback(0.0, 4, SCORES, log_ratios))
    solution = solve_beta(SCORES, log_ratios, target)
    assert controller.pooled_solution == pytest.approx(solution, rel=1e-12)
    assert solve_beta(SCORES / 1000, log_ratios, target) == pytest.approx(solution / 1000, rel=1e-9)
    controller.update(KLFeedback(0.0, 4, SCORES / 1000, log_ratios))
    assert controller.pooled_solution == pytest.approx(solution / m ** 0.5, rel=1e-12)
    controller.update(KLFeedback(0.0, 4, SCORES, log_ratios))
    assert controller.pooled_solution == pytest.approx(solution / m ** (1 / 3), rel=1e-12)


def test_the_solution_reads_low_from_a_policy_far_from_the_reference():
    """The finite-sample bias the module docstring states: batches of 64 from π*_{0.1} (far from π_ref: ESS ≈ 10)
    give β̂ below the exact β of KL target 1, on average and in most batches; batches of π_ref do not (as far as
    their noise lets one tell)."""
    names = [str(i) for i in range(len(REFERENCE))]
    far = torch.tensor(list(kl_regularised_optimum(dict(zip(names, REFERENCE.tolist())),
                                                   dict(zip(names, SCORES.tolist())), 0.1).probabilities.values()),
                       dtype=torch.float64)
    exact = solve_beta(SCORES, -(REFERENCE * len(REFERENCE)).log(), 1.0)  # K(β) of π_ref itself
    generator = torch.Generator().manual_seed(0)

    def log_solutions(policy: torch.Tensor) -> torch.Tensor:
        out = []
        for _ in range(400):
            answers = torch.multinomial(policy, 64, replacement=True, generator=generator)
            solution = solve_beta(SCORES[answers], (policy.log() - REFERENCE.log())[answers], 1.0)
            out.append(math.log(solution) if solution is not None else math.nan)
        return torch.tensor(out)

    from_far, from_reference = log_solutions(far), log_solutions(REFERENCE)
    told = from_far[~from_far.isnan()]
    assert len(told) > 200 and float(told.mean()) < math.log(exact) - 0.3
    assert float((told < math.log(exact)).double().mean()) > 0.7
    assert abs(float(from_reference.nanmean()) - math.log(exact)) < 0.1
