"""Fault injection helpers: representative agent trees whose every model call, tool call, custom
agent step and callback is an await point a fault can be injected at, stores that fail or cancel
on their N-th operation, and a watch for what a run must not leave behind.

The trees cover the composites: ``SequentialAgent``, ``ParallelAgent`` (with and without a
concurrency limit), ``LoopAgent`` ended by a break, transfers (a ``ReActAgent`` with sub-agents,
``with_sub_agents`` over a custom agent), ``AgentTool`` with ``emit_inner_events`` beside a quiet
one, a ``ReActAgent`` making concurrent calls to a tool needing approval and one raising
``Interrupt``, ``Supervisor``, ``PlanExecute``, ``ActionAgent`` leaves, and a loop of parallel
branches nesting all of it. Built with ``pause=True`` every tool call needs approval and every
custom agent asks a person first. Models answer from the conversation (no script position), so a
tree runs again, or resumes in a new runner, as often as a test likes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import warnings
import weakref
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from conftest import ChatActor

from adk import (
    Agent,
    AgentEvent,
    AgentInput,
    AgentTool,
    BaseAgent,
    Callbacks,
    Interrupt,
    LoopAgent,
    Message,
    ParallelAgent,
    Resources,
    Role,
    RunContext,
    Runner,
    SequentialAgent,
    ToolContext,
    tool,
    with_sub_agents,
)
from adk.checkpoint import _claim
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import (
    PlanExecute,
    ReActAgent,
    Supervisor,
    new_executor,
    new_planner,
    new_replanner,
)

APPROVE = {"approved": True}


class Faults:
    """Counts the await points of a run (``point``); at point ``at`` it raises ``error()``,
    raises ``CancelledError`` (something awaited was cancelled by someone else), or cancels the
    task reading the run (``reader``)."""

    def __init__(self) -> None:
        self.at = -1
        self.action = "raise"
        self.count = 0
        self.fired = False
        self.reader: asyncio.Task[Any] | None = None
        self.log: list[str] = []  # the work done, in order

    def arm(self, at: int, action: str) -> None:
        self.at, self.action, self.count, self.fired = at, action, 0, False

    async def point(self) -> None:
        self.count += 1
        await asyncio.sleep(0)
        if self.count != self.at:
            return
        self.fired = True
        if self.action == "raise":
            raise RuntimeError("injected fault")
        if self.action == "cancelled_error":
            raise asyncio.CancelledError()
        assert self.action == "cancel_reader" and self.reader is not None
        self.reader.cancel()
        await asyncio.sleep(0)


class FaultModel:
    """A chat model answering with ``respond(messages)``; every call (and, streamed, every chunk)
    passes a fault point."""

    def __init__(self, name: str, faults: Faults, respond: Callable[[list[Message]], Any]) -> None:
        self.model_name = f"model-{name}"
        self.supports_response_format = True
        self._inner = ScriptedModel(respond, record=False)
        self._faults = faults

    async def generate(self, messages: Any, *, tools: Any = (), options: Any = None) -> Message:
        await self._faults.point()
        return await self._inner.generate(messages, tools=tools, options=options)

    async def stream(self, messages: Any, *, tools: Any = (), options: Any = None) -> Any:
        await self._faults.point()
        chunks = self._inner.stream(messages, tools=tools, options=options)
        async with contextlib.aclosing(chunks):
            async for chunk in chunks:
                await self._faults.point()
                yield chunk


class FaultCallbacks(Callbacks):
    """Every agent, model and tool callback is a fault point; counts agents started and ended."""

    def __init__(self, faults: Faults) -> None:
        super().__init__()
        self.faults = faults
        self.open_agents: Counter[str] = Counter()

    async def before_agent(self, agent: Any, ctx: RunContext) -> None:
        await self.faults.point()
        self.open_agents[f"{ctx.address} {ctx.run_path}"] += 1

    async def after_agent(self, agent: Any, ctx: RunContext, error: Any) -> None:
        self.open_agents[f"{ctx.address} {ctx.run_path}"] -= 1
        await self.faults.point()

    async def before_model(self, ctx: RunContext, request: Any) -> None:
        await self.faults.point()

    async def after_model(self, ctx: RunContext, request: Any, reply: Any) -> None:
        await self.faults.point()

    async def before_tool(self, ctx: ToolContext, call: Any) -> None:
        await self.faults.point()

    async def after_tool(self, ctx: ToolContext, call: Any, result: Any) -> None:
        await self.faults.point()


# -- trees --------------------------------------------------------------------------------------


def _work(faults: Faults, approval: bool) -> Any:
    @tool(name="work", require_approval=approval)
    async def work(tag: str) -> str:
        """Do one agent's work."""
        await faults.point()
        faults.log.append(tag)
        return f"worked {tag}"

    return work


