"""An eager training step: `GradientTape` over Variables, no `tg.function` (issue 30).

    python benchmarks/eager_step.py [--rounds N] [--cpu BATCHES]

The model is `benchmarks/run.py`'s MLP loss at 32x64 -> 64 (tanh) -> 10 with a softmax
cross-entropy, float64; one step records the loss on a tape, asks for the gradients of the
4 Variables and applies plain SGD. The same step in PyTorch eager (`requires_grad` tensors,
`backward`, `torch.no_grad` updates) and in TensorFlow eager, when installed, runs in the
same process, alternately in `--rounds` rounds; all at one thread. The first steps are
checked to give the same parameters in every library; then tracegrad's step runs until its
tape's backward pass runs as a kernel (the steady state of a long loop: the pass is
replayed from the second step, and compiled once the replays took
`tape_cache.KERNEL_AFTER_SECONDS`; docs/tape.md). Times are medians of 9 batches
(`benchmarks/run.py`'s `median_time`). `--cpu B` also times B interleaved batches of 100
steps in thread CPU time (what a loaded machine distorts least), and the forward pass
alone (the loss recorded on a tape; torch: building its autograd graph). Not a test.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from one_pass import cpu  # noqa: E402
from run import median_time, mlp_loss, torch_fns  # noqa: E402

import tracegrad as tg  # noqa: E402
import tracegrad.numpy as tnp  # noqa: E402

B, D, H, K = 32, 64, 64, 10
LR = 0.05
loss_fn = mlp_loss(tnp)


def problem():
    rng = np.random.default_rng(0)
    params = [rng.standard_normal((D, H)) * 0.1, np.zeros(H),
              rng.standard_normal((H, K)) * 0.1, np.zeros(K)]
    return params, rng.standard_normal((B, D)), np.eye(K)[rng.integers(0, K, B)]


def tape_step(gradient_tape, variables, loss, x, y):
    """`(step, read)`: one SGD step of `loss` recorded on `gradient_tape` (tracegrad's or
    TensorFlow's: the same API) over `variables`, and the reader of their values."""
    def step():
        with gradient_tape() as tape:
            value = loss(*variables, x, y)
        for v, g in zip(variables, tape.gradient(value, variables), strict=True):
            v.assign_sub(LR * g)
        return value

    return step, lambda: [v.numpy() for v in variables]


def tracegrad_step(params, x, y):
    return tape_step(tg.GradientTape, [tg.Variable(p) for p in params], loss_fn, x, y)


def torch_step(params, x, y):
    import torch
    torch.set_num_threads(1)
    ts = [torch.tensor(p, requires_grad=True) for p in params]
    tx, ty = torch.tensor(x), torch.tensor(y)
    loss_t = torch_fns()[2]  # run.py's MLP loss in PyTorch

    def step():
        loss = loss_t(*ts, tx, ty)
        for t in ts:
            t.grad = None
        loss.backward()
        with torch.no_grad():
            for t in ts:
                t -= LR * t.grad
        return loss

    return step, lambda: [t.detach().numpy() for t in ts]


def tensorflow_step(params, x, y):
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(1)
    vs = [tf.Variable(p) for p in params]
    tx, ty = tf.constant(x), tf.constant(y)

    def loss_tf(w1, b1, w2, b2, x, y):
        h = tf.tanh(x @ w1 + b1)
        z = h @ w2 + b2
        m = tf.reduce_max(z, axis=1, keepdims=True)
        lse = tf.math.log(tf.reduce_sum(tf.exp(z - m), axis=1, keepdims=True)) + m
        return -tf.reduce_mean(tf.reduce_sum(y * (z - lse), axis=1))

    return tape_step(tf.GradientTape, vs, loss_tf, tx, ty)


def warm_up(step, limit=60.0) -> float:
    """Run `step` until a backward kernel of a tape is installed (or `limit` seconds)."""
    try:
        from tracegrad.transforms import tape_cache
    except ImportError:  # a tracegrad without the cached backward pass
        return 0.0
    start = time.perf_counter()
    while time.perf_counter() - start < limit:
        for _ in range(100):
            step()
        if any(getattr(r, "compiled", False) for r in tape_cache._CACHE.values()):
            break
        if any(getattr(r, "kernel", None) for r in tape_cache._CACHE.values()):
            tg.wait_for_compiles()
    return time.perf_counter() - start


def cpu_batches(fns: dict, batches: int, calls: int = 100) -> dict:
    """Per name, the thread CPU time per call (us) of each of `batches` batches of `calls`
    calls, the names taking turns batch by batch."""
    times = {name: [] for name in fns}
    for _ in range(batches):
        for name, fn in fns.items():
            start = time.thread_time()
            for _ in range(calls):
                fn()
            times[name].append((time.thread_time() - start) / calls * 1e6)
    return {name: np.array(ts) for name, ts in times.items()}


def forward_only(params, x, y):
    """The loss recorded on a tape, per library (no gradient)."""
    variables = [tg.Variable(p) for p in params]

    def tracegrad_forward():
        with tg.GradientTape():
            return loss_fn(*variables, x, y)

    fns = {"tracegrad": tracegrad_forward}
    if _available("torch"):
        import torch
        ts = [torch.tensor(p, requires_grad=True) for p in params]
        tx, ty = torch.tensor(x), torch.tensor(y)
        loss_t = torch_fns()[2]
        fns["torch"] = lambda: loss_t(*ts, tx, ty)
    return fns


def report_cpu(what: str, times: dict) -> None:
    ours = times["tracegrad"]
    for name, ts in times.items():
        ratio = ours / ts
        print(f"{what} {name:11s} CPU p25/median {np.percentile(ts, 25):.0f}/"
              f"{np.median(ts):.0f} us; tracegrad / {name} per batch: median "
              f"{np.median(ratio):.3f} (p25-p75 {np.percentile(ratio, 25):.3f}-"
              f"{np.percentile(ratio, 75):.3f})", flush=True)


def _available(name):
    try:
        __import__(name)
        return True
    except ImportError:
        return False


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cpu", type=int, default=0, metavar="BATCHES",
                        help="also time this many interleaved batches in thread CPU time")
    args = parser.parse_args(argv)
    print(f"CPU: {cpu()}; numpy {np.__version__}, tracegrad {tg.__version__}")
    print(f"eager MLP step {B}x{D} -> {H} -> {K}, 4 Variables, float64, one thread; "
          "median us per step in each round")
    makers = {"tracegrad": tracegrad_step}
    if _available("torch"):
        makers["torch"] = torch_step
    if _available("tensorflow"):
        makers["tensorflow"] = tensorflow_step
    params, x, y = problem()
    steps, finals = {}, {}
    for name, make in makers.items():
        steps[name], read = make(params, x, y)
        for _ in range(5):
            steps[name]()
        finals[name] = read()
    print(f"steady state: {warm_up(steps['tracegrad']):.1f} s of steps until the tape's "
          "backward kernel runs", flush=True)
    for name in makers:
        for a, b in zip(finals["tracegrad"], finals[name], strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    times = {name: [] for name in makers}
    for _ in range(args.rounds):
        for name, step in steps.items():
            times[name].append(median_time(step) * 1e6)
    for name, ts in times.items():
        ratio = np.array(times["tracegrad"]) / np.array(ts)
        print(f"{name:11s} {', '.join(f'{t:.0f}' for t in ts)} us; "
              f"tracegrad / {name}: {ratio.min():.2f}-{ratio.max():.2f}", flush=True)
    if args.cpu:
        report_cpu("step", cpu_batches(steps, args.cpu))
        report_cpu("forward", cpu_batches(forward_only(params, x, y), args.cpu))


if __name__ == "__main__":
    main()
