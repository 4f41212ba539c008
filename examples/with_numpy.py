"""Run a NumPy program written by others on another NumPy namespace, unchanged but for its
`import numpy as np`: `with_numpy(func, tracegrad.numpy)` is `func` with `np` (and NumPy
names it imported) rebound, as if its module had said `import tracegrad.numpy as np`.

The program's source is not copied: its code object is reused with new globals. Functions
and modules of the program's own package that it reaches through its globals (helpers of
the same module such as `cnd_array`, or `numpy.polynomial.polyutils` for `chebval2d`) are
rebound the same way, recursively (a Numba dispatcher as its Python function, `py_func`);
anything else (Python's `math`, other packages) is left as it is.
"""

from __future__ import annotations

import types

import numpy


def with_numpy(func, namespace):
    """`func` (a Python function, or a Numba dispatcher's `py_func`) running with `numpy`
    replaced by `namespace` (`tracegrad.numpy`, `jax.numpy`, or `numpy` itself)."""
    func = getattr(func, "py_func", func)
    return _Rebinder(namespace, _package(func)).function(func)


def _package(func) -> str:
    return (func.__module__ or "").split(".")[0]


def _code_names(code) -> set:
    """The global names `code` and the functions nested in it may read."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return names


class _Rebinder:
    def __init__(self, namespace, package: str):
        self.namespace = namespace
        self.package = package
        self.done: dict[int, object] = {}

    def value(self, value):
        """`value` as the rebound program sees it."""
        if isinstance(value, types.ModuleType):
            return self.module(value)
        func = getattr(value, "py_func", value)
        if isinstance(func, types.FunctionType):
            if _package(func) == self.package:
                return self.function(func)
            return value
        name = getattr(value, "__name__", None)
        if (callable(value) and isinstance(name, str) and getattr(numpy, name, None) is value
                and hasattr(self.namespace, name)):
            return getattr(self.namespace, name)  # `from numpy import asarray`
        return value

    def module(self, module):
        name = module.__name__
        if name == "numpy" or name.startswith("numpy._core"):
            return self.namespace
        if name == "numpy.linalg" and hasattr(self.namespace, "linalg"):
            return self.namespace.linalg
        if name.split(".")[0] != self.package:
            return module
        if id(module) not in self.done:
            self.done[id(module)] = _ReboundModule(module, self)
        return self.done[id(module)]

    def function(self, func):
        if id(func) in self.done:
            return self.done[id(func)]
        globals_ = dict(func.__globals__)
        closure = None if func.__closure__ is None else tuple(
            types.CellType(self.value(c.cell_contents)) for c in func.__closure__)
        new = types.FunctionType(func.__code__, globals_, func.__name__, func.__defaults__,
                                 closure)
        self.done[id(func)] = new  # before the globals: recursive helpers find it
        new.__kwdefaults__ = func.__kwdefaults__
        new.__qualname__, new.__doc__ = func.__qualname__, func.__doc__
        new.__dict__.update(func.__dict__)
        for name in _code_names(func.__code__):
            if name in globals_:
                globals_[name] = self.value(globals_[name])
        return new


class _ReboundModule(types.ModuleType):
    """A module of the program's package whose functions are rebound when first read."""

    def __init__(self, module, rebinder):
        super().__init__(module.__name__, module.__doc__)
        self._module, self._rebinder = module, rebinder

    def __getattr__(self, name):
        value = self._rebinder.value(getattr(self._module, name))
        setattr(self, name, value)
        return value
