"""Chat models: the protocol, options, retry policy and the OpenAI-compatible adapter."""

from typing import TYPE_CHECKING

from .base import ChatModel, ModelError, ModelOptions, RetryPolicy

if TYPE_CHECKING:  # for type checkers only; at run time it loads on first use (see below)
    from .openai import OpenAIChatModel

__all__ = ["ChatModel", "ModelError", "ModelOptions", "OpenAIChatModel", "RetryPolicy"]


def _lazy_attribute(name: str) -> object:
    # The adapter imports the openai SDK (~100 ms); load it only when someone asks for it.
    if name == "OpenAIChatModel":
        from .openai import OpenAIChatModel

        return OpenAIChatModel
    raise AttributeError(name)


if not TYPE_CHECKING:
    # Hidden from type checkers, which see the lazy names' imports above instead: a module
    # ``__getattr__`` makes every other name they look up its return type, without an error,
    # so a misspelt import (``from adk.models import OpenAIChatModle``) type-checked as ``Any``.
    __getattr__ = _lazy_attribute
