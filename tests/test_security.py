"""What pyadk keeps out of errors, reprs, traces and terminals: an API key a server echoes, a
password in a base URL, the conversation a server echoes in a validation error, control
characters in what ``pyadk checkpoint`` prints. Each test drives the real path (the OpenAI wire
server, the CLI's own ``main``) and searches everything it produced for the secret."""

from __future__ import annotations

import traceback

import openai
import pytest
from conftest import wire_model
from openai_server import OpenAIServer, Reply
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from span_capture import exporter_fixture, provider_fixture  # noqa: F401  (fixtures)

from adk import Message, RunError, Runner
from adk.models import ModelError, RetryPolicy
from adk.models.openai import OpenAIChatModel
from adk.tracing import CAPTURE_CONTENT_ENV
from prebuilt import ReActAgent

ONCE = RetryPolicy(max_attempts=1)
SECRET = "the-customers-account-4111-1111"
KEY = "sk-proj-Zq8v3kT1cN0pLmR5sX7w"


@pytest.fixture(autouse=True)
def _no_content_capture(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CAPTURE_CONTENT_ENV, raising=False)


def everything(error: BaseException) -> str:
    """The error as text and as the traceback a log prints, its chain included."""
    return f"{error!r}\n{''.join(traceback.format_exception(error))}"


def spans_text(exporter: InMemorySpanExporter) -> str:
    return "\n".join(span.to_json() for span in exporter.get_finished_spans())


# -- a model's errors -----------------------------------------------------------------------------


@pytest.mark.parametrize("echo", ["detail", "message"])
async def test_a_validation_error_echoing_the_request_keeps_the_conversation_out_of_the_error(
    echo: str, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """FastAPI-based servers (vLLM, LiteLLM) echo the whole request they validated as the error's
    ``input``: the conversation went into the ModelError's text (up to 500 characters), so into
    the RunError, logs and the agent's and chat spans' status and exception event, though content
    is recorded on spans only when captured. The reason (``msg``) is kept."""
    bad = Reply(status=400, error="Conversation roles must alternate.", echo_request=echo)
    async with OpenAIServer([bad]) as server, wire_model(server, retry=ONCE) as model:
        with pytest.raises(ModelError, match="roles must alternate") as caught:
            await model.generate([Message.user(f"my account is {SECRET}")])
        assert SECRET not in everything(caught.value)
        runner = Runner(ReActAgent("a", model), tracer_provider=provider)
        server.script(bad)
        with pytest.raises(RunError, match="roles must alternate") as failed:
            await runner.invoke(f"my account is {SECRET}")
    assert SECRET not in everything(failed.value)
    assert "roles must alternate" in spans_text(exporter)
    assert SECRET not in spans_text(exporter)


@pytest.mark.parametrize("given", ["api_key", "client"])
async def test_an_api_key_the_server_quotes_back_is_masked_in_the_error(given: str) -> None:
    """A server refusing a key may quote it whole ("Incorrect API key provided: sk-..."): OpenAI
    masks all but its ends, but gateways and self-hosted servers do not, and the text became the
    ModelError's, carried into RunErrors, logs and span status. The model knows its own key."""
    refused = Reply(status=401, error=f"Incorrect API key provided: {KEY}. Check it.")
    async with OpenAIServer([refused]) as server:
        if given == "api_key":
            model = wire_model(server, api_key=KEY, retry=ONCE)
        else:
            client = openai.AsyncOpenAI(base_url=server.base_url, api_key=KEY)
            model = OpenAIChatModel("test-model", client=client, retry=ONCE)
        async with model:
            with pytest.raises(ModelError, match="HTTP 401: Incorrect API key provided") as caught:
                await model.generate([Message.user("hi")])
    assert KEY not in everything(caught.value)
    assert KEY[3:] not in everything(caught.value)


async def test_a_password_in_the_models_base_url_is_masked_in_its_repr_and_errors() -> None:
    """A gateway reached with its credentials in the URL (``https://user:pw@gateway/v1``) showed
    them whole in ``repr(model)`` and in every ModelError ("chat.completions
    call to <base_url> failed"), as MCP servers' URLs and stores' DSNs are not."""
    password = "pw-Tz81xQ"
    async with OpenAIServer([Reply(status=500)], default=Reply(status=500)) as server:
        url = server.base_url.replace("http://", f"http://gw:{password}@")
        async with OpenAIChatModel("test-model", base_url=url, api_key="x", retry=ONCE) as model:
            with pytest.raises(ModelError, match=r"call to http://\*\*\*@127\.0\.0\.1") as caught:
                await model.generate([Message.user("hi")])
            shown = f"{everything(caught.value)}\n{model!r}"
    assert password not in shown