def _gate(faults: Faults, pause: bool) -> Any:
    @tool
    async def gate(tag: str, ctx: ToolContext) -> str:
        """Ask a person before going on."""
        await faults.point()
        if pause and ctx.resume is None:
            raise Interrupt(f"gate {tag}?", state={"tag": tag})
        faults.log.append(f"gate {tag}")
        return f"gate {tag} passed"

    return gate


def _calls_then_answers(name: str, calls: list[tuple[str, dict[str, Any]]]) -> Any:
    def reply(messages: list[Message]) -> Reply:
        if messages[-1].role == Role.TOOL:
            return Reply(text=f"{name} done")
        return Reply(
            tool_calls=[tool_call(t, a, id=f"{name}_{i}") for i, (t, a) in enumerate(calls)]
        )

    return reply


def react(name: str, f: Faults, pause: bool, calls: int = 1, gate: bool = False) -> ReActAgent:
    tools = [_work(f, pause)]
    planned = [("work", {"tag": f"{name}.{i}"}) for i in range(calls)]
    if gate:
        tools.append(_gate(f, pause))
        planned.append(("gate", {"tag": name}))
    model = FaultModel(name, f, _calls_then_answers(name, planned))
    return ReActAgent(name, model, tools=tools, description=name, output_key=f"out_{name}")


class Asker(BaseAgent):
    """Asks a person first (when ``asks``), then records the answer in the session."""

    def __init__(self, name: str, faults: Faults, asks: bool) -> None:
        super().__init__(name, description=name)
        self.faults = faults
        self.asks = asks

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        await self.faults.point()
        if self.asks and ctx.resume is None:
            yield ctx.interrupt(f"{self.name}: may I?", state={"asked": True})
            return
        self.faults.log.append(self.name)
        ctx.session[f"asked_{self.name}"] = ctx.resume is None or ctx.resume.data == APPROVE
        yield AgentEvent.of(f"{self.name} done")


class Breaker(BaseAgent):
    """Breaks the enclosing loop on its second run."""

    def __init__(self, name: str, faults: Faults) -> None:
        super().__init__(name, description=name)
        self.faults = faults

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        await self.faults.point()
        runs = ctx.session["breaker_runs"] = ctx.session.get("breaker_runs", 0) + 1
        self.faults.log.append(f"{self.name} #{runs}")
        yield AgentEvent.of(f"{self.name} run {runs}")
        if runs >= 2:
            yield AgentEvent.break_loop()


def actor(name: str, f: Faults, pause: bool) -> Agent:
    resources = Resources()
    model = FaultModel(name, f, _calls_then_answers(name, [("work", {"tag": name})]))
    resources.add_model("model", model)
    resources.add_tool(_work(f, pause))
    return ChatActor(
        name, ["work"], model="model", prompt="go", description=name, resources=resources
    )


def _transfer(target: str) -> Reply:
    return Reply(
        tool_calls=[tool_call("transfer_to_agent", {"agent_name": target}, id=f"to_{target}")]
    )


def _router(f: Faults, p: bool) -> Agent:
    def route(messages: list[Message]) -> Reply:
        if any("x done" in m.content for m in messages):
            return Reply(text="router done")
        return _transfer("x")

    return ReActAgent(
        "router", FaultModel("router", f, route), sub_agents=[react("x", f, p)], description="r"
    )


def _handover(f: Faults, p: bool) -> Agent:
    class HandOver(BaseAgent):
        async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            await f.point()
            yield AgentEvent.of("handing over")
            yield AgentEvent.transfer("sub")

    sub = SequentialAgent("sub", [react("s1", f, p), Asker("ask", f, p)], description="sub")
    return with_sub_agents(HandOver("handover", description="hands over"), [sub])


def _agent_tool(f: Faults, p: bool) -> Agent:
    inner = SequentialAgent("inner", [react("i1", f, p), react("i2", f, p)], description="inner")
    planned = [("inner", {"request": "go"}), ("quiet", {"request": "go"})]
    return ReActAgent(
        "caller",
        FaultModel("caller", f, _calls_then_answers("caller", planned)),
        tools=[AgentTool(inner, emit_inner_events=True), AgentTool(react("quiet", f, p))],
        description="caller",
        output_key="out_caller",
    )


