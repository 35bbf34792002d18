"""Tools: @tool / FunctionTool schemas and docstrings, ToolContext injection, sync and async
functions, result serialisation, Tool and Toolset protocols, and every failure turned into an
``Error: ...`` result the model reads next (driven through a ReActAgent and a ScriptedModel)."""

from __future__ import annotations

import asyncio
import contextlib
import enum
import functools
import gc
import itertools
import math
import sqlite3
import sys
import threading
import weakref
from typing import Annotated, Any, Literal

import pydantic_core
import pytest
from conftest import ScriptAgent, run_events
from pydantic import BaseModel, ConfigDict, Field, create_model

from adk import (
    AgentEvent,
    FunctionTool,
    LoopAgent,
    Message,
    RunContext,
    Runner,
    SequentialAgent,
    Tool,
    ToolContext,
    ToolError,
    ToolResult,
    Toolset,
    ToolSpec,
    register_type,
    run_messages,
    tool,
)
from adk.callbacks import Callbacks
from adk.testing import Reply, ScriptedModel, simplify_events, tool_call
from prebuilt import ReActAgent


class Point(BaseModel):
    x: int
    y: int = 0


# -- schemas ------------------------------------------------------------------------------------


def test_schema_and_descriptions_from_type_hints_and_a_google_docstring() -> None:
    @tool
    def locate(
        name: str,
        where: Point,
        unit: Literal["km", "mi"] = "km",
        note: str | None = None,
        tags: list[str] | None = None,
    ) -> str:
        """Find a place on the map.

        Args:
            name: What the place is called.
            where (Point): A point near it; the search
                starts there.
            unit: Distance unit.

        Returns:
            A description of the place.
        """
        return name

    spec = locate.spec
    assert spec.name == "locate"
    assert spec.description == "Find a place on the map."
    params = spec.parameters
    assert params["type"] == "object"
    assert params["required"] == ["name", "where"]
    props = params["properties"]
    assert props["name"] == {"type": "string", "description": "What the place is called."}
    assert props["where"]["description"] == "A point near it; the search starts there."
    point_schema = params["$defs"]["Point"] if "$ref" in props["where"] else props["where"]
    assert point_schema["properties"].keys() == {"x", "y"}
    assert point_schema["required"] == ["x"]
    assert props["unit"]["enum"] == ["km", "mi"] and props["unit"]["default"] == "km"
    assert props["unit"]["description"] == "Distance unit."
    assert {"type": "null"} in props["note"]["anyOf"] and props["note"]["default"] is None
    assert "description" not in props["note"]  # not documented: no made-up help


def test_descriptions_from_annotated_strings_as_langchain_writes_them() -> None:
    # LangChain's @tool reads a parameter's help from Annotated[T, "help"]; pydantic ignores the
    # str, so a ported tool's parameters reached the model with no description at all.
    @tool
    def search(
        query: Annotated[str, "What to search for"],
        k: Annotated[int, "How many results", Field(ge=1)] = 3,
        region: Annotated[str, "Ignored: the docstring says it"] = "eu",
    ) -> str:
        """Search the web.

        Args:
            region: Where to search.
        """
        return query

    props = search.spec.parameters["properties"]
    assert props["query"] == {"type": "string", "description": "What to search for"}
    assert props["k"] == {
        "type": "integer",
        "default": 3,
        "minimum": 1,
        "description": "How many results",
    }
    assert props["region"]["description"] == "Where to search."  # the docstring comes first
    assert search.fn(query="x") == "x"


async def test_a_pydantic_field_as_a_default_is_the_field_it_describes() -> None:
    # ``limit: int = Field(10, description=...)``, as pydantic's validate_call and the OpenAI
    # Agents SDK take it. It was taken as a plain default: the model was offered no default nor
    # help, and the function, called without the argument, got the FieldInfo as its value.
    @tool
    def search(
        query: str,
        limit: int = Field(10, ge=1, description="How many results"),
        tags: list[str] = Field(default_factory=list),  # noqa: B008 (the form under test)
        region: str = Field(description="Where to search"),
    ) -> str:
        """Search the web.

        Args:
            tags: Tags the results must carry.
        """
        return f"{query} {limit!r} {tags!r} {region}"

    props = search.spec.parameters["properties"]
    assert props["limit"] == {
        "type": "integer",
        "default": 10,
        "minimum": 1,
        "description": "How many results",
    }
    assert props["tags"] == {
        "type": "array",
        "items": {"type": "string"},
        "description": "Tags the results must carry.",  # the docstring, as for Annotated
    }
    assert search.spec.parameters["required"] == ["query", "region"]
    agent = _agent(
        [search],
        tool_call("search", {"query": "q", "region": "eu"}, id="c1"),
        tool_call("search", {"query": "q", "region": "eu", "limit": 0}, id="c2"),
        tool_call("search", {"query": "q"}, id="c3"),
    )
    await run_events(agent)
    results = _results(agent)
    assert results["c1"] == "q 10 [] eu"
    assert results["c2"] == (
        "Error: invalid arguments for tool 'search': limit: Input should be greater than or "
        "equal to 1"
    )
    assert results["c3"] == "Error: invalid arguments for tool 'search': region: Field required"


@pytest.mark.parametrize(
    "given", [Field(5, alias="amount"), Field(5, validation_alias="amount")], ids=["alias", "va"]
)
def test_a_field_default_naming_the_parameter_otherwise_is_refused(given: Any) -> None:
    # The model was offered "amount", while the approval request, a require_approval function
    # and the edit note named the argument "cents": a person's edit of the request, by its
    # names, was validated with "cents" silently dropped (a field's own name is no extra), and
    # the call ran with the default 5, the model told it ran with the edited amount.
    def pay(payee: str, cents: int = given) -> str:
        return payee

    with pytest.raises(
        TypeError, match=r"tool 'pay': parameter 'cents': its Field names it 'amount'.*own name"
    ):
        FunctionTool(pay)

    def refund(payee: str, cents: Annotated[int, Field(alias="amount")] = 5) -> str:
        return payee

    with pytest.raises(TypeError, match=r"tool 'refund': parameter 'cents': .* 'amount'"):
        FunctionTool(refund)


def test_a_field_alias_on_a_parameter_given_another_field_name_is_refused_too() -> None:
    # A parameter named like a BaseModel attribute (json, schema, copy...) or with a leading
    # underscore gets another field name, the parameter's own its alias: that alias overrode
    # the Field's, so its alias was dropped without a word where any other parameter's is
    # refused, and the model was offered "schema" where the author meant "db_schema".
    def tables(schema: str = Field("public", alias="db_schema")) -> str:
        return schema

    with pytest.raises(
        TypeError, match=r"tool 'tables': parameter 'schema': its Field names it 'db_schema'"
    ):
        FunctionTool(tables)

    def scan(_limit: Annotated[int, Field(validation_alias="limit")] = 5) -> int:
        return _limit

    with pytest.raises(TypeError, match=r"tool 'scan': parameter '_limit': .* 'limit'"):
        FunctionTool(scan)

    def dump(json: Annotated[int, Field(alias="json", ge=0)] = 1) -> int:  # its own name: fine
        return json

    assert list(FunctionTool(dump).spec.parameters["properties"]) == ["json"]


def test_descriptions_from_a_rest_docstring() -> None:
    @tool
    async def forecast(city: str, days: int = 2) -> str:
        """Weather forecast for a city.

        :param city: The city name.
        :param int days: How many days ahead.
        :returns: The forecast.
        """
        return city

    spec = forecast.spec
    assert spec.description == "Weather forecast for a city."
    assert spec.parameters["properties"]["city"]["description"] == "The city name."
    assert spec.parameters["properties"]["days"] == {
        "type": "integer",
        "default": 2,
        "description": "How many days ahead.",
    }
    assert spec.parameters["required"] == ["city"]


