"""The GradBench problems `gmm`, `lstm`, `lse`, `llsq`, `kmeans` and `det`, written from
their published definitions (github.com/gradbench/gradbench, evals/NAME/README.md and the
input generators of its Python evals).

Each objective is written once in NumPy style over an array namespace `xp` (tracegrad.numpy
for tracegrad, jax.numpy for JAX) and once for PyTorch; `reference_*` is an independent
float64 NumPy version (loops where the definition has them) with the gradient where it has
a closed form. `PROBLEMS[name]` says how to build inputs at a size and which arguments are
differentiated (`wrt`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

# -- lse: log(sum(exp(x))) by the max trick ---------------------------------------------------


def lse(xp):
    def objective(x):
        a = xp.max(x)
        return a + xp.log(xp.sum(xp.exp(x - a)))
    return objective


def lse_torch(torch):
    def objective(x):
        a = torch.max(x)
        return a + torch.log(torch.sum(torch.exp(x - a)))
    return objective


def lse_data(size, seed=31337):
    (n,) = size
    return (np.random.default_rng(seed).random(n),)


def lse_reference(x):
    e = np.exp(x - x.max())
    return x.max() + np.log(e.sum()), (e / e.sum(),)


# -- llsq: 1/2 sum_i (s_i - sum_j x_j t_i^j)^2, t_i = -1 + 2i/(n-1), s_i = sign(t_i) ---------


def llsq(xp, n):
    def objective(x):
        t = -1.0 + xp.arange(n) * (2.0 / (n - 1))
        powers = t[:, None] ** xp.arange(x.shape[0])
        r = xp.sign(t) - powers @ x
        return 0.5 * xp.sum(r * r)
    return objective


def llsq_torch(torch, n):
    def objective(x):
        t = -1.0 + torch.arange(n, dtype=x.dtype) * (2.0 / (n - 1))
        powers = t[:, None] ** torch.arange(x.shape[0], dtype=x.dtype)
        r = torch.sign(t) - powers @ x
        return 0.5 * torch.sum(r * r)
    return objective


def llsq_data(size, seed=31337):
    n, m = size
    return (np.random.default_rng(seed).random(m),)


def llsq_reference(x, n):
    t = np.array([-1.0 + i * 2.0 / (n - 1) for i in range(n)])
    r = np.sign(t) - np.polynomial.polynomial.polyval(t, x)
    # d/dx_j = -sum_i r_i t_i^j
    return 0.5 * np.dot(r, r), (-np.vander(t, len(x), increasing=True).T @ r,)


# -- kmeans: cost = sum_i min_j |C_j - P_i|^2; dir = J / diag(H) ----------------------------


def kmeans(xp):
    def cost(centroids, points):
        dist = (xp.sum(points * points, axis=1)[:, None] + xp.sum(centroids * centroids, axis=1)
                - 2.0 * (points @ centroids.T))
        return xp.sum(xp.min(dist, axis=1))
    return cost


def kmeans_torch(torch):
    def cost(centroids, points):
        dist = (torch.sum(points * points, dim=1)[:, None]
                + torch.sum(centroids * centroids, dim=1) - 2.0 * (points @ centroids.T))
        return torch.sum(torch.min(dist, dim=1).values)
    return cost


def kmeans_dir_tracegrad(cost):
    """GradBench's `dir` in tracegrad: (cost, J / diag(H)) of `cost(centroids, points)`; H is
    diagonal, so H @ 1 (forward over reverse) is its diagonal."""
    import tracegrad as tg
    import tracegrad.numpy as tnp

    gradient = tg.grad(cost)

    def direction(c, p):
        j, h = tg.jvp(lambda cc: gradient(cc, p), (c,), (tnp.ones_like(c),))
        return cost(c, p), j / h
    return direction


def kmeans_data(size, seed=31337):
    k, n, d = size
    points = np.random.default_rng(seed).random((n, d))
    return points[-k:].copy(), points  # the last k points: every cluster is nonempty


def kmeans_reference(centroids, points):
    cost, nearest = 0.0, np.empty(len(points), dtype=np.int64)
    for start in range(0, len(points), 1024):
        p = points[start:start + 1024]
        d2 = ((p[:, None, :] - centroids[None, :, :]) ** 2).sum(-1)
        nearest[start:start + 1024] = d2.argmin(1)
        cost += d2.min(1).sum()
    count = np.bincount(nearest, minlength=len(centroids))[:, None]
    sums = np.zeros_like(centroids)
    np.add.at(sums, nearest, points)
    # J_j = 2 (count_j C_j - sum of its points), H_jj = 2 count_j
    return cost, ((count * centroids - sums) / count,)


# -- det: expansion by minors -------------------------------------------------------------------


def minor_tables(ell: int):
    """For each minor size s = 2..ell (rows ell-s.., columns a subset S of size s, subsets in
    lexicographic order): the column of each term of the expansion along the minor's first
    row and the index of the sub-minor (S without that column) among the subsets of size s-1;
    the signs alternate along a row."""
    import itertools
    levels = {s: list(itertools.combinations(range(ell), s)) for s in range(1, ell + 1)}
    where = {s: {c: i for i, c in enumerate(levels[s])} for s in levels}
    tables = []
    for s in range(2, ell + 1):
        cols = np.array(levels[s], dtype=np.int64)
        sub = np.array([[where[s - 1][c[:t] + c[t + 1:]] for t in range(s)] for c in levels[s]],
                       dtype=np.int64)
        tables.append((ell - s, cols, sub))
    return tables


def det(xp, ell):
    """det(A) by expansion by minors along the first row, recursively, each distinct minor
    computed once (level by level over column subsets: ell 2^(ell-1) products, not ell!)."""
    tables = minor_tables(ell)
    signs = {s: np.where(np.arange(s) % 2 == 0, 1.0, -1.0) for s in range(2, ell + 1)}

    def objective(a):
        a = a.reshape(ell, ell)
        minors = a[ell - 1]  # 1x1 minors of the last row, one per column
        for row, cols, sub in tables:
            terms = a[row][cols] * minors[sub]
            minors = xp.sum(terms * signs[cols.shape[1]], axis=1)
        return minors[0]
    return objective


def det_torch(torch, ell):
    tables = [(row, torch.from_numpy(cols), torch.from_numpy(sub))
              for row, cols, sub in minor_tables(ell)]
    signs = {s: torch.tensor([1.0 if t % 2 == 0 else -1.0 for t in range(s)], dtype=torch.float64)
             for s in range(2, ell + 1)}

    def objective(a):
        a = a.reshape(ell, ell)
        minors = a[ell - 1]
        for row, cols, sub in tables:
            minors = torch.sum(a[row][cols] * minors[sub] * signs[cols.shape[1]], dim=1)
        return minors[0]
    return objective


def det_data(size, seed=31337):
    (ell,) = size
    return (np.random.default_rng(seed).random(ell * ell),)


def det_reference(a, ell):
    m = a.reshape(ell, ell)
    value = np.linalg.det(m)
    return value, ((value * np.linalg.inv(m).T).ravel(),)


# -- gmm: log posterior of a Gaussian mixture with a Wishart prior on the precisions ----------


def gmm_lower_index(d: int) -> np.ndarray:
    """(d, d) indices into a row of `l` padded with one zero at the end: `l` fills the strictly
    lower triangle column by column; the diagonal and the upper triangle read the zero."""
    index = np.full((d, d), d * (d - 1) // 2, dtype=np.int64)
    pos = 0
    for j in range(d):
        for i in range(j + 1, d):
            index[i, j] = pos
            pos += 1
    return index


def gmm_constant(d, k, n, m, gamma):
    """The terms of the log posterior that do not depend on the parameters."""
    nu = d + m + 1
    log_gamma_d = d * (d - 1) / 4 * math.log(math.pi) + sum(
        math.lgamma(nu / 2 + (1 - j) / 2) for j in range(1, d + 1))
    return -n * d / 2 * math.log(2 * math.pi) + k * (
        nu * d * math.log(gamma / math.sqrt(2)) - log_gamma_d)


def gmm(xp, m=0, gamma=1.0):
    def logsumexp(v, axis):
        a = xp.max(v, axis=axis, keepdims=True)
        return xp.squeeze(a, axis) + xp.log(xp.sum(xp.exp(v - a), axis=axis))

    def objective(alpha, mu, q, l, x):  # noqa: E741  (GradBench's names)
        n, d = x.shape
        k = alpha.shape[0]
        index = gmm_lower_index(d)
        lower = xp.concatenate([l, xp.zeros((k, 1))], axis=1)[:, index]
        qs = lower + xp.exp(q)[:, :, None] * np.eye(d)                  # (k, d, d)
        centered = x[:, None, :] - mu[None, :, :]                       # (n, k, d)
        mahal = xp.einsum("kij,nkj->nki", qs, centered)                  # (n, k, d)
        beta = alpha + xp.sum(q, axis=1) - 0.5 * xp.sum(mahal * mahal, axis=2)
        likelihood = xp.sum(logsumexp(beta, 1)) - n * logsumexp(alpha, 0)
        prior = -0.5 * gamma * gamma * xp.sum(qs * qs) + m * xp.sum(q)
        return likelihood + prior + gmm_constant(d, k, n, m, gamma)
    return objective


def gmm_torch(torch, m=0, gamma=1.0):
    def logsumexp(v, dim):
        a = torch.max(v, dim=dim, keepdim=True).values
        return a.squeeze(dim) + torch.log(torch.sum(torch.exp(v - a), dim=dim))

    def objective(alpha, mu, q, l, x):  # noqa: E741  (GradBench's names)
        n, d = x.shape
        k = alpha.shape[0]
        index = torch.from_numpy(gmm_lower_index(d))
        lower = torch.cat([l, torch.zeros((k, 1), dtype=l.dtype)], dim=1)[:, index]
        qs = lower + torch.exp(q)[:, :, None] * torch.eye(d, dtype=q.dtype)
        centered = x[:, None, :] - mu[None, :, :]
        mahal = torch.einsum("kij,nkj->nki", qs, centered)
        beta = alpha + torch.sum(q, dim=1) - 0.5 * torch.sum(mahal * mahal, dim=2)
        likelihood = torch.sum(logsumexp(beta, 1)) - n * logsumexp(alpha, 0)
        prior = -0.5 * gamma * gamma * torch.sum(qs * qs) + m * torch.sum(q)
        return likelihood + prior + gmm_constant(d, k, n, m, gamma)
    return objective


def gmm_data(size, seed=31337):
    """GradBench's generator: x normal, alpha normal, mu uniform, q and l normal (drawn in
    this order, one row at a time as its generator does)."""
    d, k, n = size
    rng = np.random.default_rng(seed)
    x = np.array([rng.normal(size=d) for _ in range(n)])
    alpha = rng.normal(size=k)
    mu = np.array([rng.uniform(size=d) for _ in range(k)])
    q = np.array([rng.normal(size=d) for _ in range(k)])
    l = np.array([rng.normal(size=d * (d - 1) // 2) for _ in range(k)])  # noqa: E741
    return alpha, mu, q, l, x


def gmm_reference(alpha, mu, q, l, x, m=0, gamma=1.0):  # noqa: E741
    """The definition's simplified form with a loop over components (value only)."""
    n, d = x.shape
    k = len(alpha)
    beta = np.empty((n, k))
    frob = 0.0
    for c in range(k):
        qk = np.diag(np.exp(q[c]))
        pos = 0
        for j in range(d):
            for i in range(j + 1, d):
                qk[i, j] = l[c, pos]
                pos += 1
        y = (x - mu[c]) @ qk.T
        beta[:, c] = alpha[c] + q[c].sum() - 0.5 * (y * y).sum(1)
        frob += (qk * qk).sum()
    bmax = beta.max(1)
    lse_rows = bmax + np.log(np.exp(beta - bmax[:, None]).sum(1))
    amax = alpha.max()
    value = (lse_rows.sum() - n * (amax + np.log(np.exp(alpha - amax).sum()))
             - 0.5 * gamma * gamma * frob + m * q.sum() + gmm_constant(d, k, n, m, gamma))
    return value, None


