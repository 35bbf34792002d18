"""Chat models: the protocol, options, retry policy and the OpenAI-compatible adapter."""

from .base import ChatModel, ModelError, ModelOptions, RetryPolicy

__all__ = ["ChatModel", "ModelError", "ModelOptions", "OpenAIChatModel", "RetryPolicy"]


def __getattr__(name: str) -> object:
    # The adapter imports the openai SDK (~100 ms); load it only when someone asks for it.
    if name == "OpenAIChatModel":
        from .openai import OpenAIChatModel

        return OpenAIChatModel
    raise AttributeError(name)
