"""The per-thread context stack: the graph being built, recording tapes, gradient overrides."""

from __future__ import annotations

import threading


class _State(threading.local):
    def __init__(self):
        self.graph = None  # the FuncGraph new ops go into; None when eager
        self.tapes = []  # the recording tapes (innermost last)
        self.grad_overrides = {}  # primitive name -> registered gradient name
        self.source = None  # the location new ops are attributed to, when a transform
        # re-emits the ops of a traced graph (else the user's frame that is running)
        self.transposing = 0  # > 0 while forward mode transposes a pullback
        self.stand_ins = {}  # id of a tensor of another trace -> (it, the tensor standing
        # for it): a deferred gradient function's view of the forward values it closes over


state = _State()