# -- lstm: ADBench's LSTM (diagonal weights), loss over a bit-encoded character sequence ------


def lstm(xp, scan):
    """`main_params` (2l, 4b): rows 2i weights and 2i+1 biases of layer i, each the forget,
    input, output and change gates' b values; `extra_params` (3, b): input weight, output
    weight, output bias; `state` (2l, b): rows 2i hidden and 2i+1 cell of layer i;
    `sequence` (c, b)."""
    def sigmoid(v):
        return 1.0 / (1.0 + xp.exp(-v))

    def objective(main_params, extra_params, state, sequence):
        layers, b = state.shape[0] // 2, state.shape[1]
        weight = main_params[0::2].reshape(layers, 4, b)
        bias = main_params[1::2].reshape(layers, 4, b)

        def step(carry, pair):
            hidden, cell = carry
            x, gold = pair
            inp = x * extra_params[0]
            hs, cs = [], []
            for i in range(layers):
                forget = sigmoid(inp * weight[i, 0] + bias[i, 0])
                ingate = sigmoid(hidden[i] * weight[i, 1] + bias[i, 1])
                outgate = sigmoid(inp * weight[i, 2] + bias[i, 2])
                change = xp.tanh(hidden[i] * weight[i, 3] + bias[i, 3])
                c = cell[i] * forget + ingate * change
                inp = outgate * xp.tanh(c)
                hs.append(inp)
                cs.append(c)
            pred = inp * extra_params[1] + extra_params[2]
            norm = pred - xp.log(xp.sum(xp.exp(pred)) + 2.0)
            return (xp.stack(hs), xp.stack(cs)), xp.sum(gold * norm)

        _, totals = scan(step, (state[0::2], state[1::2]), (sequence[:-1], sequence[1:]))
        return -xp.sum(totals) / ((sequence.shape[0] - 1) * b)
    return objective