def test_a_section_word_indented_in_a_parameters_help_is_its_help() -> None:
    # A header indented under a parameter ("See Also:", "Note:" inside its help) ended the
    # Args section: the rest of that help and every parameter below it lost their help.
    # napoleon reads a section only at the section's own indent.
    @tool
    def search(query: str, limit: int = 10, region: str = "eu") -> str:
        """Search.

        Args:
            query: What to look for.
            limit: How many results.
                See Also:
                    the paging guide.
            region: Where to search.
                Note:
                    eu or us.

        Returns:
            The results.
        """
        return query

    props = search.spec.parameters["properties"]
    assert {name: prop.get("description") for name, prop in props.items()} == {
        "query": "What to look for.",
        "limit": "How many results. See Also: the paging guide.",
        "region": "Where to search. Note: eu or us.",
    }
    assert search.spec.description == "Search."


def test_google_keyword_args_and_other_sections_are_sections() -> None:
    # napoleon's "Keyword Args:" ran on into the help of the parameter before it ("The city
    # name. Keyword Args:"), and first in the docstring it was the description, its
    # parameters' help lost; "See Also:" ran on too.
    @tool
    def forecast(city: str, *, days: int = 2, unit: str = "C") -> str:
        """Weather forecast for a city.

        Warning:
            Costs one API call.

        Args:
            city: The city name.

        Keyword Args:
            days: How many days ahead.

        See Also:
            history: the past weather.

        Other Parameters:
            unit: C or F.
        """
        return city

    @tool
    def alerts(region: str) -> str:
        """Weather alerts.

        Keyword Arguments:
            region (str): Where.
        """
        return region

    props = forecast.spec.parameters["properties"]
    assert (
        forecast.spec.description
        == "Weather forecast for a city.\n\nWarning:\n    Costs one API call."
    )
    assert {name: prop.get("description") for name, prop in props.items()} == {
        "city": "The city name.",
        "days": "How many days ahead.",
        "unit": "C or F.",
    }
    assert alerts.spec.description == "Weather alerts."
    assert alerts.spec.parameters["properties"]["region"]["description"] == "Where."


async def test_a_parameter_pydantic_cannot_name_a_field_keeps_its_name() -> None:
    # A leading underscore was pydantic's bare NameError ("Fields must not use names with
    # leading underscores"), and ``json`` (renamed ``json_`` as a BaseModel attribute) beside a
    # ``json_`` of its own was overwritten by it: the model was offered one of the two.
    @tool
    def lookup(key: str, json: bool = False, json_: int = 0, _trace: str = "") -> str:
        """Look a key up."""
        return f"{key} {json} {json_} {_trace!r}"

    props = lookup.spec.parameters["properties"]
    assert list(props) == ["key", "json", "json_", "_trace"]
    agent = _agent(
        [lookup],
        tool_call("lookup", {"key": "k", "json": True, "json_": 3, "_trace": "t"}, id="c1"),
        tool_call("lookup", {"key": "k"}, id="c2"),
    )
    await run_events(agent)
    assert _results(agent) == {"c1": "k True 3 't'", "c2": "k False 0 ''"}


def test_descriptions_from_a_numpy_docstring() -> None:
    @tool
    async def forecast(city: str, days: int = 2) -> str:
        """Weather forecast for a city.

        Parameters
        ----------
        city : str
            The city name,
            in English.
        days : int, optional
            How many days ahead.

        Returns
        -------
        str
            The forecast.
        """
        return city

    spec = forecast.spec
    assert spec.description == "Weather forecast for a city."
    assert spec.parameters["properties"]["city"]["description"] == "The city name, in English."
    assert spec.parameters["properties"]["days"]["description"] == "How many days ahead."


def test_tool_context_is_hidden_from_the_schema() -> None:
    @tool
    def remember(key: str, ctx: ToolContext) -> str:
        """Remember a key."""
        return key

    assert set(remember.spec.parameters["properties"]) == {"key"}
    assert remember.spec.parameters["required"] == ["key"]


def test_an_optional_tool_context_is_hidden_too() -> None:
    @tool
    def remember(key: str, ctx: ToolContext | None = None) -> str:
        """Remember a key."""
        return key

    assert set(remember.spec.parameters["properties"]) == {"key"}


def test_function_tool_overrides_and_refusals() -> None:
    def plain(a: int) -> int:
        return a

    t = FunctionTool(plain, name="renamed", description="Custom text")
    assert (t.spec.name, t.spec.description) == ("renamed", "Custom text")
    assert isinstance(t, Tool)
    assert tool(plain).spec.description == ""

    def star(*args: int) -> int:
        return 0

    with pytest.raises(TypeError):
        tool(star)
    with pytest.raises(ValueError):
        tool(lambda a: a)


class _Orders:
    """A dependency a tool is handed: no JSON schema."""


def test_a_parameter_without_a_json_schema_is_refused_naming_it() -> None:
    """``ctx: adk.RunContext`` (a port's ``RunContextWrapper``) or a dependency as a parameter
    failed with pydantic's error, which advised ``arbitrary_types_allowed`` and named neither the
    tool nor the parameter, nor the ``ToolContext`` the framework would have filled in."""

    def lookup(ctx: RunContext, order_id: str) -> str:
        """Look an order up."""
        return order_id

    def lookup_in(orders: list[_Orders], order_id: str) -> str:
        """Look an order up in the order books."""
        return order_id

    with pytest.raises(TypeError) as refused:
        tool(lookup)
    message = str(refused.value)
    assert message.startswith(
        "tool 'lookup': parameter 'ctx' has type RunContext, which cannot be described to a "
        "model (no JSON schema)."
    )
    assert "annotated adk.ToolContext" in message and "arbitrary_types_allowed" not in message

    with pytest.raises(TypeError, match=r"^tool 'lookup_in': parameter 'orders' has type list\["):
        tool(lookup_in)


def test_a_name_by_position_a_tool_made_again_and_a_non_callable_say_what_was_meant() -> None:
    """LangChain's ``@tool("search")``, ``FunctionTool`` of an ``@adk.tool`` function (or the
    decorator twice) and a value that is not a function were all refused as "a function tool
    needs a name", which sent the user looking for a name to give."""

    def search(query: str) -> str:
        """Search the web."""
        return query

    with pytest.raises(TypeError) as refused:
        tool("web_search")(search)  # type: ignore[call-overload]
    assert str(refused.value) == (
        "@tool takes the function to make a tool of, got str 'web_search': to name the tool, "
        "write @adk.tool(name='web_search')"
    )

    made = tool(search)
    for again in (lambda: tool(made), lambda: FunctionTool(made), lambda: tool(name="s")(made)):
        with pytest.raises(TypeError) as refused:
            again()
        assert str(refused.value) == (
            "FunctionTool 'search' is already a tool: give it to the agent as it is; to rename "
            "it, FunctionTool(tool.fn, name=...)"
        )
    assert FunctionTool(made.fn, name="web_search").spec.name == "web_search"

    with pytest.raises(TypeError) as refused:
        FunctionTool(42)  # type: ignore[arg-type]
    assert str(refused.value) == "a function tool is made of a function, got int 42"


async def test_an_async_generator_function_is_refused_when_made() -> None:
    """An ``async def`` that yields was made a tool, and each call returned the generator object:
    the model read ``"<async_generator object ...>"`` as the tool's result, with no error."""

    async def list_files(folder: str) -> Any:
        """List a folder's files."""
        yield f"{folder}/a.txt"

    class Lister:
        async def __call__(self, folder: str) -> Any:
            """List a folder's files."""
            yield folder

    for fn in (list_files, functools.partial(list_files), Lister()):
        with pytest.raises(TypeError, match=r"async generator function .*return them \(a list"):
            FunctionTool(fn, name="list_files")
    with pytest.raises(TypeError, match=r"^tool 'list_files' is an async generator function"):
        tool(list_files)

    async def list_all(folder: str) -> list[str]:
        """List a folder's files."""
        return [name async for name in list_files(folder)]

    agent = _agent([tool(list_all)], tool_call("list_all", {"folder": "docs"}, id="c1"))
    await run_events(agent)
    assert _results(agent) == {"c1": '["docs/a.txt"]'}


