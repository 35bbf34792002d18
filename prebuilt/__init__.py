"""Prebuilt agents on top of the ``adk`` core: ReActAgent, Supervisor, PlanExecute."""

from .react import ReActAgent
from .supervisor import Supervisor

__all__ = ["ReActAgent", "Supervisor"]
