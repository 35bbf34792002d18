"""The model side the app ports share (test_app_eino, test_app_travel, test_app_team and the
others' ``llm`` fixtures): each port's agents talk to one OpenAI wire-protocol server
(tests/openai_server.py) that the port scripts or answers by who is asking, and tells its agents
apart by their system messages. Kept here once so
that the ports read the same wire the same way and a fix to one reaches them all."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest_asyncio
from openai_server import Call, OpenAIServer
from openai_server import Reply as Wire


def wire_server(respond: Callable[[Any], Wire] | None = None, **options: Any) -> Any:
    """A port's ``llm`` fixture: a wire server of its own for each test (so a reply one test
    scripted and did not use cannot answer the next, and its ``requests`` start empty), answering
    with ``respond`` if given, else with what the test scripts; ``options`` are the server's other
    keyword options (``structured="openai"``, ...). Assign it as ``llm = wire_server(...)`` in the
    test module."""

    @pytest_asyncio.fixture(loop_scope="module")
    async def llm() -> AsyncIterator[OpenAIServer]:
        async with OpenAIServer(respond=respond, **options) as server:
            yield server

    return llm


def asker(body: dict[str, Any]) -> str:
    """Which agent made a request: its system message's first words."""
    system = body["messages"][0]
    assert system["role"] == "system", body["messages"]
    return str(system["content"]).split(".")[0]


def calls(*made: tuple[str, dict[str, Any], str], text: str = "") -> Wire:
    """A reply making these calls (name, arguments, id); every reply costs 10 + 5 tokens."""
    return Wire(
        text=text, tool_calls=[Call(n, json.dumps(a), id=i) for n, a, i in made], usage=(10, 5)
    )


def says(text: str) -> Wire:
    """A reply saying ``text``; every reply costs 10 + 5 tokens."""
    return Wire(text=text, usage=(10, 5))