def test_a_context_parameter_without_a_type_hint_is_refused_naming_the_hint() -> None:
    """``def f(city: str, ctx)`` (or Google ADK's ``tool_context``) asked the model for a
    required ``ctx`` of any type, and every call the model made without it failed validation."""

    def where(city, ctx):
        """Where to."""
        return city

    def where_to(city: str, tool_context):
        """Where to."""
        return city

    for fn, name in ((where, "ctx"), (where_to, "tool_context")):
        with pytest.raises(TypeError) as refused:
            tool(fn)
        assert str(refused.value) == (
            f"tool {fn.__name__!r}: parameter {name!r} has no type hint, so the model would be "
            f"asked for it and every call would fail without it; annotate it {name}: "
            "adk.ToolContext for the framework to fill it in"
        )

    def where_maybe(city: str, ctx=None):
        """Where to."""
        return city

    # With a default no call fails: the error said so all the same.
    with pytest.raises(TypeError) as refused:
        tool(where_maybe)
    assert str(refused.value) == (
        "tool 'where_maybe': parameter 'ctx' has no type hint, so the model would be asked for "
        "it and the framework would never fill it in; annotate it ctx: adk.ToolContext for the "
        "framework to fill it in"
    )

    def annotated(city: str, ctx: ToolContext) -> str:
        """Where to."""
        return city

    def context_for_the_model(city: str, context: str) -> str:  # a name, typed: the model's
        """Where to."""
        return city

    assert tool(annotated).spec.parameters["required"] == ["city"]
    assert tool(context_for_the_model).spec.parameters["required"] == ["city", "context"]


def test_type_hints_that_cannot_be_resolved_are_refused_naming_the_tool() -> None:
    """Under ``from __future__ import annotations`` (this module's), a hint naming a class local
    to a function, or an import made only under ``TYPE_CHECKING``, raised a bare ``NameError``."""

    class Local(BaseModel):
        city: str

    def where(place: Local) -> str:
        """Where to."""
        return place.city

    with pytest.raises(TypeError) as refused:
        tool(where)
    assert str(refused.value).startswith(
        "tool 'where': its type hints name 'Local', which is not defined in its module: the "
        "hints are read when the tool is made, so import it at module level"
    )
    assert isinstance(refused.value.__cause__, NameError)


def test_a_hint_naming_a_class_defined_below_the_tool_is_told_to_define_it_above() -> None:
    # A model class defined at module level but below its tool is as unknown when the tool is
    # made; the refusal said only "define the classes it names there" (at module level), where
    # the class already was.
    source = (
        "from __future__ import annotations\n"
        "import adk\n"
        "from pydantic import BaseModel\n"
        "@adk.tool\n"
        "def create(customer: Customer) -> str:\n"
        "    return customer.name\n"
        "class Customer(BaseModel):\n"
        "    name: str\n"
    )
    with pytest.raises(TypeError) as refused:
        exec(compile(source, "customers.py", "exec"), {"__name__": "customers"})
    assert str(refused.value) == (
        "tool 'create': its type hints name 'Customer', which is not defined in its module: the "
        "hints are read when the tool is made, so import it at module level (not only under "
        "TYPE_CHECKING) and define the classes it names there, above the tool, not inside a "
        "function"
    )


async def test_hints_imported_only_for_type_checking_refuse_only_what_the_tool_reads() -> None:
    """A ``ToolContext`` hint and a return hint whose imports type-checking linters moved under
    ``TYPE_CHECKING`` (tests/typing_only_tools.py) refused the whole tool: the return hint is not
    read (the result is sent as text) and the context is told by its name; a parameter the model
    fills in still needs its class (the test above)."""
    # Imported here, not at the top: the tool is made as its module is imported.
    from typing_only_tools import count_words

    assert count_words.spec.parameters["required"] == ["text"]
    agent = _agent([count_words], tool_call("count_words", {"text": "one two three"}))
    result = await Runner(agent).invoke("count")
    assert [m.content for m in result.messages if m.role == "tool"] == ['{"words":3}']
    assert result.session.values["counted_by"] == "count_words"


async def test_an_optional_context_hint_imported_only_for_type_checking_is_a_context() -> None:
    """``ctx: ToolContext | None = None`` (a tool its author also calls without a run) with the
    import under ``TYPE_CHECKING`` was refused as a hint naming an undefined class, though a bare
    ``ToolContext`` hint so imported is told by its name: the context is supplied by its name to
    the hint's resolution, so the tool is made, the model is not asked for ``ctx`` and the run's
    context is given."""
    from typing_only_tools import count_letters as function

    count_letters = tool(function)
    assert count_letters.spec.parameters["required"] == ["text"]
    assert list(count_letters.spec.parameters["properties"]) == ["text"]
    agent = _agent([count_letters], tool_call("count_letters", {"text": "ab c"}))
    result = await Runner(agent).invoke("count")
    assert [m.content for m in result.messages if m.role == "tool"] == ['{"letters":3}']
    assert result.session.values["counted_by"] == "count_letters"


# -- running tools through a ReActAgent ---------------------------------------------------------


def _agent(tools: list[Any], *calls: Any, final: str = "final") -> ReActAgent:
    """A ReActAgent whose model asks for ``calls`` in one turn, then answers ``final``."""
    model = ScriptedModel([Reply(tool_calls=list(calls)), final])
    return ReActAgent("agent", model, tools=tools)


def _results(agent: ReActAgent) -> dict[str, str]:
    """The tool messages the model received on its second call, by tool call id."""
    assert isinstance(agent.model, ScriptedModel)
    requests = agent.model.requests
    assert len(requests) == 2
    return {m.tool_call_id or "": m.content for m in requests[1].messages if m.role == "tool"}


def _double(value: int) -> int:
    """Double a value."""
    return 2 * value


class _Lookup:
    """A hand-written tool whose run returns a dict, as a newcomer's first one does."""

    spec = ToolSpec(name="lookup", description="Look a user up.", parameters={"type": "object"})

    async def run(self, arguments: str, ctx: ToolContext) -> Any:
        ctx.exit()
        return {"user": "ann"}


class _Spaced(_Lookup):
    spec = ToolSpec(name="look up", description="Look a user up.", parameters={})


def test_a_tool_of_ones_own_named_as_model_apis_refuse_is_refused_when_the_agent_is_made() -> None:
    """``ToolSpec(name="look up")`` in a hand-written tool was offered to the model as it was: a
    real API refuses the request (a 400), so every model call of the agent failed."""
    with pytest.raises(ValueError) as refused:
        ReActAgent("desk", ScriptedModel(["hi"]), tools=[_Spaced()])
    assert str(refused.value) == (
        "agent 'desk': the tool named 'look up' (test_tools._Spaced object) has a name model "
        "APIs refuse: they take 1 to 64 letters, digits, '_' and '-' (no spaces or dots), so "
        "every model call offering it would fail"
    )


async def test_a_tool_returning_neither_text_nor_a_tool_result_is_an_error_result() -> None:
    """A ``Tool`` whose ``run`` returned a dict failed the whole run with pydantic's validation
    error for a Message, though every other failure of a call is an error result (a tool call
    never crashes the run: tools.md, "Errors the model sees"); the actions it asked for are
    dropped, as for a raise."""
    agent = _agent(
        [_Lookup(), tool(_double)],
        tool_call("lookup", {}, id="c1"),
        tool_call("_double", {"value": 3}, id="c2"),
    )
    events = await run_events(agent)
    assert _results(agent) == {
        "c1": "Error: tool 'lookup' returned dict, not a str or a ToolResult (a Tool's run "
        "returns text; FunctionTool turns other values into JSON)",
        "c2": "6",
    }
    failed = next(e for e in events if e.message is not None and e.message.tool_call_id == "c1")
    assert failed.message is not None and failed.message.metadata["is_error"] is True
    assert events[-1].message is not None and events[-1].message.content == "final"  # no exit


