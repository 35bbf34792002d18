"""A data engineer's trial of the event-driven layer: sensor alerts from a JSONL file, keyed by
device, through an ``ActionAgent`` compiled to an ``AgentPlan``, end to end.

The pipeline (``Monitor``), as a Flink Agents user writes it:

1. ``parse`` (on ``InputEvent``): the record is a line of the file, as ``open(path)`` gives it;
   it is validated into an ``Alert`` (a bad field fails the record, not the stream) and the
   device is asked about through the built-in tool action, a ``ToolRequestEvent`` for
   ``device_info`` of a real MCP server over stdio (``mcp_servers/devices_server.py``);
2. ``enriched`` (on ``ToolResponseEvent``): an unknown device fails the record; otherwise the
   alert and its device go to the ``classifier`` model, an ``OpenAIChatModel`` over the real
   OpenAI wire server (``openai_server.py``), which answers 503 the first time for some alerts
   (the model's retry policy takes them);
3. ``classified`` (on ``ChatResponseEvent``): per-device memory (counts by severity under memory
   paths, the last sequence number seen); a critical alert goes to a whole agent, the
   ``investigator`` ``ReActAgent`` as an ``AgentTool``, whose ``dispatch_technician`` tool needs a
   person's approval: the record pauses inside the nested agent; the rest go on as ``Scored``;
4. ``publish`` (on ``Scored``, retried): writes to a sink that drops the connection now and then,
   and outputs the scored alert;
5. ``dispatched`` (the investigator's answer, a ``ToolResponseEvent`` too): counts the dispatch
   and outputs it.

The approvals are given later, in another process (this file run as a script), which builds the
same agent over the same SQLite files (checkpoints, and each device's memory in a
``SessionStore``) and resumes the pauses through ``apply``'s ``resumes``, as a Flink job reads an
approvals topic. PyFlink is not installed on the machine this was written on, so the Flink run of
the same plan is left to tests/test_flink.py's CI job.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sqlite3
import sys
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Collection, Hashable
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ValidationError

import adk
from adk import AgentTool, Message, Resources, RetryPolicy, ToolCall
from adk.actions import (
    ActionAgent,
    ActionContext,
    AgentPlan,
    ChatRequestEvent,
    ChatResponseEvent,
    Event,
    InputEvent,
    OutputEvent,
    ToolRequestEvent,
    ToolResponseEvent,
    action,
)
from adk.checkpoint import SQLiteCheckpointStore
from adk.checkpoint.codec import from_json_value, to_json_value
from adk.execution import KeyedOutput, LocalExecutionEnvironment
from adk.mcp import StdioServer
from adk.models.openai import OpenAIChatModel

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # run as a script too (the resuming process)

from openai_server import Call, OpenAIServer  # noqa: E402
from openai_server import Reply as Wire  # noqa: E402

pytestmark = pytest.mark.asyncio(loop_scope="module")

DEVICES_SERVER = HERE / "mcp_servers" / "devices_server.py"
CRITICAL = 98.0  # the classifier's line: a reading at or above it is critical


# -- the records ------------------------------------------------------------------------------------


def write_alerts(path: Path, count: int = 300, seed: int = 7) -> list[str]:
    """``count`` lines of sensor alerts, mostly good: devices d00-d11 and one the registry does
    not know (d99), each with its own rising ``seq``; a few lines broken (not JSON, a missing
    field, a reading that is not a number) and three critical readings."""
    rng = random.Random(seed)
    seqs: Counter[str] = Counter()
    lines = []
    for n in range(count):
        device = "d99" if n in (40, 190) else f"d{rng.randrange(12):02d}"
        seqs[device] += 1
        alert: dict[str, Any] = {
            "device": device,
            "seq": seqs[device],
            "metric": rng.choice(["temp", "vibration"]),
            "value": round(rng.uniform(40.0, 97.0), 1),
        }
        if n in (50, 150, 250):
            alert["value"] = 99.5
        if n % 37 == 11:
            lines.append('{"device": "d01", "seq": ' + str(n))  # cut off mid-line
            continue
        if n in (60, 160):
            del alert["value"]
        if n == 120:
            alert["value"] = "hot"
        lines.append(json.dumps(alert))
    path.write_text("\n".join(lines) + "\n")
    return lines


def device_of(line: str) -> str:
    """The key: the device named by the line."""
    return str(json.loads(line)["device"])


# -- the agent ------------------------------------------------------------------------------------


class Alert(BaseModel):
    device: str
    seq: int
    metric: Literal["temp", "vibration"]
    value: float


class Scored(Event):
    device: str
    seq: int
    severity: str
    count: int
    previous: int | None


class FlakySink:
    """A sink whose connection drops on the first write of every 25th alert; keeps what it got."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, int]] = []
        self.drops = 0
        self._dropped: set[tuple[str, int]] = set()

    def write(self, device: str, seq: int) -> None:
        if seq % 25 == 3 and (device, seq) not in self._dropped:
            self._dropped.add((device, seq))
            self.drops += 1
            raise ConnectionError("sink connection reset")
        self.rows.append((device, seq))


