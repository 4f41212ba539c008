"""Op-table rows for `tnp.fft` (the `fft` primitive of four kinds, and NumPy's 18 functions
over it): odd and even lengths, `n` padding and trimming, every norm, axes other than the
last, float32/float64/complex input; values against numpy.fft, gradients against central
differences (complex arguments in their real and imaginary directions)."""

from __future__ import annotations

import numpy as np

import tracegrad.numpy as tnp
from tests.ops.optable import C64, C128, F32, F64, case, rand
from tracegrad import ops

WHY = "pocketfft (NumPy) and DUCC0 (rocket-fft) sum in different orders"
F32_WHY = "float32 transforms round differently in the last bits"

# -- the primitive, each kind (gradients of the 1-d kinds: the rows of NumPy's functions) ------

case("fft[fft,c128,3x8]", lambda z: ops.fft(z, fft_type="fft", axes=(-1,)), np.fft.fft,
     rand((3, 8), C128), rtol=1e-12, atol=1e-13, why=WHY, primitive="fft")
case("fft[ifft,c128,2x3x5,axes=(-3,-1)]",
     lambda z: ops.fft(z, fft_type="ifft", axes=(-3, -1)),
     lambda z: np.fft.ifftn(z, axes=(0, 2)) * 10, rand((2, 3, 5), C128), grad_argnums=(0,),
     rtol=1e-12, atol=1e-13, why=WHY, primitive="fft")
case("fft[rfft,f64,4x9]", lambda x: ops.fft(x, fft_type="rfft", axes=(-1,)), np.fft.rfft,
     rand((4, 9), F64), grad_argnums=(0,), rtol=1e-12, atol=1e-13, why=WHY, primitive="fft")
case("fft[irfft,c128,3x5,n=8]", lambda z: ops.fft(z, fft_type="irfft", axes=(-1,), n=8),
     lambda z: np.fft.irfft(z, 8) * 8, rand((3, 5), C128), rtol=1e-12,
     atol=1e-13, why=WHY, primitive="fft")
case("fft[irfft,c128,3x4,axes=(-1,-2),n=5]",
     lambda z: ops.fft(z, fft_type="irfft", axes=(-1, -2), n=5),
     lambda z: np.fft.irfftn(z, s=(4, 5), axes=(1, 0)) * 20, rand((3, 4), C128),
     grad_argnums=(0,), rtol=1e-12, atol=1e-13, why=WHY, primitive="fft")

# -- NumPy's functions ---------------------------------------------------------------------------


def _row(name, fn, ref, *args, grad=True, f32=False):
    case(name, fn, ref, *args, grad_argnums=tuple(range(len(args))) if grad else (),
         rtol=1e-6 if f32 else 1e-12, atol=1e-5 if f32 else 1e-12, why=F32_WHY if f32 else WHY)


# Gradient rows on the diagonal of (norm, n): every norm and every n once (the numba
# backend compiles each gradient row: CI time).
_X8, _X7 = rand((8,), F64), rand((3, 7), F64)
_Z6, _Z5 = rand((6,), C128), rand((2, 5), C128)
for _k, _norm in enumerate((None, "ortho", "forward")):
    for _j, _n in enumerate((None, 5, 12)):
        _row(f"fft.fft[c128,6,n={_n},{_norm}]",
             lambda z, n=_n, nm=_norm: tnp.fft.fft(z, n, norm=nm),
             lambda z, n=_n, nm=_norm: np.fft.fft(z, n, norm=nm), _Z6, grad=_j == _k)
        _row(f"fft.rfft[f64,3x7,n={_n},{_norm}]",
             lambda x, n=_n, nm=_norm: tnp.fft.rfft(x, n, norm=nm),
             lambda x, n=_n, nm=_norm: np.fft.rfft(x, n, norm=nm), _X7, grad=_j == _k)
    for _j, _n in enumerate((None, 7, 9)):
        _row(f"fft.irfft[c128,2x5,n={_n},{_norm}]",
             lambda z, n=_n, nm=_norm: tnp.fft.irfft(z, n, norm=nm),
             lambda z, n=_n, nm=_norm: np.fft.irfft(z, n, norm=nm), _Z5, grad=_j == _k)
    _row(f"fft.ifft[c128,2x5,axis=0,n=3,{_norm}]",
         lambda z, nm=_norm: tnp.fft.ifft(z, 3, axis=0, norm=nm),
         lambda z, nm=_norm: np.fft.ifft(z, 3, axis=0, norm=nm), _Z5, grad=_k == 1)
    _row(f"fft.hfft[c128,6,n=9,{_norm}]", lambda z, nm=_norm: tnp.fft.hfft(z, 9, norm=nm),
         lambda z, nm=_norm: np.fft.hfft(z, 9, norm=nm), _Z6, grad=_k == 2)
    _row(f"fft.ihfft[f64,8,{_norm}]", lambda x, nm=_norm: tnp.fft.ihfft(x, norm=nm),
         lambda x, nm=_norm: np.fft.ihfft(x, norm=nm), _X8, grad=_k == 0)

