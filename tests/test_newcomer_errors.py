"""A newcomer's first programs, written wrong the way newcomers write them: each mistake meets an
error where it is made (the constructor, or the first call), naming the thing and saying what to
do, and loses nothing (no run started, no checkpoint gone).

The mistakes are those of a developer who knows asyncio and pydantic, reads README.md and the
concept pages, and has used another agent SDK: an agent's parts passed in the wrong shape, a tool
that cannot be one, a run awaited or iterated the wrong way, a checkpoint resumed twice, a model
pointed at the wrong URL or name. ScriptedModel stands in for the model except where the adapter
itself is the point (the wire server of tests/openai_server.py).
"""

from __future__ import annotations

import copy
import functools
import re
import sys
import threading
import typing
import weakref
from collections.abc import AsyncIterator, Callable
from typing import Any
from unittest import mock

import pydantic
import pytest
from openai_server import OpenAIServer, Reply

import adk
import adk.execution
from adk import FunctionTool, ParallelAgent, Runner, SequentialAgent, tool
from adk.testing import Reply as ScriptedReply
from adk.testing import ScriptedModel, tool_call
from prebuilt import PlanExecute, ReActAgent, Supervisor


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(require_approval=True)
async def pay(amount: int) -> str:
    """Pay an amount."""
    return f"paid {amount}"


def lookup(city: str) -> str:
    """Look a city up."""
    return city


class Notes(adk.Toolset):
    """A toolset of one's own, with nothing in it."""

    async def tools(self, ctx: adk.RunContext) -> list[adk.Tool]:
        return []


def model(*replies: Any) -> ScriptedModel:
    return ScriptedModel(list(replies) or ["hi"])


def worker(name: str) -> ReActAgent:
    return ReActAgent(name, model(), description=f"The {name} worker.")


# -- running: the Runner's two ways in -----------------------------------------------------------


async def test_awaiting_run_is_pythons_type_error_and_starts_nothing() -> None:
    # ``run`` is an async generator (kept so: see docs/performance.md, per event through
    # runner.run()); awaiting it is Python's own TypeError, which docs/agents.md's Runner
    # section names with its remedy. What matters here: nothing ran, the model was not called.
    scripted = model("hello")
    runner = Runner(ReActAgent("a", scripted))
    events = runner.run("hi")
    with pytest.raises(TypeError, match="async_generator can't be used in 'await' expression"):
        await events  # type: ignore[misc]
    with pytest.raises(TypeError, match="'async_generator' object is not iterable"):
        for _ in runner.run("hi"):  # type: ignore[attr-defined]
            pass
    assert scripted.requests == []
    await events.aclose()
    assert (await runner.invoke("hi")).text == "hello"  # the runner is as it was


async def test_invoke_not_awaited_runs_nothing() -> None:
    scripted = model("hello")
    runner = Runner(ReActAgent("a", scripted))
    pending = runner.invoke("hi")
    pending.close()  # what the "never awaited" warning is about: no work was done
    assert scripted.requests == []


# -- constructors: refusals that name the thing and say what to do ------------------------------

_REFUSED: list[tuple[str, Callable[[], object], type[Exception], str]] = [
    (
        "one tool not in a list",
        lambda: ReActAgent("a", model(), tools=add),  # type: ignore[arg-type]
        TypeError,
        r"ReActAgent 'a': tools must be a list.*for one, write \[\.\.\.\]",
    ),
    (
        "name and model swapped",
        lambda: ReActAgent(model(), "a"),  # type: ignore[arg-type]
        TypeError,
        r"a ReActAgent needs a str name, got ScriptedModel",
    ),
    (
        "an agent given as a tool",
        lambda: ReActAgent("p", model(), tools=[worker("w")]),  # type: ignore[list-item]
        TypeError,
        r"agent 'p'.*to call agent 'w' as a tool, wrap it: adk.AgentTool\(agent\)",
    ),
    (
        "two tools of one name",
        lambda: ReActAgent("a", model(), tools=[add, FunctionTool(add.fn)]),
        ValueError,
        r"agent 'a': two tools are named 'add'.*give one another name",
    ),
    (
        "a tool name with a space",
        lambda: FunctionTool(lookup, name="look up"),
        ValueError,
        r"invalid tool name 'look up'.*pass name= to choose another",
    ),
    (
        "*args and **kwargs",
        lambda: FunctionTool(lambda *args, **kwargs: None, name="anything"),
        TypeError,
        r"tool 'anything': \*args/\*\*kwargs cannot be described to a model",
    ),
    (
        "a parameter pydantic cannot describe",
        lambda: FunctionTool(_takes_a_lock),
        TypeError,
        r"tool '_takes_a_lock': parameter 'lock' has type .*cannot be described to a model",
    ),
    (
        "a RunContext parameter where ToolContext goes",
        lambda: FunctionTool(_takes_a_run_context),
        TypeError,
        r"parameter 'ctx' has type RunContext.*annotated adk.ToolContext",
    ),
    (
        "instruction not a str",
        lambda: ReActAgent("p", model(), instruction=["Be brief."]),  # type: ignore[arg-type]
        TypeError,
        r"ReActAgent 'p': instruction must be a str, got list",
    ),
    (
        "two sub-agents of one name",
        lambda: SequentialAgent("s", [worker("x"), worker("x")]),
        ValueError,
        r"s: sub-agent names must be unique, repeated: \['x'\]",
    ),
    (
        "the agent class given to the Runner",
        lambda: Runner(ReActAgent),  # type: ignore[arg-type]
        TypeError,
        r"Runner\(agent\): expected an agent .*got the class ReActAgent \(pass an instance\)",
    ),
    (
        "one scripted reply not in a list",
        lambda: ScriptedModel("hi"),  # type: ignore[arg-type]
        TypeError,
        r"ScriptedModel takes a list of replies .*for one reply, write ScriptedModel\(\[\.\.\.\]\)",
    ),
    (
        "an output_schema instance for its class",
        lambda: ReActAgent("a", model(), output_schema=_Answer(x=1)),  # type: ignore[arg-type]
        TypeError,
        r"ReActAgent 'a': output_schema must be a pydantic model class .*pass the class, _Answer",
    ),
    (
        "an instruction function that takes no context",
        lambda: ReActAgent("a", model(), instruction=lambda: "Be brief."),  # type: ignore[arg-type]
        TypeError,
        r"ReActAgent 'a': instruction function .* cannot be called as fn\(ctx\)",
    ),
    (
        "an agent whose __init__ skips BaseAgent's",
        lambda: Runner(_NoSuper()),
        TypeError,
        r"got _NoSuper with name None \(it needs a non-empty str name\)",
    ),
    (
        "a supervisor without workers",
        lambda: Supervisor(worker("boss"), []),
        ValueError,
        r"a supervisor needs at least one worker",
    ),
]


