"""Transfer between agents: ``with_sub_agents`` and the flow that acts on ``transfer_to``.

A flow drives its whole graph of reachable agents iteratively: when the running agent ends with a
transfer, the flow looks the target up among that agent's sub-agents, then its parent, and runs it
next with input rebuilt from history. Run paths nest along the chain (``[A, B, A, C]``); addresses do
not: the flow's root agent sits at the flow's address and every other agent one level below it, so a
point id stays short and stable however long the chain. The flow saves which agent was running and
its run path; on resume the chain is not re-run, the interrupted agent resumes.
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from ._aio import closing
from ._authors import Author, authors, check_authors
from ._checks import check_agent, check_agents, check_count, checked_settings
from ._driver import NO_EVENT, drive, refuse_fresh_start
from ._turns_left import count_ahead, first_askers, first_calls, turns_limit
from .agent import Agent, AgentInput
from .checkpoint._state import SavedState, _TurnsShort
from .checkpoint.codec import CheckpointError
from .context import RunContext
from .events import _TRANSFER_HANDLED, AgentEvent, ErrorInfo
from .history import HistoryRewriter, _check_rewriter, _is_history_view, build_input

if TYPE_CHECKING:
    from ._preflight import Preflight

__all__ = ["FlowAgent", "with_sub_agents"]

_FLOW_SLOT = "flow"


_UNCOUNTED = 4
"""The enclosing flows ``history_rewriter`` reads before it keeps count of those it has read:
a graph's usual depth, read without a set made per run and transfer."""


def _set_max_transfers(flow: FlowAgent, value: Any) -> Any:
    check_count(value, f"FlowAgent {flow.name!r}: max_transfers")
    return value


