"""What the machine code of a compiled kernel says about its loops, for a chosen CPU target.

Run as a script (`python _codegen_probe.py SHAPE...`) under `NUMBA_CPU_NAME` /
`NUMBA_CPU_FEATURES` to compile for another vector unit than the host's: it compiles the
kernel of `sin(a) * 3 + 1` for each shape without running it (the target's instructions
may not exist on this CPU) and prints one JSON object of facts per shape.
"""

import json
import re
import sys

# Packed (not scalar `sd`) double-precision arithmetic, on any width of vector register.
PACKED = re.compile(r"\bv?(mul|add|sub|div|fmadd\d*|fnmadd\d*|fmsub\d*|fmsubadd\d*)pd\b")
_REGISTER = re.compile(r"%([xyz])mm\d+")


def kernel_module(source: str):
    """The imported module of the generated kernel whose text ends with `source`."""
    for name, module in list(sys.modules.items()):
        if name.startswith("tg_") and not name.startswith("tg_helpers"):
            with open(module.__file__) as f:
                if f.read().endswith(source):
                    return module
    raise LookupError("no loaded kernel module has this source")


def facts(dispatcher) -> dict:
    """Loop facts of a compiled Numba dispatcher (compiled here: cached code has no text).

    - `vector_loop`: LLVM's loop vectorizer made a vector body (its `vector.body` block);
    - `alias_checks`: it needed run-time alias checks (`vector.memcheck`): pointers whose
      no-alias facts were lost;
    - `packed_widths`: the registers (xmm/ymm/zmm) that packed double arithmetic uses;
    - `gathers`: hardware gathers (`vgather*pd`), a cost-model choice that differs by CPU.
    """
    asm = "\n".join(dispatcher.inspect_asm().values())
    llvm = "\n".join(dispatcher.inspect_llvm().values())
    widths = set()
    for line in asm.splitlines():
        if PACKED.search(line):
            widths.update(m.group(1) + "mm" for m in _REGISTER.finditer(line))
    return {
        "vector_loop": "vector.body" in llvm,
        "alias_checks": "vector.memcheck" in llvm,
        "packed_widths": sorted(widths),
        "gathers": bool(re.search(r"\bvgather\w*pd\b", asm)),
    }


def sin_kernel_facts(shape) -> dict:
    """Facts of the kernel of `sin(a) * 3 + 1` over a float64 array of `shape`, compiled
    into the current `TRACEGRAD_CACHE_DIR` for the current Numba target, never run."""
    import numpy as np

    import tracegrad as tg
    import tracegrad.numpy as tnp
    from tracegrad.backends import numba as nb

    graph = tg.optimize(tg.trace(lambda a: tnp.sin(a) * 3.0 + 1.0)(
        tg.TensorSpec(shape, np.float64)))
    nb.compile_graph(graph)
    return facts(kernel_module(nb.generate_source(graph)).kernel)


def target() -> dict:
    """The CPU Numba compiles for (its name and whether its features include AVX-512)."""
    from numba.core import config
    import llvmlite.binding as ll

    name = config.CPU_NAME or ll.get_host_cpu_name()
    features = config.CPU_FEATURES
    if features is None:
        features = ll.get_host_cpu_features().flatten()
    return {"cpu": name, "features": features, "avx512f": "+avx512f" in features.split(","),
            "avx2": "+avx2" in features.split(",")}


if __name__ == "__main__":
    shapes = [tuple(int(d) for d in arg.split("x")) for arg in sys.argv[1:]]
    print(json.dumps({"target": target(),
                      "kernels": [sin_kernel_facts(s) for s in shapes]}))
