"""Backends that turn an optimized FuncGraph into something callable."""

import os

# The vector width in bits that LLVM prefers for the loops of numba kernels compiled from
# now on: 256 or 512, or None for LLVM's choice on the host CPU (`tg.config.vector_width`).
vector_width: int | None = None

# The name of the thread that compiles in the background (tg.config.background_compile): a
# compile child it forks runs at a lower priority than the program it compiles for.
BACKGROUND_THREAD = "tracegrad-compile"

_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_bytes(value) -> int | None:
    """A memory size: an int of bytes, or a string such as "512M", "8G", "1.5T" or
    "1000000"; None, "" or "none" for no limit. ValueError for anything else."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"a memory size is an int of bytes or a string like '8G', "
                         f"got {value!r}")
    text = str(value).strip().upper().removesuffix("B")
    if text in ("", "NONE"):
        return None
    scale = _UNITS.get(text[-1:], 1)
    try:
        number = float(text[:-1] if text[-1:] in _UNITS else text)
    except ValueError:
        raise ValueError(f"not a memory size: {value!r} (an int of bytes, or e.g. '8G')") \
            from None
    if not number > 0:
        raise ValueError(f"a memory limit must be positive, got {value!r}")
    return int(number * scale)


# The memory a numba compile may take beyond the size of its process, in bytes, or None
# for no limit (`tg.config.compile_memory_limit`; docs/numba.md, "Large compiles run in a
# child process").
compile_memory_limit: int | None = parse_bytes(
    os.environ.get("TRACEGRAD_COMPILE_MEMORY_LIMIT", ""))
