"""A typed user's imports: every public name resolves to its own type, a misspelt one is an error
(checked by mypy --strict, not run)."""

from __future__ import annotations

from typing import assert_type

import adk
import adk.checkpoint
import adk.execution
import adk.models
from adk import AgentTool, Callbacks, OpenAIChatModel, Resources, SequentialAgent
from adk.checkpoint import PostgresCheckpointStore, RedisCheckpointStore, SQLiteCheckpointStore
from adk.execution import FlinkExecutionEnvironment

# The lazily loaded names are their classes to a type checker, as the eager ones are.
assert_type(adk.SequentialAgent, type[SequentialAgent])
assert_type(adk.AgentTool, type[AgentTool])
assert_type(adk.Callbacks, type[Callbacks])
assert_type(adk.Resources, type[Resources])
assert_type(adk.models.OpenAIChatModel, type[OpenAIChatModel])
assert_type(adk.checkpoint.SQLiteCheckpointStore, type[SQLiteCheckpointStore])
assert_type(adk.checkpoint.RedisCheckpointStore, type[RedisCheckpointStore])
assert_type(adk.checkpoint.PostgresCheckpointStore, type[PostgresCheckpointStore])
assert_type(adk.execution.FlinkExecutionEnvironment, type[FlinkExecutionEnvironment])

# A misspelt name is an error, not an Any that hides every mistake made with it. (The hooks that
# load the lazy names at run time are not shown to type checkers.)
from adk import SequentialAgnet  # type: ignore[attr-defined]  # noqa: E402
from adk.checkpoint import SQLiteStore  # type: ignore[attr-defined]  # noqa: E402
from adk.execution import FlinkEnvironment  # type: ignore[attr-defined]  # noqa: E402
from adk.models import OpenAIChatModle  # type: ignore[attr-defined]  # noqa: E402

_ = adk.Runer  # type: ignore[attr-defined]
_ = adk.checkpoint.SqliteCheckpointStore  # type: ignore[attr-defined]
print(SequentialAgnet, SQLiteStore, FlinkEnvironment, OpenAIChatModle)
