"""The chat model contract and the options and retry policy every adapter shares.

No ``from __future__ import annotations`` here: with it pydantic would compile every field's
annotation string when the models are created at ``import adk``. Forward references are quoted.
"""

import math
import random
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from ..messages import Message, MessageChunk
from ..tools.base import ToolSpec

__all__ = ["ChatModel", "ModelError", "ModelOptions", "RetryPolicy"]


class _NamedOptions(BaseModel):
    """A model of options whose unknown field is refused naming the fields it has (and, for
    ``ModelOptions``, where a provider's own option goes): pydantic's "Extra inputs are not
    permitted" alone left ``ModelOptions(top_p=0.9)`` a puzzle, ``top_p`` being a real option."""

    model_config = ConfigDict(defer_build=True)

    if not TYPE_CHECKING:  # type checkers keep pydantic's keyword signature

        def __init__(self, /, **data: Any) -> None:
            try:  # as pydantic's own ``__init__``: no frame added when nothing is wrong
                self.__pydantic_validator__.validate_python(data, self_instance=self)
            except ValidationError as exc:
                raise _named_fields(type(self), exc) from None

        # Read by pydantic: validating one as a field, or ``model_validate``, need not call
        # this ``__init__`` (its errors then keep pydantic's wording).
        __init__.__pydantic_base_init__ = True

    @classmethod
    def _unknown_hint(cls, name: str) -> str:
        return ""


def _named_fields(cls: type[_NamedOptions], exc: ValidationError) -> ValidationError:
    """``exc`` with each unknown field's error saying which fields ``cls`` has. Still a
    ``ValidationError`` (and "Extra inputs are not permitted"), so code catching it is unchanged."""
    problems = exc.errors(include_url=False)
    unknown = ("extra_forbidden", "no_such_attribute")  # given to the constructor, or set
    if not any(problem["type"] in unknown for problem in problems):
        return exc
    fields = ", ".join(cls.model_fields)
    details: list[InitErrorDetails] = []
    for problem in problems:
        message = problem["msg"]
        if problem["type"] in unknown:
            name = str(problem["loc"][-1])
            message = (
                f"{cls.__name__} has no field {name!r} (its fields: {fields})"
                f"{cls._unknown_hint(name)}"
            )
            if problem["type"] == "extra_forbidden":
                message = f"Extra inputs are not permitted: {message}"
        # Without a context, the template is the message as written (braces included).
        kind = PydanticCustomError(problem["type"], message)
        details.append({"type": kind, "loc": problem["loc"], "input": problem["input"]})
    return ValidationError.from_exception_data(cls.__name__, details)


_OTHER_NAMES = {
    "max_output_tokens": "max_tokens",  # Gemini's (GenerateContentConfig), OpenAI Responses'
    "max_completion_tokens": "max_tokens",  # OpenAI Chat's (the adapter sends max_tokens so)
    "max_new_tokens": "max_tokens",  # Hugging Face's
    "stop_sequences": "stop",  # Gemini's, Anthropic's
}
"""Other providers' names of ``ModelOptions`` fields: an unknown field of one of these names is
told the field, not sent to ``extra``, where it would reach the server as it is (Chat Completions
refuses ``max_output_tokens``) while the adapter's own mapping of the field went unused."""


class ModelOptions(_NamedOptions):
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

    @classmethod
    def _unknown_hint(cls, name: str) -> str:
        field = _OTHER_NAMES.get(name)
        if field is not None:  # a field of ours under a provider's name: extra would send it as is
            return f"; it is {field!r} here: ModelOptions({field}=...)"
        return f"; a provider's own option goes in extra: extra={{{name!r}: ...}}"

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


# An HTTP error status a policy may retry: an int (not a bool, not "429"), 400 to 599.
_ErrorStatus = Annotated[StrictInt, Field(ge=400, le=599)]