SINK = FlakySink()


class Monitor(ActionAgent):
    @action(InputEvent)
    @staticmethod
    def parse(event: InputEvent, ctx: ActionContext) -> None:
        try:
            alert = Alert.model_validate_json(event.input)
        except ValidationError as exc:
            raise ValueError(
                f"bad alert {event.input.strip()!r}: {exc.errors()[0]['msg']}"
            ) from None
        ctx.sensory_memory.set("alert", alert.model_dump())
        lookup = ToolCall(
            id=f"info-{alert.seq}",
            name="device_info",
            arguments=json.dumps({"device": alert.device}),
        )
        ctx.send_event(ToolRequestEvent(tool_calls=[lookup], tools=["device_info"]))

    @action(ToolResponseEvent)
    @staticmethod
    def enriched(event: ToolResponseEvent, ctx: ActionContext) -> None:
        [response] = event.responses
        alert = ctx.sensory_memory.get("alert")
        if (response.tool_call_id or "").startswith("inv-"):  # the investigator's answer
            ctx.short_term_memory.set("dispatched", ctx.short_term_memory.get("dispatched", 0) + 1)
            ctx.send_event(OutputEvent(output={**alert, "dispatch": response.content}))
            return
        if response.metadata.get("is_error"):
            asked = ctx.sensory_memory.get("lookups", 1)
            if "busy" not in response.content or asked == 3:
                raise LookupError(f"device {alert['device']}: {response.content}")
            # The built-in tool action has no retry policy: the request is sent again.
            ctx.sensory_memory.set("lookups", asked + 1)
            lookup = ToolCall(
                id=f"info-{alert['seq']}-{asked}",
                name="device_info",
                arguments=json.dumps({"device": alert["device"]}),
            )
            ctx.send_event(ToolRequestEvent(tool_calls=[lookup], tools=["device_info"]))
            return
        prompt = json.dumps({"alert": alert, "device": json.loads(response.content)})
        messages = [
            Message.system("Classify the alert: low, high or critical."),
            Message.user(prompt),
        ]
        ctx.send_event(ChatRequestEvent(model="classifier", messages=messages))

    @action(ChatResponseEvent)
    @staticmethod
    def classified(event: ChatResponseEvent, ctx: ActionContext) -> None:
        severity = json.loads(event.response.content)["severity"]
        alert = ctx.sensory_memory.get("alert")
        memory = ctx.short_term_memory
        previous = memory.get("last_seq")
        count = memory.get("count", 0) + 1
        memory.set("count", count)
        memory.set("last_seq", alert["seq"])
        memory.set(f"severity.{severity}", memory.get(f"severity.{severity}", 0) + 1)
        if severity == "critical":  # investigated first (it pauses), then published
            request = json.dumps({"request": json.dumps(alert)})
            call = ToolCall(id=f"inv-{alert['seq']}", name="investigator", arguments=request)
            ctx.send_event(ToolRequestEvent(tool_calls=[call], tools=["investigator"]))
        ctx.send_event(
            Scored(
                device=alert["device"],
                seq=alert["seq"],
                severity=severity,
                count=count,
                previous=previous,
            )
        )

    @action(Scored, retry=RetryPolicy(max_attempts=3, initial_delay=0.001, jitter=False))
    @staticmethod
    def publish(event: Scored, ctx: ActionContext) -> None:
        SINK.write(event.device, event.seq)
        ctx.send_event(OutputEvent(output=event.model_dump(exclude={"id"})))