class _SyncLookup:
    """A hand-written tool whose run is a plain ``def``, as a newcomer's first one can be."""

    spec = ToolSpec(name="lookup", description="Look a user up.", parameters={"type": "object"})

    def run(self, arguments: str, ctx: ToolContext) -> str:
        return "ann"


class _HandingOn:
    """A plain ``def run`` that hands the call on to an async one: a working tool."""

    spec = ToolSpec(name="handing_on", description="Double 4.", parameters={"type": "object"})

    def run(self, arguments: str, ctx: ToolContext) -> Any:
        return tool(_double).run('{"value": 4}', ctx)


_NOT_ASYNC = (
    "Error: tool 'lookup' failed: its run is not a coroutine function: a Tool's run must be an "
    "async def (async def run(self, arguments, ctx)), or return an awaitable (TypeError: "
)


@pytest.mark.parametrize("hooked", [False, True])
async def test_a_tool_whose_run_is_not_async_tells_the_model_what_is_wrong(hooked: bool) -> None:
    """The model read only "object str can't be used in 'await' expression", which said nothing
    of the fix; a plain ``def run`` returning an awaitable still works (tools.md). ``hooked``: the
    call goes through a before_tool callback, which awaits the tool's run itself."""
    callbacks = [Callbacks(before_tool=lambda ctx, call: None)] if hooked else []
    model = ScriptedModel(
        [
            Reply(tool_calls=[tool_call("lookup", {}, id="c1"), tool_call("handing_on", id="c2")]),
            "final",
        ]
    )
    agent = ReActAgent("agent", model, tools=[_SyncLookup(), _HandingOn()], callbacks=callbacks)
    await run_events(agent)
    results = _results(agent)
    assert results["c1"].startswith(_NOT_ASYNC), results["c1"]
    assert "can't be used in 'await' expression" in results["c1"]  # Python's own words
    assert results["c2"] == "8"


@tool
def add(a: int, b: int = 2) -> int:
    """Add two integers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


@pytest.mark.parametrize("name", ["bad name", "math.add", "a" * 65, "café", "x\n"])
def test_a_tool_name_model_apis_reject_is_refused_where_the_tool_is_made(name: str) -> None:
    """OpenAI (and Anthropic) accept ^[a-zA-Z0-9_-]{1,64}$ only: any other name failed every model
    call that offered the tool, with the server's 400."""

    def plain(x: int) -> int:
        """Echo."""
        return x

    with pytest.raises(ValueError, match=r"invalid tool name .*pass name= to choose another"):
        FunctionTool(plain, name=name)
    assert FunctionTool(plain, name="a" * 64).name == "a" * 64
    assert FunctionTool(plain, name="add-2_numbers").name == "add-2_numbers"


def test_a_function_whose_own_name_is_no_tool_name_needs_name() -> None:
    def café(x: int) -> int:
        """Echo."""
        return x

    with pytest.raises(ValueError, match="invalid tool name 'café'"):
        tool(café)
    assert tool(name="cafe")(café).name == "cafe"


async def test_sync_and_async_tools_and_result_serialisation() -> None:
    @tool
    async def fetch(key: str) -> dict[str, Any]:
        """Fetch a record."""
        await asyncio.sleep(0)
        return {"key": key, "n": [1, 2]}

    @tool
    def make_point(x: int) -> Point:
        """Make a point."""
        return Point(x=x)

    @tool
    def nothing() -> None:
        """Do nothing."""

    @tool
    def shout(p: Point) -> str:
        """Shout a point."""
        assert isinstance(p, Point)
        return f"POINT {p.x},{p.y}"

    agent = _agent(
        [add, fetch, make_point, nothing, shout],
        tool_call("add", {"a": 1}, id="c1"),
        tool_call("fetch", {"key": "k"}, id="c2"),
        tool_call("make_point", {"x": 5}, id="c3"),
        tool_call("nothing", {}, id="c4"),
        tool_call("shout", {"p": {"x": 1, "y": 2}}, id="c5"),
    )
    await run_events(agent)
    results = _results(agent)
    assert results["c1"] == "3"
    assert results["c2"].replace(" ", "") == '{"key":"k","n":[1,2]}'
    assert Point.model_validate_json(results["c3"]) == Point(x=5)
    assert results["c4"] == ""
    assert results["c5"] == "POINT 1,2"


class _Level(enum.IntEnum):
    HIGH = 2


class _Text(str):
    pass


_RETURNED: list[Any] = [
    3,
    -7,
    0,
    10**700,  # past the int_max_str_digits the test sets: str() refuses it, to_json does not
    True,
    2.5,
    [1, "a", None],
    {"k": [1, 2.5], "n": None},
    _Level.HIGH,  # an int subclass: its value, as to_json writes it (str() says _Level.HIGH)
    _Text("as is"),
    "text",
]


async def test_an_iterator_a_sync_function_returns_is_read_in_its_thread() -> None:
    # ``return map(fetch, ids)`` or a generator expression came back unread from the worker
    # thread and was read by the result's serialisation on the event loop (a blocking fetch
    # stalled every run there); a range or a dict's keys read as their repr, dict_keys([...]).
    loop_thread = threading.get_ident()

    def fetch(item: int) -> dict[str, Any]:
        return {"item": item, "on_the_loop": threading.get_ident() == loop_thread}

    @tool
    def mapped(count: int) -> Any:
        """Fetch items."""
        return map(fetch, range(count))

    @tool
    def expression(count: int) -> Any:
        """Fetch items."""
        return (fetch(item) for item in range(count))

    @tool
    def views() -> Any:
        """Stock."""
        stock = {"apples": 3}
        return {
            "names": stock.keys(),
            "counts": stock.values(),
            "rows": stock.items(),
            "r": range(2),
        }

    agent = _agent(
        [mapped, expression, views],
        tool_call("mapped", {"count": 2}, id="c1"),
        tool_call("expression", {"count": 1}, id="c2"),
        tool_call("views", {}, id="c3"),
    )
    await run_events(agent)
    assert _results(agent) == {
        "c1": '[{"item":0,"on_the_loop":false},{"item":1,"on_the_loop":false}]',
        "c2": '[{"item":0,"on_the_loop":false}]',
        "c3": '{"names":["apples"],"counts":[3],"rows":[["apples",3]],"r":[0,1]}',
    }


async def test_a_huge_range_a_tool_returns_is_written_as_its_text_not_built_as_a_list() -> None:
    # A range was written as the list it holds at any length: ``return range(10**9)`` built
    # gigabytes (and the run stalled building them) where it read "range(0, 1000000000)" before.
    @tool
    def huge() -> Any:
        """Ids."""
        return {"ids": range(10**9), "past_maxsize": range(10**20)}

    @tool
    def short() -> Any:
        """Ids."""
        return range(3)

    agent = _agent(
        [huge, short],
        tool_call("huge", {}, id="c1"),
        tool_call("short", {}, id="c2"),
    )
    await run_events(agent)
    assert _results(agent) == {
        "c1": '{"ids":"range(0, 1000000000)","past_maxsize":"range(0, 100000000000000000000)"}',
        "c2": "[0,1,2]",
    }


async def test_an_iterator_a_thread_false_function_returns_is_read_on_the_event_loop() -> None:
    # tools.md: with thread=False the function and the iterator it returns are read inline on
    # the event loop, to their end (no timeout can be given such a tool, none could stop it).
    loop_thread = threading.get_ident()

    @tool(thread=False)
    def inline(count: int) -> Any:
        """Items."""
        for _ in range(count):
            yield threading.get_ident() == loop_thread

    with pytest.raises(ValueError, match="no timeout can stop it"):
        tool(inline.fn, thread=False, timeout=1)
    agent = _agent([inline], tool_call("inline", {"count": 2}, id="c1"))
    await run_events(agent)
    assert _results(agent) == {"c1": "[true,true]"}


