"""An agent behind HTTP, on the standard library alone: streamed answers, approvals, hang-ups.

``POST /chat`` runs the agent and streams its events to the client as NDJSON lines (a chunked
response): pieces of each answer as the model writes them (``{"delta": ...}``), then every event as
``{"event": event.to_dict()}`` (tool calls and results, and, when the agent wants to send money,
the approval request with its checkpoint id), which a Python client turns back into events with
``AgentEvent.from_dict``. ``GET /pending`` lists the runs waiting on a person and what each asks,
read from the checkpoint store itself (``runner.pending()``), so the service keeps no list of its
own that could drift from the store. Each run's points are sent as its interrupt event sent them
(``AgentEvent.to_dict``: a registered pydantic model as its fields, named by ``info_type``), with
``resuming`` set while a resume of it is under way, so a page does not offer that decision again;
a run whose pause cannot be sent as standard JSON, NaN in what it asks, is listed with that error:
the service writes only standard JSON, which a browser's ``JSON.parse`` reads. ``POST /resume`` carries a
person's decision, keyed by the point id shown (``{point_id: decision}``: a click sent twice is
never taken for another call), to that checkpoint, which lives in a SQLite file, so any worker
sharing the file could take it. Three things a service has to get right, shown here:

- **Errors before the first event become HTTP errors.** ``runner.run`` checks its input when it
  is called, ``runner.resume`` its request (the checkpoint exists, is not being resumed, the
  decision has the right shape) when its first event is taken; the handler takes that event
  *before* sending ``200``, so a bad request gets a ``400`` or ``409`` with the reason instead of
  a stream that breaks off (``404`` for a checkpoint gone, ``409`` for one being resumed). A
  checkpoint it cannot resume as asked (another ``CheckpointError``, raised or as the first
  event's ``exception``) is kept in the store (``"kept": true``) and told apart by its
  ``reason``, never by reading the checkpoint's bytes, as what lets it through
  (``"resumable"``): a ``max_turns`` too low for it (also a ``ValueError``, with the
  limit as ``max_turns``) a ``422``, sent again with a higher one it resumes; bytes no resume
  reads a ``410``; a tool or a ``before_tool`` gate removed since the pause, or run options
  this version does not pass, a ``503``, resumed once the service is fixed (a rollback). A
  checkpoint store that is down (``CheckpointStoreError``, no ``CheckpointError``: nothing was
  wrong with the request) is a ``503`` too, and anything unforeseen a JSON ``500``. A store
  failing as a resumed run ends (it ran: its checkpoint is left behind) ends the stream with an
  ``{"error": ...}`` line saying so, not a stream broken off. ``/chat`` and ``/resume`` take an
  optional ``"max_turns"``.
- **A failing model fails its stream.** Reading a reply's stream raises whatever the model raised
  (``adk.ModelError`` from ``OpenAIChatModel``, anything from a model of your own); the handler
  catches what *reading the stream* raises, reports it and goes on reading events, so the client
  still gets the run's error event. Its own errors (sending, encoding) are not caught there.
- **A client that hangs up cancels its run.** The handler watches the connection while it streams;
  when the client leaves, it cancels the run, and the tool that was running is cancelled with it.

It runs offline (a scripted model stands in for the LLM) and plays the client itself::

    python examples/streaming_service.py
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel

import adk
from adk.checkpoint import (
    CheckpointStoreError,
    PendingCheckpoint,
    SQLiteCheckpointStore,
)
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent

EXAMPLE_EXPECT = (
    "waiting for approval of send_payment",
    "pending: [('send_payment', {'payee': 'ACME', 'amount_cents': 4200})]",
    "pending after the approval: []",
    "pending, a quote: [{'supplier': 'Bolt & Co', 'amount_cents': 1999}] as ['example.Quote']",
    "pending, unshown: its interrupt info cannot be sent as JSON: event action.interrupted.points",
    ".info.arguments.rate: float nan is not a JSON number; store None or a string instead (the "
    "pause is saved as checkpoint '",
    "400 resume data for approval point",
    "paid: sent 4200 cents to ACME",
    "400 bad request: TypeError('run input must be a str, a Message or a list of Messages, "
    "got int')",
    "400 bad request: JSONDecodeError('Expecting",
    "[{'stream_failed': 'HTTP 503: overloaded (gave up after 3 attempts)'}, {'event': "
    "{'agent_name': 'clerk', 'run_path': ['clerk'], 'error': {'type': 'ModelError', "
    "'message': 'HTTP 503: overloaded (gave up after 3 attempts)'}}}]",
    "[{'stream_failed': 'backend reset the connection'}, {'event': {'agent_name': 'clerk', "
    "'run_path': ['clerk'], 'error': {'type': 'ConnectionResetError', 'message': "
    "'backend reset the connection'}}}]",
    "client left: run cancelled, lookup_invoice cancelled too",
)

lookup_started = asyncio.Event()
lookup_cancelled = asyncio.Event()


@adk.tool(require_approval=True)
def send_payment(payee: str, amount_cents: int) -> str:
    """Send money; a person approves every call."""
    return f"sent {amount_cents} cents to {payee}"


@adk.tool(require_approval=True)
def set_exchange_rate(currency: str, rate: float) -> str:
    """Set the rate payments in ``currency`` are converted at; a person approves it."""
    return f"{currency} at {rate}"


class Quote(BaseModel):
    """A supplier's quote, which a person accepts or not."""

    supplier: str
    amount_cents: int


