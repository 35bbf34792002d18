"""Event-driven agents in the style of Apache Flink Agents: ``@action`` handlers on events.

An ``ActionAgent`` declares actions, ``@action(EventType)`` functions ``(event, ctx)``, that react to
events and send new ones with ``ctx.send_event``. An input arrives as an ``InputEvent``; every
``OutputEvent`` becomes one output of the agent. Built-in actions answer ``ChatRequestEvent`` (the
named model resource, with tool rounds) and ``ToolRequestEvent``. ``AgentPlan.compile(agent)``
checks an agent and describes it as JSON. ``adk.execution`` runs any agent over keyed records.

Not imported by ``import adk``: programs that do not use it do not pay for it.
"""

from ._builtin import ActionError
from .agent import RECORD_KEY, ActionAgent
from .context import ActionContext, ResourceKind, ShortTermMemory
from .events import (
    ChatRequestEvent,
    ChatResponseEvent,
    Event,
    InputEvent,
    OutputEvent,
    ToolRequestEvent,
    ToolResponseEvent,
)
from .plan import AgentPlan, CompiledAction, action

__all__ = [
    "RECORD_KEY",
    "ActionAgent",
    "ActionContext",
    "ActionError",
    "AgentPlan",
    "ChatRequestEvent",
    "ChatResponseEvent",
    "CompiledAction",
    "Event",
    "InputEvent",
    "OutputEvent",
    "ResourceKind",
    "ShortTermMemory",
    "ToolRequestEvent",
    "ToolResponseEvent",
    "action",
]
