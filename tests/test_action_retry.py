"""``@action(..., retry=RetryPolicy(...))``: LlamaIndex's ``@step(retry_policy=...)`` for an action.

A failed attempt's events and memory writes must count once, as an interrupted action's do; what
cannot be retried (a pause, the run's own failures) is not; the plan says which actions retry.
"""

from __future__ import annotations

import json
import time
from http import HTTPStatus
from typing import Any

import pytest
from conftest import wire_model
from openai_server import OpenAIServer, Reply

from adk import Interrupt, ModelError, RetryPolicy, RunError, Runner, Session
from adk.actions import (
    ActionAgent,
    ActionContext,
    ActionError,
    Event,
    InputEvent,
    OutputEvent,
    action,
)
from adk.checkpoint import InMemoryCheckpointStore
from adk.messages import Message

NOW = RetryPolicy(max_attempts=3, initial_delay=0, jitter=False)


class Query(Event):
    text: str


class Found(Event):
    text: str


class Searcher(ActionAgent):
    """A search step whose backend fails ``failures`` times before it answers."""

    def __init__(self, name: str, failures: int) -> None:
        super().__init__(name)
        self.failures = failures
        self.attempts = 0

    @action(InputEvent)
    def start(self, event: InputEvent, ctx: ActionContext) -> None:
        ctx.send_event(Query(text=event.input))

    @action(Query, retry=NOW)
    async def search(self, event: Query, ctx: ActionContext) -> None:
        self.attempts += 1
        memory = ctx.short_term_memory
        memory.set("searches", memory.get("searches", 0) + 1)
        ctx.sensory_memory.set("tried", (ctx.sensory_memory.get("tried") or 0) + 1)
        ctx.send_event(OutputEvent(output=f"searching {event.text}"))
        if self.attempts <= self.failures:
            raise ConnectionError(f"backend down (attempt {self.attempts})")
        ctx.send_event(Found(text=f"facts on {event.text}"))

    @action(Found)
    def answer(self, event: Found, ctx: ActionContext) -> None:
        tried = ctx.sensory_memory.get("tried")
        ctx.send_event(OutputEvent(output=f"{event.text} (tried {tried})"))


async def test_a_failing_action_runs_again_and_its_failed_attempts_leave_nothing() -> None:
    agent = Searcher("searcher", failures=2)
    session = Session()
    result = await Runner(agent).invoke("llamas", session=session)
    assert agent.attempts == 3
    outputs = [event.output.message.content for event in result.events if event.output]
    # One "searching" output, one memory write: the two failed attempts' are dropped.
    assert outputs == ["searching llamas", "facts on llamas (tried 1)"]
    assert session["memory:searcher"] == {"searches": 1}


async def test_an_action_failing_every_attempt_fails_the_run_saying_how_often_it_tried() -> None:
    agent = Searcher("searcher", failures=5)
    with pytest.raises(RunError) as raised:
        await Runner(agent).invoke("llamas")
    assert agent.attempts == 3
    cause = raised.value.__cause__
    assert isinstance(cause, ActionError)
    assert "failed on Query after 3 attempts: ConnectionError: backend down (attempt 3)" in str(
        cause
    )
    assert isinstance(cause.__cause__, ConnectionError)


async def test_a_pause_is_not_retried_and_the_resume_keeps_the_policy() -> None:
    calls: list[object] = []

    class Reviewer(ActionAgent):
        @action(InputEvent, retry=NOW)
        def review(self, event: InputEvent, ctx: ActionContext) -> None:
            calls.append(None if ctx.resume is None else ctx.resume.data)
            if ctx.resume is None:
                raise Interrupt("publish?")
            if len(calls) == 2:
                raise TimeoutError("publisher slow")
            ctx.send_event(OutputEvent(output=f"published: {ctx.resume.data}"))

    store = InMemoryCheckpointStore()
    runner = Runner(Reviewer("reviewer"), checkpoint_store=store)
    paused = await runner.invoke("post", checkpoint_id="c")
    assert paused.interrupt is not None and calls == [None]
    done = await runner.invoke_resume("c", "yes")
    # The resumed action failed once and ran again, with the person's answer still at hand.
    assert done.text == "published: yes" and calls == [None, "yes", "yes"]


def test_the_plan_shows_the_policy_and_a_wrong_policy_is_refused_where_it_is_given() -> None:
    described = json.loads(Searcher("searcher", failures=0).plan.to_json())["actions"]
    assert described["search"]["retry"] == NOW.model_dump()
    assert "retry" not in described["start"]
    with pytest.raises(TypeError, match=r"takes an adk.RetryPolicy, got dict"):
        action(Query, retry={"max_attempts": 3})  # type: ignore[arg-type]


class _Refused(Exception):
    """A service's error carrying its HTTP status, as openai's ``APIStatusError`` (``status_code``)
    and aiohttp's ``ClientResponseError`` (``status``) do."""

    def __init__(self, status: int) -> None:
        super().__init__(f"answered {status}")
        self.status_code = status