def lstm_torch(torch):
    def objective(main_params, extra_params, state, sequence):
        layers, b = state.shape[0] // 2, state.shape[1]
        weight = main_params[0::2].reshape(layers, 4, b)
        bias = main_params[1::2].reshape(layers, 4, b)
        hidden = list(state[0::2])
        cell = list(state[1::2])
        total = 0.0
        for t in range(sequence.shape[0] - 1):
            inp = sequence[t] * extra_params[0]
            for i in range(layers):
                forget = torch.sigmoid(inp * weight[i, 0] + bias[i, 0])
                ingate = torch.sigmoid(hidden[i] * weight[i, 1] + bias[i, 1])
                outgate = torch.sigmoid(inp * weight[i, 2] + bias[i, 2])
                change = torch.tanh(hidden[i] * weight[i, 3] + bias[i, 3])
                cell[i] = cell[i] * forget + ingate * change
                hidden[i] = inp = outgate * torch.tanh(cell[i])
            pred = inp * extra_params[1] + extra_params[2]
            norm = pred - torch.log(torch.sum(torch.exp(pred)) + 2.0)
            total = total + torch.sum(sequence[t + 1] * norm)
        return -total / ((sequence.shape[0] - 1) * b)
    return objective


LSTM_BITS = 14  # GradBench's text (evals/lstm/data) needs 14 bits per character


