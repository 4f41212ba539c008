"""Pickling compiled functions, so they can be shipped to other processes (Dask workers).

- A `tg.Function` pickles as its Python function (by reference for a module-level function;
  `cloudpickle` pickles lambdas and closures by value) plus its options; the receiver traces
  again on its first call, and finds the kernel in its disk cache when it has one.
- A transformed function (`tg.grad(f)`, `tg.vmap(f)` ...) pickles as the transform, `f`
  (pickled as above) and the transform's options.
- A `ConcreteFunction` pickles as its graph's JSON form plus its signature: the receiver
  needs no Python source. It compiles (or loads from its disk kernel cache) on its first
  call, once per process however many times the same trace arrives.
The tracegrad version travels too: a receiver running another version refuses the payload.
"""

from __future__ import annotations

import hashlib
import inspect
import pickle
import threading
from collections import OrderedDict

import numpy as np

from tracegrad.core.ir import EagerTensor, FuncGraph
from tracegrad.core.serialize import VERSION as GRAPH_FORMAT_VERSION
from tracegrad.core.variables import Variable
from tracegrad.core.version import __version__
from tracegrad.errors import InvalidArgumentError, UsageError

LOADED_PER_PROCESS = 256  # unpickled concrete functions kept, most recently used first

_loaded: OrderedDict[str, object] = OrderedDict()  # payload digest -> ConcreteFunction
_loaded_lock = threading.Lock()


def function_options(f) -> dict:
    """The keyword arguments that rebuild `f` (a `tg.Function`) around its Python function."""
    return {"input_signature": f.input_signature, "static_argnums": f._static_argnums,
            "static_argnames": f._static_argnames, "backend": f._backend,
            "reduce_retracing": f._reduce_retracing, "parallel": f._parallel}


def rebuild_function(fn, options: dict):
    """`tg.function(fn, **options)`, untraced (the inverse of pickling a `tg.Function`)."""
    from tracegrad.function import Function

    return Function(fn, **options)


def apply_transform(transform, fn, options: dict):
    """`transform(fn, **options)` (the inverse of pickling a transformed function)."""
    return transform(fn, **options)


def concrete_payload(concrete) -> tuple[str, bytes]:
    """`(digest, bytes)`: what a `ConcreteFunction` travels as."""
    name = concrete.name
    if concrete._written:
        raise UsageError(
            f"{name}: a concrete function that assigns Variables cannot be pickled (each "
            "process would update its own copy); pickle the tg.Function instead")
    captures = []
    for external, _ in concrete.graph.captures:
        if isinstance(external, Variable):
            raise UsageError(
                f"{name}: a concrete function that reads a Variable cannot be pickled (the "
                "receiver would read a stale copy); pass its value as an argument")
        if not isinstance(external, EagerTensor):
            raise UsageError(f"{name}: this concrete function captures a tensor of an "
                             "enclosing trace and cannot be pickled; call it in that trace")
        captures.append(np.asarray(external._value))
    owner = concrete._owner
    signature = owner._signature
    parameters = None if signature is None else [
        (p.name, p.kind, p.default) for p in signature.parameters.values()]
    body = pickle.dumps({
        "graph": concrete.graph.to_json(), "captures": captures, "name": name,
        "treedef": concrete._treedef, "entries": concrete._entries,
        "statics": concrete._statics, "out_treedef": concrete._out_treedef,
        "parameters": parameters, "static_argnums": owner._static_argnums,
        "static_argnames": owner._static_argnames, "backend": owner._backend,
        "parallel": owner._parallel,
    }, protocol=pickle.HIGHEST_PROTOCOL)
    return hashlib.sha256(body).hexdigest(), body


def rebuild_concrete(tracegrad_version: str, graph_format: int, digest: str, body: bytes):
    """The `ConcreteFunction` a payload describes; the same one for every arrival of the
    same payload in this process, so it compiles once."""
    if tracegrad_version != __version__ or graph_format != GRAPH_FORMAT_VERSION:
        raise InvalidArgumentError(
            f"this concrete function was pickled by tracegrad {tracegrad_version} (graph "
            f"format {graph_format}); this process runs tracegrad {__version__} (graph format "
            f"{GRAPH_FORMAT_VERSION}): install the same tracegrad version on every process")
    with _loaded_lock:
        found = _loaded.get(digest)
        if found is not None:
            _loaded.move_to_end(digest)
            return found
    concrete = _concrete_from(pickle.loads(body))
    concrete._payload = (digest, body)
    with _loaded_lock:
        concrete = _loaded.setdefault(digest, concrete)
        while len(_loaded) > LOADED_PER_PROCESS:
            _loaded.popitem(last=False)
    return concrete


def _concrete_from(p: dict):
    from tracegrad.function import ConcreteFunction, Function

    graph = FuncGraph.from_json(p["graph"])
    graph.captures = [(EagerTensor(v), placeholder) for v, (_, placeholder)
                      in zip(p["captures"], graph.captures, strict=True)]
    name = p["name"]

    def traced(*args, **kwargs):
        raise UsageError(f"{name}: this function was unpickled from its trace; it has no "
                         "Python source to trace again for other arguments")

    traced.__name__ = traced.__qualname__ = name
    if p["parameters"] is not None:
        traced.__signature__ = inspect.Signature(
            [inspect.Parameter(n, kind, default=default) for n, kind, default in p["parameters"]])
    owner = Function(traced, static_argnums=p["static_argnums"],
                     static_argnames=p["static_argnames"], backend=p["backend"],
                     parallel=p["parallel"])
    return ConcreteFunction(owner, graph, p["treedef"], p["entries"], p["statics"],
                            p["out_treedef"])
