"""Retrying transient model-call failures with tenacity, honouring the server's Retry-After.

Provider-neutral: the adapter says which exceptions are transient and what delay the server asked
for; this module owns the policy (attempt count, exponential backoff with optional full jitter, the
``max_delay`` cap) so every adapter retries the same way.

The first attempt runs outside tenacity. Building a tenacity controller costs tens of microseconds —
measurable against a local model server — and almost every call succeeds first time. Only when that
attempt fails transiently does tenacity take over, replaying the failure as its own first attempt so
attempt counting, backoff and Retry-After handling all live in one place.
"""

from __future__ import annotations

import asyncio
import functools
import math
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from email.utils import parsedate_to_datetime
from typing import NoReturn, TypeVar

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
    wait_random_exponential,
)
from tenacity.wait import wait_base

from .base import RETRY_AFTER_LIMIT, RetryPolicy

T = TypeVar("T")


def retry_after_seconds(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """The delay a server asked for, in seconds, or None.

    Reads ``retry-after-ms`` (OpenAI's millisecond variant) first, then ``retry-after`` as seconds
    (fractions allowed) or as an HTTP date. Dates in the past give 0; unparseable values are ignored
    rather than failing the call.
    """
    value = headers.get("retry-after-ms")
    if value is not None:
        try:
            millis = float(value)
        except ValueError:
            millis = math.nan
        if math.isfinite(millis):
            return max(millis / 1000.0, 0.0)
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value).timestamp()
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        seconds = when - (time.time() if now is None else now)
    return max(seconds, 0.0) if math.isfinite(seconds) else None


class _Backoff(wait_base):
    """Retry-After when the server gave one (up to ``RETRY_AFTER_LIMIT``), else exponential
    backoff capped at max_delay."""

    def __init__(
        self, policy: RetryPolicy, retry_after: Callable[[BaseException], float | None]
    ) -> None:
        self._cap = max(policy.max_delay, 0.0)
        self._retry_after = retry_after
        exponential = wait_random_exponential if policy.jitter else wait_exponential
        self._exponential = exponential(multiplier=policy.initial_delay, max=self._cap)

    def __call__(self, retry_state: RetryCallState) -> float:
        outcome = retry_state.outcome
        error = outcome.exception() if outcome is not None and outcome.failed else None
        hinted = self._retry_after(error) if error is not None else None
        if hinted is not None:
            # The server's word beats max_delay (retrying sooner would only be refused again),
            # up to RETRY_AFTER_LIMIT; a longer wait is not retried at all (``is_transient``).
            return min(hinted, RETRY_AFTER_LIMIT)
        return float(self._exponential(retry_state))


