"""One lock for every figure the live explorers draw, and for matplotlib's hooks in a kernel.

ipykernel 7 may handle a widget message on a thread of its own, then fire IPython's
``post_execute`` event on that thread. matplotlib hooks two functions to it: pyplot's redraw of
every stale figure, and matplotlib-inline's ``flush_figures``, which shows and closes every open
figure. An explorer drawing a figure on another thread at that moment (a change, or a layout drawn
ahead while the kernel is idle) then shares it, and matplotlib's mathtext parser with it, with a
second thread: in JupyterLab the parse failed at random (``ParseException``). Every draw of
:mod:`mha.viz.live` holds :data:`DRAW_LOCK`, and :func:`guard_matplotlib_hooks` puts matplotlib's two
hooks under it too.
"""

from __future__ import annotations

import sys
import threading

#: Held by every draw of a live explorer and by matplotlib's hooks (re-entrant: a draw may nest).
DRAW_LOCK = threading.RLock()

#: matplotlib's own post_execute hooks (pyplot's redraw, matplotlib-inline's flush) -> their locked forms.
_LOCKED_HOOKS: dict = {}


def _locked(hook):
    if hook not in _LOCKED_HOOKS:

        def locked():
            with DRAW_LOCK:
                return hook()

        locked.__wrapped__ = hook
        locked.__name__ = f"locked_{getattr(hook, '__name__', 'hook')}"
        _LOCKED_HOOKS[hook] = locked
    return _LOCKED_HOOKS[hook]


def guard_matplotlib_hooks() -> int:
    """Put matplotlib's hooks on IPython's ``post_execute`` under :data:`DRAW_LOCK`: pyplot's redraw
    of stale figures and matplotlib-inline's ``flush_figures`` (which shows and closes every open
    figure). Both run after each widget message, on its thread, and would draw or close a figure an
    explorer is drawing on another. Returns how many hooks are locked now (0 outside IPython)."""
    shell = None
    if "IPython" in sys.modules:
        from IPython import get_ipython

        shell = get_ipython()
    if shell is None:
        return 0
    callbacks = shell.events.callbacks.get("post_execute", [])
    for i, hook in enumerate(list(callbacks)):
        if hook not in _LOCKED_HOOKS.values() and getattr(hook, "__module__", "").split(".")[0] in (
            "matplotlib",
            "matplotlib_inline",
        ):
            callbacks[i] = _locked(hook)  # in place: the hooks keep their order
    return sum(hook in _LOCKED_HOOKS.values() for hook in callbacks)


__all__ = ["DRAW_LOCK", "guard_matplotlib_hooks"]
