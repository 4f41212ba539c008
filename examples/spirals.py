"""Two interleaved spirals: the toy classification data of the training examples."""

import numpy as np


def spirals(rng: np.random.Generator, n: int = 512):
    """`n` noisy points on two interleaved spirals in the plane, and their 0/1 labels."""
    t = rng.uniform(0.5, 3 * np.pi, n)
    labels = rng.integers(0, 2, n)
    radius = t / (3 * np.pi)
    x = np.stack([radius * np.cos(t + np.pi * labels), radius * np.sin(t + np.pi * labels)], 1)
    return x + 0.02 * rng.standard_normal(x.shape), labels
