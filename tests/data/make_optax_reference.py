"""Writes optax_reference.json: the parameters after each of the first STEPS updates of
every configuration in tests/optimizer_problem.py, computed by optax in float64.

Run from the repository root, in an environment with optax installed:
    python tests/data/make_optax_reference.py
"""

import json
import pathlib
import sys

import jax
import numpy as np
import optax

jax.config.update("jax_enable_x64", True)
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
from tests import optimizer_problem as problem  # noqa: E402


def trajectory(name):
    opt = problem.make(optax, name)
    params = jax.tree.map(jax.numpy.asarray, problem.initial_params())
    state = opt.init(params)
    out = []
    for _ in range(problem.STEPS):
        grads = jax.tree.map(jax.numpy.asarray,
                             problem.gradient(jax.tree.map(np.asarray, params)))
        updates, state = opt.update(grads, state, params)
        params = optax.apply_updates(params, updates)
        out.append({k: np.asarray(v).tolist() for k, v in params.items()})
    return out


reference = {"optax": optax.__version__, "jax": jax.__version__,
             "trajectories": {name: trajectory(name) for name in problem.CONFIGS}}
path = pathlib.Path(__file__).with_name("optax_reference.json")
path.write_text(json.dumps(reference) + "\n")
print(f"wrote {path}")
