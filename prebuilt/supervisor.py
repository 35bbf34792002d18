"""``Supervisor``: a supervisor agent that hands tasks to workers, each of which reports back.

The supervisor transfers to a worker; when the worker finishes (without exiting, interrupting, failing
or transferring elsewhere) the framework transfers back to the supervisor, deterministically, so a
worker's model never has to remember to do it. The run ends when the supervisor answers without a
transfer. Workers may themselves be supervisors. A worker cannot hand over to another worker: a
transfer's target is one of the agent's sub-agents or its parent (DESIGN "Transfer").
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from adk import Agent, AgentEvent, AgentInput, FlowAgent, RunContext, with_sub_agents
from adk._aio import closing
from adk._authors import Author, authors
from adk._checks import check_agent, check_agents
from adk._driver import NO_EVENT, drive
from adk._turns_left import first_askers

from .plan_execute import PlanExecute

if TYPE_CHECKING:
    from adk._preflight import Preflight

__all__ = ["Supervisor"]


class _ReportsBack:
    """Runs a worker at its own address and, when it finishes normally, transfers back.

    No ``resume``: on resume the driver runs it with the input built from history, and the
    worker's own driver (same address) resumes the worker, or runs one that has no ``resume``
    with that input, as it would run it outside a supervisor.
    """

    # It runs the worker in place (``adk._instrument``): a ``before_agent`` answer given for it
    # is the worker's answer, after which it still reports back.
    _adk_in_place = True

    def __init__(self, worker: Agent, supervisor: str) -> None:
        self.worker = worker
        self.supervisor = supervisor
        # Whom it reports back to, for the flow (``adk.flow``): a transfer to it is refused when
        # its report back would pass ``max_transfers``, before the worker runs.
        self._adk_reports_back = supervisor
        self.name = worker.name
        self.description = worker.description

    @property
    def _adk_callbacks(self) -> Any:
        """The worker's own callbacks (``callbacks=``): the wrapper and the worker are one agent."""
        return getattr(self.worker, "_adk_callbacks", None)

    @property
    def _adk_agent(self) -> Agent:
        """The worker, which callbacks are given for this wrapper (``adk._instrument._made``)."""
        return self.worker

    @property
    def _adk_first_askers(self) -> list[str]:
        """The agents certain to ask their model as it starts (``adk._turns_left``): its
        worker's, which starts first."""
        return first_askers(self.worker)

    def _adk_authors(self, seen: set[int]) -> Iterator[Author]:
        """The worker's agents (``adk._authors``): it runs in the supervisor's history, so a
        ``PlanExecute`` anywhere in it keeps its roles' names its own there too. Without this
        the flow's check saw only this wrapper, and a worker holding a ``PlanExecute`` (in a
        sequence, say) went unchecked."""
        yield from authors(self.worker, seen)

    def _adk_preflight(self, ctx: RunContext, walk: Preflight) -> None:
        """The resume's check before anything runs (``adk._preflight``): the worker resumes
        at this agent's own address."""
        walk.agent(self.worker, ctx)

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        try:
            async with closing(drive(self.worker, input, ctx)) as events:
                async for event in events:
                    yield event
                    if event.error is not None or event.ends_agent:
                        return
        finally:
            event = NO_EVENT  # see adk._driver.NO_EVENT
        yield AgentEvent.transfer(self.supervisor)


def Supervisor(
    supervisor: Agent, workers: Iterable[Agent], *, max_transfers: int | None = None
) -> FlowAgent:
    """A flow where ``supervisor`` delegates to ``workers`` and every worker reports back.

    Each delegation is two transfers (there and back): ``max_transfers`` (default 100, see
    ``with_sub_agents``) bounds a run's delegations to half of it.
    """
    # Supervisor("boss", [...]), the supervisor named as Eino's or CrewAI's manager is: refused
    # here, naming it, before its name is read (an AttributeError on a str).
    check_agent(supervisor, "Supervisor(supervisor)")
    workers = check_agents(workers, f"Supervisor {supervisor.name!r}", "workers")
    if not workers:
        # Without one, every delegation the supervisor's model attempts fails (there is nobody
        # to transfer to) and the flow is only the supervisor under another name.
        raise ValueError(
            f"Supervisor {getattr(supervisor, 'name', None)!r}: a supervisor needs at least one "
            "worker to delegate to, got none; to run the agent alone, give it to the Runner as "
            "it is"
        )
    _check_role_names(supervisor, workers)
    return with_sub_agents(
        supervisor,
        [_ReportsBack(worker, supervisor.name) for worker in workers],
        allow_transfer_to_parent=True,
        max_transfers=max_transfers,
    )


def _check_role_names(supervisor: Agent, workers: list[Agent]) -> None:
    """Refuse a ``PlanExecute`` worker's role named like the supervisor, another worker or another
    ``PlanExecute`` worker's role. They all write to one history, which each agent reads by author
    name: the two would read each other's messages as their own (a planner would take another's
    plan for one it wrote). ``PlanExecute.from_model`` names roles apart; roles given by hand
    can still clash."""
    # Names read with getattr: what is not an agent is refused by with_sub_agents, clearly.
    owners = {getattr(supervisor, "name", None): "the supervisor"}
    owners.update(
        (getattr(w, "name", None), f"worker {getattr(w, 'name', None)!r}") for w in workers
    )
    for worker in workers:
        if not isinstance(worker, PlanExecute):
            continue
        for role, agent in worker._roles:
            mine = f"the {role} of worker {worker.name!r}"
            other = owners.setdefault(agent.name, mine)
            if other != mine and other != f"worker {worker.name!r}":
                raise ValueError(
                    f"Supervisor {supervisor.name!r}: {mine} and {other} are both named "
                    f"{agent.name!r}, so each would read the other's messages as its own; name "
                    "them apart (PlanExecute.from_model names its roles after the PlanExecute, "
                    "and new_planner, new_executor and new_replanner take name=)"
                )
