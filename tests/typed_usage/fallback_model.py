"""The fallback model of docs/models.md ("A second model when the first fails"), as a user
copies it into an application checked with mypy --strict: its ``passes_on`` and ``Fallback``
(tests/test_model_fallback.py checks that the page's are these, statement for statement).
Before, such a copy failed strict mypy: ``ChatModel`` has no ``model_name`` (it is optional),
``contextlib.aclosing`` takes no ``AsyncIterator`` (which has no ``aclose`` to type), and the
second model's ``TimeoutError`` went to ``_both_failed``, which reads a ``ModelError``'s
fields."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import adk


def passes_on(error: Exception) -> bool:
    if isinstance(error, TimeoutError):  # the first model's budget ran out
        return True
    assert isinstance(error, adk.ModelError)
    return error.status is None or error.status in (408, 409, 429) or error.status >= 500


class Fallback:
    def __init__(
        self, first: adk.ChatModel, second: adk.ChatModel, first_within: float | None = None
    ) -> None:
        self.models = (first, second)
        self.first_within = first_within  # seconds the first model has, its retries included
        self.names = [getattr(model, "model_name", "unknown") for model in self.models]  # optional
        self.model_name = " or ".join(self.names)
        self.supports_response_format = all(
            getattr(model, "supports_response_format", False) for model in self.models
        )

    def _budget(self, model: adk.ChatModel) -> float | None:
        return self.first_within if model is self.models[0] else None

    def _both_failed(self, error: adk.ModelError, first: Exception) -> adk.ModelError:
        within = "in time" if self.first_within is None else f"within {self.first_within:g} s"
        said = str(first) or f"no answer {within}"  # a TimeoutError says nothing
        message = f"{error} (after {self.names[0]}: {said})"
        return adk.ModelError(message, status=error.status, retry_after=error.retry_after)

    async def generate(
        self,
        messages: Sequence[adk.Message],
        *,
        tools: Sequence[adk.ToolSpec] = (),
        options: adk.ModelOptions | None = None,
    ) -> adk.Message:
        try:
            async with asyncio.timeout(self.first_within):
                return await self.models[0].generate(messages, tools=tools, options=options)
        except (adk.ModelError, TimeoutError) as error:
            if not passes_on(error):
                raise
            failed = error
        try:
            return await self.models[1].generate(messages, tools=tools, options=options)
        except adk.ModelError as error:
            raise self._both_failed(error, failed) from error

    async def stream(
        self,
        messages: Sequence[adk.Message],
        *,
        tools: Sequence[adk.ToolSpec] = (),
        options: adk.ModelOptions | None = None,
    ) -> AsyncIterator[adk.MessageChunk]:
        failed: Exception | None = None
        for model in self.models:
            chunks = model.stream(messages, tools=tools, options=options)
            try:
                try:
                    async with asyncio.timeout(self._budget(model)):  # None: no limit
                        first = await anext(chunks)
                except StopAsyncIteration:
                    return
                except (adk.ModelError, TimeoutError) as error:
                    if failed is None and passes_on(error):
                        failed = error
                        continue  # nothing of this answer went out: ask the next model
                    if failed is not None and isinstance(error, adk.ModelError):
                        raise self._both_failed(error, failed) from error
                    raise
                yield first
                async for chunk in chunks:  # a failure from here on is the stream's own
                    yield chunk
                return
            finally:  # closed if the reader stops (an AsyncIterator has no aclose to type)
                aclose = getattr(chunks, "aclose", None)
                if aclose is not None:
                    await aclose()