async def test_any_iterator_a_sync_function_returns_is_read_in_its_thread() -> None:
    # Only the exact types map, filter, zip, enumerate, reversed and generators were read in the
    # thread: ``itertools.islice(pages(), 2)`` was read on the event loop (its blocking fetches
    # with it), and a sqlite3 cursor (``return db.execute(...)``), read on the loop's thread,
    # was sqlite3's ProgrammingError, a cursor being usable only in the thread that made it.
    loop_thread = threading.get_ident()

    def pages() -> Any:
        for page in range(5):
            yield {"page": page, "on_the_loop": threading.get_ident() == loop_thread}

    @tool
    def first_pages() -> Any:
        """The first pages."""
        return itertools.islice(pages(), 2)

    @tool
    def rows() -> Any:
        """Rows."""
        db = sqlite3.connect(":memory:")
        return db.execute("SELECT 1 UNION SELECT 2 ORDER BY 1")

    agent = _agent(
        [first_pages, rows],
        tool_call("first_pages", {}, id="c1"),
        tool_call("rows", {}, id="c2"),
    )
    await run_events(agent)
    assert _results(agent) == {
        "c1": '[{"page":0,"on_the_loop":false},{"page":1,"on_the_loop":false}]',
        "c2": "[[1],[2]]",
    }


async def test_each_kind_of_return_value_reads_as_its_json() -> None:
    """A tool's value reaches the model as ``to_json`` writes it, whichever path ``_serialise``
    takes for its type (an exact int is written by ``str``, the plain JSON types skip the model
    tests): an int the interpreter will not turn into text, a bool, an int subclass and a str
    subclass included; None reads as nothing and a ToolResult as its content."""

    @tool
    def give(i: int) -> Any:
        """The i-th value."""
        return [*_RETURNED, None, ToolResult(content="told")][i]

    count = len(_RETURNED) + 2
    agent = _agent([give], *(tool_call("give", {"i": i}, id=f"c{i}") for i in range(count)))
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(640)
    try:
        await run_events(agent)
    finally:
        sys.set_int_max_str_digits(limit)
    results = _results(agent)
    for i, value in enumerate(_RETURNED):
        expected = value if isinstance(value, str) else pydantic_core.to_json(value).decode()
        assert results[f"c{i}"] == expected, value
    assert results["c4"] == "true" and results["c8"] == "2"
    assert results[f"c{count - 2}"] == "" and results[f"c{count - 1}"] == "told"


class Stats(BaseModel):
    mean: float
    extra: dict[str, Any]


async def test_a_model_result_holding_nan_reads_nan_like_a_dict_result() -> None:
    """A dict's NaN reached the model as NaN, a pydantic model's as null (its own JSON setting):
    the model read a value the tool never gave. Both read NaN now."""

    @tool
    def stats() -> Stats:
        """Statistics of an empty sample."""
        return Stats(mean=math.nan, extra={"max": -math.inf, "n": 0})

    @tool
    def raw() -> dict[str, Any]:
        """The same as a dict."""
        return {"mean": math.nan, "extra": {"max": -math.inf, "n": 0}}

    agent = _agent([stats, raw], tool_call("stats", {}, id="s"), tool_call("raw", {}, id="r"))
    await run_events(agent)
    results = _results(agent)
    assert results["s"] == results["r"] == '{"mean":NaN,"extra":{"max":-Infinity,"n":0}}'


class _StatsAsStrings(BaseModel):
    model_config = ConfigDict(ser_json_inf_nan="strings")
    mean: float


async def test_a_model_result_that_writes_its_nan_as_strings_reads_as_it_says() -> None:
    """A model configured to write NaN as a string (its owner's choice) reached the model as
    a NaN token once NaN was kept for models that left the setting at pydantic's null."""

    @tool
    def stats() -> _StatsAsStrings:
        """Statistics of an empty sample."""
        return _StatsAsStrings(mean=math.nan)

    agent = _agent([stats], tool_call("stats", {}, id="s"))
    await run_events(agent)
    assert _results(agent)["s"] == '{"mean":"NaN"}'


class _Measured(Stats):
    unit: str


async def test_a_model_result_of_a_class_made_per_call_does_not_keep_the_class_alive() -> None:
    """The serializer that keeps a model's NaN was cached in a module dict keyed by class, which
    kept alive every class a result was ever written from: a tool building its result type per
    call (``create_model`` from a schema) piled them up for the process's life. A subclass with
    another field still gets its own serializer, not its parent's."""
    made: list[weakref.ref[type[BaseModel]]] = []

    # Async: a sync tool's worker thread holds its last result (``_WorkItem.run``'s local) until
    # it returns, which under load may be after the run ended and the collection below ran.
    @tool
    async def report() -> Any:
        """A report whose type is made from a schema at call time."""
        cls = create_model("Report", mean=(float, ...))
        made.append(weakref.ref(cls))
        return cls(mean=math.nan)

    @tool
    def parent() -> Stats:
        """The parent's serializer is made first."""
        return Stats(mean=1.0, extra={})

    @tool
    def child() -> _Measured:
        """Then the subclass's."""
        return _Measured(mean=2.0, extra={}, unit="m")

    calls = [tool_call("report", {}, id=f"r{i}") for i in range(3)]
    calls += [tool_call("parent", {}, id="p"), tool_call("child", {}, id="c")]
    agent = _agent([report, parent, child], *calls)
    await run_events(agent)
    results = _results(agent)
    assert [results[f"r{i}"] for i in range(3)] == ['{"mean":NaN}'] * 3
    assert results["p"] == '{"mean":1.0,"extra":{}}'
    assert results["c"] == '{"mean":2.0,"extra":{},"unit":"m"}'
    # Each result is its tool message's ``structured`` value, held as long as the message is
    # (here the scripted model's record of its requests): let the run's messages go, so what is
    # asked is whether writing the results keeps the classes alive.
    assert isinstance(agent.model, ScriptedModel)
    agent.model.requests.clear()
    gc.collect()
    assert len(made) == 3
    assert [ref() for ref in made] == [None, None, None]


async def test_tool_context_is_injected() -> None:
    seen: dict[str, Any] = {}

    @tool
    def remember(key: str, ctx: ToolContext) -> str:
        """Remember a key in the session."""
        seen.update(call_id=ctx.tool_call_id, path=ctx.run_path, name=ctx.tool_name)
        ctx.session["remembered"] = key
        return f"had {ctx.session.get('before')}"

    agent = _agent([remember], tool_call("remember", {"key": "k1"}, id="c9"))
    result = await Runner(SequentialAgent("seq", [agent])).invoke("go", session={"before": 7})
    assert seen == {"call_id": "c9", "path": ("seq", "agent"), "name": "remember"}
    assert result.session["remembered"] == "k1"
    assert _results(agent) == {"c9": "had 7"}


async def test_invalid_json_arguments_become_an_error_result() -> None:
    agent = _agent([add], tool_call("add", '{"a": 1,', id="c1"))
    events = await run_events(agent)
    text = _results(agent)["c1"]
    assert text.startswith("Error:") and "JSON" in text and "add" in text
    assert all(e.error is None for e in events)
    assert simplify_events(events)[-1] == "agent: final"


async def test_arguments_failing_validation_become_an_error_result() -> None:
    agent = _agent(
        [add],
        tool_call("add", {"a": "seven"}, id="c1"),
        tool_call("add", {"b": 1}, id="c2"),
    )
    await run_events(agent)
    results = _results(agent)
    assert results["c1"].startswith("Error:") and "a" in results["c1"]
    assert "integer" in results["c1"]
    assert results["c2"].startswith("Error:") and "a" in results["c2"]
    assert "required" in results["c2"].lower() or "missing" in results["c2"].lower()


async def test_an_unknown_tool_becomes_an_error_result() -> None:
    agent = _agent([add], tool_call("subtract", {"a": 1}, id="c1"))
    await run_events(agent)
    text = _results(agent)["c1"]
    assert text.startswith("Error:") and "subtract" in text
    assert "add" in text  # tells the model what it may call