@pytest.mark.parametrize(
    ("error", "policy", "attempts"),
    [
        (ModelError("bad request", status=400), RetryPolicy(max_attempts=3, initial_delay=0), 1),
        (ModelError("overloaded", status=503), RetryPolicy(max_attempts=3, initial_delay=0), 3),
        (_Refused(400), RetryPolicy(max_attempts=3, initial_delay=0), 1),
        (
            _Refused(400),
            RetryPolicy(
                max_attempts=3,
                initial_delay=0,
                retry_on_status=RetryPolicy.TRANSIENT_STATUS | {400},
            ),
            3,
        ),
        (_Refused(503), RetryPolicy(max_attempts=3, initial_delay=0, retry_on_status={502}), 1),
        (
            ConnectionError("reset"),
            RetryPolicy(max_attempts=3, initial_delay=0, retry_on_status={502}),
            3,
        ),
        (_Refused(HTTPStatus.BAD_REQUEST), RetryPolicy(max_attempts=3, initial_delay=0), 1),
    ],
    ids=[
        "400-default",
        "503-default",
        "sdk-400-default",
        "sdk-400-added",
        "503-not-chosen",
        "no-status",
        "http-status-enum-400",
    ],
)
async def test_an_action_retry_honours_the_policys_statuses(
    error: Exception, policy: RetryPolicy, attempts: int
) -> None:
    """``retry_on_status`` means for an action what it means for a model: a failure carrying an
    HTTP status (a ``ModelError``'s ``status``, an SDK's ``status_code``) is retried only if the
    policy retries that status (by default 408, 409, 429 and 5xx: a 400 fails again, at once);
    one without a status (a connection reset) is retried whatever it says. It was ignored: a
    400 ran the action ``max_attempts`` times, and ``retry_on_status={502}`` retried a 503. A
    status given as an ``http.HTTPStatus`` (an int, as a web framework's error may hold it) is
    a status too."""
    tried: list[int] = []

    class Caller(ActionAgent):
        @action(InputEvent, retry=policy)
        def call(self, event: InputEvent, ctx: ActionContext) -> None:
            tried.append(1)
            raise error

    with pytest.raises(RunError) as raised:
        await Runner(Caller("caller")).invoke("go")
    assert len(tried) == attempts
    assert raised.value.__cause__ is not None and raised.value.__cause__.__cause__ is error


def _raised_for_status(status: int) -> Exception:
    """What ``response.raise_for_status()`` raises for ``status``: httpx's ``HTTPStatusError``
    (``httpx2``, the openai SDK's HTTP library), whose status is only on its ``response``."""
    import httpx2

    response = httpx2.Response(status, request=httpx2.Request("GET", "http://api.invalid/items/7"))
    try:
        response.raise_for_status()
    except httpx2.HTTPStatusError as exc:
        return exc
    raise AssertionError(f"raise_for_status() passed a {status}")


class _UnreadableResponse(Exception):
    """An error whose ``response`` is a property that fails: no status, not a crashed retry."""

    @property
    def response(self) -> Any:
        raise RuntimeError("no response was kept")


class _ClientError(Exception):
    """botocore's ``ClientError`` (boto3's, an AWS call's), whose ``response`` is the reply as a
    dict, its status at ``["ResponseMetadata"]["HTTPStatusCode"]`` (botocore is not a dependency:
    its shape, as ``ClientError(error_response, operation_name)`` keeps it)."""

    def __init__(self, status: int | None) -> None:
        super().__init__("An error occurred (ValidationException) when calling InvokeModel")
        self.response: dict[str, Any] = {"Error": {"Code": "ValidationException"}}
        if status is not None:
            self.response["ResponseMetadata"] = {"HTTPStatusCode": status, "RetryAttempts": 0}


class _UnreadableStatus(Exception):
    """An error whose ``status`` is a property that fails (a reply parsed lazily, say): no
    status, as an unreadable ``response`` is, not the retry's own failure in its place."""

    @property
    def status(self) -> int:
        raise RuntimeError("the reply was not parsed")


class _NoResponse(Exception):
    """requests' ``HTTPError`` raised without a response: ``response`` is None."""

    response = None


