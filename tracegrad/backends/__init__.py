"""Backends that turn an optimized FuncGraph into something callable."""

# The vector width in bits that LLVM prefers for the loops of numba kernels compiled from
# now on: 256 or 512, or None for LLVM's choice on the host CPU (`tg.config.vector_width`).
vector_width: int | None = None