async def test_a_raising_tool_becomes_an_error_result() -> None:
    @tool
    async def explode(n: int) -> str:
        """Explode."""
        raise ValueError(f"cannot explode {n}")

    @tool
    def refuse() -> str:
        """Refuse cleanly."""
        raise ToolError("not today")

    agent = _agent(
        [explode, refuse],
        tool_call("explode", {"n": 3}, id="c1"),
        tool_call("refuse", {}, id="c2"),
    )
    events = await run_events(agent)
    results = _results(agent)
    assert results["c1"].startswith("Error:") and "cannot explode 3" in results["c1"]
    assert "explode" in results["c1"]
    assert results["c2"] == "Error: not today"
    assert all(e.error is None for e in events)
    tool_messages = [
        e.message for e in events if e.message is not None and e.message.role == "tool"
    ]
    assert {m.name for m in tool_messages} == {"explode", "refuse"}


async def _cancelled_inside() -> str:
    """Awaits a future someone else cancelled: ``CancelledError`` without the run being cancelled."""
    future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    future.cancel()
    return await future


@pytest.mark.parametrize("calls", [1, 2], ids=["inline", "concurrent"])
async def test_a_tool_raising_cancelled_error_on_its_own_becomes_an_error_result(
    calls: int,
) -> None:
    # Not the run's cancellation: a failure of the tool like any other. It used to hang a round
    # of concurrent calls (the call's task ended without an outcome) and, inline, to escape the
    # run as if the caller's task had been cancelled.
    @tool
    def other() -> str:
        """Answers."""
        return "fine"

    wanted = [tool_call("cancelled", id="c1"), tool_call("other", id="c2")][:calls]
    agent = _agent([tool(_cancelled_inside, name="cancelled"), other], *wanted)
    async with asyncio.timeout(5):
        events = await run_events(agent)
    results = _results(agent)
    assert results["c1"] == "Error: tool 'cancelled' failed: CancelledError"
    assert results.get("c2", "fine") == "fine"
    assert simplify_events(events)[-1] == "agent: final"


@tool
async def quit_early() -> str:
    """Cancels the task it runs in."""
    task = asyncio.current_task()
    assert task is not None
    task.cancel()
    await asyncio.sleep(0)
    return "never"


async def test_a_lone_call_cancelling_its_task_cancels_the_run() -> None:
    # Inline, the current task is the one running the run (here the caller's): its
    # cancellation cannot be told from the caller's own, which must stop the run.
    task = asyncio.create_task(run_events(_agent([quit_early], tool_call("quit_early", id="c1"))))
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()


async def test_a_tool_cancelling_its_own_task_in_a_round_becomes_an_error_result() -> None:
    # In a round of several calls each call runs in a task of its own: a tool cancelling that
    # task (``asyncio.current_task().cancel()``, or a watchdog it handed the task to) cancels
    # its call, not the run, which nobody cancelled. Its model reads the same error result as
    # for a CancelledError the tool let out on its own (above), and the run goes on; it used
    # to end with an error event ``CancelledError`` naming no tool.
    @tool
    async def other() -> str:
        """Answers after a step of the loop."""
        await asyncio.sleep(0)
        return "fine"

    agent = _agent(
        [quit_early, other], tool_call("quit_early", id="c1"), tool_call("other", id="c2")
    )
    async with asyncio.timeout(5):
        events = await run_events(agent)
    assert all(e.error is None for e in events), simplify_events(events)
    assert _results(agent) == {
        "c1": "Error: tool 'quit_early' failed: CancelledError",
        "c2": "fine",
    }
    assert simplify_events(events)[-1] == "agent: final"


class _Abort(BaseException):
    """A program's own abort: a BaseException that is no Exception."""