def _supervisor(f: Faults, p: bool) -> Agent:
    def supervise(messages: list[Message]) -> Reply:
        said = " ".join(m.content for m in messages)
        if "w2 done" in said:
            return Reply(text="supervisor done")
        return _transfer("w2" if "w1 done" in said else "w1")

    boss = ReActAgent("boss", FaultModel("boss", f, supervise), description="boss")
    return Supervisor(boss, [react("w1", f, p), react("w2", f, p)])


def _plan_execute(f: Faults, p: bool) -> Agent:
    plan = json.dumps({"steps": ["s1", "s2"]})
    planner = new_planner(FaultModel("planner", f, lambda messages: Reply(text=plan)))

    def execute(messages: list[Message]) -> Reply:
        if messages[-1].role == Role.TOOL:
            return Reply(text="step done")
        step = messages[-1].content.rsplit("\n", 1)[-1]
        return Reply(tool_calls=[tool_call("work", {"tag": f"exec {step}"}, id="e1")])

    def replan(messages: list[Message]) -> Reply:
        done = "Remaining plan:\n(no steps)" in messages[-1].content
        return Reply(text="all done" if done else "")

    executor = new_executor(FaultModel("executor", f, execute), [_work(f, p)])
    replanner = new_replanner(FaultModel("replanner", f, replan))
    return PlanExecute(planner, executor, replanner, max_iterations=4)


def _nested(f: Faults, p: bool) -> Agent:
    branch = SequentialAgent("branch", [react("n1", f, p), Asker("nask", f, p)])
    inner = SequentialAgent(
        "nin",
        [ParallelAgent("ninp", [react("n2", f, p), react("n3", f, p)]), Asker("nsum", f, False)],
        description="nin",
    )
    caller = ReActAgent(
        "ncaller",
        FaultModel("ncaller", f, _calls_then_answers("ncaller", [("nin", {"request": "go"})])),
        tools=[AgentTool(inner, emit_inner_events=True)],
        description="ncaller",
    )
    loop = LoopAgent("nloop", [ParallelAgent("npar", [branch, caller])], max_iterations=2)
    return _then_end(f, loop)


def _then_end(f: Faults, agent: Agent) -> Agent:
    """``agent``, then a last word: a run's answer is its last message, which for parallel
    branches depends on which finishes last."""
    return SequentialAgent(f"{agent.name}_then", [agent, Asker("end", f, False)])


TREES: dict[str, Callable[[Faults, bool], Agent]] = {
    "sequence": lambda f, p: SequentialAgent(
        "seq", [react("a", f, p), Asker("ask", f, p), react("b", f, p)]
    ),
    "parallel": lambda f, p: _then_end(
        f, ParallelAgent("par", [react("a", f, p, calls=2), react("b", f, p), Asker("ask", f, p)])
    ),
    "parallel_limited": lambda f, p: _then_end(
        f,
        ParallelAgent(
            "parl", [react("a", f, p), react("b", f, p), react("c", f, p)], max_concurrency=1
        ),
    ),
    "loop": lambda f, p: LoopAgent("loop", [react("a", f, p), Breaker("brk", f)], max_iterations=3),
    "transfer": _router,
    "with_sub_agents": _handover,
    "agent_tool": _agent_tool,
    "react": lambda f, p: react("r", f, p, calls=3, gate=True),
    "supervisor": _supervisor,
    "plan_execute": _plan_execute,
    "actions": lambda f, p: SequentialAgent(
        "acts",
        [
            actor("act1", f, p),
            ParallelAgent("pa", [actor("act2", f, p), react("r2", f, p)]),
            Asker("end", f, False),
        ],
    ),
    "nested": _nested,
}


# -- outcomes -----------------------------------------------------------------------------------


def said(events: list[AgentEvent]) -> list[str]:
    """What the agents said (streams as collected by the reader, if they were)."""
    found = []
    for event in events:
        output = event.output
        if output is None or output.role != Role.ASSISTANT:
            continue
        message = output.message
        if message is None and output.stream is not None and output.stream.done:
            message = output.stream._joined
        if message is not None and message.content:
            found.append(message.content)
    return found


def session_json(values: dict[str, Any]) -> str:
    return json.dumps(values, sort_keys=True, default=lambda v: v.model_dump())


