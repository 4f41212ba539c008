"""Hooks: the functions a lower layer calls and a higher layer installs through named
setters; calling one nothing installed is a UsageError naming what is missing."""

import importlib

import numpy as np
import pytest

import tracegrad as tg
from tracegrad.core import parser, variables
from tracegrad.core.hooks import Hook
from tracegrad.errors import UsageError
from tracegrad.ops import control_flow

function_module = importlib.import_module("tracegrad.function")

# (hook, what its error names, the module that installs it)
HOOKS = [
    (parser._callee_loader, "callee loader", "tracegrad.transforms.custom"),
    (variables._traced_write, "Variable assignment inside a trace",
     "tracegrad.function._effects"),
    (function_module._call_recorder, "recorder of compiled calls", "tracegrad.function"),
    (control_flow._run, "reference interpreter", "tracegrad.transforms.evaluate"),
    (control_flow._vjp_graph, "vjp", "tracegrad.transforms.control_flow"),
    (control_flow._inline, "inliner", "tracegrad.transforms.control_flow"),
    (control_flow._build_graph, "tracer", "tracegrad.transforms.control_flow"),
]


@pytest.mark.parametrize("hook,what,installer", HOOKS, ids=lambda x: getattr(x, "name", x))
def test_the_module_a_hook_names_installs_it(hook, what, installer):
    importlib.import_module(installer)
    assert hook.fn is not None, hook


@pytest.mark.parametrize("hook,what,installer", HOOKS, ids=lambda x: getattr(x, "name", x))
def test_a_hook_nothing_installed_is_a_usage_error_naming_it(monkeypatch, hook, what,
                                                              installer):
    monkeypatch.setattr(hook, "fn", None)
    with pytest.raises(UsageError, match=f"{what}.* is not installed: {installer} installs it"):
        hook()


def test_install_returns_the_function_it_replaces():
    hook = Hook("a probe", "tests")
    first, second = (lambda: 1), (lambda: 2)
    assert hook.install(first) is None and hook() == 1
    assert hook.install(second) is first and hook() == 2


def test_variable_assignment_in_a_trace_without_the_function_layer(monkeypatch):
    monkeypatch.setattr(variables._traced_write, "fn", None)
    v = tg.Variable(np.zeros(2))

    def step(x):
        v.assign(x)
        return x

    with pytest.raises(UsageError, match="Variable assignment inside a trace is not installed"):
        tg.trace(step)(tg.TensorSpec([2]))


def test_parsing_a_call_without_a_callee_loader(monkeypatch):
    f = tg.function(lambda x: x * 2.0)
    text = str(tg.trace(lambda x: f(x) + 1.0)(tg.TensorSpec([2])))
    monkeypatch.setattr(parser._callee_loader, "fn", None)
    with pytest.raises(UsageError, match="callee loader of call ops"):
        tg.FuncGraph.parse(text)
