"""`Hook`: a function a lower layer calls and a higher layer installs through a named setter.

The core and the ops import no transforms, yet some of their rules need one (a `call` op
read back from text needs a callee, a `cond` gradient the vjp of a branch). The module that
needs the function keeps a `Hook` and a named setter (`parser.set_callee_loader`,
`control_flow.set_vjp_graph` ...); the module that provides it calls the setter when it
is imported. Calling a hook nothing installed is a `UsageError` naming the hook and the
module that installs it.
"""

from __future__ import annotations

from collections.abc import Callable

from tracegrad.errors import UsageError


class Hook:
    """One installable function: `hook.install(fn)`, then `hook(*args)` calls it."""

    __slots__ = ("fn", "installer", "name")

    def __init__(self, name: str, installer: str):
        self.fn: Callable | None = None
        self.name = name
        self.installer = installer

    def install(self, fn: Callable) -> Callable | None:
        """Make `fn` the hook's function; returns the one it replaces (None if none)."""
        previous, self.fn = self.fn, fn
        return previous

    def __call__(self, *args, **kwargs):
        fn = self.fn
        if fn is None:
            raise UsageError(
                f"{self.name} is not installed: {self.installer} installs it when imported"
            )
        return fn(*args, **kwargs)

    def __repr__(self):
        return f"<Hook {self.name}: {'installed' if self.fn else 'not installed'}>"
