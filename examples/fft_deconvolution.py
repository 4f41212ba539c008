"""Fourier transforms with gradients: a spectral derivative, and a blur filter recovered by
gradient descent through an FFT convolution.

1. The derivative of a periodic function on a grid is `irfft(i k rfft(f))`, exact to
   rounding for a band-limited function.
2. A signal `x` blurred by an unknown filter `h` (circular convolution, computed as
   `irfft(rfft(x) * rfft(h))`) gives `y`; the filter is fitted to `y` by gradient descent
   on the mean squared error, `tg.grad` differentiating through rfft and irfft. The gradient
   is checked against the one derived by hand, a circular correlation of the residual with
   `x`.

Run: python examples/fft_deconvolution.py
"""

import numpy as np

import tracegrad as tg
import tracegrad.numpy as tnp

# -- 1. spectral derivative -------------------------------------------------------------------

n = 64
t = np.arange(n) * 2 * np.pi / n
wavenumbers = np.arange(n // 2 + 1)


@tg.function
def derivative(f):
    return tnp.fft.irfft(1j * wavenumbers * tnp.fft.rfft(f), n)


error = np.max(np.abs(derivative(np.sin(3 * t) + np.cos(5 * t)) -
                      (3 * np.cos(3 * t) - 5 * np.sin(5 * t))))
print(f"spectral derivative of sin(3t) + cos(5t): max error {error:.1e}")

# -- 2. deconvolution -------------------------------------------------------------------------

rng = np.random.default_rng(0)
n = 256
x = rng.standard_normal(n)
h_true = np.exp(-0.5 * ((np.arange(n) - 4.0) / 1.5) ** 2) * (np.arange(n) < 12)
y = np.fft.irfft(np.fft.rfft(x) * np.fft.rfft(h_true), n)


def loss(h):
    blurred = tnp.fft.irfft(tnp.fft.rfft(x) * tnp.fft.rfft(h), n)
    return tnp.mean((blurred - y) ** 2)


def hand_gradient(h):
    residual = np.fft.irfft(np.fft.rfft(x) * np.fft.rfft(h), n) - y
    return 2 / n * np.fft.irfft(np.conj(np.fft.rfft(x)) * np.fft.rfft(residual), n)


grad = tg.function(tg.grad(loss))
h = np.zeros(n)
print(f"gradient at h = 0: max |tracegrad - by hand| = "
      f"{np.max(np.abs(grad(h) - hand_gradient(h))):.1e}")

# the loss is quadratic with curvature 2 |X_k|^2 / n: the step 1 / max of it is stable
step = n / (2 * np.max(np.abs(np.fft.rfft(x)) ** 2))
first = float(loss(h))
for _ in range(300):
    h = h - step * grad(h)
last = float(loss(h))
print(f"loss {first:.3e} -> {last:.3e} in 300 steps; "
      f"max |h - h_true| = {np.max(np.abs(h - h_true)):.1e}")
print(f"traced {grad.tracing_count} time(s)")
