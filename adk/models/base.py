"""The chat model contract and the options and retry policy every adapter shares.

No ``from __future__ import annotations`` here: with it pydantic would compile every field's
annotation string when the models are created at ``import adk``. Forward references are quoted.
"""

from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from ..messages import Message, MessageChunk
from ..tools.base import ToolSpec

__all__ = ["ChatModel", "ModelError", "ModelOptions", "RetryPolicy"]


class ModelOptions(BaseModel):
    """Per-call generation options. ``response_format`` is a JSON schema for structured output
    (``{"name": ..., "schema": {...}, "strict": bool}``); ``extra`` is passed through to the request
    body as is.

    An unknown field is an error, not ignored: a misspelt option (``temprature=``) would otherwise
    leave the model at its default without a word. Provider fields go in ``extra``."""

    model_config = ConfigDict(defer_build=True, extra="forbid")

    temperature: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    max_tokens: int | None = Field(default=None, ge=1)
    tool_choice: str | dict[str, Any] | None = None
    response_format: dict[str, Any] | None = None
    stop: list[str] | None = None
    extra: dict[str, Any] = Field(default_factory=dict)

    def merged(self, other: "ModelOptions | None") -> "ModelOptions":
        """These options overridden by the fields ``other`` sets explicitly."""
        if other is None:
            return self
        data = self.model_dump(exclude_unset=True)
        for key, value in other.model_dump(exclude_unset=True).items():
            if key == "extra":
                data["extra"] = {**data.get("extra", {}), **value}
            else:
                data[key] = value
        return ModelOptions(**data)


class RetryPolicy(BaseModel):
    """How an adapter retries transient failures: exponential backoff with optional jitter, capped
    at ``max_delay``; ``max_attempts`` counts the first try. Unknown fields are an error (a
    misspelt ``max_atempts=`` would leave the default in force)."""

    model_config = ConfigDict(defer_build=True, extra="forbid")

    max_attempts: int = Field(default=3, ge=1)
    initial_delay: float = Field(default=0.5, ge=0, allow_inf_nan=False)
    max_delay: float = Field(default=8.0, ge=0, allow_inf_nan=False)
    jitter: bool = True


class ModelError(Exception):
    """A model call failed for good (after any retries); ``status`` is the HTTP status if known."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@runtime_checkable
class ChatModel(Protocol):
    """Anything that can answer a list of messages, at once or as a stream of chunks.

    ``model_name`` is shown in traces (``chat {model_name}``); ``"unknown"`` when absent.
    """

    async def generate(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        options: ModelOptions | None = None,
    ) -> Message:
        """Answer ``messages`` with one assistant message, which may hold calls of ``tools``."""
        ...

    def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        options: ModelOptions | None = None,
    ) -> AsyncIterator[MessageChunk]:
        """The answer as chunks, which ``join_chunks`` makes into what ``generate`` returns; used
        when the run streams. Called without ``await``: an ``async def`` that yields fits."""
        ...


def model_name_of(model: object) -> str:
    name = getattr(model, "model_name", None)
    return name if isinstance(name, str) and name else "unknown"