def lstm_data(size, seed=31337):
    """GradBench's generator with its uniform [0, 1) state and parameters; the sequence is
    random bits of the same shape instead of its text file (not stored here)."""
    layers, c = size
    rng = np.random.default_rng(seed)
    b = LSTM_BITS
    sequence = (rng.random((c, b)) < 0.5).astype(np.float64)
    return (rng.random((2 * layers, 4 * b)), rng.random((3, b)), rng.random((2 * layers, b)),
            sequence)


def lstm_reference(main_params, extra_params, state, sequence):
    """ADBench's loops: the layers of one step in order, each gate one scalar at a time over
    the b cells vectorized (value only)."""
    layers, b = state.shape[0] // 2, state.shape[1]
    state = state.copy()
    total = 0.0
    for t in range(len(sequence) - 1):
        out = sequence[t] * extra_params[0]
        for i in range(layers):
            w, bb = main_params[2 * i], main_params[2 * i + 1]
            h, c = state[2 * i], state[2 * i + 1]
            forget = 1 / (1 + np.exp(-(out * w[:b] + bb[:b])))
            ingate = 1 / (1 + np.exp(-(h * w[b:2 * b] + bb[b:2 * b])))
            outgate = 1 / (1 + np.exp(-(out * w[2 * b:3 * b] + bb[2 * b:3 * b])))
            change = np.tanh(h * w[3 * b:] + bb[3 * b:])
            state[2 * i + 1] = c * forget + ingate * change
            state[2 * i] = outgate * np.tanh(state[2 * i + 1])
            out = state[2 * i]
        pred = out * extra_params[1] + extra_params[2]
        total += np.sum(sequence[t + 1] * (pred - np.log(np.sum(np.exp(pred)) + 2)))
    return -total / ((len(sequence) - 1) * b), None


