"""Op-table rows for the `conv` primitive (n-d correlations with padding and cropping,
leading batch dims, channels) and `tracegrad.scipy.signal` over it: values against
`scipy.signal`, gradients of both operands against central differences."""

from __future__ import annotations

import numpy as np
import scipy.signal

import tracegrad.scipy.signal as tsig
from tests.ops.optable import C128, F32, F64, I64, case, rand, ulps
from tracegrad import ops

WHY = "BLAS (numpy backend) and the loop nest add the kernel's products in other orders"


def _conv_reference(lhs, rhs, padding):
    """The `conv` primitive by scipy.signal.correlate of each image and kernel channel."""
    ns = len(padding)
    nb = lhs.ndim - 2 - ns
    crop = tuple(slice(max(-lo, 0), n - max(-hi, 0)) for n, (lo, hi) in
                 zip(lhs.shape[nb + 2:], padding))
    x = np.pad(lhs[(slice(None),) * (nb + 2) + crop],
               [(0, 0)] * (nb + 2) + [(max(lo, 0), max(hi, 0)) for lo, hi in padding])
    batch, (n, ci), co = lhs.shape[:nb], lhs.shape[nb:nb + 2], rhs.shape[nb]
    out = None
    for b in np.ndindex(batch):
        for i in range(n):
            for o in range(co):
                y = sum(scipy.signal.correlate(x[b + (i, c)], np.conj(rhs[b + (o, c)]), "valid",
                                               method="direct") for c in range(ci))
                if out is None:
                    out = np.zeros(batch + (n, co) + y.shape, np.result_type(lhs, rhs))
                out[b + (i, o)] = y
    return out


_CONVS = {
    # name: lhs shape, rhs shape, padding
    "1d,valid": ((2, 1, 9), (3, 1, 4), ((0, 0),)),
    "1d,full,kernel>input": ((1, 2, 3), (2, 2, 5), ((4, 4),)),
    "1d,crop": ((2, 1, 7), (1, 1, 2), ((-1, 2),)),
    "2d,channels": ((2, 3, 6, 5), (4, 3, 3, 2), ((1, 2), (0, -1))),
    "2d,batch": ((2, 1, 2, 5, 4), (2, 3, 2, 2, 3), ((1, 1), (2, 0))),
    "3d": ((1, 2, 4, 3, 5), (2, 2, 2, 3, 2), ((1, 0), (1, 1), (0, 2))),
}
for _name, (_sa, _sb, _pad) in _CONVS.items():
    for _dt in (F64, F32, C128, I64):
        # (float32: positive terms, so 32 ulps of the largest value bound the other orders'
        # sums without cancellation)
        low = 0.1 if _dt == F32 else -2.0
        a, b = rand(_sa, _dt, low, seed=1), rand(_sb, _dt, low, seed=2)
        ref = lambda a, b, p=_pad: _conv_reference(a, b, p)
        case(f"conv[{_name},{_dt}]", lambda a, b, p=_pad: ops.conv(a, b, padding=p), ref, a, b,
             grad_argnums=(0, 1) if _dt in (F64, C128) else (), why=WHY, primitive="conv",
             **({"rtol": 1e-6, **ulps(ref, a, b, n=32)} if _dt == F32 else
                ulps(ref, a, b, n=16) if _dt == F64 else
                {"rtol": 1e-12} if _dt == C128 else {}))

# no window fits (the padded operand shorter than the kernel): an empty result, as XLA's
case("conv[1d,empty,float64]", lambda a, b: ops.conv(a, b, padding=((0, 0),)),
     lambda a, b: np.zeros((1, 2, 0)), rand((1, 1, 3), seed=1), rand((2, 1, 4), seed=2),
     grad_argnums=(0, 1), primitive="conv")

# -- scipy.signal over it: every mode, both methods, odd/even kernels, kernel larger ---------

_PAIRS = [((7,), (3,)), ((6,), (4,)), ((3,), (5,)), ((5, 6), (3, 2)), ((3, 4), (4, 5)),
          ((4, 3, 5), (2, 3, 2))]
for _fn in ("convolve", "correlate"):
    for _sa, _sb in _PAIRS:
        for _mode in ("full", "same", "valid"):
            for _method in ("direct", "fft"):
                a, b = rand(_sa, seed=3), rand(_sb, seed=4)

                def _ours(a, b, f=_fn, m=_mode, me=_method):
                    return getattr(tsig, f)(a, b, mode=m, method=me)

                def _ref(a, b, f=_fn, m=_mode, me=_method):
                    return getattr(scipy.signal, f)(a, b, mode=m, method=me)

                case(f"signal.{_fn}[{_mode},{_method},{'x'.join(map(str, _sa))},"
                     f"{'x'.join(map(str, _sb))}]", _ours, _ref, a, b, grad_argnums=(0, 1),
                     rtol=1e-12, atol=1e-12, why=WHY + "; pocketfft and DUCC0 too",
                     primitive="conv" if _method == "direct" else "fft")
for _fn in ("convolve2d", "correlate2d"):
    for _mode in ("full", "same", "valid"):
        for _boundary, _fill in (("fill", 0), ("fill", 1.5), ("wrap", 0), ("symm", 0)):
            a, b = rand((5, 6), seed=5), rand((2, 3), seed=6)

            def _ours(a, b, f=_fn, m=_mode, bd=_boundary, fv=_fill):
                return getattr(tsig, f)(a, b, mode=m, boundary=bd, fillvalue=fv)

            def _ref(a, b, f=_fn, m=_mode, bd=_boundary, fv=_fill):
                return getattr(scipy.signal, f)(a, b, mode=m, boundary=bd, fillvalue=fv)

            case(f"signal.{_fn}[{_mode},{_boundary},{_fill}]", _ours, _ref, a, b,
                 grad_argnums=(0, 1), rtol=1e-12, atol=1e-12, why=WHY, primitive="conv")
case("signal.fftconvolve[same,axes=-1,broadcast]",
     lambda a, b: tsig.fftconvolve(a, b, mode="same", axes=-1),
     lambda a, b: scipy.signal.fftconvolve(a, b, mode="same", axes=-1),
     rand((3, 7), seed=7), rand((1, 4), seed=8), grad_argnums=(0, 1), rtol=1e-12, atol=1e-12,
     why="pocketfft (SciPy) and DUCC0 (rocket-fft) sum in different orders", primitive="fft")
case("signal.detrend[linear,axis=0]", lambda x: tsig.detrend(x, axis=0),
     lambda x: scipy.signal.detrend(x, axis=0), rand((6, 3), seed=9), grad_argnums=(0,),
     rtol=1e-12, atol=1e-12, why="a closed-form slope against SciPy's lstsq")