# The name is what ``info_type`` carries: stable, whichever module path the class has.
adk.register_type(Quote, name="example.Quote")


@adk.tool
def order_parts(supplier: str, ctx: adk.ToolContext) -> str:
    """Order parts; pauses with the supplier's quote until a person decides on it."""
    if ctx.resume is None:
        raise adk.Interrupt(Quote(supplier=supplier, amount_cents=1999))
    return f"parts from {supplier}: {ctx.resume.data}"


@adk.tool
async def lookup_invoice(invoice: str) -> str:
    """Look an invoice up in a slow back-office system."""
    lookup_started.set()
    try:
        await asyncio.sleep(3600)  # the client will not wait that long
    except asyncio.CancelledError:
        lookup_cancelled.set()
        raise
    return f"{invoice}: due"


def scripted_model(messages: list[adk.Message]) -> Any:
    """Stands in for an LLM: pay ACME, look invoices up, fail (as ``OpenAIChatModel`` does, or as
    a model of your own might), or report the last tool result."""
    last = messages[-1]
    if last.role == "tool":
        return f"paid: {last.content}"
    if "break" in last.content:
        return adk.ModelError("HTTP 503: overloaded (gave up after 3 attempts)", status=503)
    if "drop" in last.content:  # a model of your own raises what its client raised
        return ConnectionResetError("backend reset the connection")
    if "rate" in last.content:  # a model that wrote NaN (Python's JSON parser takes it)
        unknown = {"currency": "CHF", "rate": float("nan")}
        return Reply(tool_calls=[tool_call("set_exchange_rate", unknown)])
    if "parts" in last.content:
        return Reply(tool_calls=[tool_call("order_parts", {"supplier": "Bolt & Co"})])
    if "slow" in last.content:
        return Reply(tool_calls=[tool_call("lookup_invoice", {"invoice": "INV-9"})])
    payment = {"payee": "ACME", "amount_cents": 4200}
    return Reply(text="I'll pay ACME.", tool_calls=[tool_call("send_payment", payment)])


# -- the service ----------------------------------------------------------------------------------