@pytest.mark.parametrize(
    ("make", "policy", "attempts"),
    [
        (lambda: _raised_for_status(404), RetryPolicy(max_attempts=3, initial_delay=0), 1),
        (lambda: _raised_for_status(503), RetryPolicy(max_attempts=3, initial_delay=0), 3),
        (
            lambda: _raised_for_status(503),
            RetryPolicy(max_attempts=3, initial_delay=0, retry_on_status={502}),
            1,
        ),
        (
            lambda: _raised_for_status(404),
            RetryPolicy(max_attempts=3, initial_delay=0, retry_on_status={404}),
            3,
        ),
        (lambda: _UnreadableResponse("lost"), RetryPolicy(max_attempts=3, initial_delay=0), 3),
        (lambda: _NoResponse("lost"), RetryPolicy(max_attempts=3, initial_delay=0), 3),
        (lambda: _UnreadableStatus("lost"), RetryPolicy(max_attempts=3, initial_delay=0), 3),
        (lambda: _ClientError(400), RetryPolicy(max_attempts=3, initial_delay=0), 1),
        (lambda: _ClientError(503), RetryPolicy(max_attempts=3, initial_delay=0), 3),
        (lambda: _ClientError(None), RetryPolicy(max_attempts=3, initial_delay=0), 3),
    ],
    ids=[
        "404-default",
        "503-default",
        "503-not-chosen",
        "404-chosen",
        "unreadable",
        "none",
        "unreadable-status",
        "boto-400",
        "boto-503",
        "boto-no-metadata",
    ],
)
async def test_an_action_retry_reads_the_status_of_an_httpx_raise_for_status(
    make: Any, policy: RetryPolicy, attempts: int
) -> None:
    """An action calling a web API with httpx and ``response.raise_for_status()`` fails with an
    ``HTTPStatusError`` whose status is on its ``response`` (``.response.status_code``), not on
    the error: it was taken for a failure without a status and retried whatever it was, a 404
    ``max_attempts`` times and a 503 under ``retry_on_status={502}`` too. A ``response`` that
    cannot be read, or None, is no status (retried), not a failure of the retry itself."""
    tried: list[Exception] = []

    class Fetcher(ActionAgent):
        @action(InputEvent, retry=policy)
        def fetch(self, event: InputEvent, ctx: ActionContext) -> None:
            error = make()
            tried.append(error)
            raise error

    with pytest.raises(RunError) as raised:
        await Runner(Fetcher("fetcher")).invoke("go")
    assert len(tried) == attempts
    assert raised.value.__cause__ is not None and raised.value.__cause__.__cause__ is tried[-1]


def _told_not_to_retry(status: int) -> Exception:
    """httpx's ``HTTPStatusError`` for ``status`` sent with ``x-should-retry: false``."""
    import httpx2

    response = httpx2.Response(
        status,
        headers={"X-Should-Retry": "false"},
        request=httpx2.Request("GET", "http://api.invalid/items/7"),
    )
    try:
        response.raise_for_status()
    except httpx2.HTTPStatusError as exc:
        return exc
    raise AssertionError(f"raise_for_status() passed a {status}")


@pytest.mark.parametrize(
    ("reply", "attempts"),
    [
        (Reply(status=429, error="slow down", should_retry="false", retry_after="0"), 1),
        (Reply(status=503, error="busy", retry_after="3600"), 1),
        (Reply(status=503, error="busy", retry_after="0"), 3),
    ],
    ids=["x-should-retry-false", "wait-too-long", "wait-retried"],
)
async def test_an_action_retry_does_not_ask_again_what_the_model_was_told_not_to(
    reply: Reply, attempts: int
) -> None:
    """An action calling a model over the wire, the model's own retries off: a server saying
    ``x-should-retry: false``, or asking to wait longer than a call waits (60 s), made the
    adapter give up at once, and the action asked again anyway (``max_attempts`` requests,
    after the policy's backoff), as the adapter would not have; a ``Retry-After`` it may wait
    out is retried as before."""
    once = RetryPolicy(max_attempts=1)

    async with OpenAIServer() as server:
        server.default = reply
        model = wire_model(server, retry=once)

        class Caller(ActionAgent):
            @action(InputEvent, retry=NOW)
            async def call(self, event: InputEvent, ctx: ActionContext) -> None:
                await model.generate([Message.user(event.input)])

        try:
            with pytest.raises(RunError) as raised:
                await Runner(Caller("caller")).invoke("go")
        finally:
            await model.aclose()
    assert len(server.requests) == attempts
    assert isinstance(raised.value.__cause__, ActionError)
    assert isinstance(raised.value.__cause__.__cause__, ModelError)


async def test_an_action_retry_reads_httpx_s_x_should_retry_and_waits_a_model_s_retry_after() -> (
    None
):
    """An action's own HTTP call answered with ``x-should-retry: false`` is not retried (the
    header is read off the error's ``response``, any case); a ``ModelError``'s ``retry_after``
    is waited before the next attempt, beating the policy's backoff (0 here) as an adapter's
    retry does: it was ignored."""
    tried: list[float] = []

    class Fetcher(ActionAgent):
        @action(InputEvent, retry=NOW)
        def fetch(self, event: InputEvent, ctx: ActionContext) -> None:
            tried.append(time.monotonic())
            raise _told_not_to_retry(503)

    with pytest.raises(RunError):
        await Runner(Fetcher("fetcher")).invoke("go")
    assert len(tried) == 1

    tried.clear()

    class Paced(ActionAgent):
        @action(InputEvent, retry=NOW)
        def call(self, event: InputEvent, ctx: ActionContext) -> None:
            tried.append(time.monotonic())
            if len(tried) == 1:
                raise ModelError("HTTP 429: slow down", status=429, retry_after=0.05)
            ctx.send_event(OutputEvent(output="answered"))

    result = await Runner(Paced("paced")).invoke("go")
    assert result.text == "answered" and len(tried) == 2
    assert tried[1] - tried[0] >= 0.05  # (a lower bound: the wait asked, at least)