# -- the table of problems ----------------------------------------------------------------------


@dataclass
class Problem:
    """A GradBench problem: `data(size)` its inputs (arrays), `wrt` the differentiated
    arguments; `make(xp, scan, size)` / `make_torch(torch, size)` the objective;
    `reference(*args, size)` NumPy's (value, gradients or None)."""
    sizes: list            # GradBench's standard sizes
    default: list          # the ones run.py times unless told otherwise
    tiny: tuple            # for tests
    data: Callable
    wrt: tuple
    make: Callable
    make_torch: Callable
    reference: Callable
    label: Callable
    derivative: str = "gradient"  # kmeans: J / diag(H)


PROBLEMS = {
    "gmm": Problem(
        sizes=sorted([(d, k, 1000) for d in (2, 10, 20, 32, 64) for k in (5, 10, 25, 50, 100)],
                     key=lambda s: s[0] * s[1]),
        default=[(10, 25, 1000), (64, 50, 1000)], tiny=(3, 4, 7),
        data=gmm_data, wrt=(0, 1, 2, 3),
        make=lambda xp, scan, size: gmm(xp), make_torch=lambda torch, size: gmm_torch(torch),
        reference=lambda *a, size: gmm_reference(*a),
        label=lambda s: f"d={s[0]} K={s[1]} N={s[2]}"),
    "lstm": Problem(
        sizes=sorted([(lay, c) for lay in (2, 4, 6) for c in (1024, 4096, 8192)],
                     key=lambda s: s[0] * s[1]),
        default=[(2, 1024), (4, 4096)], tiny=(2, 5),
        data=lstm_data, wrt=(0, 1),
        make=lambda xp, scan, size: lstm(xp, scan),
        make_torch=lambda torch, size: lstm_torch(torch),
        reference=lambda *a, size: lstm_reference(*a),
        label=lambda s: f"l={s[0]} c={s[1]} b={LSTM_BITS}"),
    "lse": Problem(
        sizes=[(2500 * 2 ** i,) for i in range(10)], default=[(1280000,)], tiny=(9,),
        data=lse_data, wrt=(0,), make=lambda xp, scan, size: lse(xp),
        make_torch=lambda torch, size: lse_torch(torch),
        reference=lambda *a, size: lse_reference(*a), label=lambda s: f"n={s[0]}"),
    "llsq": Problem(
        sizes=[(n, 128) for n in (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8196, 16392)],
        default=[(16392, 128)], tiny=(11, 4),
        data=llsq_data, wrt=(0,), make=lambda xp, scan, size: llsq(xp, size[0]),
        make_torch=lambda torch, size: llsq_torch(torch, size[0]),
        reference=lambda x, size: llsq_reference(x, size[0]), label=lambda s: f"n={s[0]} m={s[1]}"),
    "kmeans": Problem(
        sizes=sorted([(k, n, d) for k in (10, 100, 1000) for n in (1000, 10000) for d in (8, 16)],
                     key=lambda s: s[0] * s[1] * s[2]),
        default=[(1000, 10000, 16)], tiny=(3, 12, 2),
        data=kmeans_data, wrt=(0,), make=lambda xp, scan, size: kmeans(xp),
        make_torch=lambda torch, size: kmeans_torch(torch),
        reference=lambda *a, size: kmeans_reference(*a),
        label=lambda s: f"k={s[0]} n={s[1]} d={s[2]}", derivative="dir"),
    "det": Problem(
        sizes=[(ell,) for ell in range(5, 12)], default=[(11,)], tiny=(4,),
        data=det_data, wrt=(0,), make=lambda xp, scan, size: det(xp, size[0]),
        make_torch=lambda torch, size: det_torch(torch, size[0]),
        reference=lambda a, size: det_reference(a, size[0]), label=lambda s: f"ell={s[0]}"),
}