class Service:
    def __init__(self, runner: adk.Runner) -> None:
        self.runner = runner

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:  # a body that is not JSON is a bad request too, not a connection dropped
                path, body = await _read_request(reader)
                if path == "/pending":
                    await self.pending(writer)
                    return
                if path == "/chat":  # run() checks its input at the call
                    events = self.runner.run(body["message"], max_turns=body.get("max_turns"))
                elif path == "/resume":
                    events = self.runner.resume(
                        body["checkpoint_id"], body["decision"], max_turns=body.get("max_turns")
                    )
                else:
                    await _send_json(writer, 404, {"error": f"no route {path}"})
                    return
            except (KeyError, TypeError, ValueError) as exc:
                await _send_json(writer, 400, {"error": f"bad request: {exc!r}"})
                return
            resumed = body["checkpoint_id"] if path == "/resume" else None  # not a /chat's
            async with contextlib.aclosing(events):
                await self.stream(events, reader, writer, resumed)
        finally:
            writer.close()

    async def pending(self, writer: asyncio.StreamWriter) -> None:
        """Send the runs waiting on a person, read from the checkpoints (nothing is resumed or
        run). A checkpoint that cannot be read is listed with its error, for an operator to look
        at; a store that is down is a ``503``."""
        waiting: list[dict[str, Any]] = []
        try:
            async for entry in self.runner.pending():
                if entry.error is not None:
                    waiting.append(
                        {"checkpoint_id": entry.checkpoint_id, "error": str(entry.error)}
                    )
                    continue
                try:  # what a checkpoint keeps (NaN) may not be JSON a client reads
                    points = _points_json(entry)
                except TypeError as exc:  # listed, not hidden, nor the list failed
                    error = f"its interrupt info cannot be sent as JSON: {exc}"
                    waiting.append({"checkpoint_id": entry.checkpoint_id, "error": error})
                    continue
                waiting.append(
                    {
                        "checkpoint_id": entry.checkpoint_id,
                        "saved_at": entry.saved_at,
                        "resuming": entry.resuming,  # a resume is under way: do not offer it
                        "points": points,
                    }
                )
        except CheckpointStoreError as exc:
            await _send_json(writer, 503, {"error": str(exc)})
            return
        await _send_json(writer, 200, waiting)

    async def stream(
        self,
        events: AsyncIterator[adk.AgentEvent],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        checkpoint_id: str | None = None,
    ) -> None:
        try:  # resume() checks its request when the first event is taken: answer that too
            first = await anext(events, None)
        except adk.CheckpointError as exc:  # before ValueError: a refusal may be both
            if checkpoint_id is not None:
                await self.refused(writer, checkpoint_id, exc)
            else:  # a new run's: no checkpoint to keep, the service's fault
                await _send_json(writer, 500, {"error": str(exc)})
            return
        except (ValueError, TypeError) as exc:  # a malformed resume (unknown point, bad decision)
            await _send_json(writer, 400, {"error": str(exc)})
            return
        except CheckpointStoreError as exc:  # the store is down: nothing ran, ask again later
            await _send_json(writer, 503, {"error": str(exc)})
            return
        except Exception as exc:  # unforeseen (a bug): none is known today
            # Answered, not a connection dropped with nothing said (the handler's exception
            # went to asyncio's log alone); the checkpoint is kept, the decision may be resent.
            print(f"[server] the run failed: {exc!r}", flush=True)
            await _send_json(writer, 500, {"error": f"the run failed: {type(exc).__name__}"})
            return
        if (
            checkpoint_id is not None
            and first is not None
            and isinstance(first.exception, adk.CheckpointError)
        ):
            # Refused as its first event, not raised (a before_tool gate this version lacks, an
            # agent tree that no longer fits the pause, a max_turns too low): nothing ran.
            await self.refused(writer, checkpoint_id, first.exception)
            return
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        sending = asyncio.ensure_future(self.send_all(first, events, writer))
        hangup = asyncio.ensure_future(reader.read(1))  # b"" once the client closes
        await asyncio.wait({sending, hangup}, return_when=asyncio.FIRST_COMPLETED)
        hangup.cancel()
        if not sending.done():
            sending.cancel()  # cancels the run: its tools, model calls and MCP calls
            print("[server] client left: run cancelled", flush=True)
        with contextlib.suppress(asyncio.CancelledError, ConnectionError):
            await sending

    async def refused(
        self, writer: asyncio.StreamWriter, checkpoint_id: str, exc: adk.CheckpointError
    ) -> None:
        """Answer a resume the runner refused (raised, or as its first event): nothing ran and
        the checkpoint is kept as it was (``"kept": true``). Told apart by the refusal's
        ``reason`` (docs/service.md), which says what lets it through (``"resumable"``):
        ``404`` gone (``"not_found"``: a stale link), ``409`` being resumed (``"busy"``: a
        double click); ``422`` for a ``max_turns`` too low for what the resume must make
        (``"max_turns"``, the limit as its ``max_turns``), which the same checkpoint passes sent
        again with a higher ``"max_turns"``; ``410`` for bytes no resume will ever read
        (``"corrupt"``), which nothing makes resumable; ``503`` for a checkpoint the service as
        now deployed cannot resume (another pyadk release's, a tool or a ``before_tool`` gate
        removed since the pause, run options it does not pass), which a fixed deployment (a
        rollback, a worker of that release) resumes: the decision can be sent again then."""
        reason = exc.reason
        if reason == "not_found":  # a stale link, sent twice
            await _send_json(writer, 404, {"error": str(exc)})
            return
        if reason == "busy":  # a double click
            await _send_json(writer, 409, {"error": str(exc)})
            return
        kept = {"checkpoint_id": checkpoint_id, "kept": True, "resumable": True}
        if reason == "max_turns":
            why = f"checkpoint {checkpoint_id!r} cannot be resumed within max_turns: {exc}"
            held_to = getattr(exc, "max_turns", None)  # the limit it was held against
            await _send_json(writer, 422, kept | {"error": why, "max_turns": held_to})
            return
        if reason == "corrupt":
            why = f"checkpoint {checkpoint_id!r} cannot be resumed by this service: {exc}"
            await _send_json(writer, 410, kept | {"error": why, "resumable": False})
            return
        why = (
            f"this service cannot resume checkpoint {checkpoint_id!r} now: {exc}; send the "
            "decision again once it can"
        )
        await _send_json(writer, 503, kept | {"error": why})

    async def send_all(
        self,
        event: adk.AgentEvent | None,
        events: AsyncIterator[adk.AgentEvent],
        writer: asyncio.StreamWriter,
    ) -> None:
        while event is not None:
            stream = event.output.stream if event.output is not None else None
            failed = await _forward(stream, writer) if stream is not None else None
            if failed is not None:  # the run's error event comes next
                await _send_line(writer, {"stream_failed": str(failed)})
            else:  # read to its end, a streamed reply encodes as its joined message
                await _send_line(writer, {"event": event.to_dict()})
            try:
                event = await anext(events, None)
            except CheckpointStoreError as exc:  # it ran, and its checkpoint was left behind:
                await _send_line(writer, {"error": str(exc)})  # the decision must not be resent
                break
        writer.write(b"0\r\n\r\n")
        await writer.drain()


