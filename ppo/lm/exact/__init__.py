"""Exact analysis of the tiny model: the KL-regularised optimum and the distance to it, enumeration, best-of-n, exact KL gradients, over-optimisation fits."""
