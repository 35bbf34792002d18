"""Keyed execution environments: run any agent over a stream of keyed records.

``LocalExecutionEnvironment().from_list(records, key=...).apply(agent)`` gives the agent's outputs:
records of one key in order, with that key's session and short-term memory; different keys
concurrently, up to a limit. ``FlinkExecutionEnvironment`` does the same over a PyFlink
``DataStream`` (the ``flink`` extra); PyFlink loads only when that name is first used. Not imported
by ``import adk``.
"""

from typing import TYPE_CHECKING, Any

from ._local import KeyedInput, KeyedOutputs, LocalExecutionEnvironment
from ._records import KeyedOutput, RecordError, SessionStore

if TYPE_CHECKING:
    from ._flink import FlinkExecutionEnvironment, FlinkKeyedInput, FlinkKeyedOutputs

__all__ = [
    "FlinkExecutionEnvironment",
    "FlinkKeyedInput",
    "FlinkKeyedOutputs",
    "KeyedInput",
    "KeyedOutput",
    "KeyedOutputs",
    "LocalExecutionEnvironment",
    "RecordError",
    "SessionStore",
]


_FLINK = {"FlinkExecutionEnvironment", "FlinkKeyedInput", "FlinkKeyedOutputs"}


def _lazy_attribute(name: str) -> Any:
    # PyFlink is an optional extra and heavy to import: load it when a Flink name is asked for.
    if name in _FLINK:
        try:
            from . import _flink
        except ModuleNotFoundError as exc:
            # cloudpickle comes with PyFlink (and _flink imports it first): missing, the extra is
            if (exc.name or "").split(".")[0] not in ("pyflink", "cloudpickle"):
                raise
            raise ImportError(
                f"{name} needs PyFlink: pip install 'pyadk[flink]' (and Java 11 or newer)"
            ) from exc
        return getattr(_flink, name)
    raise AttributeError(f"module 'adk.execution' has no attribute {name!r}")


if not TYPE_CHECKING:
    # Hidden from type checkers, which see the lazy names' imports above instead: a module
    # ``__getattr__`` makes every other name they look up its return type, without an error,
    # so a misspelt import (``from adk.execution import FlinkEnvironment``) type-checked as ``Any``.
    __getattr__ = _lazy_attribute
