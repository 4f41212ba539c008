"""The Black-Scholes option pricer of Numba's test suite, run by tracegrad:
`blackscholes_arrayexpr` and its `cnd_array` (the Abramowitz-Stegun polynomial for the
normal CDF) from `numba/tests/test_blackscholes.py` (Numba 0.68.1, a tracegrad
dependency), the classic NumPy array-expression benchmark, loaded from the installed
package (the plain Python function under its `@njit`) with only `np` rebound to
`tracegrad.numpy`. Its gradients are the option Greeks: delta (stock price), vega
(volatility), rho (rate), theta (time) and the strike sensitivity.

    python examples/black_scholes.py
"""

import numpy as np
from _program_check import check
from numba.tests.test_blackscholes import blackscholes_arrayexpr
from with_numpy import with_numpy

import tracegrad.numpy as tnp

black_scholes = with_numpy(blackscholes_arrayexpr, tnp)
black_scholes_numpy = blackscholes_arrayexpr.py_func


def data(options=64, seed=0):
    """Numba's test ranges: prices 5-30, strikes 1-100, 0.25-10 years; rate 2%, vol 30%."""
    rng = np.random.default_rng(seed)
    return (rng.uniform(5.0, 30.0, options), rng.uniform(1.0, 100.0, options),
            rng.uniform(0.25, 10.0, options), np.float64(0.02), np.float64(0.30))


def main():
    args = data()
    check("Black-Scholes call and put (64 options); Greeks", black_scholes,
          black_scholes_numpy, args, argnums=(0, 1, 2, 3, 4))


if __name__ == "__main__":
    main()
