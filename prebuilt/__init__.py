"""Prebuilt agents on top of the ``adk`` core: ReActAgent, Supervisor, PlanExecute."""

from ._output import OutputRejected, OutputSchemaError, stream_output
from .plan_execute import (
    ExecutedStep,
    Plan,
    PlanExecute,
    new_executor,
    new_planner,
    new_replanner,
)
from .react import MaxIterationsError, ReActAgent
from .supervisor import Supervisor

__all__ = [
    "ExecutedStep",
    "MaxIterationsError",
    "OutputRejected",
    "OutputSchemaError",
    "Plan",
    "PlanExecute",
    "ReActAgent",
    "Supervisor",
    "new_executor",
    "new_planner",
    "new_replanner",
    "stream_output",
]
