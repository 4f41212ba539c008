"""A huge entry function split into parts: functions of the module it calls in turn.

Numba's passes (SSA repair, reaching definitions, liveness) and LLVM's optimizer cost more
per statement the longer the function they see: an unrolled loop of 900 ops made one entry
function of 4000 lines and 550 loops, which compiled in minutes and gigabytes. Cut into
parts of about `SPLIT_LINES` lines, each compiled on its own, the compile grows linearly
with the graph (docs/performance.md, "Compile time of unrolled loops").

A part takes the names it reads that earlier statements (or the entry's parameters) set,
and returns the names it sets that later statements read; arrays are shared, so writes
into them need no return. The statements keep their text and comments. The entry calls
each part's own machine code (`_direct`, helpers.py), so LLVM compiles a part once, not
again inside the entry.
"""

from __future__ import annotations

import ast
import os

from tracegrad.backends.numba import helpers
from tracegrad.backends.numba.records import CALLED_ONLY, direct_args

# An entry function longer than SPLIT_ABOVE lines, or holding more than SPLIT_LOOPS loops,
# is cut into parts of about SPLIT_LINES lines (docs/performance.md). Measured: an entry of
# 271 loops in 1420 lines (the LSTM l=4 gradient's) compiled 18% faster in parts; one of 159
# loops no faster; the det gradient (ell=10, 11: about 1060 and 1165 lines) ran 9-15% faster
# in parts, an HMM of 14 steps (about 1200 lines) ran and compiled as fast. A part's arrays
# are its arguments, which LLVM must assume may overlap: small kernels cut into parts ran
# slower (an HMM of 5 steps: 7 -> 12 us a call, of 10 steps, 859 lines: 11 -> 18 us), so
# only large entries are cut.
SPLIT_ABOVE = int(os.environ.get("TRACEGRAD_NUMBA_SPLIT_ABOVE", "1000"))
SPLIT_LOOPS = int(os.environ.get("TRACEGRAD_NUMBA_SPLIT_LOOPS", "200"))
SPLIT_LINES = int(os.environ.get("TRACEGRAD_NUMBA_SPLIT_LINES", "200"))
# An entry of at least ENTRY_LINES lines kept whole is made one part all the same: a part
# is called by `_direct`, which translates it to LLVM IR when it can (llvmgen.py), and
# Numba then compiles only the entry's one call (env TRACEGRAD_NUMBA_ENTRY_PART_LINES; 0:
# never). The LSTM l=4 gradient's synchronous first call: 19-25 s -> 10.4-12.3 s.
ENTRY_LINES = int(os.environ.get("TRACEGRAD_NUMBA_ENTRY_PART_LINES", "150"))


def _one_part(lines: int) -> bool:
    from tracegrad.backends.numba import llvmgen

    return llvmgen.ENABLED and 0 < ENTRY_LINES <= lines


def _names(stmt: ast.stmt) -> tuple[dict, dict]:
    """(names read, names set) by `stmt`, in order of appearance."""
    loads, stores = {}, {}
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name):
            (loads if isinstance(node.ctx, ast.Load) else stores)[node.id] = None
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            loads[node.target.id] = None
    return loads, stores


def _movable(stmt: ast.stmt) -> bool:
    return not any(isinstance(n, (ast.Return, ast.Global, ast.Nonlocal, ast.Yield,
                                  ast.FunctionDef, ast.Lambda)) for n in ast.walk(stmt))


def _whole(lines: int, loops) -> bool:
    """Whether a function of `lines` lines and `loops()` loops is kept whole."""
    return lines <= 2 * SPLIT_LINES or (lines <= SPLIT_ABOVE and loops() <= SPLIT_LOOPS)


def split_entry(source: str, entry: str) -> str:
    """`source` with function `entry`'s body cut into parts of about `SPLIT_LINES` lines
    when it is longer than `SPLIT_ABOVE` lines or holds more than `SPLIT_LOOPS` loops
    (unchanged otherwise)."""
    max_lines = SPLIT_LINES
    # the whole source's lines and loops first, which bound the entry's, before parsing it
    n = source.count("\n")
    if (max_lines <= 0 or _whole(n, lambda: source.count(" for "))) and not _one_part(n):
        return source
    module = ast.parse(source)
    fn = next((n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == entry),
              None)
    if fn is None:
        return source
    if max_lines <= 0 or _whole(fn.end_lineno - fn.lineno,
                                lambda: sum(isinstance(n, ast.For) for n in ast.walk(fn))):
        if not _one_part(fn.end_lineno - fn.lineno):
            return source
        max_lines = None  # the whole body, one part
    lines = source.splitlines()
    body = fn.body
    tail = len(body)
    while tail and not _movable(body[tail - 1]):
        tail -= 1
    if tail < len(body) - 1 or any(not _movable(s) for s in body[:tail]):
        return source  # a return before the end: kept whole
    # each statement's text, with the comment lines above it
    texts, end = [], None
    for s in body:
        texts.append((s.lineno if end is None else end + 1, s.end_lineno))
        end = s.end_lineno
    names = [_names(s) for s in body]
    params = {a.arg: None for a in fn.args.args}
    last_read = {}  # name -> the last statement that reads it
    for i, (loads, _) in enumerate(names):
        for n in loads:
            last_read[n] = i
    chunks, current, size = [], [], 0
    for i in range(tail):
        n = body[i].end_lineno - body[i].lineno + 1
        if current and max_lines is not None and size + n > max_lines:
            chunks.append(current)
            current, size = [], 0
        current.append(i)
        size += n
    if current:
        chunks.append(current)
    if len(chunks) < (1 if max_lines is None else 2):
        return source
    decorator = lines[fn.decorator_list[0].lineno - 1] if fn.decorator_list else "@njit"
    decorator = decorator.replace(", forceinline=True", "")
    if decorator.endswith(")"):
        decorator = decorator[:-1] + CALLED_ONLY + ")"
    defined = dict(params)
    parts, calls = [], []
    for k, chunk in enumerate(chunks):
        reads, sets = {}, {}
        for i in chunk:
            reads.update((n, None) for n in names[i][0] if n in defined and n not in sets)
            sets.update(names[i][1])
        returned = [n for n in sets if last_read.get(n, -1) > chunk[-1]]
        name = f"{entry}_part{k}"
        text = [line for i in chunk for line in lines[texts[i][0] - 1:texts[i][1]]]
        ret = f"    return ({', '.join(returned)},)" if returned else "    return None"
        parts.append("\n".join([decorator, f"def {name}({', '.join(reads)}):", *text, ret])
                     + "\n")
        call = f"_direct({name}, {direct_args(reads)})"
        calls.append(f"    {', '.join(returned)}, = {call}" if returned else f"    {call}")
        defined.update(sets)
    head = lines[:(fn.decorator_list[0].lineno if fn.decorator_list else fn.lineno) - 1]
    signature = lines[(fn.decorator_list[0].lineno if fn.decorator_list else fn.lineno) - 1:
                      body[0].lineno - 1]
    rest = lines[texts[tail][0] - 1:] if tail < len(body) else lines[fn.end_lineno:]
    imports = [f"from {helpers.MODULE} import _direct", ""]
    return "\n".join(head + imports + parts + signature + calls + rest) + "\n"
