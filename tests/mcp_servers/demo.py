"""The MCP server the MCP tests talk to, written with the ``mcp`` package (2.x ``MCPServer``).

One definition, served over stdio (``stdio_server.py``) and over streamable HTTP or SSE
(``http_server.py``), so every transport is exercised against the same behaviour:

- typed arguments (``add``), structured output (``forecast``), a tool error (``fail``);
- a tool that never returns (``hang``) and a counter that shows the client cancelled it
  (``hang_stats``, which also counts the ``tools/list`` requests the server got);
- a rendezvous (``rendezvous``) that only completes when ``n`` calls are inside it at once, which
  proves calls run concurrently over one session without measuring time;
- tools that change the tool list with and without announcing it (``add_tool``,
  ``add_tool_silently``), to prove the client re-lists on the announcement and only then;
- ``media``: a result with one content block of every kind (text, image, audio, links, embedded
  resources);
- ``large``: a text result of any size;
- ``files.read``, ``files_read`` and a tool with a 97-character name: names MCP allows (dots,
  up to 128 characters) but model APIs refuse (``[a-zA-Z0-9_-]{1,64}``);
- ``pid`` and ``die`` (the process exits mid-call: a dropped connection);
- prompts with arguments (``greet``, ``review``), and one asking the user for input (``trip``);
- ``work``: a long tool that reports progress and sends log messages at each step;
- ``book``: asks the user for a date (elicitation) and ``summarize``: asks the client's model for a
  completion (sampling), both through ``Resolve`` so each protocol era asks its own way;
  ``describe`` asks it about a screenshot (sampling with an image; with ``conversation``, after an
  assistant message holding an image and a user's sound);
- ``weather_agent``: an agent loop run by the server with the client's model (sampling with
  tools, SEP-1577): it offers ``forecast.today``, runs each call the model proposes and asks again
  with the results, handshake era only (a 2026-07-28 server samples once per input round);
  ``pick_city`` samples once with a tool and says what the model proposed (both eras; with
  ``offer``, a tool without arguments or two whose names model APIs would make one);
  ``sample_raw`` sends a sampling request the ``mcp`` server's own checks would refuse (its tool
  blocks do not pair up) and returns the client's answer;
- ``ticket``: an ``outputSchema`` and ``structuredContent`` beside its text;
- resources (``notes://today``, ``notes://{day}``, a binary ``logo://png``).

With ``DEMO_STALL_LISTINGS=<n>`` in its environment, the server leaves its first ``n``
``tools/list`` requests unanswered (``_stalling_listings``); with ``DEMO_BAD_TOOLS`` it lists
tools a client leaves out as well (``_list_bad_tools``).

With ``legacy=True`` the server refuses ``server/discover``, so clients fall back to the
``initialize`` handshake (protocol 2025-11-25): list changes then travel as plain notifications and
HTTP sessions are stateful, as with servers built on older SDKs.
"""

from __future__ import annotations

import os
import warnings
from typing import Annotated, Any, Literal

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.prompts.base import AssistantMessage, Message, UserMessage
from mcp.server.mcpserver.resolve import Elicit, Resolve, Sample
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.types import (
    METHOD_NOT_FOUND,
    AudioContent,
    BlobResourceContents,
    ContentBlock,
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResultWithTools,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    SamplingMessage,
    TextContent,
    TextResourceContents,
    Tool,
    ToolChoice,
    ToolResultContent,
    ToolUseContent,
)
from pydantic import BaseModel

# ``ctx.log`` warns that 2026-07-28 deprecates logging; clients of both eras still receive it.
warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

LONG_TOOL_NAME = "report_" + "quarterly_" * 8 + "figures.v2"  # 97 characters, a dot in it


class Forecast(BaseModel):
    city: str
    temperature: float
    units: Literal["celsius", "fahrenheit"]
    conditions: list[str]


class Ticket(BaseModel):
    id: int
    title: str


class Travel(BaseModel):
    date: str


def _ask_date(destination: str) -> Elicit[Travel]:
    return Elicit(f"When do you want to travel to {destination}?", Travel)


def _sample_summary(text: str, temperature: float | None = None) -> Sample:
    return Sample(
        [SamplingMessage(role="user", content=TextContent(type="text", text=f"Summarize: {text}"))],
        max_tokens=50,
        system_prompt="Be brief.",
        temperature=temperature,
    )


