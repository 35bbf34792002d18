"""``ReActAgent``: call the model; run the tools it asks for, concurrently; repeat until it answers.

Events: one assistant event per model call (a stream when the run streams), one tool event per
result in completion order, return-directly results after the others, and any action tools asked
for (exit, transfer, loop break) as one action event after the round. On a tool interrupt the agent
saves its conversation and which calls are still open; on resume only those run again.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from adk import (
    AgentAction,
    AgentEvent,
    AgentInput,
    AgentOutput,
    ChatModel,
    FlowAgent,
    FunctionTool,
    HistoryRewriter,
    Message,
    ModelOptions,
    RunContext,
    Tool,
    ToolContext,
    ToolResult,
    ToolSpec,
)
from adk.history import build_messages
from adk.interrupts import _InterruptSignal
from adk.models import _call
from adk.tools._executor import ToolOutcome, execute_tool_calls

from ._instruction import render_instruction

__all__ = ["ReActAgent"]

ToolSource = Tool | Callable[..., Any] | str | Any  # a Tool, a function, a resource name, a Toolset
_FENCE = re.compile(r"^\s*```[a-zA-Z0-9_-]*\s*\n(.*?)\n?\s*```\s*$", re.DOTALL)


class MaxIterationsError(RuntimeError):
    """The model kept calling tools past ``max_iterations`` model calls."""


class OutputSchemaError(ValueError):
    """The final answer did not match ``output_schema``, even after one retry."""


def _strip_fences(text: str) -> str:
    match = _FENCE.match(text)
    return match.group(1) if match else text.strip()


class _TransferTool:
    """``transfer_to_agent(agent_name)``: hand the conversation to another agent.

    The schema enumerates the valid targets and the description lists them; a wrong name is an
    error result the model can correct, not a crash.
    """

    def __init__(self, targets: Sequence[tuple[str, str]]) -> None:
        self._targets = {name for name, _ in targets}
        lines = "\n".join(f"- {name}: {desc or '(no description)'}" for name, desc in targets)
        self._spec = ToolSpec(
            name="transfer_to_agent",
            description="Transfer the conversation to another agent that is better suited to "
            f"answer. Available agents:\n{lines}",
            parameters={
                "type": "object",
                "properties": {
                    "agent_name": {"type": "string", "enum": sorted(self._targets)},
                },
                "required": ["agent_name"],
            },
        )

    @property
    def spec(self) -> ToolSpec:
        return self._spec

    async def run(self, arguments: str, ctx: ToolContext) -> str | ToolResult:
        try:
            name = json.loads(arguments or "{}").get("agent_name")
        except (ValueError, AttributeError):
            name = None
        if name not in self._targets:
            valid = ", ".join(sorted(self._targets))
            return ToolResult.error(f"unknown agent {name!r}; valid agents: {valid}")
        ctx.transfer(name)
        return f"Transferred to agent '{name}'"


def _exit(final_result: str, ctx: ToolContext) -> str:
    """End the whole run with a final result.

    Args:
        final_result: The final answer to return to the user.
    """
    ctx.exit()
    return final_result


def _merge_action(into: AgentAction | None, new: AgentAction | None) -> AgentAction | None:
    if new is None:
        return into
    if into is None:
        return AgentAction(new.exit, new.transfer_to, new.break_loop)
    into.exit = into.exit or new.exit
    into.transfer_to = new.transfer_to or into.transfer_to
    into.break_loop = into.break_loop or new.break_loop
    return into


class _RoundEnd:
    """Whether a tool round ended the agent (a return-directly result, exit or transfer)."""

    __slots__ = ("agent_done",)

    def __init__(self) -> None:
        self.agent_done = False


class _ReActCore:
    """The agent loop itself; ``ReActAgent`` puts it in a flow when it has agents to transfer to."""

    def __init__(self, owner: ReActAgent) -> None:
        self.owner = owner
        self.name = owner.name
        self.description = owner.description

    # -- setup --------------------------------------------------------------------------------
    async def _tools(self, ctx: RunContext) -> dict[str, Any]:
        owner = self.owner
        tools: dict[str, Any] = dict(owner._static_tools)
        for source in owner._dynamic_tools:
            if isinstance(source, str):
                resources = ctx._run.resources
                if resources is None:
                    raise LookupError(f"tool {source!r} named but the runner has no resources")
                found = [await resources.get_tool(source)]
            else:
                found = list(await source.tools(ctx))
            for item in found:
                name = item.spec.name
                if name in tools:
                    raise ValueError(f"agent '{self.name}': two tools are named {name!r}")
                tools[name] = item
        targets = owner._transfer_targets()
        if targets:
            tools["transfer_to_agent"] = _TransferTool(targets)
        return tools

    def _system(self, ctx: RunContext) -> list[Message]:
        owner = self.owner
        text = render_instruction(owner.instruction, ctx.session.values, self.name)
        if owner.output_schema is not None and not owner._native_schema:
            schema = json.dumps(owner.output_schema.model_json_schema())
            text = (
                f"{text}\n\nWhen you give your final answer, reply with only a JSON object "
                f"matching this JSON schema, without prose or code fences:\n{schema}"
            ).strip()
        return [Message.system(text)] if text else []

    def _input_messages(self, input: AgentInput, ctx: RunContext) -> list[Message]:
        rewriter = self.owner.history_rewriter
        if rewriter is not None:
            return build_messages(ctx, self.name, rewriter)
        return input.messages

    # -- running ------------------------------------------------------------------------------
    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        messages = [*self._system(ctx), *self._input_messages(input, ctx)]
        async for event in self._loop(ctx, messages, 0, None):
            yield event

    async def resume(self, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        resume = ctx.resume
        state = resume.state if resume is not None else None
        if not isinstance(state, dict):
            raise RuntimeError(f"agent '{self.name}': checkpoint has no saved ReAct state")
        async for event in self._loop(ctx, list(state["messages"]), state["iterations"], state):
            yield event

    async def _loop(
        self,
        ctx: RunContext,
        messages: list[Message],
        iterations: int,
        saved: dict[str, Any] | None,
    ) -> AsyncIterator[AgentEvent]:
        owner = self.owner
        tools = await self._tools(ctx)
        specs = [t.spec for t in tools.values()]
        schema_retry_used = False
        if saved is not None:
            assistant = next(m for m in reversed(messages) if m.tool_calls)
            open_ids = set(saved["open"])
            calls = [c for c in assistant.tool_calls if c.id in open_ids]
            held = list(saved.get("held", []))
            action = AgentAction(**saved["action"]) if saved.get("action") else None
            outcome = _RoundEnd()
            async for event in self._round(
                ctx, tools, messages, calls, iterations, held, action, outcome
            ):
                yield event
                if event.ends_agent:
                    return
            if outcome.agent_done:
                return
        while True:
            if iterations >= owner.max_iterations:
                raise MaxIterationsError(
                    f"agent '{self.name}' exceeds max iterations ({owner.max_iterations})"
                )
            iterations += 1
            if ctx.enable_streaming:
                stream = _call.stream(ctx, owner.model, messages, specs, owner._options)
                yield AgentEvent.streaming(stream)
                reply = await stream.collect()
            else:
                reply = await _call.generate(ctx, owner.model, messages, specs, owner._options)
                yield AgentEvent.of(reply)
            messages.append(reply)
            if not reply.tool_calls:
                if owner.output_schema is not None:
                    parsed, problem = self._parse_output(reply.content)
                    if problem is not None:
                        if schema_retry_used:
                            raise OutputSchemaError(
                                f"agent '{self.name}': answer does not match "
                                f"{owner.output_schema.__name__}: {problem}"
                            )
                        schema_retry_used = True
                        messages.append(Message.user(_schema_retry_prompt(problem)))
                        continue
                    self._store_output(ctx, reply.content)
                    yield AgentEvent(output=AgentOutput(custom=parsed))
                    return
                self._store_output(ctx, reply.content)
                return
            outcome = _RoundEnd()
            async for event in self._round(
                ctx, tools, messages, reply.tool_calls, iterations, [], None, outcome
            ):
                yield event
                if event.ends_agent:
                    return
            if outcome.agent_done:
                return

    async def _round(
        self,
        ctx: RunContext,
        tools: dict[str, Any],
        messages: list[Message],
        calls: Sequence[Any],
        iterations: int,
        held: list[Message],
        action: AgentAction | None,
        end: _RoundEnd,
    ) -> AsyncIterator[AgentEvent]:
        """Run one round of tool calls; afterwards ``end.agent_done`` says the agent is done."""
        direct = self.owner.return_directly
        signal: _InterruptSignal | None = None
        open_ids: list[str] = []
        async for item in execute_tool_calls(calls, tools, ctx):
            if isinstance(item, AgentEvent):
                yield item
                continue
            outcome: ToolOutcome = item
            if outcome.signal is not None:
                signal = signal or _InterruptSignal()
                signal.merge(outcome.signal)
                open_ids.append(outcome.call.id)
                action = _merge_action(action, outcome.action)
                continue
            assert outcome.message is not None
            messages.append(outcome.message)
            action = _merge_action(action, outcome.action)
            if outcome.call.name in direct and not outcome.message.metadata.get("is_error"):
                held.append(outcome.message)
            else:
                yield AgentEvent.of(outcome.message)
        if signal is not None:
            state = {
                "messages": messages,
                "iterations": iterations,
                "open": open_ids,
                "held": held,
                "action": _action_state(action),
            }
            signal.save(ctx.address, state)
            yield AgentEvent(action=AgentAction(interrupted=signal.info()), _signal=signal)
            return
        if held:
            order = {c.id: i for i, c in enumerate(calls)}
            held.sort(key=lambda m: order.get(m.tool_call_id or "", -1))
            for message in held:
                yield AgentEvent.of(message)
            self._store_output(ctx, held[-1].content)
        if action is not None and (action.exit or action.transfer_to or action.break_loop):
            yield AgentEvent(action=action)
        end.agent_done = bool(held) or (
            action is not None and bool(action.exit or action.transfer_to)
        )

    def _parse_output(self, text: str) -> tuple[Any, str | None]:
        schema = self.owner.output_schema
        assert schema is not None
        try:
            return schema.model_validate_json(_strip_fences(text)), None
        except ValidationError as exc:
            return None, str(exc)

    def _store_output(self, ctx: RunContext, text: str) -> None:
        key = self.owner.output_key
        if key:
            ctx.session[key] = text


def _schema_retry_prompt(problem: str) -> str:
    return (
        "Your previous answer did not match the required JSON schema:\n"
        f"{problem}\nReply again with only the corrected JSON object."
    )


def _action_state(action: AgentAction | None) -> dict[str, Any] | None:
    if action is None:
        return None
    return {"exit": action.exit, "transfer_to": action.transfer_to, "break_loop": action.break_loop}


class ReActAgent:
    """A model-and-tools agent (see the module docstring); parameters as in DESIGN.md."""

    def __init__(
        self,
        name: str,
        model: ChatModel,
        instruction: str = "",
        description: str = "",
        tools: Iterable[ToolSource] = (),
        max_iterations: int = 20,
        return_directly: Iterable[str] = (),
        output_key: str | None = None,
        output_schema: type[BaseModel] | None = None,
        sub_agents: Iterable[Any] = (),
        exit_tool: bool = False,
        model_options: ModelOptions | None = None,
        history_rewriter: HistoryRewriter | None = None,
    ) -> None:
        if not name:
            raise ValueError("a ReActAgent needs a non-empty name")
        if max_iterations < 1:
            raise ValueError("max_iterations must be at least 1")
        self.name = name
        self.description = description
        self.model = model
        self.instruction = instruction
        self.max_iterations = max_iterations
        self.return_directly = frozenset(return_directly)
        self.output_key = output_key
        self.output_schema = output_schema
        self.history_rewriter = history_rewriter
        self._static_tools: dict[str, Any] = {}
        self._dynamic_tools: list[Any] = []
        for source in tools:
            self._add_tool(source)
        if exit_tool:
            self._add_tool(FunctionTool(_exit, name="exit"))
        self._native_schema = output_schema is not None and bool(
            getattr(model, "supports_response_format", False)
        )
        self._options = model_options
        if self._native_schema and output_schema is not None:
            response_format = {
                "name": output_schema.__name__,
                "schema": output_schema.model_json_schema(),
            }
            native = ModelOptions(response_format=response_format)
            self._options = (model_options or ModelOptions()).merged(native)
        self._core = _ReActCore(self)
        self._adk_flow = FlowAgent(self._core, sub_agents, history_rewriter=history_rewriter)

    def _add_tool(self, source: ToolSource) -> None:
        if isinstance(source, str) or (hasattr(source, "tools") and not hasattr(source, "spec")):
            self._dynamic_tools.append(source)
            return
        tool = source if hasattr(source, "spec") else FunctionTool(source)
        name = tool.spec.name
        if name in self._static_tools:
            raise ValueError(f"agent '{self.name}': two tools are named {name!r}")
        self._static_tools[name] = tool

    def _transfer_targets(self) -> list[tuple[str, str]]:
        flow = self._adk_flow
        targets = [(node.name, node.description) for node in flow.sub_agents]
        parent = flow.parent
        if parent is not None and flow.may_transfer_to_parent:
            targets.append((parent.name, parent.description))
        return targets

    @property
    def sub_agents(self) -> list[Any]:
        return [node.agent for node in self._adk_flow.sub_agents]

    def _uses_flow(self) -> bool:
        flow = self._adk_flow
        return bool(flow.sub_agents) or flow.parent is not None

    def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        if self._uses_flow():
            return self._adk_flow.run(input, ctx)
        return self._core.run(input, ctx)

    def resume(self, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        if self._uses_flow():
            return self._adk_flow.resume(ctx)
        return self._core.resume(ctx)

    def __repr__(self) -> str:
        return f"ReActAgent(name={self.name!r}, tools={sorted(self._static_tools)})"