class RetryRunner:
    """Runs one model call under a :class:`RetryPolicy`.

    ``is_transient`` decides what is retried (a failure, by the policy of the call: its
    ``retry_on_status``); ``retry_after`` extracts a server-requested delay; ``status_of`` (if
    given) reads the status a failure without one of its own stands for (an error event inside
    a stream), for the ``adk.model.retry`` event's ``error.type`` as ``is_transient`` read it.
    ``run`` hands the final failure and the number of attempts made to ``on_failure``, which returns
    the exception to raise (so adapters can name the status and the attempt count in one message).
    """

    __slots__ = ("_is_transient", "_policy", "_retry_after", "_status_of", "_waiters")

    def __init__(
        self,
        policy: RetryPolicy,
        *,
        is_transient: Callable[[BaseException, RetryPolicy], bool],
        retry_after: Callable[[BaseException], float | None],
        status_of: Callable[[BaseException], int | None] | None = None,
    ) -> None:
        self._policy = policy
        self._is_transient = is_transient
        self._retry_after = retry_after
        self._status_of = status_of
        self._waiters: set[asyncio.Future[None]] = set()

    def with_policy(self, policy: RetryPolicy) -> RetryRunner:
        """A runner retrying by ``policy`` whose backoffs ``wake`` ends with this one's: a model
        given another policy (``OpenAIChatModel.retry``) while a call waits out a backoff under
        the first still ends that backoff when it is closed (woken through the new runner)."""
        runner = RetryRunner(
            policy,
            is_transient=self._is_transient,
            retry_after=self._retry_after,
            status_of=self._status_of,
        )
        runner._waiters = self._waiters
        return runner

    def wake(self) -> None:
        """End every backoff now (the adapter was closed): the next attempt then fails at once
        instead of after a delay of up to ``max_delay``, and is not retried."""
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def _sleep(self, seconds: float) -> None:
        """A backoff ``wake`` can end early (a future per sleep, not an Event: an Event would bind
        to the first event loop it is used on, and a model may outlive one)."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        handle = loop.call_later(seconds, _set_done, waiter)
        self._waiters.add(waiter)
        try:
            await waiter
        finally:
            handle.cancel()
            self._waiters.discard(waiter)

    async def run(
        self,
        attempt: Callable[[], Awaitable[T]],
        *,
        on_failure: Callable[[Exception, int], Exception],
    ) -> T:
        try:
            return await attempt()
        except Exception as exc:
            # Read from the policy when a call fails, as its delays are (``_Backoff``): a field
            # changed in place (``model.retry.max_attempts = 1``) counts from the next call on.
            # Read once, a change of the delays took effect and one of the attempts did not.
            policy = self._policy
            attempts = max(policy.max_attempts, 1)
            if attempts == 1 or not self._is_transient(exc, policy):
                _raise_final(on_failure, exc, 1)
            first: Exception | None = exc

        made = 1

        async def again() -> T:
            nonlocal first, made
            if first is not None:
                replay, first = first, None
                try:
                    raise replay
                finally:
                    del replay  # the frame is in the traceback: a local would close a cycle
            made += 1
            return await attempt()

        retrying = AsyncRetrying(
            stop=stop_after_attempt(attempts),
            wait=_Backoff(policy, self._retry_after),
            retry=retry_if_exception(lambda error: self._is_transient(error, policy)),
            reraise=True,
            sleep=self._sleep,
            before_sleep=functools.partial(_record_retry, status_of=self._status_of),
        )
        try:
            return await retrying(again)
        except Exception as exc:
            _raise_final(on_failure, exc, made)


RETRY_EVENT = "adk.model.retry"
"""The span event of an attempt that failed and is retried (see ``_record_retry``)."""


def _record_retry(
    retry_state: RetryCallState,
    status_of: Callable[[BaseException], int | None] | None = None,
) -> None:
    """Put an attempt that failed and is about to be retried on the current span, as an
    ``adk.model.retry`` event: which attempt failed (``adk.retry.attempt``, from 1), with what
    (``error.type``: the HTTP status as text when there is one, or the one ``status_of`` reads
    from an error event a stream sent, as the ``chat`` span's own ``error.type`` has it, else
    the exception's class) and how long the call waits before the next
    (``adk.retry.delay``, seconds). Under a traced run the current span is the call's ``chat``
    span (``adk.tracing`` makes it current around the call). Without these events a call that
    succeeded on its third attempt was one slow ``chat`` span with nothing saying why, and one
    that failed for good said only its last error.

    Only a failure that is retried gets here (tenacity calls it before the backoff), so a call
    that succeeds first time pays nothing; OpenTelemetry is looked up, never imported: a process
    that never loaded it has no span to record on. Telemetry never changes what a call does, so
    a failure to record is ignored."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return
    try:
        span = trace.get_current_span()
        tracing = sys.modules.get("adk.tracing")  # loaded by a runner that records metrics
        recording = span.is_recording()
        if not recording and tracing is None:
            return
        outcome = retry_state.outcome
        error = outcome.exception() if outcome is not None and outcome.failed else None
        error_type = _attempt_error_type(error, status_of)
        if tracing is not None:
            # ``adk.model.retries``, by the call's model and provider: a metrics-only runner's
            # spans do not record, and sampled-out traces hold no events to count.
            tracing._count_retry(error_type)
        if not recording:
            return
        attributes: dict[str, str | int | float] = {
            "adk.retry.attempt": retry_state.attempt_number,
            "error.type": error_type,
        }
        action = retry_state.next_action
        if action is not None:
            attributes["adk.retry.delay"] = float(action.sleep)
        span.add_event(RETRY_EVENT, attributes)
    except Exception:
        return


def _attempt_error_type(
    error: BaseException | None,
    status_of: Callable[[BaseException], int | None] | None = None,
) -> str:
    """A failed attempt's ``error.type``: its HTTP status (an SDK's ``status_code``, a
    ``ModelError``'s ``status``, or the status ``status_of`` reads from an error a stream sent,
    vLLM's ``{"error": {"code": 500}}``, which is retried as that status) as text, else its
    class name; ``_OTHER`` for a private class of the adapter's (a stream the server ended
    early), a name no documentation gives."""
    for attribute in ("status_code", "status"):
        status = getattr(error, attribute, None)
        if type(status) is int:
            return str(status)
    if status_of is not None and error is not None:
        read = status_of(error)
        if read is not None:
            return str(read)
    name = type(error).__name__
    return name if error is not None and not name.startswith("_") else "_OTHER"


def _set_done(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _raise_final(
    on_failure: Callable[[Exception, int], Exception], exc: Exception, attempts: int
) -> NoReturn:
    error = on_failure(exc, attempts)
    # The frame raising is in the traceback; dropping its locals keeps the failed run (reachable
    # from the exception) out of a reference cycle, so it is freed at once rather than by the GC.
    try:
        if error is exc:
            raise exc
        if getattr(error, "_adk_secret_cause", False):
            # The failure's text holds a secret (an API key in a header HTTP cannot send): the
            # error says what happened without it, and tracebacks (logs, a span's recorded
            # exception) do not print the chain that holds it.
            raise error from None
        raise error from exc
    finally:
        del error, exc
