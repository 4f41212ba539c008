"""Sensitivities of an ODE solution: gradients and a Jacobian through a compiled RK4 loop.

A damped pendulum, theta'' = -(g/L) sin(theta) - c theta', integrated with classic RK4
(dt = 0.01, 500 steps to t = 5) inside one `tg.function`; the steps are a `tg.fori_loop`,
so the graph holds one `while` op, not 500 unrolled copies of the step. Reverse mode
through the loop gives:

- with `tg.grad`, the gradient of the final energy with respect to the initial state
  (theta0, omega0) and to the damping coefficient c;
- with `tg.jacobian`, the 2x2 Jacobian of the final state with respect to the initial
  state (whose determinant is the phase-space area ratio, exp(-c t) for the exact flow).

Every derivative is checked against float64 central finite differences of the same RK4
loop written in plain NumPy.

Run: python examples/ode_sensitivity.py
"""

import time

import numpy as np

import tracegrad as tg
import tracegrad.numpy as tnp

G_OVER_L = 9.81
DT, STEPS = 0.01, 500


def pendulum(x, damping, np_=tnp):
    """d/dt [theta, omega]."""
    theta, omega = x[0], x[1]
    return np_.stack([omega, -G_OVER_L * np_.sin(theta) - damping * omega])


def rk4_step(x, damping, np_=tnp):
    k1 = pendulum(x, damping, np_)
    k2 = pendulum(x + 0.5 * DT * k1, damping, np_)
    k3 = pendulum(x + 0.5 * DT * k2, damping, np_)
    k4 = pendulum(x + DT * k3, damping, np_)
    return x + DT / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)


@tg.function
def final_state(x0, damping):
    return tg.fori_loop(0, STEPS, lambda i, x: rk4_step(x, damping), x0)


def energy(x, np_=tnp):
    return 0.5 * x[1] ** 2 + G_OVER_L * (1.0 - np_.cos(x[0]))


def final_energy(x0, damping):
    return energy(final_state(x0, damping))


def final_state_numpy(x0, damping):
    x = x0
    for _ in range(STEPS):
        x = rk4_step(x, damping, np)
    return x


def central_difference(f, x, h=1e-5):
    """d f / d x by central differences (x a float or a 1-D array: one column per element).
    h = 1e-5 balances truncation (h^2) against rounding (eps / h) here: errors ~1e-10."""
    if np.ndim(x) == 0:
        return (f(x + h) - f(x - h)) / (2 * h)
    return np.stack([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(x.size)],
                    axis=-1)


def complex_step(f, x, k, h=1e-30):
    """d f / d x_k exactly to rounding: Im f(x + i h e_k) / h (f is analytic)."""
    x = np.array(x, dtype=complex)
    x[k] += 1j * h
    return np.imag(f(x)) / h


x0, c = np.array([2.0, 0.0]), 0.25

t = time.perf_counter()
xT = final_state(x0, c)
first = time.perf_counter() - t
np.testing.assert_allclose(xT, final_state_numpy(x0, c), rtol=1e-12)
graph = final_state.get_concrete_function(x0, c).graph
loops = [op for op in graph.operations if op.primitive.name == "while"]
body = loops[0].attrs["body_graph"]
print(f"damped pendulum, RK4, dt = {DT}, {STEPS} steps to t = {DT * STEPS:g}, c = {c}")
print(f"graph: {len(graph.operations)} ops, {len(loops)} while op whose body has "
      f"{len(body.operations)} ops (one RK4 step)")
print(f"x(0) = {x0}  ->  x(T) = {np.array2string(xT, precision=10)}  "
      f"(NumPy loop: max |diff| = {np.max(np.abs(xT - final_state_numpy(x0, c))):.1e})")
print(f"E(0) = {float(energy(x0, np)):.10f}  ->  E(T) = {float(final_energy(x0, c)):.10f}")

energy_grad = tg.grad(final_energy, argnums=(0, 1))  # made once: each has its trace cache
t = time.perf_counter()
grad_x0, grad_c = energy_grad(x0, c)
first_grad = time.perf_counter() - t
fd_x0 = central_difference(lambda v: energy(final_state_numpy(v, c), np), x0)
fd_c = central_difference(lambda v: energy(final_state_numpy(x0, v), np), c)
np.testing.assert_allclose(grad_x0, fd_x0, rtol=1e-7, atol=1e-9)
np.testing.assert_allclose(grad_c, fd_c, rtol=1e-7)
print("\ngradient of E(T) (tg.grad, reverse mode through the loop) vs central differences:")
print(f"  dE/dx0 = {np.array2string(grad_x0, precision=10)}   "
      f"FD {np.array2string(fd_x0, precision=10)}   "
      f"max rel err {np.max(np.abs(grad_x0 - fd_x0) / np.abs(fd_x0)):.1e}")
print(f"  dE/dc  = {float(grad_c):.10f}   FD {float(fd_c):.10f}   "
      f"rel err {abs(grad_c - fd_c) / abs(fd_c):.1e}")

state_jacobian = tg.jacobian(final_state, argnums=0)
t = time.perf_counter()
jac = state_jacobian(x0, c)
first_jac = time.perf_counter() - t
fd_jac = central_difference(lambda v: final_state_numpy(v, c), x0)
np.testing.assert_allclose(jac, fd_jac, rtol=1e-7, atol=1e-9)
det = np.linalg.det(jac)
assert abs(det - np.exp(-c * DT * STEPS)) < 1e-7  # RK4 is not exactly area-preserving
print("\nJacobian d x(T) / d x(0) (tg.jacobian) vs central differences:")
for row, fd_row in zip(jac, fd_jac, strict=True):
    print(f"  {np.array2string(row, precision=10)}   FD {np.array2string(fd_row, precision=10)}")
print(f"  max |J - FD| = {np.max(np.abs(jac - fd_jac)):.1e}; det J = {det:.10f}, "
      f"exp(-c t) = {np.exp(-c * DT * STEPS):.10f} (the exact flow's area ratio)")

# The finite differences above agree to ~1e-10; the complex step shows the reverse-mode
# derivatives are exact to rounding.
cs_x0 = np.array([complex_step(lambda v: energy(final_state_numpy(v, c), np), x0, k)
                  for k in range(2)])
cs_c = complex_step(lambda v: energy(final_state_numpy(x0, v[0]), np), [c], 0)
cs_jac = np.stack([complex_step(lambda v: final_state_numpy(v, c), x0, k) for k in range(2)],
                  axis=-1)
errors = [np.max(np.abs(grad_x0 - cs_x0) / np.abs(cs_x0)), abs(grad_c - cs_c) / abs(cs_c),
          np.max(np.abs(jac - cs_jac)) / np.max(np.abs(cs_jac))]
assert max(errors) < 1e-12
print("complex-step derivatives (exact to rounding): relative differences dE/dx0 "
      "{:.1e}, dE/dc {:.1e}, Jacobian {:.1e}".format(*errors))

steady = {}
for name, fn in (("value", lambda: final_state(x0, c)),
                 ("gradient", lambda: energy_grad(x0, c)),
                 ("jacobian", lambda: state_jacobian(x0, c))):
    t = time.perf_counter()
    for _ in range(20):
        fn()
    steady[name] = (time.perf_counter() - t) / 20
print(f"\nfirst calls (trace + compile): value {first:.2f} s, gradient {first_grad:.2f} s, "
      f"jacobian {first_jac:.2f} s; then per call: " + ", ".join(
          f"{k} {v * 1e3:.2f} ms" for k, v in steady.items()))
