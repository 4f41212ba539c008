"""The reference problem for the optimizers: a loss over two parameter arrays with its
gradient written out in NumPy (so neither library's autodiff is involved), and the
optimizer configurations compared with optax's (tests/data/make_optax_reference.py)."""

import numpy as np

STEPS = 10
A = np.array([[1.0, -2.0, 0.5, 3.0], [0.25, 1.5, -1.0, 2.0], [2.0, 0.0, 1.0, -0.5]])
B = np.array([1.0, -1.0, 0.5])


def initial_params():
    return {"w": np.array([0.5, -0.25, 1.0, 0.75]), "m": np.array([[0.1, -0.2, 0.3],
                                                                   [0.4, 0.0, -0.6]])}


def gradient(params):
    """d/dparams of 0.5 |A w - B|^2 + 0.1 sum(w^4) + sum(sin(m) * m)."""
    w, m = params["w"], params["m"]
    return {"w": A.T @ (A @ w - B) + 0.4 * w ** 3, "m": np.sin(m) + m * np.cos(m)}


def decaying(count):
    return 0.05 * 0.9 ** count


# name -> (optimizer, learning rate, keyword arguments); "decaying" is the schedule above
CONFIGS = {
    "sgd": ("sgd", 0.05, {}),
    "sgd_momentum": ("sgd", 0.05, {"momentum": 0.9}),
    "sgd_nesterov": ("sgd", 0.05, {"momentum": 0.9, "nesterov": True}),
    "adam": ("adam", 0.05, {}),
    "adam_schedule": ("adam", "decaying", {"b1": 0.8, "eps_root": 1e-10}),
    "nadam": ("adam", 0.05, {"nesterov": True}),
    "adamw": ("adamw", 0.05, {"weight_decay": 0.1}),
    "rmsprop": ("rmsprop", 0.05, {}),
    "rmsprop_centered_momentum": ("rmsprop", 0.05, {"centered": True, "momentum": 0.5}),
    "rmsprop_nesterov": ("rmsprop", 0.02, {"momentum": 0.9, "nesterov": True,
                                           "initial_scale": 0.1}),
    "adagrad": ("adagrad", 0.1, {}),
}


def make(module, name):
    """The optimizer of configuration `name` from `module` (optax or tracegrad.optimizers)."""
    fn, lr, kwargs = CONFIGS[name]
    return getattr(module, fn)(decaying if lr == "decaying" else lr, **kwargs)