DISPATCHED: list[str] = []


@adk.tool(require_approval=True)
def dispatch_technician(device: str, reason: str) -> str:
    """Send a technician to a device; a person approves every dispatch.

    Args:
        device: The device to visit.
        reason: Why, in a few words.
    """
    DISPATCHED.append(device)
    return f"technician sent to {device} ({reason}) by process {os.getpid()}"


def build_resources(model_url: str) -> Resources:
    """The same resources in every process: the registry's MCP server, the classifier and the
    investigator over the wire server at ``model_url``."""
    from prebuilt import ReActAgent

    def model() -> OpenAIChatModel:
        retry = RetryPolicy(max_attempts=3, initial_delay=0.001, jitter=False)
        return OpenAIChatModel("gpt-test", base_url=model_url, api_key="sk-test", retry=retry)

    investigator = ReActAgent(
        "investigator",
        model(),
        instruction="Investigate the critical alert; dispatch a technician when it is real.",
        tools=[dispatch_technician],
        description="Investigates a critical alert and dispatches a technician.",
    )
    resources = Resources()
    resources.add_mcp("devices", StdioServer(sys.executable, [str(DEVICES_SERVER)]))
    resources.add_model("classifier", model())
    resources.add_tool(AgentTool(investigator))
    return resources


class SqliteSessions:
    """Each device's session values as JSON in SQLite (``adk.execution.SessionStore``), so
    another process resumes on the memory the first one left."""

    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(path)
        self.db.execute("CREATE TABLE IF NOT EXISTS sessions (key TEXT PRIMARY KEY, data TEXT)")

    async def get(self, key: Hashable) -> dict[str, Any] | None:
        row = self.db.execute("SELECT data FROM sessions WHERE key = ?", (str(key),)).fetchone()
        return None if row is None else from_json_value(json.loads(row[0]))

    async def put(self, key: Hashable, values: dict[str, Any]) -> None:
        data = json.dumps(to_json_value(values, f"session of {key!r}"))
        self.db.execute("INSERT OR REPLACE INTO sessions VALUES (?, ?)", (str(key), data))
        self.db.commit()

    def memory(self) -> dict[str, Any]:
        rows = self.db.execute("SELECT key, data FROM sessions").fetchall()
        return {key: json.loads(data)["memory:monitor"] for key, data in rows}


# -- the model on the wire --------------------------------------------------------------------------


class Classifier:
    """What the wire server answers: a severity for a classification, tool calls then an answer
    for the investigator. The first request about an alert whose seq is 5 mod 40 is a 503."""

    def __init__(self, stall: Collection[tuple[str, int]] = ()) -> None:
        self.asked: Counter[tuple[str, int]] = Counter()
        self.unavailable = 0
        self.stall = set(stall)

    def __call__(self, body: Any) -> Wire:
        messages = body["messages"]
        if body.get("tools"):  # the investigator
            if messages[-1]["role"] == "tool":
                return Wire(text=f"dispatched: {messages[-1]['content']}")
            alert = json.loads(messages[-1]["content"])
            reason = json.dumps(
                {"device": alert["device"], "reason": f"{alert['metric']} {alert['value']}"}
            )
            return Wire(tool_calls=[Call("dispatch_technician", reason)])
        asked = json.loads(messages[-1]["content"])
        alert, device = asked["alert"], asked["device"]
        place = (alert["device"], alert["seq"])
        self.asked[place] += 1
        if place in self.stall:
            return Wire(text="{}", delay=60.0)  # a server that stops answering
        if alert["seq"] % 40 == 5 and self.asked[place] == 1:
            self.unavailable += 1
            return Wire(status=503, error="overloaded, try again")
        value = alert["value"]
        severity = (
            "critical" if value >= CRITICAL else "high" if value >= device["limit"] else "low"
        )
        return Wire(text=json.dumps({"severity": severity}))


