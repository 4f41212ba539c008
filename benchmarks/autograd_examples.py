"""autograd's example programs run whole, in a fresh process, by autograd, tracegrad and
JAX (issue 30, item 3).

    python benchmarks/autograd_examples.py --examples AUTOGRAD/examples
    python benchmarks/autograd_examples.py --examples AUTOGRAD/examples --programs hmm_em \
        --engines tracegrad --repeats 3

`AUTOGRAD` is a checkout of github.com/HIPS/autograd (its examples are not installed with
the package, and their code is not copied here). Each example module is imported from
that directory with only its import lines changed, as a user would edit them:
`autograd.numpy` becomes `tracegrad.numpy` or `jax.numpy`, autograd's `grad`,
`value_and_grad` and `hessian_vector_product` become tracegrad's (a `tg.function`, compiled
by the numba backend) or JAX's under `jax.jit` (engine `jax`) or without it (`jax_eager`, op by
op as autograd runs), `autograd.scipy.special` and
`autograd.scipy.stats.multivariate_normal` their counterparts; `autograd.numpy.random`
stays NumPy's and `autograd.misc` stays autograd's (`adam`, `flatten_func`).
For JAX, `np` is `jax.numpy` whose `prod` of a Python tuple or list (a shape: `jnp.prod`
takes arrays only) is NumPy's (`_jnp`); no other program calls it.
`autograd.scipy.signal.convolve` (autograd's own API, not SciPy's: it contracts `dot_axes`
and convolves over `axes`) becomes `autograd_convolve.make(np, conv)` (this directory):
the same code for both engines over the engine's n-d convolution primitive, tracegrad's
`tracegrad.ops.conv` and JAX's `lax.conv_general_dilated` (the example's line
`convolve = autograd.scipy.signal.convolve` is the one non-import line rewritten).

The work of each program is its `__main__` block's with fewer iterations (so that autograd
takes about a second) and without plotting:

- `fluidsim`: `value_and_grad` of the objective (100 time steps of the smoke simulation on
  a 110 x 110 grid, the example's image size; the images are replaced by smooth fields of
  that size, as matplotlib's `imread` is not needed for the work), 2 calls;
- `hmm_em`: one EM step (`value_and_grad` of the log partition function over the example's
  60 lines of text, 20 states);
- `lstm`: 5 `adam` steps of the example's LSTM (30 characters x 60 lines, 40 cells);
- `gmm`: 5 gradient and 5 Hessian-vector-product calls of the example's mixture of 10
  Gaussians on its pinwheel data (`flatten_func` as the example);
- `convnet`: 4 steps of the example's momentum SGD (batches of 256) on its LeNet-like net
  (two 5x5 convolutions of 6 and 16 filters, 2x2 max pools, tanh layers of 120 and 84, a
  softmax of 10), the MNIST download replaced by 1024 random 28x28 images and labels.

Each (program, engine) runs in a fresh process (tracegrad with an empty kernel cache);
`whole` is the process's wall time from start to exit, `result` the time its work ended
(after imports), `rss_mb` its peak resident memory; a process still running after
`--timeout` seconds is ended (`timed_out`). Not a test: nothing here asserts.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.abc
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

PROGRAMS = ("fluidsim", "hmm_em", "lstm", "gmm", "convnet")
ENGINES = ("autograd", "tracegrad", "jax", "jax_eager")
MODULES = {"fluidsim": "fluidsim/fluidsim.py", "hmm_em": "hmm_em.py", "lstm": "lstm.py",
           "rnn": "rnn.py", "gmm": "gmm.py", "data": "data.py", "convnet": "convnet.py",
           "data_mnist": "data_mnist.py"}

# Import lines of the examples and what each engine puts in their place.
_IMPORTS = {
    "tracegrad": [
        (r"import autograd\.numpy\.random as npr", "import numpy.random as npr"),
        (r"import autograd\.numpy as np", "import tracegrad.numpy as np"),
        (r"from autograd\.scipy\.special import", "from tracegrad.scipy.special import"),
        (r"import autograd\.scipy\.stats\.multivariate_normal as mvn",
         "from tracegrad.scipy.stats import multivariate_normal as mvn"),
        (r"import autograd\.scipy\.signal\n", "import _engine\n"),
        (r"autograd\.scipy\.signal\.convolve", "_engine.convolve"),
        (r"from autograd import ", "from _engine import "),
    ],
    "jax": [
        (r"import autograd\.numpy\.random as npr", "import numpy.random as npr"),
        (r"import autograd\.numpy as np", "import _jnp as np"),
        (r"from autograd\.scipy\.special import", "from jax.scipy.special import"),
        (r"import autograd\.scipy\.stats\.multivariate_normal as mvn",
         "from jax.scipy.stats import multivariate_normal as mvn"),
        (r"import autograd\.scipy\.signal\n", "import _engine\n"),
        (r"autograd\.scipy\.signal\.convolve", "_engine.convolve"),
        (r"from autograd import ", "from _engine import "),
    ],
    "autograd": [],
}
_IMPORTS["jax_eager"] = _IMPORTS["jax"]


def _engine_module(engine):
    """The `_engine` module: the engine's grad, value_and_grad, hessian_vector_product and
    autograd's convolve."""
    import types

    import autograd_convolve

    mod = types.ModuleType("_engine")
    if engine == "tracegrad":
        import tracegrad as tg
        import tracegrad.numpy as tnp

        mod.grad, mod.value_and_grad = tg.grad, tg.value_and_grad
        mod.convolve = autograd_convolve.make(tnp, autograd_convolve.tracegrad_conv)

        def hessian_vector_product(fn):
            return tg.function(lambda x, v: tg.hvp(fn, (x,), (v,))[0])
    else:
        import jax
        import jax.numpy as jnp

        jax.config.update("jax_enable_x64", True)
        mod.convolve = autograd_convolve.make(jnp, autograd_convolve.jax_conv)
        jit = jax.jit if engine == "jax" else (lambda fn: fn)

        def grad(fn):
            return jit(jax.grad(fn))

        def value_and_grad(fn):
            return jit(jax.value_and_grad(fn))

        def hessian_vector_product(fn):
            return jit(lambda x, v: jax.jvp(jax.grad(fn), (x,), (v,))[1])

        mod.grad, mod.value_and_grad = grad, value_and_grad
    mod.hessian_vector_product = hessian_vector_product
    return mod