class _Answer(pydantic.BaseModel):
    x: int


class _NoSuper(adk.BaseAgent):
    def __init__(self) -> None:  # BaseAgent.__init__ not called: no name
        pass

    async def run(
        self, input: adk.AgentInput, ctx: adk.RunContext
    ) -> AsyncIterator[adk.AgentEvent]:
        yield adk.AgentEvent.of("hi")


def _takes_a_lock(lock: threading.Lock) -> str:  # type: ignore[valid-type]
    """Hold a lock."""
    return ""


def _takes_a_run_context(x: int, ctx: adk.RunContext) -> str:
    """Read the run."""
    return ""


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [pytest.param(make, error, message, id=case) for case, make, error, message in _REFUSED],
)
def test_a_wrong_part_is_refused_where_it_is_made(
    make: Callable[[], object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        make()


def test_what_needs_no_refusal_is_taken() -> None:
    # A plain function is wrapped (no @tool needed); a sync one and a bound method are tools; a
    # partial keeps its function's name; a tool without a docstring has an empty description.
    class Store:
        def find(self, key: str) -> str:
            """Find a key."""
            return key

    def bare(a, b):  # type: ignore[no-untyped-def]
        return a

    agent = ReActAgent("a", model(), tools=[lookup, Store().find, bare])
    assert repr(agent) == "ReActAgent(name='a', tools=['bare', 'find', 'lookup'])"  # sorted
    assert FunctionTool(functools.partial(lookup, city="Oslo")).spec.name == "lookup"
    assert FunctionTool(bare).spec.description == ""
    assert FunctionTool(bare).spec.parameters["required"] == ["a", "b"]


def test_a_method_decorated_in_its_class_is_told_to_use_the_bound_method() -> None:
    with pytest.raises(TypeError, match=r"tool 'find'.*make the tool of the bound method instead"):

        class Store:
            @tool
            def find(self, key: str) -> str:
                """Find a key."""
                return key


def test_a_classmethod_decorated_in_its_class_is_told_to_use_the_class() -> None:
    # It was "a function tool is made of a function, got classmethod <classmethod(...)>", which
    # said nothing of what to write instead (a staticmethod is callable, so that one works).
    with pytest.raises(TypeError, match=r"classmethod 'Store.find' .*FunctionTool\(Store.find\)"):

        class Store:
            @tool  # type: ignore[arg-type]
            @classmethod
            def find(cls, key: str) -> str:
                """Find a key."""
                return key


def test_a_decorator_without_functools_wraps_is_named_as_what_hides_the_parameters() -> None:
    # The refusal said only "tool 'wrapper': *args/**kwargs cannot be described", sending the
    # user looking for *args in their own function, whose parameters the wrapper hides.
    def logged(fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return fn(*args, **kwargs)

        return wrapper

    with pytest.raises(TypeError) as refused:
        FunctionTool(logged(lookup))
    assert str(refused.value) == (
        "tool 'wrapper': *args/**kwargs cannot be described to a model; "
        "'test_a_decorator_without_functools_wraps_is_named_as_what_hides_the_parameters."
        "<locals>.logged.<locals>.wrapper' looks like a decorator's wrapper: a decorator that "
        "does not use functools.wraps hides the parameters of the function it wraps"
    )

    # With functools.wraps the tool is the function's, its parameters shown.
    def logged_well(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return fn(*args, **kwargs)

        return wrapper

    wrapped = FunctionTool(logged_well(lookup))
    assert (wrapped.name, wrapped.spec.parameters["required"]) == ("lookup", ["city"])


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="pydantic takes typing.TypedDict there")
def test_a_typing_typeddict_before_python_3_12_is_refused_naming_the_tool() -> None:
    # pydantic's PydanticUserError came out of FunctionTool bare, naming neither tool nor
    # parameter (only PydanticSchemaGenerationError, its subclass, was caught).
    with pytest.raises(
        TypeError, match=r"^tool '_order': parameter 'items': Please use `typing_ex"
    ):
        FunctionTool(_order)


class _Item(typing.TypedDict):  # typing's, as a user writes it first
    sku: str


def _order(items: list[_Item]) -> str:
    """Place an order."""
    return ""


async def test_a_mutable_default_is_not_shared_between_calls() -> None:
    # ``into: list = []``, Python's shared-default trap: each call gets its own list, as the
    # arguments are validated (and defaults filled in, copied) per call.
    def collect(item: str, into: list[str] = []) -> int:  # noqa: B006
        """Collect an item."""
        into.append(item)
        return len(into)

    calls = [ScriptedReply(tool_calls=[tool_call("collect", {"item": i})]) for i in "ab"]
    result = await Runner(ReActAgent("a", model(*calls, "done"), tools=[collect])).invoke("go")
    assert [e.message.content for e in result.events if e.output.tool_name] == ["1", "1"]


async def test_one_agent_in_two_workflows_runs_in_each() -> None:
    # A flow gives an agent one parent (with_sub_agents refuses a second); a workflow does not,
    # and each run places the agent under the workflow that ran it.
    shared = ReActAgent("shared", model("s1", "s2"))
    first = await Runner(SequentialAgent("one", [shared])).invoke("x")
    second = await Runner(SequentialAgent("two", [shared])).invoke("x")
    assert [(e.run_path, e.message.content) for e in first.events + second.events] == [
        (("one", "shared"), "s1"),
        (("two", "shared"), "s2"),
    ]


# -- defects found: refusals that did not name the mistake --------------------------------------


@pytest.mark.parametrize(
    "make",
    [lambda: FunctionTool(lambda city: city), lambda: tool(lambda city: city)],
    ids=["FunctionTool", "tool"],
)
def test_a_lambda_tool_is_told_to_take_a_name(make: Callable[[], object]) -> None:
    # Was "a function tool needs a name", which did not say why a function had none, nor how to
    # give it one.
    with pytest.raises(ValueError, match=r"a lambda has no name of its own: pass name="):
        make()
    assert FunctionTool(lambda city: city, name="echo").spec.name == "echo"


@pytest.mark.parametrize("kind", [SequentialAgent, ParallelAgent, adk.LoopAgent])
def test_sub_agents_given_one_by_one_are_told_to_go_in_a_list(kind: type[Any]) -> None:
    # SequentialAgent("s", a, b), as a newcomer writes it from Google ADK's keyword
    # sub_agents=[...]: the second agent landed in ``description`` and the refusal said
    # "description must be a str, got ReActAgent" (LoopAgent: "sub_agents must be a list").
    with pytest.raises(
        TypeError,
        match=rf"{kind.__name__} 's': sub_agents must be a list of agents, got ReActAgent "
        r".*\(a single agent: put the sub-agents in one list, \[a, b\]\)",
    ):
        kind("s", worker("a"), worker("b"))


@pytest.mark.parametrize("kind", [SequentialAgent, ParallelAgent, adk.LoopAgent])
def test_a_workflow_without_its_name_is_told_the_name_comes_first(kind: type[Any]) -> None:
    # SequentialAgent([a, b]), the name forgotten (Eino's NewSequentialAgent takes a config, Google
    # ADK's its name by keyword): Python's "_Workflow.__init__() missing 1 required positional
    # argument: 'sub_agents'" named a private class and blamed the argument that was given.
    name = kind.__name__
    for make in (lambda: kind([worker("a"), worker("b")]), lambda: kind(sub_agents=[worker("a")])):
        with pytest.raises(TypeError) as refused:
            make()
        said = str(refused.value)
        assert said.startswith(f"{name} takes its name first, then its sub-agents in a list: "), (
            said
        )
        assert f"{name}('name', [a, b])" in said and "_Workflow" not in said, said
    with pytest.raises(TypeError) as refused:
        kind("s")
    said = str(refused.value)
    assert (
        said.startswith(f"{name} 's' needs its sub-agents in a list: ") and "_Workflow" not in said
    )
    assert f"{name}('s', [a, b])" in said, said
    built = kind("s", [worker("a")])  # as it was: by position and by keyword
    assert built.name == "s" and kind(name="k", sub_agents=[worker("b")]).name == "k"

    class Pipeline(kind):  # an __init__ of its own: its own rules
        def __init__(self, name: str) -> None:
            super().__init__(name, [worker("a")])

    assert Pipeline("p").name == "p" and copy.copy(built).name == "s"


@pytest.mark.parametrize("kind", [SequentialAgent, ParallelAgent, adk.LoopAgent])
def test_a_workflow_named_by_keyword_after_its_sub_agents_is_told_the_name_comes_first(
    kind: type[Any],
) -> None:
    # SequentialAgent([a, b], name="s"): the sub-agents first, the name by keyword (as Google ADK
    # writes name=): Python's "_Workflow.__init__() got multiple values for argument 'name'",
    # a private class again, as the check for the name forgotten was made to spare.
    with pytest.raises(TypeError) as refused:
        kind([worker("a")], name="s")
    said = str(refused.value)
    assert said.startswith(f"{kind.__name__} takes its name first") and "_Workflow" not in said, (
        said
    )


def test_a_supervisor_named_by_a_str_is_told_to_take_an_agent() -> None:
    # Supervisor("boss", [workers]), as Eino's or CrewAI's would take a name: it failed with
    # "AttributeError: 'str' object has no attribute 'name'".
    with pytest.raises(
        TypeError,
        match=r"Supervisor\(supervisor\): expected an agent .*got str 'boss'",
    ):
        Supervisor("boss", [worker("w")])  # type: ignore[arg-type]


def test_a_supervisor_given_one_worker_not_in_a_list_is_told_so() -> None:
    # It failed with "TypeError: 'ReActAgent' object is not iterable".
    with pytest.raises(
        TypeError,
        match=r"Supervisor 'boss': workers must be a list of agents, got ReActAgent .*"
        r"\(a single agent: put the workers in one list, \[a, b\]\)",
    ):
        Supervisor(worker("boss"), worker("w"))  # type: ignore[arg-type]


@pytest.mark.parametrize("given", [Notes, FunctionTool], ids=["Toolset", "FunctionTool"])
def test_a_tool_class_where_an_instance_goes_is_refused_when_made(given: type[Any]) -> None:
    # tools=[Notes] (a Toolset class) was taken and failed the run at its start with "TypeError:
    # Notes.tools() missing 1 required positional argument: 'ctx'"; tools=[FunctionTool] failed
    # with "AttributeError: 'property' object has no attribute 'name'".
    with pytest.raises(
        TypeError,
        match=rf"agent 'a': tools\[0\] is the class {given.__name__} \(pass an instance",
    ):
        ReActAgent("a", model(), tools=[given])


# -- at the first call ----------------------------------------------------------------------------


async def test_a_provider_model_name_where_a_chat_model_goes_says_what_to_pass() -> None:
    # ReActAgent("a", "gpt-4o"): a str model names a model resource; with none, Runner(...) says
    # so and how to call the provider's model (it was the first run, once the model was asked).
    with pytest.raises(ValueError, match=r"names model 'gpt-4o', and the Runner has no resources"):
        Runner(ReActAgent("a", "gpt-4o"))


def test_a_resource_name_without_resources_is_refused_at_runner_anywhere_in_the_tree() -> None:
    """Refused where the Runner is made, naming the agent, the name and how to give resources:
    the run reached it only at that agent's first model call, after the steps before it had run
    (their model calls paid, their tools' effects made). Deep in the tree too: a workflow's
    step, a transfer target, an AgentTool's agent, a PlanExecute role, a tool named by a str."""
    ready = ReActAgent("ready", ScriptedModel(["hi"]))
    trees: list[tuple[Any, str]] = [
        (
            SequentialAgent("steps", [ready, ReActAgent("late", "fast")]),
            "agent 'late' names model 'fast'",
        ),
        (ReActAgent("boss", model(), sub_agents=[ReActAgent("worker", "fast")]), "agent 'worker'"),
        (
            ReActAgent(
                "boss",
                model(),
                tools=[adk.AgentTool(ReActAgent("helper", "fast", description="Helps."))],
            ),
            "agent 'helper'",
        ),
        (Supervisor(ReActAgent("lead", model()), [ReActAgent("w", "fast")]), "agent 'w'"),
        (ReActAgent("a", model(), tools=["search"]), "agent 'a' names tool 'search'"),
        (PlanExecute.from_model("fast"), "names model 'fast'"),
    ]
    for tree, said in trees:
        with pytest.raises(ValueError) as refused:
            Runner(tree)
        message = str(refused.value)
        assert said in message and "Runner(agent, resources=resources)" in message, message
    # An execution environment makes its Runner at apply: refused there, before any record runs.
    records = adk.execution.LocalExecutionEnvironment().from_list([{"text": "hi"}])
    with pytest.raises(ValueError, match="an execution environment's resources="):
        records.apply(ReActAgent("a", "fast"))


def test_a_runner_looks_for_a_resource_name_only_while_an_agent_has_named_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The walk of the tree costs a few microseconds a Runner (~35k instructions for a two-step
    workflow), paid per request by a service that makes a Runner per request: it is skipped while
    no agent alive has named a resource, as none can be found then. Still refused: a model set to
    a str after the agent was made, a str tool, a copy of an agent that names one."""
    import adk.runner
    import prebuilt.react

    named: weakref.WeakSet[object] = weakref.WeakSet()  # this process's other tests' agents
    monkeypatch.setattr(adk.runner, "_naming", named)
    monkeypatch.setattr(prebuilt.react, "_naming", named)
    walks: list[object] = []
    walk = adk.runner._named_without_resources

    def counted(agent: Any) -> None:
        walks.append(agent)
        walk(agent)

    monkeypatch.setattr(adk.runner, "_named_without_resources", counted)
    ready = ReActAgent("ready", ScriptedModel(["hi"]))
    steps = SequentialAgent("steps", [ready, ReActAgent("next", ScriptedModel(["hi"]))])
    Runner(steps)
    assert walks == []  # no agent names a resource: nothing looked at
    late = ReActAgent("late", ScriptedModel(["hi"]))
    late.model = "fast"  # set after it was made
    with pytest.raises(ValueError, match="agent 'late' names model 'fast'"):
        Runner(SequentialAgent("steps2", [ready, late]))
    Runner(steps)
    assert walks[-1] is steps  # one alive names a resource: every tree is looked at
    original = ReActAgent("twin", ScriptedModel(["hi"]), tools=["search"])
    named.clear()  # as if the agents recorded so far were gone: only the copy may record itself
    twin = copy.deepcopy(original)  # made without __init__
    with pytest.raises(ValueError, match="agent 'twin' names tool 'search'"):
        Runner(twin)
    assert set(named) == {twin}


def _no_agent_named_yet(monkeypatch: pytest.MonkeyPatch) -> weakref.WeakSet[object]:
    """An empty ``adk._naming`` set, as in a process where no agent has named a resource yet
    (this process's other tests' agents may still be alive)."""
    import adk.runner
    import prebuilt.react

    named: weakref.WeakSet[object] = weakref.WeakSet()
    monkeypatch.setattr(adk.runner, "_naming", named)
    monkeypatch.setattr(prebuilt.react, "_naming", named)
    return named


class _Router(adk.BaseAgent):
    """An agent of one's own keeping its agents where it likes: by topic in a dict, a fallback
    in an attribute of its own, one behind a tool of its own."""

    def __init__(self, name: str, by_topic: dict[str, Any], fallback: Any, tools: Any = ()) -> None:
        super().__init__(name)
        self.by_topic = by_topic
        self.fallback = fallback
        self.helpers = list(tools)

    async def run(
        self, input: adk.AgentInput, ctx: adk.RunContext
    ) -> AsyncIterator[adk.AgentEvent]:
        async for event in self.by_topic["billing"].run(input, ctx):
            yield event


class _Asks:
    """A tool of one's own that asks an agent it holds (not an ``AgentTool``)."""

    def __init__(self, expert: Any, **more: Any) -> None:
        self.expert = expert
        vars(self).update(more)
        self.spec = adk.ToolSpec(
            name="ask",
            description="Ask the expert.",
            parameters={"type": "object", "properties": {}},
        )

    async def run(self, arguments: str, ctx: adk.ToolContext) -> str:
        return "asked"


class _Touchy:
    """A value whose ``spec`` property fails when read (a lazy client not configured, say)."""

    @property
    def spec(self) -> Any:
        raise RuntimeError("not configured")


def test_a_resource_name_in_an_agent_of_ones_own_attributes_is_refused_at_runner(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The walk looked only where the framework's classes keep agents (``sub_agents``,
    ``tools``, ``agent``, ``worker``): an agent of one's own holding them in a dict, another
    attribute or a tool of its own was not looked into, and its agent naming a resource failed
    at its first model call, after the steps before it had run. The tree is now the one
    ``agent_options`` and ``aclose`` see: what an agent (a tool) of one's own holds in its
    attributes, directly or in a list, tuple, set or dict."""
    _no_agent_named_yet(monkeypatch)
    ready = ReActAgent("ready", model())
    trees = [
        (_Router("r", {"billing": ReActAgent("billing", "fast")}, ready), "agent 'billing'"),
        (_Router("r", {"billing": ready}, ReActAgent("late", "fast")), "agent 'late'"),
        (
            _Router("r", {"billing": ready}, None, [_Asks(ReActAgent("expert", "fast"))]),
            "agent 'expert'",
        ),
        (
            SequentialAgent(
                "steps",
                [
                    ready,
                    _Router(
                        "r", {"deep": [{"x": ReActAgent("deep", model(), tools=["search"])}]}, None
                    ),
                ],
            ),
            "agent 'deep' names tool 'search'",
        ),
    ]
    for tree, said in trees:
        with pytest.raises(ValueError) as refused:
            Runner(tree)
        assert said in str(refused.value), str(refused.value)
    # Nothing named: the same shapes are taken, and the walk does not climb to a parent; a
    # value of one's own whose property fails is not looked into, nor fails the Runner.
    Runner(_Router("r", {"billing": ready}, ReActAgent("other", model()), [_Asks(ready)]))
    Runner(_Router("r", {"billing": ready}, _Touchy()))
    boss = ReActAgent("boss", "fast", sub_agents=[_Router("r", {"billing": ready}, None)])
    Runner(boss, resources=adk.Resources())  # (boss names one: given resources, taken)
    with pytest.raises(ValueError, match="agent 'boss'"):
        Runner(boss)
    routed = boss.sub_agents[0]
    Runner(routed)  # its parent names a model: not in this tree


class _AsksModel(pydantic.BaseModel):
    """A tool of one's own that is a pydantic model holding the agent it asks."""

    model_config = pydantic.ConfigDict(arbitrary_types_allowed=True)
    expert: Any
    spec: adk.ToolSpec = adk.ToolSpec(name="ask", description="Ask the expert.", parameters={})

    async def run(self, arguments: str, ctx: adk.ToolContext) -> str:
        return "asked"


class _Remote:
    """A client answering any attribute with a remote call (xmlrpc's ``ServerProxy``, an RPC
    stub): every name is a method, and calling one does the call."""

    def __init__(self) -> None:
        self.called: list[str] = []

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)

        def call(*args: Any, **kwargs: Any) -> None:
            self.called.append(name)

        return call


def test_a_client_answering_any_attribute_in_an_agent_of_ones_own_is_not_called_at_runner(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While an agent naming a resource was alive anywhere in the process, ``Runner(agent)``
    called ``_adk_named_resource`` on whatever an agent of one's own held that answers every
    attribute: a ``MagicMock`` client (a unit test's) failed the Runner ('not enough values to
    unpack', 'cannot unpack non-iterable Mock object'), and an RPC proxy was sent a remote call
    named ``_adk_named_resource`` at each Runner made. Such a value is looked into through
    what it holds, never called; an agent naming a resource beside it is still refused."""
    _no_agent_named_yet(monkeypatch)
    elsewhere = ReActAgent("elsewhere", "fast")  # alive: every Runner without resources looks
    ready = ReActAgent("ready", model())
    remote = _Remote()
    for client in (remote, mock.MagicMock(), mock.Mock()):
        Runner(_Router("r", {"billing": ready}, client))
        # where the framework's classes keep an agent (a tool's ``agent``): a mock's child
        # there was read as the next agent, whose own ``agent`` was a new child, for ever
        Runner(_Router("r", {"billing": ready}, None, [_Asks(ready, agent=client)]))
    assert remote.called == []
    with pytest.raises(ValueError, match="agent 'billing' names model 'fast'"):
        Runner(_Router("r", {"billing": ReActAgent("billing", "fast")}, mock.MagicMock()))
    # A pydantic model's __getattr__ (its private attributes) answers no other name: a tool of
    # one's own that is a model is looked into as before.
    with pytest.raises(ValueError, match="agent 'expert' names model 'fast'"):
        Runner(
            _Router(
                "r", {"billing": ready}, None, [_AsksModel(expert=ReActAgent("expert", "fast"))]
            )
        )
    assert elsewhere.model == "fast"


class _Logged(adk.BaseAgent):
    """An agent of one's own wrapping another, handing on what it does not have itself
    (``__getattr__``), as a logging or retrying wrapper does."""

    def __init__(self, inner: adk.Agent) -> None:
        super().__init__(f"logged-{inner.name}")
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def run(
        self, input: adk.AgentInput, ctx: adk.RunContext
    ) -> AsyncIterator[adk.AgentEvent]:
        async for event in self.inner.run(input, ctx):
            yield event


def test_a_delegating_agent_of_ones_own_held_in_a_dict_is_still_looked_into_at_runner(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A class answering any attribute was taken for a mock or a proxy and passed over whole,
    an agent of one's own that delegates (``__getattr__``) too: kept in another agent's dict,
    the agent it wraps, naming a resource, was not refused at Runner but failed at its first
    model call, after the steps before it had run. Whether it is an agent or a tool is read
    from its class, which a mock's or a proxy's does not say."""
    _no_agent_named_yet(monkeypatch)
    ready = ReActAgent("ready", model())
    wrapped = _Logged(ReActAgent("billing", "fast"))
    with pytest.raises(ValueError, match="agent 'billing' names model 'fast'"):
        Runner(_Router("r", {"billing": wrapped}, None))
    with pytest.raises(ValueError, match="agent 'billing' names model 'fast'"):
        Runner(_Router("r", {"billing": ready}, None, [_Asks(ready, agent=[wrapped])]))
    Runner(_Router("r", {"billing": _Logged(ready)}, mock.MagicMock()))  # nothing named


def test_an_agent_of_ones_own_keeping_data_in_memory_costs_runner_no_probe_per_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While an agent naming a resource was alive, ``Runner(agent)`` probed each value an agent
    of one's own held, to the strings of its documents and the floats of its rows (``spec``,
    ``run``: ~0.2 s a Runner for 100k documents, a Runner made per request). Text, numbers and
    None are passed over by their type; an agent kept among them is still found."""
    _no_agent_named_yet(monkeypatch)
    elsewhere = ReActAgent("elsewhere", "fast")
    probed: list[object] = []
    probe = adk.runner._holds_agents

    def counted(value: object) -> bool:
        probed.append(value)
        return probe(value)

    monkeypatch.setattr(adk.runner, "_holds_agents", counted)
    ready = ReActAgent("ready", model())
    docs = [f"document {n}" for n in range(2000)]
    rows = {n: {"text": f"row {n}", "vector": [0.5, 1.5], "seen": None} for n in range(500)}
    Runner(_Router("r", {"billing": ready, "docs": docs, "rows": rows}, 3.5))
    assert probed == [ready]
    kept = [*docs, ReActAgent("kept", "fast")]
    with pytest.raises(ValueError, match="agent 'kept' names model 'fast'"):
        Runner(_Router("r", {"billing": ready, "docs": kept}, None))
    assert elsewhere.model == "fast"


def test_a_subclass_shadowing_model_with_a_class_attribute_is_refused_at_runner(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``model = "fast"`` in a subclass shadows ``ReActAgent.model``, whose setter records an
    agent naming a resource (``adk._naming``): with none recorded the Runner skipped its walk,
    and the agent failed at its first model call. The class records itself instead."""
    named = _no_agent_named_yet(monkeypatch)

    class Fast(ReActAgent):
        model = "fast"

        def __init__(self, name: str) -> None:
            super().__init__(name, model=type(self).model)

    class Plain(ReActAgent):
        """Shadows nothing: not recorded."""

    with pytest.raises(ValueError, match="agent 'grader' names model 'fast'"):
        Runner(SequentialAgent("steps", [ReActAgent("ready", model()), Fast("grader")]))
    assert set(named) == {Fast}  # a subclass shadowing nothing costs no walk
    Runner(Plain("plain", model()))


class _Slotted(ReActAgent):
    """A subclass adding a slot: its copy's state is (the __dict__, the slots), not a dict."""

    __slots__ = ("extra",)


@pytest.mark.parametrize("copied", [copy.copy, copy.deepcopy])
def test_a_copy_of_a_react_agent_subclass_with_slots_keeps_them_and_its_naming(
    copied: Callable[[Any], Any],
) -> None:
    """``ReActAgent.__setstate__`` (which records a copy that names a resource) read the state as
    the agent's ``__dict__`` only: a subclass with ``__slots__`` is copied with the pair (dict,
    slots), and its copy failed with 'dictionary update sequence element #0 has length ...',
    where it copied before the method was added. Now the slots and the naming are both kept."""
    plain = _Slotted("plain", ScriptedModel(["hi"]))
    plain.extra = 1
    twin = copied(plain)
    assert (twin.name, twin.extra, type(twin.model)) == ("plain", 1, ScriptedModel)
    naming = _Slotted("naming", ScriptedModel(["hi"]), tools=["search"])
    naming.extra = 2
    other = copied(naming)
    assert other.extra == 2
    import adk._naming

    assert other in adk._naming.naming  # recorded: a Runner with no resources looks for it
    with pytest.raises(ValueError, match="agent 'naming' names tool 'search'"):
        Runner(other)


async def test_resources_given_to_the_runner_may_be_filled_after_it_is_made() -> None:
    """Only a runner with no resources at all is refused: a Resources given, whose models are
    added after the Runner is made (and after the agents that name them were), runs."""
    resources = adk.Resources()
    runner = Runner(ReActAgent("a", "fast"), resources=resources)
    resources.add_model("fast", ScriptedModel(["from the resource"]))
    assert (await runner.invoke("hi")).text == "from the resource"


async def test_instruction_placeholders_a_missing_value_and_a_json_example() -> None:
    with pytest.raises(
        adk.RunError, match=r"uses \{user\} but the session has no value 'user' \(write \{user\?\}"
    ):
        await Runner(ReActAgent("i", model(), instruction="Greet {user}.")).invoke("hi")
    scripted = model("ok")
    agent = ReActAgent("j", scripted, instruction='Answer as {"name": "x"} for {user}.')
    await Runner(agent).invoke("hi", session={"user": "ann"})
    assert scripted.requests[0].messages[0].content == 'Answer as {"name": "x"} for ann.'


async def test_resuming_wrongly_names_the_mistake_and_keeps_the_checkpoint() -> None:
    scripted = model(ScriptedReply(tool_calls=[tool_call("pay", {"amount": 5})]), "done")
    runner = Runner(ReActAgent("a", scripted, tools=[pay]))
    paused = await runner.invoke("pay 5")
    assert paused.interrupt is not None
    with pytest.raises(TypeError, match=r"pass its checkpoint_id \(InterruptInfo.checkpoint_id\)"):
        await runner.invoke_resume(paused.interrupt, True)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"checkpoint id must be a str, got int"):
        await runner.invoke_resume(5, True)  # type: ignore[arg-type]
    checkpoint_id = paused.interrupt.checkpoint_id
    assert (await runner.invoke_resume(checkpoint_id, True)).text == "done"  # kept until now
    with pytest.raises(
        adk.CheckpointNotFoundError, match=r"a resume of it ran to the end, which deletes it"
    ):
        await runner.invoke_resume(checkpoint_id, True)  # a second resume of the same pause


# -- the OpenAI adapter --------------------------------------------------------------------------


def test_no_api_key_for_openai_is_refused_when_the_model_is_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ValueError, match=r"no API key for OpenAI: pass api_key= or set"):
        adk.OpenAIChatModel("gpt-4o")


async def test_a_404_says_to_check_the_base_url_and_the_model_name() -> None:
    # A model name with a typo (OpenAI's own 404) and a base_url whose path is not where the
    # server's API starts (a gateway's "Unknown path", Ollama's "404 page not found"): the
    # server's words alone did not say what to check.
    typo = Reply(status=404, error="The model `gpt-4x` does not exist")
    async with OpenAIServer([typo]) as server:
        for base_url, name, said in [
            (server.base_url, "gpt-4x", "The model `gpt-4x` does not exist"),
            (f"{server.root_url}/api", "m", "Unknown path /api/chat/completions"),
        ]:
            async with adk.OpenAIChatModel(name, base_url=base_url) as chat:
                with pytest.raises(adk.RunError) as failed:
                    await Runner(ReActAgent("a", chat)).invoke("hi")
            message = str(failed.value.__cause__)
            assert f"(model {name!r}) failed: HTTP 404: {said}" in message
            assert message.endswith(
                f" (check the model name, {name!r}, and that base_url, {base_url}, is where "
                "the server's OpenAI API starts: most serve it under /v1)"
            )
        assert len(server.requests) == 2  # a 404 is not retried


async def test_data_keyed_by_the_single_pending_calls_id_is_refused_naming_its_point() -> None:
    # {"call_1": "window"}, the answer keyed by the call's id as LangGraph keys it: with one
    # point pending, a mapping naming no point id is plain data, so the tool was resumed with
    # the whole mapping for its answer. An approval refused it already (not a decision); a
    # tool's own question took it.
    asked: list[object] = []

    @tool
    def book(seat: str, ctx: adk.ToolContext) -> str:
        """Book a seat."""
        if ctx.resume is None:
            raise adk.Interrupt("window or aisle?")
        asked.append(ctx.resume.data)
        return f"booked {ctx.resume.data}"

    call = tool_call("book", {"seat": "?"}, "call_1")
    runner = Runner(ReActAgent("a", model(ScriptedReply(tool_calls=[call]), "done"), tools=[book]))
    paused = await runner.invoke("book")
    assert paused.interrupt is not None
    point = paused.interrupt.points[0].id
    saved = await runner.checkpoint_store.get(paused.interrupt.checkpoint_id)
    with pytest.raises(
        ValueError,
        match=rf"resume data .* for point {re.escape(repr(point))} is keyed by tool call id; "
        r"answers are keyed by point id, not by tool call id: 'call_1' is the tool call id of "
        rf"pending point {re.escape(repr(point))}.*Nothing ran and the checkpoint is kept",
    ):
        await runner.invoke_resume(paused.interrupt.checkpoint_id, {"call_1": "window"})
    assert asked == []
    assert await runner.checkpoint_store.get(paused.interrupt.checkpoint_id) == saved
    assert (await runner.invoke_resume(paused.interrupt.checkpoint_id, "window")).text == "done"
    assert asked == ["window"]


def test_a_url_given_first_is_told_the_model_name_comes_first() -> None:
    # OpenAIChatModel(url, name), as clients that take the server first are called: it was
    # refused as "base_url must be an http(s) URL ...; got 'llama3'", the name taken for the URL.
    with pytest.raises(
        ValueError,
        match=r"OpenAIChatModel's first argument is the model name, got a URL, "
        r"'http://localhost:11434/v1': pass the URL as base_url=",
    ):
        adk.OpenAIChatModel("http://localhost:11434/v1", "llama3")


def test_a_run_without_ctx_is_refused_where_the_class_is_defined() -> None:
    # async def run(self, input): each run failed with "run() takes 2 positional arguments but
    # 3 were given"; now the class statement itself is refused, saying what run is given.
    with pytest.raises(
        TypeError,
        match=r"Mine.run\(self, input\) cannot be called as run\(input, ctx\): the framework "
        r"passes both; write async def run\(self, input: adk.AgentInput, ctx: adk.RunContext\)",
    ):

        class Mine(adk.BaseAgent):
            async def run(self, input: adk.AgentInput) -> AsyncIterator[adk.AgentEvent]:  # type: ignore[override]
                yield adk.AgentEvent.of("hi")


async def test_runs_the_framework_can_call_are_taken() -> None:
    # ctx with a default, *args, and a static run are each callable as run(input, ctx).
    class Defaulted(adk.BaseAgent):
        async def run(self, input: Any, ctx: Any = None) -> AsyncIterator[adk.AgentEvent]:
            yield adk.AgentEvent.of("defaulted")

    class Starred(adk.BaseAgent):
        async def run(self, *args: Any) -> AsyncIterator[adk.AgentEvent]:
            yield adk.AgentEvent.of("starred")

    class Static(adk.BaseAgent):
        @staticmethod
        async def run(input: Any, ctx: Any) -> AsyncIterator[adk.AgentEvent]:  # type: ignore[override]
            yield adk.AgentEvent.of("static")

    for kind in (Defaulted, Starred, Static):
        assert (await Runner(kind("a")).invoke("hi")).text == kind.__name__.lower()


async def test_a_runner_used_after_its_async_with_says_its_model_is_closed() -> None:
    async with OpenAIServer(default=Reply(text="hi")) as server:
        runner = Runner(ReActAgent("a", adk.OpenAIChatModel("m", base_url=server.base_url)))
        async with runner:
            assert (await runner.invoke("hi")).text == "hi"
        with pytest.raises(adk.RunError) as failed:
            await runner.invoke("hi again")
        assert "is closed: its aclose() ran, or that of a Runner whose agents use it" in str(
            failed.value
        )
        assert "keep one runner open for as long as the agents run" in str(failed.value)
        assert len(server.requests) == 1  # the closed model sent nothing


async def test_a_run_that_is_a_callable_object_is_checked_as_python_calls_it() -> None:
    # A class attribute that is no descriptor (an object with __call__, functools.partial before
    # Python 3.14) is called without the instance, as run(input, ctx): it is taken. It was bound
    # as three arguments, (self, input, ctx), and such a class was refused where it is defined.
    class Answer:
        async def __call__(self, input: Any, ctx: Any) -> AsyncIterator[adk.AgentEvent]:
            yield adk.AgentEvent.of("object")

    class ByObject(adk.BaseAgent):
        run = Answer()  # type: ignore[assignment]

    assert (await Runner(ByObject("a")).invoke("hi")).text == "object"

    class Wrong:
        async def __call__(self, input: Any) -> AsyncIterator[adk.AgentEvent]:
            yield adk.AgentEvent.of("never")

    with pytest.raises(TypeError, match=r"ByWrong.run\(input\) cannot be called as run"):

        class ByWrong(adk.BaseAgent):
            run = Wrong()  # type: ignore[assignment]


@pytest.mark.parametrize(
    ("ported", "advice"),
    [
        ("instructions", "instruction="),
        ("handoffs", "sub_agents="),
        ("output_type", "output_schema= (a pydantic model class"),
        ("model_settings", "model_options=adk.ModelOptions("),
        ("handoff_description", "description="),
        ("tool_use_behavior", "return_directly=["),
        ("hooks", "callbacks=["),
        ("input_guardrails", "callbacks=[...] with a before_model"),
        ("output_guardrails", "callbacks=[...] with an after_model"),
        ("generate_content_config", "model_options=adk.ModelOptions("),
        ("before_model_callback", "callbacks=[adk.Callbacks(before_model=...)]"),
        ("after_tool_callback", "callbacks=[adk.Callbacks(after_tool=...)]"),
        ("include_contents", "history_rewriter="),
        ("global_instruction", "Runner(agent, callbacks=[...])"),
        ("disallow_transfer_to_parent", "allow_transfer_to_parent=False"),
    ],
)
def test_an_agent_given_another_sdks_argument_names_ours(ported: str, advice: str) -> None:
    # An agent ported from the OpenAI Agents SDK (Agent(instructions=, handoffs=, output_type=))
    # or Google ADK (LlmAgent(before_model_callback=, generate_content_config=)) met Python's
    # bare "got an unexpected keyword argument 'instructions'", naming nothing to use instead.
    with pytest.raises(TypeError) as failed:
        ReActAgent("support", ScriptedModel(["hi"]), **{ported: None})
    text = str(failed.value)
    assert text.startswith(f"ReActAgent 'support': got an unexpected keyword argument {ported!r}; ")
    assert advice in text


def test_an_agent_given_an_unknown_argument_is_refused_as_python_refuses_it() -> None:
    with pytest.raises(
        TypeError, match=r"^ReActAgent 'a': got an unexpected keyword argument 'colour'$"
    ):
        ReActAgent("a", ScriptedModel(["hi"]), colour="red")  # type: ignore[call-arg]


def test_adk_agent_called_as_another_sdks_agent_names_react_agent() -> None:
    # Agent(name=, instructions=) (the OpenAI Agents SDK) and Agent(name=, model=, instruction=)
    # (Google ADK's LlmAgent alias) open both SDKs' quickstarts; adk.Agent is the protocol every
    # agent satisfies, and a port writing adk.Agent(...) met typing's bare "Protocols cannot be
    # instantiated", naming no agent to use.
    with pytest.raises(TypeError) as failed:
        adk.Agent(name="support", model=ScriptedModel(["hi"]), instruction="Help.")  # type: ignore[misc]
    assert str(failed.value) == (
        "adk.Agent is the protocol every agent satisfies, not an agent to make: a model agent "
        "(the OpenAI Agents SDK's Agent, Google ADK's Agent or LlmAgent) is "
        "prebuilt.ReActAgent(name, model, instruction=..., tools=[...]), and a custom agent a "
        "subclass of adk.BaseAgent"
    )


def test_a_class_declaring_the_agent_protocol_is_still_made() -> None:
    class Declared(adk.Agent):
        def __init__(self, name: str) -> None:
            self.name = name
            self.description = ""

        async def run(self, input: adk.AgentInput, ctx: adk.RunContext) -> Any:
            yield adk.AgentEvent.of(adk.Message.assistant("hi"))

    assert Declared("d").name == "d"
    with pytest.raises(TypeError, match="Protocols cannot be instantiated"):
        adk.ResumableAgent()  # type: ignore[misc]