def canonical(outputs: list[KeyedOutput]) -> list[tuple[Any, ...]]:
    """What must be the same however the keys interleave: each output but its run's ids."""
    return [
        (
            o.index,
            o.key,
            o.output,
            None if o.error is None else str(o.error),
            None if o.interrupt is None else [p.info for p in o.interrupt.points],
        )
        for o in sorted(outputs, key=lambda o: o.index)
    ]


def monitor_env(model_url: str, files: Path, **options: Any) -> LocalExecutionEnvironment:
    """The environment of every process: the same resources, the checkpoints in ``files``."""
    store = SQLiteCheckpointStore(str(files / "checkpoints.db"))
    return LocalExecutionEnvironment(
        on_error="emit", resources=build_resources(model_url), checkpoint_store=store, **options
    )


async def run_file(
    env: LocalExecutionEnvironment, path: Path, sessions: Any
) -> tuple[list[KeyedOutput], float]:
    """Every line of ``path`` through ``Monitor``, as ``open`` reads it; the outputs in the
    order they came, and the seconds it took."""
    with path.open() as lines:
        outputs = env.from_list(lines, key=device_of).apply(Monitor("monitor"), sessions=sessions)
        started = time.perf_counter()
        got = [output async for output in outputs]
        return got, time.perf_counter() - started


# -- the trial --------------------------------------------------------------------------------------


