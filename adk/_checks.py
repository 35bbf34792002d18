"""Argument checks shared by the constructors: a wrong argument fails where it is given, naming
the parameter and the value, not later inside a run with an ``AttributeError`` or a comparison
error from deep in the framework. Construction-time only: nothing here is on a per-event path
(the event helpers that use it, ``AgentEvent.transfer`` say, make rare events; ``AgentEvent.of``
checks inline).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = [
    "agent_description",
    "check_agent",
    "check_agents",
    "check_callbacks",
    "check_count",
    "check_description",
    "check_flag",
    "check_name",
    "check_resources",
    "checked_settings",
    "shown",
]

SettingCheck = Callable[[Any, Any], Any]
"""``check(obj, value)``: ``value`` as the attribute keeps it, or the constructor's error."""


def checked_settings(
    checks: Mapping[str, SettingCheck], made: str
) -> Callable[[Any, str, Any], None]:
    """A ``__setattr__`` for a class whose constructor checks some public attributes: assigned
    later (``agent.max_iterations = "5"``), each is checked as the constructor checks it, by
    ``checks[name]``, which returns what to keep (a list made a frozenset, say) or raises;
    other names are set as they are. A ``__setattr__`` rather than properties: a run reads these
    attributes per model call or per step, and an instance attribute's read stays CPython's
    specialised one, where a property's would be a call; a write (the constructor's, rarely a
    run's) pays the call instead. A refused value leaves the attribute as it was.

    ``made`` is an attribute the class's constructor sets once what the checks read is set:
    before it, a setting is set as it is. A user's subclass may set one in its ``__init__``
    before ``super().__init__`` (to pass it on), where a check read attributes the base
    constructor had not set yet; the constructor checks what it is given."""
    find = checks.get
    store = object.__setattr__

    def __setattr__(obj: Any, name: str, value: Any) -> None:
        check = find(name)
        if check is not None and hasattr(obj, made):  # ``hasattr`` only for a checked name
            value = check(obj, value)
        store(obj, name, value)

    return __setattr__


def check_name(name: object, what: str) -> str:
    """``name`` if it is a non-empty str; ``what`` says whose name it is (``"an agent"``)."""
    if not isinstance(name, str):
        raise TypeError(f"{what} needs a str name, got {shown(name)}")
    if not name:
        raise ValueError(f"{what} needs a non-empty name")
    return name


def check_description(description: object, what: str) -> str:
    """``description`` if it is a str; ``what`` names the tool or agent (``"tool 'search'"``).
    Another type was taken and failed later, inside a ``ToolSpec``, with pydantic's validation
    error naming neither the tool nor the agent."""
    if not isinstance(description, str):
        raise TypeError(f"{what}: description must be a str, got {shown(description)}")
    return description


def agent_description(description: object, what: str) -> str:
    """An agent's ``description``: a str, or None taken as none (``""``), as the transfer tool
    and tracing, its readers, always took it (``description=config.get("description")``, a
    subclass defaulting it to None). A lazy translation string (Django's ``gettext_lazy``,
    Babel's ``LazyString``: an object whose class has a ``__str__`` of its own, bytes aside) is
    kept as given, for its readers take it as text where they read it (the transfer tool lists it
    in each run's language); made text here, it would be read where the agent is made, often at
    import, before translations load. Another type is refused, naming the agent (``what``)."""
    if description is None:
        return ""
    if _is_lazy_text(description):
        return description  # type: ignore[return-value]
    return check_description(description, what)


def _is_lazy_text(value: object) -> bool:
    """Whether ``value``, no str, reads as text: its class has a ``__str__`` of its own (numbers,
    lists and dicts have ``object``'s), and it is not bytes, whose ``str`` is their repr."""
    kind = type(value)
    return not isinstance(value, str | bytes | bytearray) and kind.__str__ is not object.__str__


def check_flag(value: object, flag: str, what: str) -> bool:
    """``value`` if it is a bool: a str such as ``"no"`` is truthy and would be taken as True
    without a word. ``flag`` names the parameter, ``what`` its owner."""
    if type(value) is not bool:
        raise TypeError(f"{what}: {flag} must be True or False, got {shown(value)}")
    return value


