"""Keyed execution environments: run any agent over a stream of keyed records.

``LocalExecutionEnvironment().from_list(records, key=...).apply(agent)`` gives the agent's outputs:
records of one key in order, with that key's session and short-term memory; different keys
concurrently, up to a limit. Not imported by ``import adk``.
"""

from ._local import KeyedInput, KeyedOutputs, LocalExecutionEnvironment
from ._records import KeyedOutput, RecordError

__all__ = [
    "KeyedInput",
    "KeyedOutput",
    "KeyedOutputs",
    "LocalExecutionEnvironment",
    "RecordError",
]