_row("fft.fft[f64,8]", tnp.fft.fft, np.fft.fft, _X8)
_row("fft.fft[f32,3x7]", tnp.fft.fft, np.fft.fft, rand((3, 7), F32), grad=False, f32=True)
_row("fft.rfft[f32,8,n=6]", lambda x: tnp.fft.rfft(x, 6), lambda x: np.fft.rfft(x, 6),
     rand((8,), F32), grad=False, f32=True)
_row("fft.irfft[c64,2x5]", tnp.fft.irfft, np.fft.irfft, rand((2, 5), C64), grad=False, f32=True)
_row("fft.ifft[c64,6]", tnp.fft.ifft, np.fft.ifft, rand((6,), C64), grad=False, f32=True)

_A = rand((3, 4, 5), F64)
_B = rand((3, 4, 5), C128)
for _name, _arg in (("fftn", _B), ("ifftn", _B), ("rfftn", _A), ("irfftn", _B)):
    _fn, _ref = getattr(tnp.fft, _name), getattr(np.fft, _name)
    _row(f"fft.{_name}[3x4x5]", _fn, _ref, _arg, grad=False)
    _row(f"fft.{_name}[3x4x5,s=(6,3),axes=(2,0),ortho]",
         lambda a, f=_fn: f(a, s=(6, 3), axes=(2, 0), norm="ortho"),
         lambda a, f=_ref: f(a, s=(6, 3), axes=(2, 0), norm="ortho"), _arg,
         grad=_name in ("fftn", "irfftn"))
    _row(f"fft.{_name}[3x4x5,axes=(1,1)]", lambda a, f=_fn: f(a, axes=(1, 1)),
         lambda a, f=_ref: f(a, axes=(1, 1)), _arg, grad=False)
for _name, _arg in (("fft2", _B), ("ifft2", _B), ("rfft2", _A), ("irfft2", _B)):
    _fn, _ref = getattr(tnp.fft, _name), getattr(np.fft, _name)
    _row(f"fft.{_name}[3x4x5,s=(5,4),forward]",
         lambda a, f=_fn: f(a, s=(5, 4), norm="forward"),
         lambda a, f=_ref: f(a, s=(5, 4), norm="forward"), _arg, grad=_name in ("ifft2", "rfft2"))
_row("fft.fft2[c64,4x6]", tnp.fft.fft2, np.fft.fft2, rand((4, 6), C64), grad=False, f32=True)

# -- frequencies and shifts ----------------------------------------------------------------------

_D = np.asarray(0.25)
for _n in (7, 8):
    _row(f"fft.fftfreq[n={_n}]", lambda d, n=_n: tnp.fft.fftfreq(n, d),
         lambda d, n=_n: np.fft.fftfreq(n, d), _D)
    _row(f"fft.rfftfreq[n={_n}]", lambda d, n=_n: tnp.fft.rfftfreq(n, d),
         lambda d, n=_n: np.fft.rfftfreq(n, d), _D, grad=False)
_S = rand((3, 5), F64)
_row("fft.fftshift[3x5]", tnp.fft.fftshift, np.fft.fftshift, _S)
_row("fft.ifftshift[3x5]", tnp.fft.ifftshift, np.fft.ifftshift, _S, grad=False)
_row("fft.fftshift[3x5,axes=1]", lambda x: tnp.fft.fftshift(x, axes=1),
     lambda x: np.fft.fftshift(x, axes=1), _S, grad=False)
_row("fft.ifftshift[3x5,axes=(0,)]", lambda x: tnp.fft.ifftshift(x, axes=(0,)),
     lambda x: np.fft.ifftshift(x, axes=(0,)), _S, grad=False)