SCREENSHOT = "iVBORw0KGgoAAAANSUhEUg=="  # a PNG's first bytes, base64
"""The image ``describe`` asks the client's model about."""


def _sample_description(conversation: bool = False) -> Sample:
    """A screenshot for the client's model to describe; with ``conversation``, after an exchange
    in which the assistant drew an image itself (MCP allows images in its messages too) and the
    user sent a sound."""
    screenshot = ImageContent(type="image", data=SCREENSHOT, mime_type="image/png")
    ask = [TextContent(type="text", text="Describe this screenshot."), screenshot]
    messages = [SamplingMessage(role="user", content=ask)]
    if conversation:
        drawn = ImageContent(type="image", data="R0lGODlh", mime_type="image/gif")
        sound = AudioContent(type="audio", data="UklGRg==", mime_type="audio/wav")
        messages = [
            SamplingMessage(role="user", content=TextContent(type="text", text="Draw a logo.")),
            SamplingMessage(
                role="assistant", content=[TextContent(type="text", text="Here it is:"), drawn]
            ),
            SamplingMessage(role="user", content=sound),
            *messages,
        ]
    return Sample(messages, max_tokens=100, system_prompt="You see images.")


FORECAST_TOOL = Tool(
    name="forecast.today",  # a dot: not a name model APIs take
    description="Today's forecast for a city.",
    input_schema={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)


def _forecast(use: ToolUseContent) -> ToolResultContent:
    """The server running a call its client's model proposed."""
    city = use.input.get("city")
    if not isinstance(city, str):
        text, error = f"{use.name}: no city in {use.input}", True
    else:
        text, error = f"{use.name}: sunny in {city}", False
    return ToolResultContent(
        type="tool_result",
        tool_use_id=use.id,
        content=[TextContent(type="text", text=text)],
        is_error=error,
    )


CLOCK_TOOL = Tool(
    name="clock.now",
    description="The time now.",
    input_schema={"type": "object"},  # no arguments: MCP's schema need not list properties
)
FORECAST_FIT_TOOL = Tool(
    name="forecast_today",  # a name model APIs take: the one forecast.today is made fit as
    description="Today's forecast, another way.",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
)


def _sample_pick(question: str, offer: str = "forecast") -> Sample:
    """``offer``: the tools given, ``forecast`` (forecast.today), ``clock`` (a tool without
    arguments) or ``both_forecasts`` (forecast.today and forecast_today)."""
    tools = {
        "forecast": [FORECAST_TOOL],
        "clock": [CLOCK_TOOL],
        "both_forecasts": [FORECAST_TOOL, FORECAST_FIT_TOOL],
    }[offer]
    return Sample(
        [SamplingMessage(role="user", content=TextContent(type="text", text=question))],
        max_tokens=100,
        tools=tools,
        tool_choice=ToolChoice(mode="required"),
    )


def _raw_messages(case: str) -> list[SamplingMessage]:
    """Sampling conversations whose tool blocks break SEP-1577's pairing."""
    ask = SamplingMessage(role="user", content=TextContent(type="text", text="Weather in Oslo?"))
    result = ToolResultContent(
        type="tool_result", tool_use_id="call_9", content=[TextContent(type="text", text="sunny")]
    )

    def use(id_: str) -> ToolUseContent:
        return ToolUseContent(
            type="tool_use", id=id_, name="forecast.today", input={"city": "Oslo"}
        )

    if case == "orphan_result":  # a result answering no call
        return [ask, SamplingMessage(role="user", content=[result])]
    if case == "wrong_id":  # a result answering a call the model did not make
        return [
            ask,
            SamplingMessage(role="assistant", content=[use("call_1")]),
            SamplingMessage(role="user", content=[result]),
        ]
    if case == "twice":  # the model's call answered twice
        answer = result.model_copy(update={"tool_use_id": "call_1"})
        return [
            ask,
            SamplingMessage(role="assistant", content=[use("call_1")]),
            SamplingMessage(role="user", content=[answer, answer]),
        ]
    if case == "empty_id":
        empty = result.model_copy(update={"tool_use_id": ""})
        return [
            ask,
            SamplingMessage(role="assistant", content=[use("")]),
            SamplingMessage(role="user", content=[empty]),
        ]
    if case == "unanswered":  # the model's call, then the user goes on as if it were not made
        return [
            ask,
            SamplingMessage(role="assistant", content=[use("call_1")]),
            SamplingMessage(role="user", content=TextContent(type="text", text="Well?")),
        ]
    raise ValueError(case)


class _State:
    """Server-side bookkeeping the tests read back through tools."""

    def __init__(self) -> None:
        self.hangs_started = 0
        self.hangs_cancelled = 0
        self.tools_listed = 0  # ``tools/list`` requests answered or not (``_counting_listings``)
        self.rendezvous: dict[str, tuple[list[int], anyio.Event]] = {}


async def _refuse_discover(ctx: Any, call_next: Any) -> Any:
    if ctx.method == "server/discover":
        raise MCPError(METHOD_NOT_FOUND, "Method not found")
    return await call_next(ctx)


def _counting_listings(state: _State) -> Any:
    """Middleware counting the ``tools/list`` requests the process gets (``hang_stats``'s
    ``listed``): how many listings concurrent first uses of a toolset sent."""

    async def count(ctx: Any, call_next: Any) -> Any:
        if ctx.method == "tools/list":
            state.tools_listed += 1
        return await call_next(ctx)

    return count


def _stalling_listings(count: int) -> Any:
    """Middleware leaving the first ``count`` ``tools/list`` requests the process gets unanswered
    (until the client cancels them), as a server whose handshake answers but whose listing hangs
    (a backend it asks is down); later ones are answered."""
    left = count

    async def stall(ctx: Any, call_next: Any) -> Any:
        nonlocal left
        if ctx.method == "tools/list" and left > 0:
            left -= 1
            await anyio.sleep_forever()
        return await call_next(ctx)

    return stall


async def _list_bad_tools(ctx: Any, call_next: Any) -> Any:
    """Add to a ``tools/list`` answer a tool whose input schema is no object schema and a second
    ``add`` unlike the first: tools a client leaves out (``DEMO_BAD_TOOLS`` set)."""
    result = await call_next(ctx)
    if ctx.method != "tools/list":
        return result
    bad = [
        {"name": "string_schema", "inputSchema": {"type": "string"}},
        {"name": "add", "description": "Another add.", "inputSchema": {"type": "object"}},
    ]
    return {**result, "tools": [*result["tools"], *bad]}  # the answer as it is sent


def build_server(name: str = "demo", *, legacy: bool = False) -> MCPServer:
    state = _State()
    middleware = [_counting_listings(state)]
    if legacy:
        middleware.append(_refuse_discover)
    if os.environ.get("DEMO_STALL_LISTINGS"):
        middleware.append(_stalling_listings(int(os.environ["DEMO_STALL_LISTINGS"])))
    if os.environ.get("DEMO_BAD_TOOLS"):
        middleware.append(_list_bad_tools)
    server = MCPServer(name, log_level="WARNING", middleware=middleware)

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    def forecast(city: str, units: Literal["celsius", "fahrenheit"] = "celsius") -> Forecast:
        """Tomorrow's weather for a city."""
        temperature = 21.5 if units == "celsius" else 70.7
        return Forecast(
            city=city, temperature=temperature, units=units, conditions=["sunny", "dry"]
        )

    @server.tool()
    def fail(message: str) -> str:
        """Always fails with the given message."""
        raise ToolError(message)

    @server.tool()
    async def hang() -> str:
        """Never returns (until the client cancels the request)."""
        state.hangs_started += 1
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            state.hangs_cancelled += 1
            raise
        return "unreachable"

    @server.tool()
    def hang_stats() -> dict[str, int]:
        """How many ``hang`` calls started and how many the client cancelled, and how many
        ``tools/list`` requests the server got (``listed``)."""
        return {
            "started": state.hangs_started,
            "cancelled": state.hangs_cancelled,
            "listed": state.tools_listed,
        }

    @server.tool()
    async def rendezvous(group: str, n: int, tag: str) -> str:
        """Returns only once ``n`` calls of ``group`` are inside this tool at the same time."""
        inside, everyone_arrived = state.rendezvous.setdefault(group, ([0], anyio.Event()))
        inside[0] += 1
        if inside[0] >= n:
            everyone_arrived.set()
        await everyone_arrived.wait()
        return tag

    @server.tool()
    async def add_tool(name: str, ctx: Context) -> str:
        """Adds a tool named ``name`` and announces that the tool list changed."""
        _add_echo_tool(server, name)
        await ctx.notify_tools_changed()  # 2026-07-28 clients: subscriptions/listen
        await ctx.session.send_tool_list_changed()  # earlier clients: a plain notification
        return f"added {name}"

    @server.tool()
    def add_tool_silently(name: str) -> str:
        """Adds a tool named ``name`` without telling anyone."""
        _add_echo_tool(server, name)
        return f"added {name} silently"

    @server.tool()
    def media() -> list[ContentBlock]:
        """One block of every kind a tool result can hold: text, image, audio, a resource link,
        an embedded text resource and an embedded binary one."""
        return [
            TextContent(type="text", text="a chart of sales"),
            ImageContent(type="image", data="iVBORw0KGgo=", mime_type="image/png"),
            AudioContent(type="audio", data="UklGRg==", mime_type="audio/wav"),
            ResourceLink(type="resource_link", name="report", uri="file:///reports/q3.pdf"),
            EmbeddedResource(
                type="resource",
                resource=TextResourceContents(uri="file:///notes.txt", text="notes: up 4%"),
            ),
            EmbeddedResource(
                type="resource",
                resource=BlobResourceContents(
                    uri="file:///raw.bin", blob="AAEC", mime_type="application/octet-stream"
                ),
            ),
        ]

    @server.tool()
    def large(size: int) -> str:
        """A text of ``size`` characters."""
        return "x" * size

    def read_dotted(path: str) -> str:
        return f"dotted read {path}"

    def read_underscored(path: str) -> str:
        return f"underscored read {path}"

    def long_named() -> str:
        return "long name answered"

    server.add_tool(read_dotted, name="files.read", description="Reads a file (dotted name).")
    server.add_tool(read_underscored, name="files_read", description="Reads a file.")
    server.add_tool(long_named, name=LONG_TOOL_NAME, description="A tool with a long name.")

    @server.tool()
    def pid() -> int:
        """The server's process id."""
        return os.getpid()

    @server.tool()
    def trace_parent(ctx: Context) -> str:
        """The W3C ``traceparent`` the request carried in its ``_meta`` (SEP-414), or ""."""
        meta = ctx.request_context.meta
        value = meta.get("traceparent") if meta else None
        return value if isinstance(value, str) else ""

    @server.tool()
    def die() -> str:
        """Ends the server process in the middle of the call."""
        os._exit(3)

    @server.tool()
    async def work(steps: int, ctx: Context) -> str:
        """A long task: reports progress and logs a message at each step (a debug one and an
        info one). Says whether the client asked for progress (sent a progress token)."""
        meta = ctx.request_context.meta
        asked = meta.get("progress_token") if meta else None
        for step in range(1, steps + 1):
            await ctx.report_progress(step, steps, f"step {step} of {steps}")
            await ctx.log("debug", f"starting step {step}", logger_name="worker")
            await ctx.log("info", f"finished step {step}", logger_name="worker")
        return f"did {steps} steps" + (" (progress asked)" if asked is not None else "")

    @server.tool()
    async def book(
        destination: str, travel: Annotated[Travel, Resolve(_ask_date)], ctx: Context
    ) -> str:
        """Books a trip, asking the user for the date."""
        return f"booked {destination} on {travel.date}"

    @server.tool()
    async def summarize(
        text: str,
        sampled: Annotated[Any, Resolve(_sample_summary)],
        temperature: float | None = None,
    ) -> str:
        """Summarizes a text with the client's model (and says why it stopped, unless at the end
        of its turn)."""
        content = sampled.content
        summary = f"summary ({sampled.model}): {getattr(content, 'text', content)}"
        stopped = sampled.stop_reason
        return summary if stopped in ("endTurn", None) else f"{summary} (stopped: {stopped})"

    @server.tool()
    async def describe(
        sampled: Annotated[Any, Resolve(_sample_description)], conversation: bool = False
    ) -> str:
        """Describes a screenshot with the client's model (sampling with an image)."""
        return f"description ({sampled.model}): {getattr(sampled.content, 'text', '')}"

    @server.tool()
    async def weather_agent(question: str, ctx: Context) -> str:
        """Answers a question with the client's model, running the tools it calls (sampling with
        tools, handshake era)."""
        messages = [SamplingMessage(role="user", content=TextContent(type="text", text=question))]
        for _ in range(4):
            result = await ctx.session.create_message(
                messages,
                max_tokens=100,
                system_prompt="Use the tools.",
                tools=[FORECAST_TOOL],
                tool_choice=ToolChoice(mode="auto"),
            )
            uses = [block for block in result.content_as_list if isinstance(block, ToolUseContent)]
            if not uses:
                text = " ".join(
                    b.text for b in result.content_as_list if isinstance(b, TextContent)
                )
                return f"{text} ({result.stop_reason}, {len(messages)} messages)"
            messages.append(SamplingMessage(role="assistant", content=result.content_as_list))
            messages.append(SamplingMessage(role="user", content=[_forecast(u) for u in uses]))
        return "the model kept calling tools"

    @server.tool()
    async def pick_city(
        question: str, sampled: Annotated[Any, Resolve(_sample_pick)], offer: str = "forecast"
    ) -> str:
        """Asks the client's model once, with a tool it must call, and says what it proposed."""
        proposed = [
            f"{block.name}({block.input}) id={block.id}"
            for block in sampled.content_as_list
            if isinstance(block, ToolUseContent)
        ]
        return f"{sampled.stop_reason}: {'; '.join(proposed)}"

    @server.tool()
    async def sample_raw(case: str, ctx: Context) -> str:
        """Sends a sampling request whose tool blocks do not pair up (handshake era)."""
        request = CreateMessageRequest(
            params=CreateMessageRequestParams(
                messages=_raw_messages(case), max_tokens=10, tools=[FORECAST_TOOL]
            )
        )
        try:
            result = await ctx.session.send_request(request, CreateMessageResultWithTools)
        except MCPError as exc:
            return f"refused ({exc.error.code}): {exc.error.message}"
        return f"answered: {result.content}"

    @server.tool()
    def ticket(title: str) -> Ticket:
        """Opens a ticket."""
        return Ticket(id=7, title=title)

    @server.resource("notes://today", name="today", mime_type="text/plain")
    def today_note() -> str:
        """Today's note."""
        return "water the plants"

    @server.resource("notes://{day}", name="day_note")
    def day_note(day: str) -> str:
        """The note of a given day."""
        return f"note of {day}"

    @server.resource("logo://png", name="logo", mime_type="image/png")
    def logo() -> bytes:
        """The logo."""
        return b"\x89PNG\r\n"

    @server.prompt()
    async def trip(ctx: Context) -> str:
        """A trip plan, asking the user for the date (elicitation outside any tool call)."""
        answer = await ctx.elicit("When is the trip?", Travel)
        return f"Plan a trip on {getattr(answer, 'data', Travel(date='?')).date}."

    @server.prompt()
    def greet(name: str, mood: str = "cheerful") -> str:
        """A greeting for someone."""
        return f"Write a {mood} greeting for {name}."

    @server.prompt()
    def explain_chart() -> list[Message]:
        """A question about a chart, which the prompt holds as an image."""
        return [
            UserMessage("What does this chart show?"),
            UserMessage(ImageContent(type="image", data="iVBORw0KGgo=", mime_type="image/png")),
        ]

    @server.prompt()
    def redraw() -> list[Message]:
        """A conversation in which the assistant drew a chart (an image in its message)."""
        return [
            UserMessage("Draw a chart."),
            AssistantMessage(ImageContent(type="image", data="R0lGODlh", mime_type="image/gif")),
            UserMessage("Make it blue."),
        ]

    @server.prompt()
    def review(code: str) -> list[Message]:
        """A short code-review conversation."""
        return [
            UserMessage(f"Review this code:\n{code}"),
            AssistantMessage("Sure. What should I focus on?"),
            UserMessage("Correctness first."),
        ]

    return server


def _add_echo_tool(server: MCPServer, name: str) -> None:
    def echo(text: str) -> str:
        return text

    server.add_tool(echo, name=name, description=f"Echo tool {name}.")
