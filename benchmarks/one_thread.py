"""The peers of the one-thread benchmark scripts (jacobians.py, control_flow.py), loaded after
every library is limited to one thread: `jax` (x64) and `jnp`, `torch`, or None where not
installed, and `time_peers`. Import it before NumPy.

TRACEGRAD_BENCH_THREADS=default leaves every library (tracegrad too) at its default thread
count instead; benchmarks/scaling.py runs a script both ways."""

import os

THREADS = os.environ.get("TRACEGRAD_BENCH_THREADS", "1")
if THREADS == "1":
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                 "NUMBA_NUM_THREADS", "TRACEGRAD_NUM_THREADS"):
        os.environ.setdefault(_var, "1")
    os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false "
                          "intra_op_parallelism_threads=1")
    # and on one core: XLA's runtime still ran independent ops (the GP's, the batched eigh's)
    # on a second thread under the flags above
    if hasattr(os, "sched_setaffinity"):
        # the cores the process had, for a child at the default settings (first calls)
        os.environ.setdefault("TRACEGRAD_BENCH_CORES", ",".join(
            map(str, sorted(os.sched_getaffinity(0)))))
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
elif THREADS != "default":
    raise SystemExit(f"TRACEGRAD_BENCH_THREADS={THREADS!r}: '1' (the default) or 'default'")
elif os.environ.get("TRACEGRAD_BENCH_CORES") and hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {int(c) for c in os.environ["TRACEGRAD_BENCH_CORES"].split(",")})
os.environ.setdefault("XLA_FLAGS", "")

# TRACEGRAD_BENCH_ISA=avx2: every library generates AVX2 code, no AVX-512, on any x86-64
# that has AVX2 (the figures of an AVX2-only machine, as near as one that has AVX-512 gets):
# Numba from a CPU name *and* a feature list (a name alone keeps the host's features, so
# 512-bit vectors), XLA's max ISA, PyTorch's kernels and torch.compile's vector length, and
# OpenBLAS's Haswell kernels (its BLAS and LAPACK, which NumPy, SciPy and tracegrad call) unless
# OPENBLAS_CORETYPE is already set.
ISA = os.environ.get("TRACEGRAD_BENCH_ISA", "").lower()
AVX2_FEATURES = ("+64bit,+avx,+avx2,+bmi,+bmi2,+cmov,+cx16,+cx8,+f16c,+fma,+fsgsbase,+fxsr,"
                 "+lzcnt,+mmx,+movbe,+pclmul,+popcnt,+rdrnd,+sahf,+sse,+sse2,+sse3,+sse4.1,"
                 "+sse4.2,+ssse3,+xsave,+xsaveopt")
if ISA == "avx2":
    os.environ["NUMBA_CPU_NAME"] = "haswell"
    os.environ["NUMBA_CPU_FEATURES"] = AVX2_FEATURES
    os.environ["XLA_FLAGS"] += " --xla_cpu_max_isa=AVX2"
    os.environ["ATEN_CPU_CAPABILITY"] = "avx2"
    os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")
elif ISA:
    raise SystemExit(f"TRACEGRAD_BENCH_ISA={ISA!r}: only 'avx2' (or unset: the host's)")

from run import _optional, first_call, median_report, median_time  # noqa: E402

jax = _optional("jax")
torch = _optional("torch")
jnp = None
if jax is not None:
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
if torch is not None:
    if THREADS == "1":
        torch.set_num_threads(1)
    if ISA == "avx2":
        import torch._inductor.config

        torch._inductor.config.cpp.simdlen = 256


def time_peers(args, times: dict, first: dict, same, *, jax_fn=None, torch_fn=None,
               torch_label="torch") -> None:
    """Time JAX's jitted `jax_fn` and PyTorch's `torch_fn` (where installed) on `args`, after
    `same(result)` checked each gives tracegrad's values; medians go to `times`, JAX's first
    call to `first`."""
    if jax is not None and jax_fn is not None:
        f = jax_fn
        ja = [jnp.asarray(a) for a in args]
        first["jax"] = first_call(lambda: jax.block_until_ready(f(*ja)))
        same(f(*ja))
        times["jax"] = median_time(lambda: jax.block_until_ready(f(*ja)))
    if torch is not None and torch_fn is not None:
        ta = [torch.from_numpy(a) for a in args]
        same(torch_fn(*ta))
        times[torch_label] = median_time(lambda: torch_fn(*ta))


def peer_report(argv, doc: str, default: str, labels: dict, measure) -> None:
    """A benchmark script's main: the CPU, then `run.median_report` of its rows beside the
    peers that are installed (the script's docstring's first line describes it)."""
    from one_pass import cpu

    print("cpu:", cpu())
    median_report(argv, description=doc.splitlines()[0], default=default, labels=labels,
                  measure=measure, libraries=(jax, torch))