async def test_a_jsonl_file_of_alerts_runs_keyed_with_failures_apart_and_resumes_elsewhere(
    tmp_path: Path,
) -> None:
    lines = write_alerts(tmp_path / "alerts.jsonl")
    SINK.__init__()  # type: ignore[misc]
    DISPATCHED.clear()
    plan = AgentPlan.compile(Monitor("monitor")).to_dict()
    assert plan["actions_by_event"][f"{__name__}.Scored"] == ["publish"]
    assert plan["actions"]["publish"]["retry"]["max_attempts"] == 3

    classifier = Classifier()
    async with OpenAIServer(respond=classifier) as server:
        env = monitor_env(server.base_url, tmp_path, max_concurrency=16)
        sessions = SqliteSessions(tmp_path / "sessions.db")
        got, seconds = await run_file(env, tmp_path / "alerts.jsonl", sessions)
        await env.resources.aclose()
        print(f"\n{len(lines)} records in {seconds:.2f} s: {len(lines) / seconds:.0f} records/s")

        # One output per line, each line's once; a key's outputs come in its lines' order.
        assert sorted(o.index for o in got) == list(range(len(lines)))
        by_key: dict[Hashable, list[int]] = defaultdict(list)
        for o in got:
            by_key[o.key].append(o.index)
        assert all(indexes == sorted(indexes) for indexes in by_key.values())

        # The lines that are not JSON fail at their key, with the line kept on the output.
        broken = [n for n, line in enumerate(lines) if not line.endswith("}")]
        failed = {o.index: o for o in got if o.error is not None}
        assert len(broken) == 8 and all(failed[n].key is None for n in broken)
        assert all(failed[n].record == lines[n] + "\n" for n in broken)
        assert {failed[n].error.type for n in broken} == {"JSONDecodeError"}  # type: ignore[union-attr]
        assert "the key function failed on it" in str(failed[broken[0]].error)
        # A bad field fails its record in the parse action, under its device; so does a device
        # the registry (the MCP server) does not know.
        bad = {n: str(o.error) for n, o in failed.items() if n not in broken}
        assert sorted(bad) == [40, 60, 120, 160, 190]
        assert "action 'parse'" in bad[60] and "Field required" in bad[60]
        assert "unable to parse string as a number" in bad[120]
        assert "no device d99 in the registry" in bad[40] and failed[40].key == "d99"

        # The model was unavailable for some alerts at first; its retries took them all.
        assert classifier.unavailable > 5
        assert all(classifier.asked[place] == 2 for place in classifier.asked if place[1] % 40 == 5)
        # The sink dropped some writes; the action's retries wrote each alert once.
        published = [o.output for o in got if isinstance(o.output, dict)]
        assert SINK.drops > 5 and len(SINK.rows) == len(set(SINK.rows)) == len(published)

        # Per-device memory: counts, and each alert saw the one before it of its device.
        valid: dict[str, list[int]] = defaultdict(list)
        for n, line in enumerate(lines):
            if n not in failed:
                alert = json.loads(line)
                valid[alert["device"]].append(alert["seq"])
        for output in published:
            seqs = valid[output["device"]]
            place = seqs.index(output["seq"])
            assert output["previous"] == (seqs[place - 1] if place else None)
            assert output["count"] == place + 1
        memory = sessions.memory()
        assert {device: memory[device]["count"] for device in memory} == {
            device: len(seqs) for device, seqs in valid.items()
        }

        # d07's first alert met a busy registry (an error result) and asked again: it went on.
        first_d07 = min(o.index for o in got if o.key == "d07")
        assert first_d07 not in failed and memory["d07"]["count"] == len(valid["d07"])

        # Three critical alerts pause in the investigator, for a person to approve.
        paused = [o for o in got if o.interrupt is not None]
        assert [o.index for o in paused] == [50, 150, 250] and not DISPATCHED
        for o in paused:
            [point] = o.interrupt.points  # type: ignore[union-attr]
            assert "/tool:investigator#inv-" in point.id and point.id.endswith(
                "/agent:investigator/tool:dispatch_technician#call_0"
            )
            assert point.info["arguments"]["device"] == o.key

        # The file's first 60 lines again, fewer keys at a time, over fresh stores: the same
        # outputs as those lines had (a line's outputs depend on its key's lines before it only).
        SINK.__init__()  # type: ignore[misc]
        (tmp_path / "again").mkdir()
        (tmp_path / "again" / "alerts.jsonl").write_text(
            "".join(f"{line}\n" for line in lines[:60])
        )
        again_env = monitor_env(server.base_url, tmp_path / "again", max_concurrency=3)
        again, _ = await run_file(again_env, tmp_path / "again" / "alerts.jsonl", {})
        await again_env.resources.aclose()
        assert canonical(again) == [o for o in canonical(got) if o[0] < 60]

        # Later, another process approves two dispatches and refuses one.
        approvals = [
            {
                "key": o.key,
                "checkpoint_id": o.checkpoint_id,
                "run_id": o.run_id,
                "resume": o.index != 150,
            }
            for o in paused
        ]
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            server.base_url,
            str(tmp_path),
            json.dumps(approvals),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(HERE.parent)},  # this checkout's adk
        )
        out, err = await child.communicate()
    assert child.returncode == 0, err.decode()
    resumed = json.loads(out)
    assert not DISPATCHED  # nothing ran here
    # Each resume goes on under its paused run: the alert published (its Scored event was queued
    # behind the pause: saved as test_app_alerts.Scored and taken by this process's
    # __main__.Scored), then the investigator's answer, which the tool round sends as it ends.
    assert [r["run_id"] for r in resumed] == [o.run_id for o in paused for _ in (0, 1)]
    assert all(r["resumed"] and r["error"] is None for r in resumed), resumed
    sent = [r["output"]["dispatch"] for r in resumed[1::2]]
    assert sent[0].startswith("dispatched: technician sent to d03 (")
    assert f"by process {child.pid}" in sent[0] and f"by process {child.pid}" in sent[2]
    assert "technician sent" not in sent[1]  # refused: the tool did not run
    critical = [r["output"] for r in resumed[::2]]
    assert [(c["device"], c["severity"]) for c in critical] == [
        ("d03", "critical"),
        ("d11", "critical"),
        ("d11", "critical"),
    ]
    # The resumes ran on each device's memory as the later records left it, and kept theirs.
    memory = sessions.memory()
    assert memory["d03"]["dispatched"] == 1 and memory["d11"]["dispatched"] == 2
    assert memory["d11"]["count"] == len(valid["d11"])
    assert memory["d11"]["severity"]["critical"] == 2
    # Each pause is over: its checkpoint deleted.
    store = SQLiteCheckpointStore(str(tmp_path / "checkpoints.db"))
    assert [cp async for cp in store.ids()] == []