class FlowAgent:
    """An agent with sub-agents (and maybe a parent) it can transfer to. Build with
    ``with_sub_agents``.

    ``max_transfers`` bounds the transfers one chain may make: agents whose models keep handing
    the conversation back and forth would otherwise run (and spend) without end.
    """

    max_transfers: int = 100
    # ``max_transfers`` assigned after the flow is made is checked as ``with_sub_agents``
    # checks it: ``adk._checks.checked_settings``.
    __setattr__ = checked_settings({"max_transfers": _set_max_transfers}, made="name")
    # It runs its agent in place, at its own address (``adk._instrument``): a ``before_agent``
    # answer given for the flow is that agent's answer, and the flow goes on around it.
    _adk_in_place = True
    # Its span is a flow's, whose duration holds every agent its transfers lead to, not one turn
    # of its root agent: tracing says so (``adk.agent.flow``) on the span and in the metric.
    _adk_flow_span = True

    def __init__(
        self,
        agent: Agent,
        sub_agents: Iterable[Agent] = (),
        *,
        history_rewriter: HistoryRewriter | None = None,
    ) -> None:
        check_agent(agent, "FlowAgent(agent)")
        _check_rewriter(history_rewriter, f"FlowAgent {agent.name!r}")
        self.agent = agent
        # Remember the node on the agent, so wiring it later (top-down or bottom-up) reuses it.
        if _get_link(agent, _FLOW) is None:
            _set_link(agent, _FLOW, self)
        self.name = agent.name
        self.description = agent.description
        self.parent: FlowAgent | None = None
        self.may_transfer_to_parent = True
        self._rewriter = history_rewriter  # checked above
        self.sub_agents: list[FlowAgent] = []
        self._set_sub_agents(sub_agents, allow_transfer_to_parent=True)

    @property
    def history_rewriter(self) -> HistoryRewriter | None:
        """Its own ``history_rewriter``, else its nearest enclosing flow's, read as they are now:
        a sub-agent reads the history as its parent shapes it unless it has a rewriter of its
        own, whether the parent's was given before the sub-agent was wired or assigned since
        (it was copied at wiring, so one assigned later reached the parent alone)."""
        node: FlowAgent = self
        for _ in range(_UNCOUNTED):
            own = node._rewriter
            if own is not None:
                return own
            parent = node.parent
            if parent is None or parent is self:  # the top, or round a ring of transfers
                return None
            node = parent
        # Deeper, each flow read once: a ring of transfers above this flow has no top (read to
        # a bound, a ring of three was read ~330 times at every run and transfer).
        seen: set[int] = set()
        while id(node) not in seen:
            seen.add(id(node))
            own = node._rewriter
            if own is not None:
                return own
            parent = node.parent
            if parent is None:
                return None
            node = parent
        return None

    @history_rewriter.setter
    def history_rewriter(self, rewriter: HistoryRewriter | None) -> None:
        _check_rewriter(rewriter, f"FlowAgent {self.name!r}")  # as where it is given
        self._rewriter = rewriter

    def _set_sub_agents(self, sub_agents: Iterable[Agent], allow_transfer_to_parent: bool) -> None:
        if self.sub_agents:
            # Said in full: a crew built per request from agents made once (CrewAI's
            # ``Crew(...)`` per kickoff) reaches here on its second request.
            names = ", ".join(repr(sub.name) for sub in self.sub_agents)
            raise ValueError(
                f"agent {self.name!r} already has sub-agents ({names}): an agent is wired "
                "once, so build the flow (with_sub_agents, Supervisor, ReActAgent(sub_agents=)) "
                "once and run it as often as needed, concurrent runs included, or give another "
                "flow agents of its own"
            )
        # All checked (type, name, parent) before any is adopted: a bad one must not leave the
        # others claimed by a parent that never got them.
        subs: list[Agent] = check_agents(sub_agents, f"agent {self.name!r}")
        seen: set[str] = set()
        for sub in subs:
            if sub.name in seen or sub.name == self.name:
                raise ValueError(f"duplicate agent name {sub.name!r} under {self.name!r}")
            seen.add(sub.name)
            _check_parent(self, sub)
        # The parent too: it writes to the one history its sub-agents do (a coordinator named
        # like a PlanExecute role under it would read that role's messages as its own).
        check_authors(f"agent {self.name!r}", [self.agent, *subs])
        if self.parent is not None:
            # Wired top-down: this agent already is in a graph, all of whose agents write to one
            # history, so the new sub-agents must not clash with any of them either.
            check_authors(f"agent {self.name!r}", [_root(self), *subs])
        _check_targets(self, subs, allow_transfer_to_parent)
        nodes = [_adopt(self, sub) for sub in subs]
        for node in nodes:
            node.may_transfer_to_parent = allow_transfer_to_parent
        self.sub_agents = nodes

    def _adk_authors(self, seen: set[int]) -> Iterator[Author]:
        """Its agent's agents, then its sub-agents' (``adk._authors``): they all write to the
        history the flow does. Without this a flow nested under a workflow or another flow was
        walked only by its name, and a ``PlanExecute`` as its agent (or inside a sub-agent's
        node) kept its roles out of the outer check."""
        yield from authors(self.agent, seen)
        for sub in self.sub_agents:
            yield from authors(sub, seen)

    @property
    def _adk_callbacks(self) -> Any:
        """Its agent's own callbacks (``callbacks=``): the flow and its agent are one agent."""
        return getattr(self.agent, "_adk_callbacks", None)

    @property
    def _adk_first_askers(self) -> list[str]:
        """The agents certain to ask their model as it starts (``adk._turns_left``): its
        agent's, which starts first."""
        return first_askers(self.agent)

    def find(self, name: str) -> FlowAgent | None:
        """The transfer target ``name`` as seen from this agent: a sub-agent, then the parent."""
        for sub in self.sub_agents:
            if sub.name == name:
                return sub
        parent = self.parent
        if parent is not None and parent.name == name and self.may_transfer_to_parent:
            return parent
        return None

    def _target_names(self) -> list[str]:
        """The names ``find`` finds: the sub-agents', then the parent's if it may transfer back."""
        names = [sub.name for sub in self.sub_agents]
        parent = self.parent
        if parent is not None and self.may_transfer_to_parent:
            names.append(parent.name)
        return names

    def _follow(self, chain: tuple[str, ...], name: object) -> FlowAgent | None:
        """The agent the saved transfer ``chain`` (the run path below the flow) ends at, found
        the way the transfers found it. Names need only be unique among an agent's sub-agents,
        so two agents named ``X`` under different parents are told apart by the chain."""
        node = self
        for step in chain:
            # A name no transfer leads to is a step inside a node (a workflow's sub-agent whose
            # transfer the flow handled): the chain goes on from the same node.
            node = node.find(step) or node
        return node if node.name == name else None

    def _graph_node(self, name: str) -> FlowAgent | None:
        """Any agent of the graph reachable from here by name: the fallback for a saved chain that
        no longer leads anywhere (the graph was rewired between pause and resume)."""
        seen: set[int] = set()
        stack: list[FlowAgent] = [self]
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if node.name == name:
                return node
            stack.extend(node.sub_agents)
            if node.parent is not None:
                stack.append(node.parent)
        return None

    def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        if ctx._run.plan is not None:  # resuming: no call on a fresh run's starts
            refuse_fresh_start(self, ctx)
        if self.history_rewriter is not None and _is_history_view(input, ctx):
            input = build_input(ctx, self.name, self.history_rewriter)
        return self._drive_chain(self, input, ctx, ctx)

    def resume(self, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        node, path, transfers = self._paused_node(ctx)
        node_ctx = self._node_context(ctx, node, path)
        input = build_input(node_ctx, node.name, self.history_rewriter)
        return self._drive_chain(node, input, node_ctx, ctx, transfers)

    def _adk_preflight(self, ctx: RunContext, walk: Preflight) -> None:
        """The resume's check before anything runs (``adk._preflight``): the chain resumes the
        agent it paused in, found as ``resume`` finds it."""
        node, path, transfers = self._paused_node(ctx)
        node_ctx = self._node_context(ctx, node, path)
        if node is not self:  # else the agent at the flow's own address leads below it
            why = f"agent {self.name!r} resumes the agent its transfers paused in, {node.name!r}"
            walk.only_under(ctx.address, [node_ctx.address], why)
        walk.agent(node.agent, node_ctx)
        address = node_ctx.address
        passed = walk.take_transfer(address)
        if passed is not None:  # a paused round's transfer reaches this chain: it goes on there
            self._check_passed_transfer(ctx, walk, node, passed, transfers)
        # No report back when the agent pauses again or its paused round exits (the run ends).
        elif not walk.plan.leaves_waiting(address) and not walk.stops(address, False, False):
            self._check_report_back(ctx, walk, node)
        self._check_paused_transfer(node, node_ctx, transfers)

    def _check_passed_transfer(
        self, ctx: RunContext, walk: Preflight, node: FlowAgent, name: str, transfers: int
    ) -> None:
        """Check, for the resume's check, the transfer to ``name`` that a paused round below
        ``node`` holds and passes up to this chain (``Preflight.note_transfer``: its agent has no
        flow of its own, as a ``ReActAgent`` step of a workflow that is ``node``'s agent): the
        chain must take it (``_transfer_refusal``), and the model calls it brings count
        (``calls_after_transfer``), as a flow's own agent's round's do
        (``_check_paused_transfer``, ``_ReActCore._after_transfer``). Its agent ends with the
        transfer: no report back."""
        refusal = self._transfer_refusal(node, name, transfers)
        if refusal is not None:
            raise refusal
        target = node.find(name)
        assert target is not None  # (``_transfer_refusal``)
        for what, needs in self.calls_after_transfer(ctx, target):
            refused = count_ahead(walk, ctx, what)
            if refused is not None:
                raise _TurnsShort(
                    f"the checkpoint does not fit agent '{self.name}' (its transfers): "
                    f"{refused}: {needs} a model call the limit does not allow; resume with a "
                    "higher max_turns (it counts the calls before the pause)",
                    turns_limit(ctx),
                )

    def calls_after_transfer(self, ctx: RunContext, target: FlowAgent) -> list[tuple[str, str]]:
        """The model calls certain once a paused round's transfer reached ``target``: its agents
        that ask first (``first_calls``), then, when it is a supervisor's worker, the
        supervisor's after its report back. Each as (what counts it, what needs it), for
        ``count_ahead`` and the refusal."""
        found: list[tuple[str, str]] = []
        to = f"the paused round transfers to {target.name!r}"
        for name in first_calls(target.agent, ctx):
            inside = "" if name == target.name else f", agent {name!r}"
            found.append((f"agent {target.name!r} (transferred to{inside})", f"{to}, which asks"))
        if found:
            boss = getattr(target.agent, "_adk_reports_back", None)
            back = self._graph_node(boss) if isinstance(boss, str) else None
            for name in first_calls(back.agent, ctx) if back is not None else ():
                needs = f"{to}, which reports back to {boss!r}, which asks"
                inside = "" if name == boss else f", agent {name!r}"
                found.append((f"supervisor {boss!r} (the report back{inside})", needs))
        return found

    def _check_paused_transfer(self, node: FlowAgent, node_ctx: RunContext, transfers: int) -> None:
        """Refuse the resume of an agent whose paused round holds a transfer (a finished
        ``transfer_to_agent`` call beside a call awaiting approval) that the chain cannot take:
        to an agent it no longer has (changed since the pause), or one past ``max_transfers``
        (``_transfer_refusal``; the model calls the transfer brings, its target's and its report
        back's, the agent counts itself: ``_ReActCore._after_transfer``). The round may end its
        agent, so the agent's own check lets it resume; run, the approved calls (a payment)
        would be made, the transfer then fail the run, and the kept checkpoint's retry make them
        again. The agent says what its saved round transfers to (``_adk_paused_transfer``:
        ``ReActAgent``); a transfer a resumed call asks for is not known before it runs."""
        paused = getattr(node.agent, "_adk_paused_transfer", None)
        name = paused(node_ctx) if paused is not None else None
        if name is not None:
            refusal = self._transfer_refusal(node, name, transfers)
            if refusal is not None:
                raise refusal

    def _transfer_refusal(
        self, node: FlowAgent, name: str, transfers: int
    ) -> CheckpointError | None:
        """The refusal of a paused round's transfer to ``name`` from ``node``, after the
        chain's ``transfers``, that the chain cannot take: to an agent it no longer has, or one
        past ``max_transfers`` (with the report back of a supervisor's worker); else None."""
        target = node.find(name)
        if target is None:  # gone since the pause: the transfer would fail the run after them
            listed = ", ".join(repr(n) for n in node._target_names()) or "none"
            return CheckpointError(
                f"the checkpoint does not fit agent '{self.name}' (its transfers): the transfer "
                f"to {name!r} its paused round holds goes to no agent it can transfer to now "
                f"({listed}): resumed, its approved calls would be made and the transfer then "
                f"fail the run; give agent {node.name!r} an agent {name!r} to transfer to again "
                "and resume",
                reason="incompatible",
            )
        after = transfers + 1
        reports = after == self.max_transfers and getattr(target.agent, "_adk_reports_back", None)
        if after > self.max_transfers or reports:
            return CheckpointError(
                f"the checkpoint does not fit agent '{self.name}' (its transfers): its agent "
                f"{node.name!r} paused after {transfers} transfers, with max_transfers of "
                f"{self.max_transfers}: the transfer to {name!r} its paused round holds"
                f"{' and the report back' if reports else ''} would pass the limit; raise "
                "max_transfers and resume again",
                reason="incompatible",
            )
        return None

    def _check_report_back(self, ctx: RunContext, walk: Preflight, node: FlowAgent) -> None:
        """Count, for the resume's check (``adk._turns_left``), the model call a Supervisor's
        worker's report back is certain to bring (it hands the turn to the supervisor, which
        asks its model), and refuse the resume when the run has no call left for it. Run, the
        paused calls (an approved refund) would be made, the supervisor fail on the limit, and
        the kept checkpoint's retry make them again. After the worker's own count, whose
        refusal (its round needing a model call) names the worker. Not asked when the worker's
        paused round holds an exit (``Preflight.stops``): the run ends with it, and the worker
        reports nothing back."""
        boss = getattr(node.agent, "_adk_reports_back", None)
        if boss is None or ctx._run.turns is None:
            return
        found = self._graph_node(boss)
        for name in first_calls(found.agent, ctx) if found is not None else ():
            inside = "" if name == boss else f" (agent {name!r})"
            refused = count_ahead(walk, ctx, f"supervisor {boss!r}{inside}")
            if refused is None:
                continue
            raise _TurnsShort(
                f"the checkpoint does not fit agent '{self.name}' (its transfers): "
                f"{refused}: its worker {node.name!r} reports back to {boss!r}, which asks a "
                f"model call{inside} the limit does not allow; resume with a higher max_turns (it "
                "counts the calls before the pause)",
                turns_limit(ctx),
            )

    def _paused_node(self, ctx: RunContext) -> tuple[FlowAgent, tuple[str, ...], int]:
        """The agent of the chain that paused, its run path and the transfers the chain had
        made, from the flow's saved state (a checkpoint saved before the count was counts from
        the resume)."""
        resume = ctx._resume_slot(_FLOW_SLOT)
        node, path, transfers = self, ctx.run_path, 0
        if resume is not None and resume.state:  # else the pause came before any transfer
            state = SavedState(f"agent '{self.name}' (its transfers)", resume.state)
            name = state.values.get("agent")
            path = tuple(state.names("run_path"))
            transfers = state.count("transfers", default=0)
            found = self._follow(path[len(ctx.run_path) :], name)
            if found is None and isinstance(name, str):
                found = self._graph_node(name)
            if found is None:
                raise state.error(
                    f"the paused agent {name!r} is not among the agents it transfers to"
                )
            node = found
            if transfers >= self.max_transfers and getattr(node.agent, "_adk_reports_back", None):
                # A Supervisor's worker paused with no transfer left (the limit lowered since):
                # its report back would fail the run after the paused calls ran, keeping the
                # checkpoint for a retry to run them again. Refused as the transfer to it is.
                where = "beyond" if transfers > self.max_transfers else "at"
                raise state.error(
                    f"its worker {node.name!r} paused after {transfers} transfers, {where} "
                    f"max_transfers of {self.max_transfers}: its report back would pass the "
                    "limit; raise max_transfers and resume again"
                )
        return node, path, transfers

    def _node_context(self, ctx: RunContext, node: FlowAgent, path: tuple[str, ...]) -> RunContext:
        if node is self:
            node_ctx = ctx._fork()
            node_ctx.run_path = path
            return node_ctx
        return ctx._child(node.name, path)

    async def _drive_chain(
        self,
        node: FlowAgent,
        input: AgentInput,
        node_ctx: RunContext,
        ctx: RunContext,
        transfers: int = 0,
    ) -> AsyncIterator[AgentEvent]:
        """Run ``node``, then each agent it transfers to. ``transfers`` is the count made so far
        (a resumed chain's before its pause), saved at a pause: counted from 0 again on resume,
        a chain pausing in a worker would get ``max_transfers`` afresh at every pause."""
        source_path: tuple[str, ...] = ()
        try:
            while True:
                target: FlowAgent | None = None
                async with closing(drive(node.agent, input, node_ctx)) as events:
                    async for event in events:
                        action = event.action
                        if action is not None:
                            if action.interrupted is not None and event._signal is not None:
                                state = {
                                    "agent": node.name,
                                    "run_path": list(node_ctx.run_path),
                                    "transfers": transfers,
                                }
                                event._signal.save(ctx.address, state, _FLOW_SLOT)
                            elif (
                                action.transfer_to is not None
                                and not event._flags & _TRANSFER_HANDLED
                                and event.error is None
                            ):
                                event._flags |= _TRANSFER_HANDLED
                                yield event
                                target = node.find(action.transfer_to)
                                if target is None:
                                    source = event.agent_name or node.name
                                    yield _transfer_failed(
                                        action.transfer_to, source, event, node._target_names()
                                    )
                                    return
                                transfers += 1
                                if transfers > self.max_transfers:
                                    yield _too_many_transfers(self.max_transfers, event)
                                    return
                                if transfers == self.max_transfers and getattr(
                                    target.agent, "_adk_reports_back", None
                                ):
                                    # Its report back, certain once it finishes, would be past
                                    # the limit: refused now, before the worker runs (and acts,
                                    # or asks a person) for a run that then fails.
                                    yield _no_report_back(self.max_transfers, target, event)
                                    return
                                # The target nests under the agent that asked (a step inside a
                                # workflow node, too). The driver ends after this event on its
                                # own: pulling on, rather than closing it here, lets it record a
                                # streamed message the event carried.
                                source_path = event.run_path or node_ctx.run_path
                                continue
                        yield event
                if target is None:
                    return
                node_ctx = self._node_context(ctx, target, (*source_path, target.name))
                rewriter = target.history_rewriter or self.history_rewriter
                input = build_input(node_ctx, target.name, rewriter)
                node = target
        finally:
            event = NO_EVENT  # see _driver.NO_EVENT

    def __repr__(self) -> str:
        subs = ", ".join(s.name for s in self.sub_agents)
        return f"FlowAgent({self.name!r}, sub_agents=[{subs}])"


def _too_many_transfers(limit: int, cause: AgentEvent) -> AgentEvent:
    message = (
        f"more than {limit} transfers in one run: the agents may be transferring in a cycle "
        "(raise max_transfers, a parameter of with_sub_agents and Supervisor, if the "
        "conversation needs more)"
    )
    return AgentEvent(cause.agent_name, cause.run_path, error=ErrorInfo("TransferError", message))


def _no_report_back(limit: int, target: FlowAgent, cause: AgentEvent) -> AgentEvent:
    """The error of a transfer to an agent that reports back (a ``Supervisor``'s worker) when
    the report back would be one more than ``limit``."""
    back = getattr(target.agent, "_adk_reports_back", "")
    message = (
        f"more than {limit} transfers in one run: the transfer to {target.name!r} would be the "
        f"{_ordinal(limit)}, and its report back to {back!r} the {_ordinal(limit + 1)} (raise "
        "max_transfers, a parameter of with_sub_agents and Supervisor, if the conversation "
        "needs more)"
    )
    return AgentEvent(cause.agent_name, cause.run_path, error=ErrorInfo("TransferError", message))


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _transfer_failed(target: str, source: str, cause: AgentEvent, valid: list[str]) -> AgentEvent:
    """The error ending a run whose transfer named no agent it can reach. The names it could
    have named are listed, as the model's own transfer tool lists them: a tool's
    ``ctx.transfer("billing")`` for a sibling or a misspelt name said only "not found"."""
    names = ", ".join(repr(name) for name in valid) if valid else "none"
    message = (
        f"transfer failed: agent '{target}' not found when transferring from '{source}'; "
        f"the agents it can transfer to: {names}"
    )
    return AgentEvent(cause.agent_name, cause.run_path, error=ErrorInfo("TransferError", message))


# The links wiring keeps on an agent: the node that represents it in a transfer graph, and the flow
# it was made a sub-agent of (one parent only).
_FLOW, _PARENT = "_adk_flow", "_adk_parent"

# The links of agents that take no attributes (``__slots__`` without ``__dict__``, a frozen
# dataclass), by the agent's id and the link's name. Held weakly, and the flow a link names keeps
# the agent alive (a node holds its agent, a parent its sub-agents' nodes): while an entry's flow
# lives, its id cannot pass to another object, and the entry goes when the flow does. Wiring reads
# it, never a run.
_links: dict[tuple[int, str], weakref.ref[FlowAgent]] = {}


def _get_link(agent: object, name: str) -> Any:
    found = getattr(agent, name, None)
    if found is None and _links:
        ref = _links.get((id(agent), name))
        if ref is not None:
            found = ref()
    return found


def _set_link(agent: object, name: str, flow: FlowAgent) -> None:
    try:
        setattr(agent, name, flow)
    except AttributeError:  # takes no attributes: kept beside it
        key = (id(agent), name)

        def forget(ref: weakref.ref[FlowAgent]) -> None:
            if _links.get(key) is ref:  # not a newer link for the same key
                del _links[key]

        _links[key] = weakref.ref(flow, forget)


def _node_and_holder(agent: Agent) -> tuple[FlowAgent | None, Any]:
    """The node ``agent`` already has (an agent that brings its own flow, a ``ReActAgent`` with
    sub-agents, joins the graph through it), and the object its parent is recorded on."""
    node = agent if isinstance(agent, FlowAgent) else _get_link(agent, _FLOW)
    return node, (node.agent if node is not None else agent)


def _root(node: FlowAgent) -> FlowAgent:
    """The top of the graph ``node`` is in, by its parents; each seen once, since a graph may
    loop (an agent's sub-agent made the parent of one of its ancestors)."""
    seen: set[int] = set()
    while node.parent is not None and id(node) not in seen:
        seen.add(id(node))
        node = node.parent
    return node


def _check_parent(parent: FlowAgent, agent: Agent) -> None:
    """Refuse a second parent: an agent may have only one."""
    current = _get_link(_node_and_holder(agent)[1], _PARENT)
    if current is not None and current is not parent:
        raise ValueError(
            f"agent {agent.name!r} already has parent {current.name!r}; an agent has one parent"
        )


def _check_targets(parent: FlowAgent, subs: list[Agent], back: bool) -> None:
    """Refuse wiring that gives an agent two transfer targets of one name, or a transfer tool
    beside a tool of its own with that tool's name; before anything is adopted.

    A transfer goes to a sub-agent, else the parent (``find``): a sub-agent named like the parent
    would hide it, and an agent's transfer tool would list the name twice. ``back`` says whether
    the sub-agents may transfer back to ``parent``. An agent that adds a transfer tool itself
    (``ReActAgent``'s loop) has ``_adk_check_transfer``, called when it is to gain a target.
    """
    above = parent.parent
    if above is not None and parent.may_transfer_to_parent:
        for sub in subs:
            if sub.name == above.name:
                raise _two_targets(parent.name, above.name)
    if back:
        for sub in subs:
            node = _node_and_holder(sub)[0]
            if node is not None and any(s.name == parent.name for s in node.sub_agents):
                raise _two_targets(sub.name, parent.name)
    if subs:
        _gains_target(parent.agent)
    if back:
        for sub in subs:
            node = _node_and_holder(sub)[0]
            _gains_target(sub if node is None else node.agent)


def _gains_target(agent: object) -> None:
    check = getattr(agent, "_adk_check_transfer", None)
    if check is not None:
        check()


def _two_targets(agent: str, name: str) -> ValueError:
    return ValueError(
        f"agent {agent!r} would have two agents named {name!r} to transfer to, a sub-agent and "
        "its parent, and a transfer could reach only the sub-agent; rename one"
    )


def _adopt(parent: FlowAgent, agent: Agent) -> FlowAgent:
    """Make ``agent`` (checked by ``_check_parent``) a sub-agent of ``parent``."""
    node, holder = _node_and_holder(agent)
    _set_link(holder, _PARENT, parent)
    if node is None:
        node = FlowAgent(agent)
    node.parent = parent  # whose history_rewriter it reads unless it has its own
    return node


def with_sub_agents(
    agent: Agent,
    sub_agents: Iterable[Agent],
    allow_transfer_to_parent: bool = True,
    *,
    history_rewriter: HistoryRewriter | None = None,
    max_transfers: int | None = None,
) -> FlowAgent:
    """An agent that can transfer to ``sub_agents``; they may transfer back unless
    ``allow_transfer_to_parent`` is false. An agent that brings its own flow (``ReActAgent``) gets
    the sub-agents in that flow, so its transfer tool knows them. ``max_transfers`` (default 100)
    bounds the transfers of one run through this agent."""
    check_agent(agent, "with_sub_agents(agent)")
    check_count(max_transfers, "max_transfers", optional=True)
    _check_rewriter(history_rewriter, f"with_sub_agents({agent.name!r})")
    flow = agent if isinstance(agent, FlowAgent) else _get_link(agent, _FLOW)
    if not isinstance(flow, FlowAgent):
        flow = FlowAgent(agent)
    if history_rewriter is not None:  # the sub-agents without one of their own read it
        flow._rewriter = history_rewriter
    flow._set_sub_agents(sub_agents, allow_transfer_to_parent)
    if max_transfers is not None:
        flow.max_transfers = max_transfers
    return flow
