"""How the SDK's exceptions with fields cross a process boundary (``pickle``).

A multiprocessing pool, a ``concurrent.futures`` process executor or a PyFlink worker sends a
failure back pickled. ``BaseException``'s own protocol rebuilds an exception by calling
``cls(*exc.args)``, and ``args`` holds only the message, so an exception whose ``__init__`` takes
its fields (``RunError(event, events)``, ``RecordError(index, key, ...)``) failed to unpickle with
a ``TypeError`` about missing arguments, which hid the failure it carried. ``reduce_error`` rebuilds
it as it was instead: the same class, ``args`` and attributes, without calling ``__init__``, so it
holds for subclasses with ``__init__``s of their own too.

This is the exceptions' own protocol, used by whoever moves them between processes: the SDK never
unpickles anything itself.
"""

from __future__ import annotations

from typing import Any, TypeVar

__all__ = ["rebuild_error", "reduce_error"]

E = TypeVar("E", bound=BaseException)


def reduce_error(exc: BaseException) -> tuple[Any, ...]:
    """``exc.__reduce__``'s value: rebuilt by ``rebuild_error`` with its args and attributes."""
    return (rebuild_error, (type(exc), exc.args), dict(vars(exc)) or None)


def rebuild_error(cls: type[E], args: tuple[Any, ...]) -> E:
    """An exception of ``cls`` with ``args``, not initialised: pickle sets its attributes next."""
    exc = cls.__new__(cls, *args)
    exc.args = args
    return exc