def check_agent(value: object, what: str) -> None:
    """Refuse what cannot be run as an agent: anything without a non-empty str ``name`` and a
    callable ``run``; ``what`` names the parameter (``"Runner(agent)"``). Duck-typed, like the
    rest of the framework (``Agent`` is a protocol); a class given where an instance belongs is
    called out, a common slip."""
    name = getattr(value, "name", None)
    if isinstance(name, str) and name and callable(getattr(value, "run", None)):
        return
    if isinstance(value, type):
        problem = f"the class {value.__name__} (pass an instance)"
    elif callable(getattr(value, "run", None)):
        problem = f"{type(value).__name__} with name {name!r} (it needs a non-empty str name)"
    else:
        problem = shown(value)
    raise TypeError(
        f"{what}: expected an agent (an object with a non-empty str name and a run method), "
        f"got {problem}"
    )


def check_agents(values: object, owner: str, what: str = "sub_agents") -> list[Any]:
    """The sub-agents in ``values`` as a list, each checked; ``owner`` names the agent they are
    given to (``"SequentialAgent 'seq'"``), ``what`` the parameter (a ``Supervisor``'s
    ``"workers"``), and an error names the position too."""
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        hint = ""
        if isinstance(getattr(values, "name", None), str) and callable(
            getattr(values, "run", None)
        ):
            # SequentialAgent("s", a, b): the agents one by one, as a list is not where the
            # newcomer looked (the second landed in ``description``; see ``_Workflow``).
            plural = "sub-agents" if what == "sub_agents" else what
            hint = f" (a single agent: put the {plural} in one list, [a, b])"
        raise TypeError(f"{owner}: {what} must be a list of agents, got {shown(values)}{hint}")
    agents = list(values)
    for index, agent in enumerate(agents):
        check_agent(agent, f"{owner}: {what}[{index}]")
    return agents


def check_count(value: object, name: str, *, optional: bool = False) -> None:
    """Refuse anything but an int >= 1 (or ``None`` when ``optional``): a str would fail later
    at a comparison, a float would round a limit up and a bool would pass for 1."""
    if value is None and optional:
        return
    wanted = "an int >= 1" + (" or None" if optional else "")
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be {wanted}, got {shown(value)}")
    if value < 1:
        raise ValueError(f"{name} must be {wanted}, got {value!r}")


def shown(value: object) -> str:
    """``value`` for an error message: its type, and its repr when short."""
    text = repr(value)
    if len(text) > 60:
        return type(value).__name__
    return text if value is None else f"{type(value).__name__} {text}"


def check_resources(resources: object, what: str) -> None:
    """Refuse ``resources`` given as a plain collection: a dict of models or tools (a registry's
    natural mistake), or a list of them, was taken, and the run failed at its first lookup, deep
    inside, with ``'dict' object has no attribute 'get_model'``. Anything else is duck-typed and
    taken: a registry of your own may serve only some kinds (any of ``get_model``, ``get_tool``
    and ``get_prompt``), or none, an object the runner only closes for an agent that looks
    nothing up."""
    if resources is None or any(
        callable(getattr(resources, name, None)) for name in ("get_model", "get_tool", "get_prompt")
    ):
        return
    if not isinstance(resources, Mapping | list | tuple | set | frozenset | str):
        return
    raise TypeError(
        f"{what}: resources must be an adk.Resources (a registry of named models, tools and "
        f"prompts: resources = Resources(), then resources.add_model('my_model', model), "
        f"add_tool(...), add_prompt(...)), got {shown(resources)}"
    )


def check_callbacks(callbacks: object, what: str) -> tuple[Any, ...]:
    """``callbacks`` as a tuple; one callbacks object given alone (``callbacks=Callbacks(...)``)
    was ``'Callbacks' object is not iterable``, which did not say a list was wanted."""
    if isinstance(callbacks, Iterable) and not isinstance(callbacks, str | bytes):
        return tuple(callbacks)
    kind = type(callbacks).__name__
    raise TypeError(
        f"{what}: callbacks takes a list of callback objects, callbacks=[{kind}(...)], "
        f"got one {kind} alone"
    )