def _jax_numpy():
    """`jax.numpy` with `prod` of a Python sequence (shape arithmetic) done by NumPy."""
    import types

    import jax.numpy as jnp
    import numpy as onp

    mod = types.ModuleType("_jnp")
    mod.__dict__.update({k: v for k, v in vars(jnp).items() if not k.startswith("__")})

    def prod(a, *args, **kwargs):
        return (onp.prod if isinstance(a, (tuple, list)) else jnp.prod)(a, *args, **kwargs)

    mod.prod = prod
    return mod


class _Examples(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports autograd's example modules from `root` with their import lines changed."""

    def __init__(self, root, engine):
        self.root, self.engine = root, engine

    def find_spec(self, name, path, target=None):
        if name in MODULES:
            return importlib.util.spec_from_loader(name, self)
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        path = os.path.join(self.root, MODULES[module.__name__])
        with open(path) as f:
            source = f.read()
        # plotting is not part of the work: matplotlib's names become inert stand-ins
        source = re.sub(r"^import matplotlib\S* as (\w+)$|^import (matplotlib)\S*$",
                        lambda m: f"{m[1] or m[2]} = __import__('unittest.mock').mock.Mock()",
                        source, flags=re.M)
        source = re.sub(r"^from matplotlib\S* import (\w+)$",
                        lambda m: f"{m[1]} = __import__('unittest.mock').mock.Mock()",
                        source, flags=re.M)
        for pattern, replacement in _IMPORTS[self.engine]:
            source = re.sub(pattern, replacement, source)
        module.__file__ = path
        exec(compile(source, path, "exec"), module.__dict__)


@contextlib.contextmanager
def _numpy_in(fn):
    """`fn`'s module sees NumPy as `np` (JAX's arrays cannot be filled in place)."""
    import numpy as onp

    namespace = fn.__globals__
    saved, namespace["np"] = namespace["np"], onp
    try:
        yield
    finally:
        namespace["np"] = saved


def _fluidsim(ex, engine):
    import numpy as onp

    np = ex.np
    rows = cols = 110
    yy, xx = onp.mgrid[0:rows, 0:cols] / rows
    init_smoke = onp.sin(6 * xx) ** 2 * onp.cos(4 * yy) ** 2
    target = onp.exp(-((xx - 0.5) ** 2 + (yy - 0.5) ** 2) * 8)
    if engine == "tracegrad":  # a NumPy array indexed by a traced array cannot dispatch
        import tracegrad as tg

        init_smoke, target = tg.constant(init_smoke), tg.constant(target)
    elif engine != "autograd":
        init_smoke, target = np.asarray(init_smoke), np.asarray(target)

    def objective(params):
        vx = np.reshape(params[: (rows * cols)], (rows, cols))
        vy = np.reshape(params[(rows * cols):], (rows, cols))
        final_smoke = ex.simulate(vx, vy, init_smoke, 100)
        return np.mean((target - final_smoke) ** 2)

    objective_with_grad = ex.value_and_grad(objective)
    params = onp.zeros(2 * rows * cols) + 0.01
    out = []
    for _ in range(2):
        value, g = objective_with_grad(params)
        params = params - 0.1 * onp.asarray(g)
        out.append(float(value))
    return out


def _hmm_em(ex, engine):
    import numpy as onp

    onp.random.seed(0)
    train, num_outputs = ex.build_dataset(os.path.join(os.path.dirname(ex.__file__),
                                                       "lstm.py"), max_lines=60)
    train = [onp.asarray(line) for line in train]
    params = [onp.asarray(p) for p in ex.initialize_hmm_parameters(20, num_outputs)]
    vgrad = ex.vgrad(ex.log_partition_function)
    out = []
    for _ in range(1):
        loglike, stats = vgrad([onp.log(p) for p in params], train)
        params = [onp.asarray(ex.normalize(onp.asarray(s))) for s in stats]
        out.append(float(loglike))
    return out


def _lstm(ex, engine):
    import numpy as onp
    from autograd.misc.optimizers import adam

    text = os.path.join(os.path.dirname(ex.__file__), "lstm.py")
    with _numpy_in(ex.build_dataset):  # (the data are made before the work, with NumPy)
        train = ex.build_dataset(text, sequence_length=30, alphabet_size=128, max_lines=60)
    init = {k: onp.asarray(v) for k, v in
            ex.init_lstm_params(input_size=128, output_size=128, state_size=40).items()}

    def training_loss(params, iter):
        return -ex.lstm_log_likelihood(params, train, train)

    loss_grad = ex.grad(training_loss)

    def numpy_grad(params, i):
        return {k: onp.asarray(v) for k, v in loss_grad(params, i).items()}

    trained = adam(numpy_grad, init, step_size=0.1, num_iters=5)
    return [float(onp.sum(trained["predict"]))]


def _gmm(ex, engine):
    import numpy as onp
    from autograd.misc.flatten import flatten_func

    init = ex.init_gmm_params(num_components=10, D=2, scale=0.1)
    init = {k: onp.asarray(v) for k, v in init.items()}
    with _numpy_in(ex.make_pinwheel):
        data = ex.make_pinwheel(radial_std=0.3, tangential_std=0.05, num_classes=3,
                                num_per_class=100, rate=0.4)

    def objective(params):
        return -ex.gmm_log_likelihood(params, data)

    if engine == "autograd":
        flat_obj, unflatten, x = flatten_func(objective, init)
    else:  # autograd's flatten_func runs autograd's vjp (in-place adds) to unflatten
        keys = sorted(init)
        x = onp.concatenate([onp.ravel(init[k]) for k in keys])
        ends = onp.cumsum([init[k].size for k in keys])

        def flat_obj(v):
            return objective({k: ex.np.reshape(v[end - init[k].size:end], init[k].shape)
                              for k, end in zip(keys, ends, strict=True)})
    jac, hessp = ex.grad(flat_obj), ex.hessian_vector_product(flat_obj)
    out = []
    for _ in range(5):
        g = onp.asarray(jac(x))
        hv = onp.asarray(hessp(x, g))
        x = x - 0.01 * g
        out.append(float(onp.sum(hv)))
    return out


def _convnet(ex, engine):
    import numpy as onp

    rs = onp.random.RandomState(0)
    layer_specs = [ex.conv_layer((5, 5), 6), ex.maxpool_layer((2, 2)),
                   ex.conv_layer((5, 5), 16), ex.maxpool_layer((2, 2)),
                   ex.tanh_layer(120), ex.tanh_layer(84), ex.softmax_layer(10)]
    n_weights, _, loss_fun, _ = ex.make_nn_funs((1, 28, 28), layer_specs, 1.0)
    loss_grad = ex.grad(loss_fun)
    images = rs.rand(1024, 1, 28, 28)
    labels = onp.eye(10)[rs.randint(0, 10, 1024)]
    weights = rs.randn(int(n_weights)) * 0.1
    direction = onp.zeros(int(n_weights))
    for idxs in ex.make_batches(len(images), 256):
        g = onp.asarray(loss_grad(weights, images[idxs], labels[idxs]))
        direction = 0.9 * direction + 0.1 * g
        weights = weights - 1e-3 * direction
    return [float(onp.sum(weights)), float(onp.sum(g))]


WORK = {"fluidsim": _fluidsim, "hmm_em": _hmm_em, "lstm": _lstm, "gmm": _gmm,
        "convnet": _convnet}


def child(root, engine, program):
    start = time.perf_counter()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # autograd_convolve
    if engine != "autograd":
        sys.modules["_engine"] = _engine_module(engine)
    if engine.startswith("jax"):
        sys.modules["_jnp"] = _jax_numpy()
    sys.meta_path.insert(0, _Examples(root, engine))
    sys.path.insert(0, os.path.join(root, os.path.dirname(MODULES[program])))
    ex = importlib.import_module(program)
    if program == "gmm":
        ex.make_pinwheel = importlib.import_module("data").make_pinwheel
    imported = time.perf_counter() - start
    values = WORK[program](ex, engine)
    print(json.dumps({"imported": imported, "result": time.perf_counter() - start,
                      "values": values}), flush=True)


def measure(root, engine, program, timeout):
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as cache:
        env["TRACEGRAD_CACHE_DIR"] = cache
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, __file__, "--child", engine, program,
                                 "--examples", root], env=env, stdout=subprocess.PIPE,
                                text=True)
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        stdout = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        timed_out = not timer.is_alive()
        timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        whole = time.perf_counter() - start
    row = {"program": program, "engine": engine, "whole": round(whole, 2),
           "rss_mb": usage.ru_maxrss // 1024}
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if timed_out:
        row["timed_out"] = timeout
        return row
    if proc.returncode or not lines:
        row["failed"] = proc.returncode
        return row
    row.update(json.loads(lines[-1]))
    row["result"] = round(row["result"], 2)
    row["imported"] = round(row["imported"], 2)
    return row


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--examples", required=True)
    parser.add_argument("--programs", nargs="*", default=list(PROGRAMS))
    parser.add_argument("--engines", nargs="*", default=list(ENGINES))
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=600, help="seconds a process may take")
    parser.add_argument("--child", nargs=2)
    args = parser.parse_args()
    if args.child:
        child(args.examples, *args.child)
        return
    for _ in range(args.repeats):
        for program in args.programs:
            for engine in args.engines:
                print(json.dumps(measure(args.examples, engine, program, args.timeout)), flush=True)


if __name__ == "__main__":
    main()
