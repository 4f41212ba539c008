"""The peers of the one-thread benchmark scripts (jacobians.py, control_flow.py), loaded after
every library is limited to one thread: `jax` (x64) and `jnp`, `torch`, or None where not
installed. Import it before NumPy."""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false "
                      "intra_op_parallelism_threads=1")

from run import _optional  # noqa: E402

jax = _optional("jax")
torch = _optional("torch")
jnp = None
if jax is not None:
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
if torch is not None:
    torch.set_num_threads(1)