@dataclass
class Outcome:
    """What a run did, from its first event to its end, over all its resumes."""

    work: Counter[str]
    text: str
    session: str
    said: Counter[str]


async def run_to_end(runner: Runner, faults: Faults, result: Any = None) -> Outcome:
    """Run (or go on from ``result``), approving every pause, to the end."""
    spoken: list[str] = []
    if result is None:
        result = await runner.invoke("go")
    spoken += said(result.events)
    while result.interrupt is not None:
        approvals = dict.fromkeys(result.interrupt.point_ids, APPROVE)
        result = await runner.invoke_resume(result.checkpoint_id, approvals)
        spoken += said(result.events)
    values = session_json(result.session.values)
    return Outcome(Counter(faults.log), result.text, values, Counter(spoken))


async def read_all(events: Any, sink: list[AgentEvent]) -> None:
    """Read a run to its end, streams included, as a consumer would."""
    async with contextlib.aclosing(events) as iterator:
        async for event in iterator:
            stream = event.output.stream if event.output is not None else None
            if stream is not None:
                with contextlib.suppress(Exception):  # its failure is the run's error event
                    await stream.collect()
            sink.append(event)


async def cancel_from(reader: asyncio.Task[Any], steps: int, again: bool) -> None:
    """Cancel ``reader`` after ``steps`` loop steps; with ``again``, at every step after that
    until it ends, as anyio's cancel scopes do."""
    for _ in range(steps):
        await asyncio.sleep(0)
    reader.cancel()
    while again and not reader.done():
        await asyncio.sleep(0)
        reader.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await reader


class Watch:
    """What a stretch of a test must not leave behind: tasks, async generators not closed (left
    to the garbage collector), errors the loop logged, exceptions nobody could raise, warnings
    (a coroutine never awaited), the in-process resume guard."""

    def __init__(self) -> None:
        self.generators: weakref.WeakSet[Any] = weakref.WeakSet()
        self.finalized: list[str] = []
        self.loop_errors: list[str] = []
        self.unraisable: list[str] = []

    def __enter__(self) -> Watch:
        loop = asyncio.get_running_loop()
        old = self._hooks = sys.get_asyncgen_hooks()

        def firstiter(generator: Any) -> None:
            self.generators.add(generator)
            if old.firstiter is not None:
                old.firstiter(generator)

        def finalizer(generator: Any) -> None:
            self.finalized.append(generator.__qualname__)
            if old.finalizer is not None:
                old.finalizer(generator)

        sys.set_asyncgen_hooks(firstiter=firstiter, finalizer=finalizer)
        self._handler = loop.get_exception_handler()
        loop.set_exception_handler(lambda _, context: self.loop_errors.append(str(context)))
        self._unraisable = sys.unraisablehook
        sys.unraisablehook = lambda u: self.unraisable.append(f"{u.exc_value!r} in {u.object!r}")
        self._warnings = warnings.catch_warnings(record=True)
        self.warned = self._warnings.__enter__()
        warnings.simplefilter("always")
        return self

    def __exit__(self, *exc: object) -> None:
        sys.set_asyncgen_hooks(*self._hooks)
        asyncio.get_running_loop().set_exception_handler(self._handler)
        sys.unraisablehook = self._unraisable
        self._warnings.__exit__(*exc)

    def problems(self) -> list[str]:
        found = []
        current = asyncio.current_task()
        tasks = [t for t in asyncio.all_tasks() if t is not current]
        if tasks:
            found.append(f"tasks left running: {tasks}")
        open_generators = [g.__qualname__ for g in list(self.generators) if g.ag_frame is not None]
        if open_generators:
            found.append(f"async generators not closed: {open_generators}")
        if _claim._RESUMING:
            found.append(f"resume guard not released: {_claim._RESUMING}")
        # No gc.collect(): a generator dropped in a reference cycle is still alive, and so
        # reported above as not closed (and a collection per example costs more than the run).
        if self.finalized:
            found.append(f"async generators left to the garbage collector: {self.finalized}")
        if self.loop_errors or self.unraisable:
            found.append(f"logged by the loop: {self.loop_errors} {self.unraisable}")
        warned = [str(w.message) for w in self.warned if issubclass(w.category, RuntimeWarning)]
        if warned:
            found.append(f"warnings: {warned}")
        return found


def expect_clean(watch: Watch, where: str) -> None:
    problems = watch.problems()
    assert not problems, f"{where}: {problems}"