async def test_a_second_base_exception_of_a_round_is_logged_not_lost(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Two calls of one round each raise a BaseException that is no Exception: the round raises
    # one (its type kept, as a lone call's would be: an ``except _Abort`` of the caller still
    # catches it; asyncio.TaskGroup raises the first KeyboardInterrupt/SystemExit alone too),
    # and the other, which nobody would otherwise see, is logged on ``adk.tools`` naming its
    # tool. It used to be dropped without a word.
    @tool
    async def first() -> str:
        """Aborts."""
        raise _Abort("first abort")

    @tool
    async def second() -> str:
        """Aborts too."""
        raise _Abort("second abort")

    agent = _agent([first, second], tool_call("first", id="c1"), tool_call("second", id="c2"))
    with caplog.at_level("ERROR", logger="adk.tools"), pytest.raises(_Abort) as raised:
        await run_events(agent)
    logged = [r for r in caplog.records if r.name == "adk.tools"]
    assert len(logged) == 1, [r.getMessage() for r in logged]
    other = logged[0].exc_info[1] if logged[0].exc_info else None
    assert isinstance(other, _Abort) and other is not raised.value
    assert {str(raised.value), str(other)} == {"first abort", "second abort"}
    whose = "second" if str(other) == "second abort" else "first"
    assert f"tool '{whose}'" in logged[0].getMessage()


async def test_a_base_exception_after_its_round_stopped_is_logged_not_lost(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The reader leaves at the first result: the round cancels the call still running, whose
    # cleanup raises a BaseException nobody awaits any more. Logged, not dropped.
    @tool
    async def quick() -> str:
        """Answers at once."""
        return "quick"

    @tool
    async def stuck() -> str:
        """Waits, and aborts when cancelled."""
        try:
            await asyncio.Event().wait()
        finally:
            raise _Abort("cleanup abort")

    agent = _agent([quick, stuck], tool_call("quick", id="c1"), tool_call("stuck", id="c2"))
    with caplog.at_level("ERROR", logger="adk.tools"):
        async with contextlib.aclosing(Runner(agent).run("hi")) as events:
            async for event in events:
                if event.message is not None and event.message.role == "tool":
                    break
    [logged] = [r for r in caplog.records if r.name == "adk.tools"]
    assert "tool 'stuck'" in logged.getMessage() and "_Abort: cleanup abort" in logged.getMessage()
    assert "its round had stopped" in logged.getMessage()


async def test_cancelling_the_run_during_a_tool_call_still_cancels_it() -> None:
    started = asyncio.Event()

    @tool
    async def wait() -> str:
        """Waits forever."""
        started.set()
        await asyncio.Event().wait()
        return "never"

    task = asyncio.create_task(run_events(_agent([wait], tool_call("wait", id="c1"))))
    async with asyncio.timeout(5):
        await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_calls_of_one_turn_run_concurrently() -> None:
    first_in, second_in = asyncio.Event(), asyncio.Event()

    @tool
    async def ping() -> str:
        """Waits for pong."""
        first_in.set()
        await second_in.wait()
        return "ping done"

    @tool
    async def pong() -> str:
        """Waits for ping."""
        second_in.set()
        await first_in.wait()
        return "pong done"

    agent = _agent([ping, pong], tool_call("ping", id="c1"), tool_call("pong", id="c2"))
    async with asyncio.timeout(5):  # run one after the other, they would wait forever
        await run_events(agent)
    assert _results(agent) == {"c1": "ping done", "c2": "pong done"}


async def test_sync_tools_run_in_worker_threads_concurrently() -> None:
    """Two blocking sync tools of one turn meet at a barrier: run inline on the event loop, one
    after the other, the first would wait at the barrier until it broke."""
    barrier = threading.Barrier(2, timeout=5)
    loop_thread = threading.get_ident()
    threads: list[int] = []

    @tool
    def blocking(n: int) -> int:
        """Blocks until its sibling call arrives."""
        threads.append(threading.get_ident())
        barrier.wait()
        return n * 2

    agent = _agent(
        [blocking],
        tool_call("blocking", {"n": 1}, id="c1"),
        tool_call("blocking", {"n": 2}, id="c2"),
    )
    await run_events(agent)
    assert _results(agent) == {"c1": "2", "c2": "4"}
    assert loop_thread not in threads


async def test_a_sync_tool_with_thread_false_runs_on_the_event_loop() -> None:
    seen: list[int] = []

    @tool(thread=False)
    def tiny(n: int) -> int:
        """Cheap enough to run inline."""
        seen.append(threading.get_ident())
        return n + 1

    agent = _agent([tiny], tool_call("tiny", {"n": 1}, id="c1"))
    await run_events(agent)
    assert _results(agent) == {"c1": "2"}
    assert seen == [threading.get_ident()]


async def test_partials_callable_objects_and_positional_only_parameters_work() -> None:
    def scale(factor: int, /, value: int) -> int:
        """Scale a value.

        Args:
            value: The value to scale.
        """
        return factor * value

    class Counter:
        """Count words."""

        async def __call__(self, text: str) -> int:
            return len(text.split())

    async def _shout(text: str) -> str:
        return text.upper()

    @functools.wraps(_shout)
    def shout(text: str) -> Any:  # a sync wrapper handing back the coroutine
        return _shout(text)

    triple = FunctionTool(functools.partial(scale, 3), name="triple")
    assert set(triple.spec.parameters["properties"]) == {"value"}
    assert triple.spec.description == "Scale a value."
    counter = FunctionTool(Counter(), name="count_words")
    assert counter.spec.description == "Count words."
    with pytest.raises(ValueError, match="pass name="):
        FunctionTool(Counter())
    agent = _agent(
        [tool(scale), triple, counter, FunctionTool(shout, name="shout")],
        tool_call("scale", {"factor": 2, "value": 5}, id="c1"),
        tool_call("triple", {"value": 5}, id="c2"),
        tool_call("count_words", {"text": "one two three"}, id="c3"),
        tool_call("shout", {"text": "hi"}, id="c4"),
    )
    await run_events(agent)
    assert _results(agent) == {"c1": "10", "c2": "15", "c3": "3", "c4": "HI"}


async def test_arguments_a_partial_binds_by_keyword_are_not_shown_to_the_model() -> None:
    """``functools.partial(fn, conn=conn, api_key=key)`` binds a dependency the model must not see
    nor change (AutoGen and LangChain users bind a database or a key so). Only arguments bound by
    position were left out: a connection bound by keyword refused the tool (no JSON schema) and
    a key was sent to the model provider as its parameter's default, which the model could
    override."""

    def query(sql: str, conn: sqlite3.Connection, api_key: str = "") -> str:
        """Run a read-only query."""
        assert api_key == "sk-secret"
        return str(conn.execute(sql).fetchall())

    conn = sqlite3.connect(":memory:", check_same_thread=False)  # sync tools run in a thread
    bound = FunctionTool(functools.partial(query, conn=conn, api_key="sk-secret"), name="query")
    assert bound.spec.parameters["properties"] == {"sql": {"type": "string"}}
    assert "sk-secret" not in str(bound.spec)
    agent = _agent(
        [bound],
        tool_call("query", {"sql": "select 1 + 1"}, id="c1"),
        tool_call("query", {"sql": "select 1", "api_key": "mine"}, id="c2"),
    )
    await run_events(agent)
    results = _results(agent)
    assert results["c1"] == "[(2,)]"
    assert results["c2"].startswith("Error:") and "api_key" in results["c2"]


async def test_a_method_decorated_in_its_class_is_refused_and_its_bound_method_works() -> None:
    """``@tool`` on a method inside its class made a tool asking the model for ``self`` (an
    untyped required parameter): every call then failed. It is refused, naming the fix."""
    with pytest.raises(
        TypeError, match=r"first parameter is 'self'.*FunctionTool\(instance\.get\)"
    ):

        class Store:
            @tool
            def get(self, key: str) -> str:
                """Read a value."""
                return key

    with pytest.raises(TypeError, match="first parameter is 'cls'"):
        FunctionTool(lambda cls, key: key, name="get")

    class Notes:
        def __init__(self) -> None:
            self.notes = {"todo": "milk"}

        def read(self, title: str) -> str:
            """Read a note."""
            return self.notes[title]

    @tool
    def echo(self: str) -> str:  # an annotated parameter that happens to be named self
        """Echo."""
        return self

    read = FunctionTool(Notes().read)
    assert read.spec.parameters["required"] == ["title"]
    assert echo.spec.parameters["required"] == ["self"]
    agent = _agent(
        [read, echo],
        tool_call("read", {"title": "todo"}, id="c1"),
        tool_call("echo", {"self": "hi"}, id="c2"),
    )
    await run_events(agent)
    assert _results(agent) == {"c1": "milk", "c2": "hi"}


async def test_parameters_named_like_basemodel_attributes_keep_their_names_and_values() -> None:
    """Such parameters get other field names in the arguments model (FunctionTool reads them back
    by name); every other tool reads the validated arguments straight from the instance."""

    @tool
    def describe(json: str, copy: int, schema: str = "s", plain: int = 1) -> str:
        """Describe the arguments."""
        return f"{json}|{copy}|{schema}|{plain}"

    @tool
    def plain(text: str, times: int = 2) -> str:
        """Repeat a text."""
        return text * times

    assert set(describe.spec.parameters["properties"]) == {"json", "copy", "schema", "plain"}
    agent = _agent(
        [describe, plain],
        tool_call("describe", {"json": "j", "copy": 3}, id="c1"),
        tool_call("describe", {"json": "j", "copy": 3, "schema": "x", "plain": 5}, id="c2"),
        tool_call("plain", {"text": "ab"}, id="c3"),
        tool_call("plain", {"times": 3, "text": "ab"}, id="c4"),
    )
    await run_events(agent)
    assert _results(agent) == {"c1": "j|3|s|1", "c2": "j|3|x|5", "c3": "abab", "c4": "ababab"}


async def test_a_result_json_cannot_hold_is_sent_as_text_not_as_a_failure() -> None:
    """The tool has run by then: "failed" would invite the model to repeat its side effects."""

    class Receipt:
        def __str__(self) -> str:
            return "receipt #7"

    @tool
    async def pay() -> Any:
        """Pay."""
        return Receipt()

    @tool
    async def raw() -> bytes:
        """Raw bytes."""
        return b"\xff\xfe"

    agent = _agent([pay, raw], tool_call("pay", id="c1"), tool_call("raw", id="c2"))
    await run_events(agent)
    assert _results(agent) == {"c1": '"receipt #7"', "c2": "b'\\xff\\xfe'"}


async def test_a_custom_tool_and_a_toolset() -> None:
    class Echo:
        spec = ToolSpec(
            name="echo",
            description="Echo the text",
            parameters={"type": "object", "properties": {"text": {"type": "string"}}},
        )

        async def run(self, arguments: str, ctx: ToolContext) -> ToolResult:
            return ToolResult(content=f"echo {arguments}", structured={"raw": arguments})

    class Failing:
        spec = ToolSpec(name="failing", description="Always fails")

        async def run(self, arguments: str, ctx: ToolContext) -> ToolResult:
            return ToolResult.error("it failed")

    class Kit:
        def __init__(self) -> None:
            self.asked: list[RunContext] = []

        async def tools(self, ctx: RunContext) -> list[Tool]:
            self.asked.append(ctx)
            return [Echo(), Failing()]

    kit = Kit()
    assert isinstance(kit, Toolset) and isinstance(Echo(), Tool)
    agent = _agent(
        [kit],
        tool_call("echo", '{"text": "hi"}', id="c1"),
        tool_call("failing", {}, id="c2"),
    )
    await run_events(agent)
    assert len(kit.asked) == 1
    assert _results(agent) == {"c1": 'echo {"text": "hi"}', "c2": "Error: it failed"}
    assert isinstance(agent.model, ScriptedModel)
    assert {s.name for s in agent.model.requests[0].tools} == {"echo", "failing"}


async def test_the_model_is_told_the_tool_specs() -> None:
    agent = _agent([add], tool_call("add", {"a": 1}, id="c1"))
    await run_events(agent)
    assert isinstance(agent.model, ScriptedModel)
    assert agent.model.requests[0].tools == [add.spec]


async def test_a_tool_may_end_the_run() -> None:
    @tool
    def finish(answer: str, ctx: ToolContext) -> str:
        """Finish the run."""
        ctx.exit()
        return answer

    agent = _agent([finish], tool_call("finish", {"answer": "42"}, id="c1"), final="never")
    after = ScriptAgent("after")
    events = await run_events(SequentialAgent("seq", [agent, after]))
    assert simplify_events(events)[-2:] == ["agent: [tool finish] 42", "agent: [exit]"]
    assert isinstance(agent.model, ScriptedModel)
    assert len(agent.model.requests) == 1 and after.runs == 0


@pytest.mark.parametrize("ask", ["exit", "transfer"])
async def test_a_tool_that_fails_after_asking_to_end_does_not_end_the_run(ask: str) -> None:
    """The model must read the error: the actions of a failed call are dropped."""

    @tool
    def finish(ctx: ToolContext) -> str:
        """Finish the run."""
        if ask == "exit":
            ctx.exit()
        else:
            ctx.transfer("elsewhere")
        raise RuntimeError("boom")

    agent = _agent([finish], tool_call("finish", id="c1"), final="recovered")
    after = ScriptAgent("after", "after ran")
    events = await run_events(SequentialAgent("seq", [agent, after]))
    assert simplify_events(events) == [
        "agent: [call finish {}]",
        "agent: [tool finish] Error: tool 'finish' failed: RuntimeError: boom",
        "agent: recovered",
        "after: after ran",
    ]


async def test_a_tool_may_break_the_enclosing_loop() -> None:
    @tool
    def stop(ctx: ToolContext) -> str:
        """Stop looping."""
        ctx.break_loop()
        return "stopping"

    model = ScriptedModel(
        [Reply(tool_calls=[tool_call("stop", id="c1")]), "wrapped up"], cycle=True
    )
    agent = ReActAgent("agent", model, tools=[stop])
    events = await run_events(LoopAgent("loop", [agent], max_iterations=3))
    assert len(model.requests) == 2  # one iteration: the tool round, then the final answer
    assert "agent: [break_loop]" in simplify_events(events)


def test_tool_result_error_prefix() -> None:
    assert ToolResult.error("x") == ToolResult(content="Error: x", is_error=True)
    assert ToolResult.error("Error: y").content == "Error: y"
    assert Message.tool("r", tool_call_id="1").role == "tool"


@register_type
class _Quote(BaseModel):
    """A supplier's quote, registered: a checkpoint holds it as itself."""

    supplier: str
    cents: int


class _Opaque:
    """What neither a checkpoint nor JSON can hold."""


class _OpaqueTool:
    """A hand-written tool whose structured output is an object of its own."""

    spec = ToolSpec(name="opaque", description="Gives an object beside its text.")

    async def run(self, arguments: str, ctx: ToolContext) -> ToolResult:
        return ToolResult(content="an object", structured=_Opaque())


async def test_a_tools_structured_output_rides_its_react_tool_event_across_a_pause(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A function tool returning a pydantic model gave its tool event the model's JSON text
    alone (no ``ToolResult.structured``), and a tool returning ``ToolResult(structured=...)``
    lost it on the way to the events of a ``ReActAgent`` run. The tool message carries it as
    ``metadata["structured"]`` (the model as the tool returned it; the text the model reads is
    as before). A pause of its round keeps it (a registered model comes back as itself); a
    value neither a checkpoint nor JSON holds is saved and written as None, with a warning,
    rather than the pause or the event refused."""
    from adk.checkpoint import codec

    codec._warned_structured.difference_update(
        {("opaque", w) for w in ("a checkpoint", "an event's JSON")}
    )
    returned: list[_Quote] = []

    @tool
    def quote(supplier: str) -> _Quote:
        """A quote from a supplier."""
        returned.append(_Quote(supplier=supplier, cents=1999))
        return returned[-1]

    @tool(require_approval=True)
    def pay(cents: int) -> str:
        """Pay; a person approves."""
        return f"paid {cents}"

    calls = [
        tool_call("quote", {"supplier": "Bolt"}, id="q"),
        tool_call("opaque", {}, id="o"),
        tool_call("pay", {"cents": 5}, id="p"),
    ]
    model = ScriptedModel([Reply(tool_calls=calls), "done"])
    runner = Runner(ReActAgent("clerk", model, tools=[quote, _OpaqueTool(), pay]))
    events = [e async for e in runner.run("Quote, then pay.")]
    shown = {e.message.name: e for e in events if e.message is not None and e.message.name}
    got = shown["quote"].message
    assert got is not None and got.metadata["structured"] is returned[0]
    assert got.content == '{"supplier":"Bolt","cents":1999}'  # what the model reads
    sent = AgentEvent.from_dict(shown["quote"].to_dict()).message
    assert sent is not None and sent.metadata["structured"] == {"supplier": "Bolt", "cents": 1999}
    with caplog.at_level("WARNING", logger="adk.tools"):
        opaque = shown["opaque"].to_dict()["output"]["message"]
        paused = events[-1].interrupted
    assert opaque["metadata"] == {"structured": None} and opaque["content"] == "an object"
    assert paused is not None  # saved: not refused for the object
    warned = [r.getMessage() for r in caplog.records if r.name == "adk.tools"]
    assert any("'opaque'" in w and "an event's JSON cannot hold" in w for w in warned), warned
    assert any("'opaque'" in w and "a checkpoint cannot hold" in w for w in warned), warned

    resuming = runner.resume(paused.checkpoint_id, True)
    resumed = [e async for e in resuming]
    assert resumed[-1].message is not None and resumed[-1].message.content == "done"
    kept = {m.name: m for m in run_messages(resuming) if m.role == "tool"}
    assert kept["quote"].metadata["structured"] == _Quote(supplier="Bolt", cents=1999)
    assert kept["opaque"].metadata["structured"] is None
    assert kept["opaque"].content == "an object"


class _Customer(BaseModel):
    name: str
    ssn: str


async def test_an_after_tool_redacting_text_sees_a_model_result_as_text_and_its_event_no_model() -> (
    None
):
    """An ``after_tool`` callback gets a function tool's result as the model will read it: a
    pydantic model the tool returned as its JSON text, a ``str`` (google_adk.md, tracing.md).
    Once the model became the result's ``structured`` value, the callback got a ``ToolResult``:
    a redaction written to that contract (``isinstance(result, str)``) passed it by, and the
    model read the number it hid, and the tool's event carried it twice (the text and
    ``metadata["structured"]``) to whoever reads the run's events. The callback sees the text;
    its replacement is the result (no ``structured``); one that keeps it keeps the model."""

    @tool
    def lookup(name: str) -> _Customer:
        """A customer's record."""
        return _Customer(name=name, ssn="123-45-6789")

    seen: list[object] = []

    def redact(ctx: RunContext, call: Any, result: Any) -> Any:
        seen.append(result)
        if isinstance(result, str) and call.arguments != '{"name": "Bo"}':
            return result.replace("123-45-6789", "***-**-****")
        return None

    calls = [
        tool_call("lookup", {"name": "Ann"}, id="a"),
        tool_call("lookup", {"name": "Bo"}, id="b"),
    ]
    model = ScriptedModel([Reply(tool_calls=calls), "done"])
    runner = Runner(
        ReActAgent("clerk", model, tools=[lookup]), callbacks=[Callbacks(after_tool=redact)]
    )
    events = [e async for e in runner.run("Look them up.")]
    assert seen == ['{"name":"Ann","ssn":"123-45-6789"}', '{"name":"Bo","ssn":"123-45-6789"}']
    shown = {e.message.tool_call_id: e for e in events if e.message and e.message.role == "tool"}
    tools = {call_id: event.message for call_id, event in shown.items()}
    assert tools["a"].content == '{"name":"Ann","ssn":"***-**-****"}'
    assert "structured" not in tools["a"].metadata  # replaced: the hidden number not carried
    assert "123-45-6789" not in repr(shown["a"].to_dict())
    assert tools["b"].metadata["structured"] == _Customer(name="Bo", ssn="123-45-6789")  # kept
    sent = [m for m in model.requests[-1].messages if m.role == "tool"]
    assert [m.content for m in sent] == [tools["a"].content, tools["b"].content]