def alert_line(device: str, seq: int) -> str:
    return json.dumps({"device": device, "seq": seq, "metric": "temp", "value": 50.0 + seq % 30})


async def test_a_stalled_model_times_its_record_out_and_the_rest_go_on(tmp_path: Path) -> None:
    lines = [alert_line(f"d0{n % 4}", 1 + n // 4) for n in range(24)]
    classifier = Classifier(stall={("d01", 2)})
    async with OpenAIServer(respond=classifier) as server:
        env = monitor_env(server.base_url, tmp_path, max_concurrency=8, timeout=3.0)
        await env.resources.get_tool("device_info")  # the server started outside any record
        outputs = env.from_list(lines, key=device_of).apply(Monitor("monitor"))
        got = await outputs.to_list()
        await env.resources.aclose()
        assert server.hangups == 1  # the stalled request was given up, its connection closed
    [late] = [o for o in got if o.error is not None]
    assert (late.key, late.index, late.error.type) == ("d01", 5, "TimeoutError")  # type: ignore[union-attr]
    assert "timeout=3.0s" in late.error.message  # type: ignore[union-attr]
    d01 = [o.output for o in got if o.key == "d01" and o.error is None]
    # The timed-out record's memory writes are dropped: the next alert follows the one before.
    assert [(o["seq"], o["previous"], o["count"]) for o in d01] == [
        (1, None, 1),
        *((seq, seq - 1 if seq > 3 else 1, seq - 1) for seq in range(3, 7)),
    ]
    assert outputs.sessions["d01"]["memory:monitor"]["count"] == 5


async def test_closing_the_outputs_mid_stream_stops_the_source_and_cancels_running_records(
    tmp_path: Path,
) -> None:
    read = 0

    async def endless() -> AsyncIterator[str]:
        nonlocal read
        for n in range(100_000):
            read += 1
            yield alert_line(f"d{n % 12:02d}", 1 + n // 12)

    classifier = Classifier(stall={("d00", 3)})  # d00's third alert hangs in the model
    async with OpenAIServer(respond=classifier) as server:
        env = monitor_env(server.base_url, tmp_path, max_concurrency=4)
        outputs = env.from_list(endless(), key=device_of).apply(Monitor("monitor"))
        taken = []
        async with outputs:
            async for output in outputs:
                taken.append(output)
                if len(taken) == 40:
                    break
        was_read = read
        await asyncio.sleep(0.05)
        assert read == was_read <= 40 + 5 * 4  # taken, and at most the buffers' worth ahead
        assert server.hangups == 1  # the hanging call was cancelled with its record
        await env.resources.aclose()
    assert all(o.error is None for o in taken)
    assert ("d00", 3) not in {(o.output["device"], o.output["seq"]) for o in taken}
    # What ended committed; the cancelled record did not.
    assert outputs.sessions["d00"]["memory:monitor"]["count"] == 2
    committed = sum(s["memory:monitor"]["count"] for s in outputs.sessions.values())
    assert len(taken) <= committed <= was_read - 1


async def resume_elsewhere(model_url: str, files: Path, approvals: list[dict[str, Any]]) -> None:
    """The other process: the same agent over the same files, the approvals as resumes."""
    env = monitor_env(model_url, files)
    outputs = env.from_list([], key=device_of).apply(
        Monitor("monitor"), sessions=SqliteSessions(files / "sessions.db"), resumes=approvals
    )
    got = await outputs.to_list()
    await env.resources.aclose()
    shown = [
        {
            "key": o.key,
            "run_id": o.run_id,
            "resumed": o.resumed,
            "output": o.output,
            "error": None if o.error is None else str(o.error),
        }
        for o in got
    ]
    print(json.dumps(shown))


if __name__ == "__main__":
    asyncio.run(resume_elsewhere(sys.argv[1], Path(sys.argv[2]), json.loads(sys.argv[3])))
