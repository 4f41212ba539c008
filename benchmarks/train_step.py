"""A compiled training step two ways: functional (parameters in, new parameters out, as
examples/train_mlp.py) against TensorFlow-style (parameters and optimizer state in
`tg.Variable`s, a `GradientTape` inside the `tg.function`, updates by `assign`).

    python benchmarks/train_step.py [--rounds N]

The model is `benchmarks/run.py`'s MLP loss (128x64 -> 128 -> 10, tanh, softmax
cross-entropy, float64); the steps are plain SGD and SGD with momentum 0.9. Both versions
are traced once and compiled by the numba backend into one kernel each; they are checked to
give the same parameters after 20 steps from the same start. Times are medians of 9 batches
(`benchmarks/run.py`'s `median_time`), measured alternately in `--rounds` rounds so both see
the same machine load; ratio = Variables time / functional time. Not a test.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from run import median_time, mlp_loss  # noqa: E402

import tracegrad as tg  # noqa: E402
import tracegrad.numpy as tnp  # noqa: E402

tg.config.background_compile = False  # timed calls measure the kernel, not the interim

B, D, H, K = 128, 64, 128, 10
LR, BETA = 0.05, 0.9
loss_fn = mlp_loss(tnp)


def problem(rng):
    params = [rng.standard_normal((D, H)) * 0.1, np.zeros(H),
              rng.standard_normal((H, K)) * 0.1, np.zeros(K)]
    return params, rng.standard_normal((B, D)), np.eye(K)[rng.integers(0, K, B)]


def functional(momentum: bool):
    """`step(state, x, y) -> (state, loss)`; state = params (+ momentum slots)."""
    grad = tg.value_and_grad(loss_fn, argnums=(0, 1, 2, 3))

    @tg.function
    def step(state, x, y):
        params = state[:4]
        loss, grads = grad(*params, x, y)
        if not momentum:
            return [p - LR * g for p, g in zip(params, grads)], loss
        slots = [BETA * m + g for m, g in zip(state[4:], grads)]
        return [p - LR * m for p, m in zip(params, slots)] + slots, loss

    return step


def with_variables(params, momentum: bool):
    """`step(x, y) -> loss` updating Variables in place; returns `(step, variables)`."""
    variables = [tg.Variable(p) for p in params]
    slots = [tg.Variable(np.zeros_like(p), trainable=False) for p in params]

    @tg.function
    def step(x, y):
        with tg.GradientTape() as tape:
            loss = loss_fn(*variables, x, y)
        grads = tape.gradient(loss, variables)
        for p, m, g in zip(variables, slots, grads):
            if momentum:
                m.assign(BETA * m + g)
                p.assign_sub(LR * m)
            else:
                p.assign_sub(LR * g)
        return loss

    return step, variables


def measure(momentum: bool, rounds: int):
    rng = np.random.default_rng(0)
    params, x, y = problem(rng)
    fstep = functional(momentum)
    vstep, variables = with_variables(params, momentum)
    state = [list(params) + ([np.zeros_like(p) for p in params] if momentum else [])]

    def run_functional():
        state[0], _ = fstep(state[0], x, y)

    def run_variables():
        vstep(x, y)

    for _ in range(20):  # compile both, then check that they compute the same thing
        run_functional()
        run_variables()
    for a, v in zip(state[0], variables):
        np.testing.assert_allclose(v.numpy(), a, rtol=1e-9, atol=1e-12)
    times = {"functional": [], "variables": []}
    for _ in range(rounds):
        times["functional"].append(median_time(run_functional))
        times["variables"].append(median_time(run_variables))
    assert fstep.tracing_count == 1 and vstep.tracing_count == 1
    return times


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    print(f"CPU: {cpu_model()} ({os.cpu_count()} cores); python {sys.version.split()[0]}, "
          f"numpy {np.__version__}, tracegrad {tg.__version__}")
    print(f"MLP {B}x{D} -> {H} -> {K}; median us per step in each round; "
          "ratio = Variables / functional")
    for name, momentum in (("SGD", False), ("SGD + momentum", True)):
        times = measure(momentum, args.rounds)
        f, v = (np.array(times[k]) * 1e6 for k in ("functional", "variables"))
        rounds = ", ".join(f"{a:.0f} / {b:.0f}" for a, b in zip(f, v))
        print(f"{name:15s} functional / Variables: {rounds} us; ratio "
              f"{np.min(v / f):.2f}-{np.max(v / f):.2f}", flush=True)


if __name__ == "__main__":
    main()
