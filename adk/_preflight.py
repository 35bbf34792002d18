"""The check a resume makes before anything runs: can it reach every paused point?

A resume continues where the saved state still means the same thing and is refused otherwise
(docs/interrupts.md, "Resuming after a redeploy"). Each component checks its own saved state when
the resume reaches it, but by then other parts of the run may have run: a parallel branch beside
the one that no longer fits, or another call of a ReAct round, has made its approved call, and as
the refused resume keeps its checkpoint, the next resume makes it again.

So before the resumed run starts, the runner walks the current agent tree the way the resume will
go (``Preflight.agent``), from the root down every path that holds a pending point: each component
that leads below itself (``_adk_preflight(ctx, walk)``: workflows, transfer flows, ``ReActAgent``
and the tools of its open calls, ``AgentTool``, ``ActionAgent`` and the calls its paused tool
action runs again) checks its saved state as its resume would, and
walks on into the children the resume would enter, by name. What it cannot reach is a
``CheckpointError`` raised before anything ran.

The walk is once per resume, never on a plain run. It reads; it runs no agent, tool or model, and
it does not mark points as reached (``Preflight.run`` clears the marks), so the runner's check at
the end of the run (``_ResumePlan.unreached``) still catches what the walk could not see: tools a
``Toolset`` or a resource provides, agents of classes the walk does not know.

One such tool is looked up after all: the tool of a call whose approval edits its arguments. The
walk is synchronous, and finding a toolset's tools asks its server, so the component defers that
check (``defer``) and the runner awaits it after the walk (``finish``), still before anything
runs. An edit that does not fit is a person's typo, not a redeploy: found when the paused round
started, it failed the resume after a parallel branch had made its approved call, which the
kept checkpoint's next resume made again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from . import _approval
from ._parts import attributes, members
from .agent import BaseAgent
from .checkpoint.codec import CheckpointError
from .interrupts import _ancestors, is_within
from .tools.base import new_tool_context

if TYPE_CHECKING:
    from .context import RunContext
    from .interrupts import _ResumePlan
    from .messages import ToolCall


class Preflight:
    """One resume's walk of the agent tree (see the module docstring)."""

    __slots__ = ("checkpoint_id", "deferred", "endings", "plan", "turns_ahead")

    def __init__(self, plan: _ResumePlan, checkpoint_id: str | None) -> None:
        self.plan = plan
        self.checkpoint_id = checkpoint_id
        # Checks that must await (``defer``), run by ``finish``; a list only once one is made.
        self.deferred: list[Callable[[], Awaitable[None]]] | None = None
        # The model calls the resume is certain to make after the paused calls, counted by the
        # components as the walk passes them (``adk._turns_left.count_ahead``), each named.
        self.turns_ahead: list[str] = []
        # Paused rounds that end their workflows once resumed (``note_ending``,
        # ``note_transfer``): (address, kind, transfer target), kind "exit", "break",
        # "transfer" or "taken" (a loop took the break, a flow the transfer).
        self.endings: list[tuple[str, str, str]] | None = None

    def note_ending(self, address: str, exits: bool) -> None:
        """Note that the paused round at ``address`` asks for an exit (``exits``), which ends
        every enclosing workflow, or a break, which ends those up to the innermost loop, once
        it is resumed (a call that finished before the pause asked for it: ``ctx.exit()``, the
        exit tool, ``ctx.break_loop()``). The workflows' check of the steps after a paused one
        (``workflows._check_turns_left``) asks ``stops``, as does a flow's check of a worker's
        report back (``FlowAgent._check_report_back``)."""
        if self.endings is None:
            self.endings = []
        self.endings.append((address, "exit" if exits else "break", ""))

    def note_transfer(self, address: str, target: str) -> None:
        """Note that the paused round at ``address`` ends its agent by a transfer to ``target``
        once resumed (a call that finished before the pause asked for it, ``ctx.transfer``)
        that no flow of the agent's own takes: it passes up, ending the workflows on its way
        (``stops``), to the first transfer flow above, which takes it (``take_transfer``). One
        that none takes fails the run (``run``), as does one leaving a parallel branch
        (``ParallelAgent._adk_preflight``)."""
        if self.endings is None:
            self.endings = []
        self.endings.append((address, "transfer", target))

    def take_transfer(self, address: str) -> str | None:
        """The target of a transfer noted below ``address`` (``note_transfer``) that no flow
        took yet, now taken by the flow at ``address``; None if there is none. Not across an
        ``AgentTool`` (a ``tool:`` segment): the nested run's own."""
        endings = self.endings
        if not endings:
            return None
        for index in self._below(address):
            where, kind, target = endings[index]
            if kind == "transfer":
                endings[index] = (where, "taken", target)
                return target
        return None

    def _below(self, address: str) -> list[int]:
        """The indices of the endings noted at or below ``address``, not across an
        ``AgentTool`` (a ``tool:`` segment)."""
        return [
            index
            for index, (where, _, _) in enumerate(self.endings or ())
            if is_within(where, address) and "/tool:" not in where[len(address) :]
        ]

    def stops(self, address: str, loop: bool, in_loop: bool) -> bool:
        """Whether a round noted below ``address`` (``note_ending``) ends the workflow there, its
        later steps never run: an exit, or a break no loop below it took first (the walk checks
        the inner workflows first, so the innermost takes it), when the workflow is a ``loop``
        (which takes it) or a sequence ``in_loop`` (inside one, which it stops on its way to
        that loop, as ``_run_steps`` does: ``take_break``); outside any loop a break is ignored
        and the sequence goes on; or a transfer no flow below it took (``note_transfer``).
        None crosses an ``AgentTool`` (a ``tool:`` segment), where an exit ends only the
        nested run."""
        endings = self.endings
        if not endings:
            return False
        found = self._below(address)
        if any(endings[index][1] in ("exit", "transfer") for index in found):
            return True
        for index in found:
            where, kind, _ = endings[index]
            if kind != "break":
                continue
            if loop:
                endings[index] = (where, "taken", "")
                return True
            if in_loop:
                return True
        return False

    def run(self, root: Any, ctx: RunContext) -> None:
        """Walk from the root agent; raise the ``CheckpointError`` of the first point the resume
        cannot reach (or the first saved state that does not fit), or of a paused round's
        transfer that no flow takes (``note_transfer``): it would fail the run once the round's
        approved calls were made."""
        self.within(lambda: self.agent(root, ctx))
        target = self.take_transfer(ctx.address)
        if target is not None:
            why = (
                "no transfer flow above the round takes it (give the agents one with an agent "
                f"{target!r}: with_sub_agents)"
            )
            raise self.failing_transfer(target, why)

    def failing_transfer(self, target: str, why: str) -> CheckpointError:
        """The refusal of a paused round's transfer to ``target`` that the run would fail
        (``why``): resumed, the round's approved calls would be made, the transfer then fail the
        run and the kept checkpoint's retry make them again."""
        of = f" of checkpoint {self.checkpoint_id!r}" if self.checkpoint_id is not None else ""
        return CheckpointError(
            f"the transfer to {target!r} that a paused round{of} holds would fail: {why}; "
            "resumed, its approved calls would be made and the transfer then fail the run; the "
            "checkpoint is kept as it was",
            reason="incompatible",
        )

    def defer(self, check: Callable[[], Awaitable[None]]) -> None:
        """Have ``finish`` run ``check``, a part of the walk that must await (finding a
        toolset's tools, see the module docstring)."""
        if self.deferred is None:
            self.deferred = []
        self.deferred.append(check)

    async def finish(self) -> None:
        """Run the deferred checks, each as ``within`` runs a part of the walk."""
        for check in self.deferred or ():
            reached = set(self.plan.reached)
            try:
                await check()
            finally:
                self.plan.reached.clear()
                self.plan.reached.update(reached)

    def edits(self, call: ToolCall, address: str) -> bool:
        """Whether the resume runs the open ``call`` at ``address`` with a person's edit of its
        arguments (``_approval.edit_at``)."""
        if not self.holds(address):
            return False
        resume = self.plan.resume_for(address)
        if resume is None or not resume.is_target:
            return False
        return _approval.edit_at(self.plan, address, call, resume.data) is not None

    def within(self, check: Callable[[], None]) -> None:
        """Run ``check`` (a part of the walk), then forget the points it marked as reached: it
        asked components for ``ctx.resume``, which marks them, and the run's own check at its end
        (``_ResumePlan.unreached``) must see only what the run reached."""
        reached = set(self.plan.reached)
        try:
            check()
        finally:
            self.plan.reached.clear()
            self.plan.reached.update(reached)

    def holds(self, address: str) -> bool:
        """Whether a pending point lies at or below ``address``."""
        return self.plan.holds(address)

    def below(self, address: str) -> list[str]:
        """The pending points strictly below ``address``."""
        prefix = address + "/"  # strictly below: not at it, and never the empty address's all
        return [p.id for p in self.plan.within(address) if p.id.startswith(prefix)]

    def agent(self, agent: Any, ctx: RunContext) -> None:
        """Check ``agent`` at ``ctx`` (its place as the resume will give it) and what lies below.

        An agent of a class that leads below itself has ``_adk_preflight``. A ``BaseAgent``
        without it that holds nothing it could run pauses only at its own address
        (``ctx.interrupt``): a point below it is one no resume reaches, e.g. a workflow that
        paused inside replaced by a plain agent of its name. What the walk does not know (an
        object that is no ``BaseAgent``, or one that holds agents or tools it may run with its own
        context, a wrapper that delegates to a workflow) is left to the run and its check at the
        end."""
        if not self.holds(ctx.address):
            return
        check = getattr(agent, "_adk_preflight", None)
        if check is not None:
            check(ctx, self)
        elif isinstance(agent, BaseAgent):
            below = self.below(ctx.address)
            if below and not _runs_others(agent):  # its attributes read only when it matters
                raise self.unreachable(
                    below,
                    f"agent {agent.name!r} at {ctx.address!r} is a {type(agent).__name__}, "
                    "which holds no agents or tools to run below it",
                )

    def call(self, tool: Any, call: ToolCall, ctx: RunContext, address: str) -> None:
        """Check one open tool call of a resumed round, at ``address``: a person's edit of its
        arguments (``ValueError`` if they do not fit the tool, as the resume's check of the
        decision refuses one that is unclear), the tool's own check of the call
        (``_adk_check_resume``: arguments that no longer fit, a missing approval) and, for a tool
        that runs agents (``AgentTool``), the nested tree below it."""
        if not self.holds(address):
            return
        arguments = _approval.checked_arguments(self.plan, address, call, tool)
        tool_ctx = new_tool_context(ctx, call.name, call.id, address, None)
        nested = getattr(tool, "_adk_preflight_call", None)
        if nested is not None:
            nested(tool_ctx, self)
            return
        check = getattr(tool, "_adk_check_resume", None)
        if check is not None:
            check(arguments, tool_ctx)

    def only_under(self, address: str, entered: list[str], why: str) -> None:
        """Refuse the points below ``address`` that lie under none of the ``entered`` addresses:
        the places the component at ``address`` resumes. ``why`` says where it goes instead."""
        ways = set(entered)  # a point is under one when one of its ancestors is one: O(depth)
        stray = [p for p in self.below(address) if ways.isdisjoint(_ancestors(p))]
        if stray:
            raise self.unreachable(stray, why)

    def unreachable(self, points: list[str], why: str) -> CheckpointError:
        """The refusal of ``points``, which the resume cannot reach because of ``why``."""
        of = f" of checkpoint {self.checkpoint_id!r}" if self.checkpoint_id is not None else ""
        return CheckpointError(
            f"the resume{of} cannot reach the paused point(s) {points}: {why} (the agents "
            "changed since the pause?); the checkpoint is kept as it was",
            reason="incompatible",
        )


_LINKS = frozenset({"_adk_flow", "_adk_parent"})
"""The links transfer wiring sets on an agent: its own node in the graph and its parent, which it
does not run below itself."""


def _runs_others(agent: BaseAgent) -> bool:
    """Whether ``agent`` holds something it may run with its own context (anything with a
    ``run``: an agent, whose points then lie below the agent's address, or a tool such as an
    ``AgentTool``). Only a custom agent's attributes are read: once per resume, for an agent on
    the way to a pending point below it."""
    return any(
        item is not agent and callable(getattr(item, "run", None))
        for name, value in attributes(agent)
        if name not in _LINKS
        for item in members(value)
    )
