"""NumPy's own Chebyshev series evaluation, run by tracegrad: `chebval2d` of
`numpy.polynomial.chebyshev` (NumPy 2.4.6), with its helper `numpy.polynomial.polyutils.
_valnd` and `chebval`, Clenshaw's recurrence (a Python loop over the coefficients),
loaded from the installed NumPy with only `np` rebound to `tracegrad.numpy`.

    python examples/chebyshev_clenshaw.py

Prints the values against NumPy's and the gradients with respect to the coefficients and
the points against central differences, for a degree-(11, 9) series at 200 points.
"""

import numpy as np
import numpy.polynomial.chebyshev as chebyshev
from _program_check import check
from with_numpy import with_numpy

import tracegrad.numpy as tnp

chebval2d = with_numpy(chebyshev.chebval2d, tnp)
chebval = with_numpy(chebyshev.chebval, tnp)


def data(points=200, degrees=(12, 10), seed=0):
    rng = np.random.default_rng(seed)
    decay = np.add.outer(np.arange(degrees[0]), np.arange(degrees[1]) + 1)
    return (rng.uniform(-1, 1, points), rng.uniform(-1, 1, points),
            rng.normal(size=degrees) / decay)


def main():
    x, y, c = data()
    check("chebval2d (NumPy's Clenshaw recurrence, 12x10 coefficients, 200 points)",
          chebval2d, chebyshev.chebval2d, (x, y, c), argnums=(0, 1, 2))
    check("chebval (one variable, 12 coefficients)", chebval, chebyshev.chebval,
          (x, c[:, 0]), argnums=(0, 1))


if __name__ == "__main__":
    main()