class RetryPolicy(_NamedOptions):
    """How an adapter retries transient failures: exponential backoff with optional jitter, capped
    at ``max_delay``; ``max_attempts`` counts the first try. Unknown fields are an error (a
    misspelt ``max_atempts=`` would leave the default in force). A field set on a policy is
    checked as the argument is, and counts from an adapter's next call.

    ``retry_on_status``: the HTTP statuses retried, in place of ``TRANSIENT_STATUS`` (408, 409,
    429 and 5xx), the default (``None``, which retries a non-standard status above 599 too). ``RetryPolicy.TRANSIENT_STATUS | {400}`` also retries a
    400 a gateway sends when overloaded; ``RetryPolicy.TRANSIENT_STATUS - {429}`` never retries
    a rate limit (a queue of your own does). Failures without a status (a connection lost, a
    timeout) are retried whatever it says; a 429 saying the quota is exhausted never is."""

    # Assignments checked: an adapter reads its policy's fields when a call fails, so
    # ``model.retry.max_attempts = 0`` would otherwise reach it unchecked.
    model_config = ConfigDict(defer_build=True, extra="forbid", validate_assignment=True)

    TRANSIENT_STATUS: ClassVar[frozenset[int]] = frozenset({408, 409, 429, *range(500, 600)})

    max_attempts: int = Field(default=3, ge=1)
    initial_delay: float = Field(default=0.5, ge=0, allow_inf_nan=False)
    max_delay: float = Field(default=8.0, ge=0, allow_inf_nan=False)
    jitter: bool = True
    retry_on_status: "frozenset[_ErrorStatus] | None" = None

    def _retries_status(self, status: int) -> bool:
        """Whether this policy retries a failure with HTTP ``status`` (the quota's 429 aside,
        which an adapter never retries)."""
        chosen = self.retry_on_status
        return (
            status in self.TRANSIENT_STATUS or status > 599 if chosen is None else status in chosen
        )

    def _retries_error(self, error: BaseException) -> bool:
        """Whether this policy retries ``error`` by its HTTP status, for a retry that sees only
        the exception (an action's, ``@action(retry=...)``): one carrying a status (an int
        ``status_code``, as the SDKs' errors have, or ``status``, as ``ModelError`` and
        aiohttp's have, an ``http.HTTPStatus`` too, not a bool; or its ``response``'s
        ``status_code``, as httpx's ``HTTPStatusError`` from ``raise_for_status()`` and
        requests' ``HTTPError`` have; botocore's ``ClientError``'s in its dict) if the policy
        retries that status; one without, always. Unless the server said not to: an error sent
        with ``x-should-retry: false``, or one whose ``retry_after`` asks for more than
        ``RETRY_AFTER_LIMIT`` (a model adapter retries neither).
        Read only when an action with a policy fails: no HTTP library is imported for it."""
        status = _status_of(error)
        if status is not None and not self._retries_status(status):
            return False
        if _told_not_to_retry(error):
            return False
        wait = _asked_wait(error)
        return wait is None or wait <= RETRY_AFTER_LIMIT

    def _wait_after(self, error: BaseException, attempt: int) -> float:
        """Seconds before attempt ``attempt + 1`` of a retry that sees only the exception (an
        action's): the wait the server asked for (a ``ModelError``'s ``retry_after``), which
        beats ``max_delay`` as a model adapter's does (``_retries_error`` refused one past
        ``RETRY_AFTER_LIMIT``), else exponential from ``initial_delay``, capped at
        ``max_delay``, with full jitter if the policy asks."""
        wait = _asked_wait(error)
        if wait is not None:
            return min(wait, RETRY_AFTER_LIMIT)
        delay = min(self.max_delay, self.initial_delay * 2 ** (attempt - 1))
        return random.uniform(0, delay) if self.jitter else delay

    if not TYPE_CHECKING:  # type checkers keep pydantic's own

        def __setattr__(self, name: str, value: Any) -> None:
            try:  # an unknown field is told the fields, as the constructor tells it
                super().__setattr__(name, value)
            except ValidationError as exc:
                raise _named_fields(type(self), exc) from None


def _status_of(error: BaseException) -> int | None:
    """The HTTP status ``error`` carries (see ``RetryPolicy._retries_error``), or None. Its own
    ``status_code`` or ``status`` first (openai's ``APIStatusError`` has a ``response`` too);
    then its ``response``'s ``status_code``: httpx's ``HTTPStatusError`` keeps it only there, so
    a 404 from ``raise_for_status()`` was retried as a failure without a status (a connection
    lost), and a 503 under ``retry_on_status={502}`` retried too; botocore's ``ClientError``
    keeps it in its dict ``response``, at ``["ResponseMetadata"]["HTTPStatusCode"]`` (an AWS
    call's 400 was retried alike). A ``status_code``, ``status`` or ``response`` that cannot be
    read (a property that raises, requests' ``None``) is no status."""
    for attribute in ("status_code", "status"):
        try:
            status = getattr(error, attribute, None)
        except Exception:  # a property of the error's failed (a reply parsed lazily): none here
            continue
        if isinstance(status, int) and not isinstance(status, bool):
            return int(status)
    try:
        response = getattr(error, "response", None)
        if isinstance(response, dict):  # botocore's ClientError: the reply as a dict
            status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        else:
            status = getattr(response, "status_code", None)
    except Exception:  # the error's own property failed, or its dict is not so: no status
        return None
    if isinstance(status, int) and not isinstance(status, bool):
        return int(status)
    return None


RETRY_AFTER_LIMIT = 60.0
"""The longest ``Retry-After`` honoured, as the ``openai`` package does; a server asking for more
gets no retry: the call fails at once, saying how long the server asked to wait."""


def _told_not_to_retry(error: BaseException) -> bool:
    """Whether ``error`` says another attempt would fail alike: a ``ModelError`` an adapter
    gave up on at once for it (``_adk_not_retried``), or an HTTP error whose ``response``'s
    headers hold ``x-should-retry: false`` (openai's and anthropic's ``APIStatusError``, httpx's
    ``HTTPStatusError``). Read only when a retry that sees only the exception decides."""
    if getattr(error, "_adk_not_retried", False) is True:
        return True
    try:
        said = error.response.headers.get("x-should-retry")  # type: ignore[attr-defined]
    except Exception:  # no response, no headers, or a property that fails: nothing said
        return False
    return isinstance(said, str) and said.strip().lower() == "false"


def _asked_wait(error: BaseException) -> float | None:
    """The seconds ``error`` says the server asked to wait (a ``ModelError``'s
    ``retry_after``), or None: not given, or not a finite number of seconds."""
    try:
        wait = getattr(error, "retry_after", None)
    except Exception:  # a property of the error's that fails: none said
        return None
    if isinstance(wait, bool) or not isinstance(wait, int | float) or not math.isfinite(wait):
        return None
    return max(float(wait), 0.0)


class ModelError(Exception):
    """A model call failed for good (after any retries); ``status`` is the HTTP status if known,
    ``retry_after`` the seconds the server asked to wait before another try (its
    ``Retry-After``), if it said: a service pacing its own retries (a queue, a fallback, its own
    client's ``Retry-After``) reads it here."""

    def __init__(
        self, message: str, *, status: int | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


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
