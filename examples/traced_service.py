"""A small traced HTTP service: ``POST /chat`` runs a ReAct agent, spans go to the console.

It runs offline: the "model" is a ``ScriptedModel`` that asks the ``add`` tool for the sum of the
numbers in the question, then answers. Every request is one run whose ``gen_ai.conversation.id`` is
the ``conversation`` field of the request, so a conversation's turns group together in a tracing
backend. Swap ``ConsoleSpanExporter`` for ``OTLPSpanExporter`` to send the same spans to a collector
(see docs/tracing.md).

    python examples/traced_service.py                # serve, ask "what is 2+3?" over HTTP, stop
    python examples/traced_service.py --ask "1+2+3"  # the same with another question
    python examples/traced_service.py --serve        # keep serving on http://127.0.0.1:8000
    curl -s 127.0.0.1:8000/chat -d '{"message": "what is 2+3?", "conversation": "c-1"}'

Set ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`` to see prompts, replies, tool
arguments and results on the spans too. Starlette and uvicorn are not dependencies of pyadk:
``pip install starlette uvicorn`` first.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import urllib.request

import uvicorn
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from adk import Message, Runner, tool
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent

EXAMPLE_EXPECT = ("answer: The sum is 5.0.", '"name": "invoke_agent calculator"')


def configure_tracing() -> TracerProvider:
    """The usual OpenTelemetry set-up, done once at start-up, before building the runner."""
    provider = TracerProvider(resource=Resource.create({"service.name": "pyadk-demo"}))
    provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
    trace.set_tracer_provider(provider)
    return provider


@tool
def add(numbers: list[float]) -> float:
    """Add numbers.

    Args:
        numbers: The numbers to add.
    """
    return sum(numbers)


def scripted_reply(messages: list[Message]) -> Reply:
    """Ask ``add`` for the numbers in the question; once it answered, report the sum."""
    last = messages[-1]
    if last.role == "tool":
        return Reply(text=f"The sum is {last.content}.")
    numbers = [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", last.content)]
    if not numbers:
        return Reply(text="Give me some numbers to add.")
    return Reply(tool_calls=[tool_call("add", {"numbers": numbers})])


def build_app() -> Starlette:
    model = ScriptedModel(scripted_reply, model_name="scripted-calculator", record=False)
    agent = ReActAgent(
        "calculator", model, tools=[add], description="Adds the numbers it is given."
    )
    runner = Runner(agent)  # global tracer provider: configured before this line

    async def chat(request: Request) -> JSONResponse:
        try:
            body = json.loads(await request.body() or b"{}")
            message = body["message"]
            if not isinstance(message, str):
                raise TypeError("message must be a string")
        except (ValueError, KeyError, TypeError) as exc:
            return JSONResponse({"error": f"expected {{'message': str}}: {exc}"}, status_code=400)
        conversation = body.get("conversation")
        result = await runner.invoke(message, run_id=conversation)
        return JSONResponse({"answer": result.text})

    return Starlette(routes=[Route("/chat", chat, methods=["POST"])])


def _post(url: str, payload: dict[str, str]) -> str:
    request = urllib.request.Request(
        url, data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        answer: str = json.loads(response.read())["answer"]
        return answer


async def serve(port: int, question: str | None) -> None:
    config = uvicorn.Config(build_app(), host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    if question is None:
        await server.serve()
        return
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            await task  # startup failed: raise its error
            return
        await asyncio.sleep(0.01)
    bound = server.servers[0].sockets[0].getsockname()[1]
    url = f"http://127.0.0.1:{bound}/chat"
    answer = await asyncio.to_thread(_post, url, {"message": question, "conversation": "demo-1"})
    print(f"answer: {answer}", flush=True)
    server.should_exit = True
    await task


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", action="store_true", help="keep serving until interrupted")
    parser.add_argument("--port", type=int, default=8000, help="port for --serve")
    parser.add_argument("--ask", default="what is 2+3?", help="the question to ask once")
    args = parser.parse_args()
    provider = configure_tracing()
    try:
        if args.serve:
            asyncio.run(serve(args.port, None))
        else:
            asyncio.run(serve(0, args.ask))
    finally:
        provider.shutdown()  # flush the spans still in the batch processor


if __name__ == "__main__":
    main()