async def _forward(stream: adk.MessageStream, writer: asyncio.StreamWriter) -> Exception | None:
    """Send a reply's pieces as they come; what reading the stream raised, if it failed.

    Only reading is guarded: a stream raises whatever its model raised (any exception), and the
    run then reports it as its error event, so nothing is hidden. Sending is not: a client gone
    (``ConnectionError``) or a bug of the service's own must end the handler, not pass as a
    model's failure."""
    chunks = aiter(stream)
    while True:
        try:
            chunk = await anext(chunks)
        except StopAsyncIteration:
            return None
        except Exception as exc:  # the model's error, whatever its type
            return exc
        if chunk.content:
            await _send_line(writer, {"delta": chunk.content})


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, dict[str, Any]]:
    _method, path, _version = (await reader.readline()).decode().split(" ", 2)
    length = 0
    while (header := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = header.decode().partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    body = json.loads(await reader.readexactly(length)) if length else {}
    return path, body


def _points_json(entry: PendingCheckpoint) -> list[dict[str, Any]]:
    """``entry``'s points as its interrupt event sent them to the client that started the run:
    ``AgentEvent.to_dict``'s encoding (``id``, ``address``, ``info``; a registered model as its
    fields with its name in ``info_type``, which ``AgentEvent.from_dict`` rebuilds it by), so a
    client reads both alike. A ``TypeError`` names what standard JSON cannot hold (NaN)."""
    paused = adk.InterruptInfo(checkpoint_id=entry.checkpoint_id, points=entry.points)
    event = adk.AgentEvent(action=adk.AgentAction(interrupted=paused))
    points: list[dict[str, Any]] = event.to_dict()["action"]["interrupted"]["points"]
    return points


# ``allow_nan=False``: Python would write ``NaN``, which is not JSON and a browser's ``JSON.parse``
# refuses; what cannot be sent is refused here, where it is made, as ``AgentEvent.to_dict`` does.
async def _send_line(writer: asyncio.StreamWriter, value: Any) -> None:
    data = json.dumps(value, allow_nan=False).encode() + b"\n"
    writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
    await writer.drain()


async def _send_json(writer: asyncio.StreamWriter, status: int, value: Any) -> None:
    data = json.dumps(value, allow_nan=False).encode()
    reason = "OK" if status == 200 else "Error"
    head = f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
    writer.write(f"{head}Content-Length: {len(data)}\r\n\r\n".encode() + data)
    await writer.drain()


# -- a client -------------------------------------------------------------------------------------


async def post(
    port: int,
    path: str,
    body: Any,
    *,
    leave_when: asyncio.Event | None = None,
    method: str = "POST",
) -> Any:
    """POST ``body`` (as JSON; bytes as they are); return the NDJSON lines of a ``200`` (its JSON
    when it is not a stream), or ``(status, error)`` otherwise. With ``leave_when``, hang up
    mid-stream once it is set."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    writer.write(f"{method} {path} HTTP/1.1\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data)
    status = int((await reader.readline()).split()[1])
    length = None
    while (header := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = header.decode().partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    try:
        if status != 200:
            assert length is not None
            return status, _json(await reader.readexactly(length))["error"]
        if length is not None:  # a plain JSON answer (GET /pending), not a stream
            return _json(await reader.readexactly(length))
        if leave_when is not None:
            await leave_when.wait()
            return []
        lines = []
        while size := int(await reader.readline(), 16):
            lines.append(_json(await reader.readexactly(size)))
            await reader.readline()
        return lines
    finally:
        writer.close()


def _json(data: bytes) -> Any:
    """Parse as a browser's ``JSON.parse`` would: ``NaN``/``Infinity`` are not JSON."""
    return json.loads(data, parse_constant=_not_json)


def _not_json(token: str) -> Any:
    raise ValueError(f"{token} is not JSON")


async def get(port: int, path: str) -> Any:
    """GET ``path``: its JSON answer."""
    return await post(port, path, b"", method="GET")


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        agent = ReActAgent(
            "clerk",
            ScriptedModel(scripted_model),
            instruction="You pay invoices.",
            tools=[send_payment, set_exchange_rate, order_parts, lookup_invoice],
        )
        async with (
            SQLiteCheckpointStore(Path(tmp) / "checkpoints.db") as store,
            adk.Runner(agent, checkpoint_store=store, enable_streaming=True) as runner,
        ):
            server = await asyncio.start_server(Service(runner).handle, "127.0.0.1", 0)
            port = server.sockets[0].getsockname()[1]

            lines = await post(port, "/chat", {"message": "Pay the ACME invoice."})
            print("[client] deltas:", [line["delta"] for line in lines if "delta" in line])
            paused = lines[-1]["event"]["action"]["interrupted"]  # plain JSON: any client reads it
            point = paused["points"][0]
            print(f"[client] waiting for approval of {point['info']['tool']}: {point['id']}")

            # A person's inbox: every run waiting on a decision, read from the store.
            waiting = await get(port, "/pending")
            assert [entry["checkpoint_id"] for entry in waiting] == [paused["checkpoint_id"]]
            asks = [(p["info"]["tool"], p["info"]["arguments"]) for p in waiting[0]["points"]]
            print("[client] pending:", asks)

            status, error = await post(
                port,
                "/resume",
                {
                    "checkpoint_id": paused["checkpoint_id"],
                    "decision": {point["id"]: {"approve": True}},
                },
            )
            print(f"[client] {status} {error[:60]}...")  # a typo: refused, nothing lost

            # Keyed by the point the person was shown: a click sent twice is never taken for
            # another call the model asks for next (docs/interrupts.md, "Resuming").
            decision = {point["id"]: {"approved": True, "reason": "invoice checked"}}
            lines = await post(
                port, "/resume", {"checkpoint_id": paused["checkpoint_id"], "decision": decision}
            )
            # A Python client can have the events back as they were sent.
            events = [adk.AgentEvent.from_dict(line["event"]) for line in lines if "event" in line]
            answer = events[-1]
            assert answer.output is not None and answer.output.stream is not None  # it streamed
            print("[client] answer:", (await answer.output.stream.collect()).content)
            print("[client] pending after the approval:", await get(port, "/pending"))

            # A run that paused on a registered model: listed as its fields, as its event was.
            async for _event in runner.run("Order parts."):
                pass
            (quote,) = await get(port, "/pending")
            infos = [(p["info"], p["info_type"]) for p in quote["points"]]
            print("[client] pending, a quote:", [i for i, _ in infos], "as", [t for _, t in infos])
            assert quote["resuming"] is False  # nobody is deciding it now
            await runner.invoke_resume(
                quote["checkpoint_id"], {quote["points"][0]["id"]: "accepted"}
            )

            # A run another worker paused with NaN in what it asks (a checkpoint keeps NaN): it is
            # listed with why it cannot be shown, and the list is standard JSON all the same.
            async for _event in runner.run("Set the CHF rate."):
                pass
            (unshown,) = await get(port, "/pending")
            print("[client] pending, unshown:", unshown["error"])

            status, error = await post(port, "/chat", {"message": 42})
            print(f"[client] {status} {error}")
            status, error = await post(port, "/chat", b"{'message': 'hi'}")
            print(f"[client] {status} {error[:40]}")

            lines = await post(port, "/chat", {"message": "Just break, please."})
            print("[client] failed:", lines)
            lines = await post(port, "/chat", {"message": "Just drop, please."})
            print("[client] failed:", lines)  # not a ModelError: the client gets it all the same

            # Hang up while the tool runs; the server notices and cancels the run.
            await post(
                port, "/chat", {"message": "Look INV-9 up, slowly."}, leave_when=lookup_started
            )
            await lookup_cancelled.wait()
            print("[client] client left: run cancelled, lookup_invoice cancelled too")

            server.close()
            await server.wait_closed()


if __name__ == "__main__":
    asyncio.run(main())
