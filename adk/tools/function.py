"""``@tool`` / ``FunctionTool``: a Python function as a tool.

The name comes from the function, the description and per-argument help from its docstring (Google
style ``Args:``, NumPy style ``Parameters`` over a dashed line, or reST ``:param x:``; else an
``Annotated[T, "help"]`` string, as LangChain's ``@tool`` reads it), the JSON schema and
validation from its type hints through a pydantic model built once. A parameter annotated
``ToolContext`` is injected and hidden from the model.

Sync functions run in a worker thread (``asyncio.to_thread``), so a blocking tool (file or network
I/O, a slow computation) neither stalls the event loop nor serialises the other calls of its turn,
as pydantic-ai and the OpenAI Agents SDK do. ``thread=False`` runs a tiny, non-blocking sync
function inline and saves the thread hop (tens of µs).

``timeout=`` bounds a call in seconds: past it the call is cancelled and the model reads an error
naming the tool and the limit. A sync function's thread cannot be killed: the run goes on at the
limit and the thread runs to its end, its result dropped. So a timed sync function runs in a
daemon thread of its own, not the loop's default executor: a call that hangs (what a timeout is
for) held an executor worker for good, a few of them starved every ``to_thread`` of the process,
and ``asyncio.run`` waited at its end for the hung threads. ``thread=False`` with a timeout is
refused, as a function run inline holds the event loop the timeout needs to fire.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
import math
import re
import threading
import types
from collections.abc import Awaitable, Callable, ItemsView, Iterator, KeysView, ValuesView
from types import SimpleNamespace, UnionType
from typing import (
    TYPE_CHECKING,
    Annotated,
    Any,
    Generic,
    Union,
    get_args,
    get_origin,
    get_type_hints,
    overload,
)

import pydantic_core
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.errors import PydanticSchemaGenerationError, PydanticUserError
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

# ``adk._approval`` loads on first use (the package's ``__getattr__``): only a call that asks for
# approval, or a resumed one, reads it.
import adk

from .._checks import check_description, check_flag, shown
from ..checkpoint.codec import CheckpointError, _nan_json
from ..interrupts import Interrupt, ResumeContext, _InterruptSignal
from ..messages import AudioPart, FilePart, ImagePart, part_placeholder
from ._origin import function_origin
from .base import ToolContext, ToolError, ToolResult, ToolSpec, _own_words

__all__ = ["FunctionTool", "format_validation_error", "tool"]

_ApprovalCheck = Callable[[ToolContext, dict[str, Any]], bool | Awaitable[bool]]

if TYPE_CHECKING:
    from typing_extensions import ParamSpec, TypeVar

    # The function a ``FunctionTool`` wraps, so that ``tool.fn`` keeps its signature for a type
    # checker. The defaults (PEP 696) keep a bare ``FunctionTool`` annotation valid under
    # ``mypy --strict``; covariance makes any tool one.
    _P = ParamSpec("_P", default=...)
    _R = TypeVar("_R", covariant=True, default=Any)
else:
    from typing import ParamSpec, TypeVar

    # Python 3.11's ParamSpec and TypeVar take no default: type checkers read the above.
    _P = ParamSpec("_P")
    _R = TypeVar("_R", covariant=True)
_Params = ParamSpec("_Params")  # a decorated function's, for ``tool``
_Result = TypeVar("_Result")
"""A ``require_approval`` that decides per call: ``(ctx, arguments) -> bool`` (or an awaitable of
one), given the call's validated arguments by name; True pauses the call for a person's decision.
The OpenAI Agents SDK's ``needs_approval`` and Google ADK's ``require_confirmation`` functions."""

# Docstring patterns, compiled by ``re`` on first use (and cached there) rather than at import:
# compiling them costs ~1 ms that ``import adk`` would otherwise charge every program.
# Google style's sections, as Sphinx's napoleon reads them: a parameter's help is under ``Args:``
# (``Keyword Args:`` and ``Other Parameters:`` too, which ran on into the help of the parameter
# before them); the others end it and stay out of the description, but for the admonitions
# (``Warning:``, ``Important:``...), which are left in the summary that a model reads.
_SECTION = (
    r"^\s*(Args|Arguments|Parameters|Keyword Args|Keyword Arguments|Kwargs|Other Parameters"
    r"|Returns?|Raises?|Yields?|Warns|Examples?|Notes?|Attributes|Methods|References|See Also"
    r"|Todo):\s*$"
)
_ARG_SECTIONS = frozenset(
    {"Args", "Arguments", "Parameters", "Keyword Args", "Keyword Arguments", "Kwargs",
     "Other Parameters"}
)  # fmt: skip
# NumPy style: the header on a line of its own, underlined by dashes on the next line.
_NUMPY_SECTION = (
    r"^\s*(Parameters|Other Parameters|Returns|Raises|Yields|Examples?|Notes?|See Also)\s*$"
)
_NUMPY_RULE = r"^\s*-{3,}\s*$"
_NUMPY_ARG = r"^\*{0,2}(\w+)\s*(?::.*)?$"
_ARG_LINE = r"^\s*\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$"
_REST_PARAM = r"^\s*:param\s+(?:[\w\[\], ]+\s+)?(\w+)\s*:\s*(.*)$"
# A function name as OpenAI's and Anthropic's APIs accept it: a tool named outside it fails every
# model call that offers it (a server-side 400), so it is refused where the tool is made.
_TOOL_NAME = r"[a-zA-Z0-9_-]{1,64}"


def _is_tool_name(name: str) -> bool:
    """Whether ``name`` is one a model API accepts for a tool (``_TOOL_NAME``)."""
    return re.fullmatch(_TOOL_NAME, name) is not None


def _parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """The summary (text before the first section) and the per-argument help."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    summary: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    arg_indent = 0  # the indent of the line naming ``current`` in an Args section
    skip_rule = False
    for index, line in enumerate(lines):
        if skip_rule:
            skip_rule = False
            continue
        header = re.match(_SECTION, line)
        if header and not (
            section in _ARG_SECTIONS and current is not None and _indent(line) > arg_indent
        ):  # indented below a parameter ("Note:" in its help), napoleon reads it as its help
            section, current = header.group(1), None
            continue
        numpy = re.match(_NUMPY_SECTION, line)
        if numpy and index + 1 < len(lines) and re.match(_NUMPY_RULE, lines[index + 1]):
            name = numpy.group(1)
            section = "numpy" if name in ("Parameters", "Other Parameters") else name
            current, skip_rule = None, True
            continue
        rest = re.match(_REST_PARAM, line)
        if rest:
            current = rest.group(1)
            params[current] = rest.group(2).strip()
            section = "rest"
            continue
        if line.strip().startswith(":"):
            section, current = "rest", None
            continue
        if section is None:
            summary.append(line)
        elif section == "numpy":
            # ``name : type`` at the section's indent, its help on the indented lines below.
            arg = re.match(_NUMPY_ARG, line)
            if arg and not line.startswith((" ", "\t")):
                current = arg.group(1)
                params[current] = ""
            elif current is not None and line.strip():
                params[current] = f"{params[current]} {line.strip()}".strip()
        elif section in _ARG_SECTIONS:
            arg = re.match(_ARG_LINE, line)
            if arg and (not line.startswith((" ", "\t")) or current is None or _indent(line) <= 4):
                current, arg_indent = arg.group(1), _indent(line)
                params[current] = arg.group(2).strip()
            elif current is not None and line.strip():
                params[current] = f"{params[current]} {line.strip()}".strip()
        elif section == "rest" and current is not None and line.strip():
            params[current] = f"{params[current]} {line.strip()}".strip()
    return "\n".join(summary).strip(), {k: v for k, v in params.items() if v}


def _check_alias(tool_name: str, param_name: str, info: FieldInfo) -> None:
    """Refuse a Field's alias (in the default or ``Annotated``) naming the argument otherwise
    than ``param_name``: the model would give it under another name than the approval request,
    a ``require_approval`` function and an edit's note show it by; an edit by the request's
    names then lost that argument without a word (a field's own name is no extra to pydantic)."""
    other = next(
        (a for a in (info.alias, info.validation_alias) if a not in (None, param_name)), None
    )
    if other is not None:
        fix = f"rename the parameter {other!r} instead" if isinstance(other, str) else ""
        raise TypeError(
            f"tool {tool_name!r}: parameter {param_name!r}: its Field names it {other!r}, "
            "but the model gives every argument under the parameter's own name; drop the "
            f"alias{' or ' + fix if fix else ''}"
        )


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _is_tool_context(annotation: Any) -> bool:
    """``ToolContext``, ``ToolContext | None`` or ``Annotated[ToolContext, ...]``: injected."""
    if annotation is ToolContext:
        return True
    origin = get_origin(annotation)
    if origin is Annotated:
        return _is_tool_context(get_args(annotation)[0])
    if origin in (Union, UnionType):
        members = [a for a in get_args(annotation) if a is not type(None)]
        return len(members) == 1 and _is_tool_context(members[0])
    return False


def _check_function(fn: object) -> None:
    """Refuse what is not a function to make a tool of, saying what was meant. All three were
    refused as "a function tool needs a name", which sent the user looking for a name: LangChain's
    ``@tool("search")`` (a name given by position), a tool made a tool again (``FunctionTool`` of
    an ``@adk.tool`` function, or the decorator twice), and an object that cannot be called."""
    if isinstance(fn, str):
        raise TypeError(
            f"@tool takes the function to make a tool of, got str {fn!r}: to name the tool, "
            f"write @adk.tool(name={fn!r})"
        )
    spec = getattr(fn, "spec", None)
    if isinstance(spec, ToolSpec) and callable(getattr(fn, "run", None)):
        again = "; to rename it, FunctionTool(tool.fn, name=...)" if hasattr(fn, "fn") else ""
        raise TypeError(
            f"{type(fn).__name__} {spec.name!r} is already a tool: give it to the agent as it "
            f"is{again}"
        )
    if isinstance(fn, classmethod):
        # ``@tool`` above ``@classmethod`` in a class body: a classmethod object is no function
        # until it is read from its class, which binds it.
        where = ".".join(getattr(fn.__func__, "__qualname__", "Cls.method").split(".")[-2:])
        raise TypeError(
            f"a function tool is made of a function, got the classmethod {where!r} in its class "
            f"body: make the tool of the method read from its class, FunctionTool({where})"
        )
    if not callable(fn):
        raise TypeError(f"a function tool is made of a function, got {shown(fn)}")


# Parameter names that say "the tool's context" (pyadk's snippets, Google ADK's tool_context): left
# without a type hint, each would be a required argument of any type the model is asked for.
_CONTEXT_NAMES = frozenset({"ctx", "tool_ctx", "tool_context"})


# A ``ToolContext`` hint written as text: ``ctx: ToolContext`` or ``ctx: adk.ToolContext``.
_CONTEXT_TEXT = re.compile(r"(?:\w+\.)*ToolContext")


def _type_hints(tool_name: str, target: Callable[..., Any]) -> dict[str, Any]:
    """The function's type hints, resolved. Under ``from __future__ import annotations`` a hint
    naming what the module imports only under ``TYPE_CHECKING``, or a class local to a function,
    cannot be resolved, and ``get_type_hints`` raised a bare ``NameError`` naming neither the
    tool nor what to do. Then each parameter's hint is resolved alone, so what the tool does not
    read cannot refuse it: the return hint (the result is sent as text whatever its type) and a
    ``ToolContext`` hint written by name (bare, optional or annotated), whose import
    type-checking linters move under ``TYPE_CHECKING`` when it is used only in annotations."""
    try:
        return get_type_hints(target, include_extras=True)
    except NameError:
        pass
    raw: Any = target
    while hasattr(raw, "__wrapped__"):  # where get_type_hints reads the globals from
        raw = raw.__wrapped__
    namespace = getattr(raw, "__globals__", None)
    hints: dict[str, Any] = {}
    for name, annotation in getattr(target, "__annotations__", {}).items():
        if name == "return":
            continue
        if isinstance(annotation, str) and _CONTEXT_TEXT.fullmatch(annotation.strip()):
            hints[name] = ToolContext  # by name alone: its import may be for type checkers only
            continue
        holder = SimpleNamespace(__annotations__={name: annotation})
        try:
            try:
                hints.update(get_type_hints(holder, globalns=namespace, include_extras=True))
            except NameError as exc:
                if exc.name != "ToolContext":
                    raise
                # ``ToolContext | None``, ``Optional[ToolContext]``, ``Annotated[ToolContext,
                # ...]``: a context hint too, its import under ``TYPE_CHECKING`` as the bare one's
                # may be. Supplied by its name; what else the hint names must still resolve, and
                # a hint that is no context (``list[ToolContext]``) is refused as undescribable.
                hints.update(
                    get_type_hints(
                        holder,
                        globalns=namespace,
                        localns={"ToolContext": ToolContext},
                        include_extras=True,
                    )
                )
        except NameError as exc:
            raise TypeError(
                f"tool {tool_name!r}: its type hints name {exc.name or 'something'!r}, which is not "
                "defined in its module: the hints are read when the tool is made, so import it at "
                "module level (not only under TYPE_CHECKING) and define the classes it names there, "
                "above the tool, not inside a function"
            ) from exc
    return hints


def _unshowable(
    tool_name: str,
    fields: dict[str, Any],
    names: list[tuple[str, str]],
    exc: PydanticUserError,
) -> TypeError:
    """The refusal of a parameter whose type has no JSON schema, naming it. The usual one is a
    context the framework was meant to fill in under another name: ``adk.RunContext`` (the
    OpenAI Agents SDK's ``RunContextWrapper``, Google ADK's ``ToolContext`` imported from there),
    for which pydantic's own error only advised ``arbitrary_types_allowed``. Found again here,
    field by field, only when the model of all of them could not be built."""
    for field, param in names:
        annotation = fields[field][0]
        try:
            create_model("probe", value=(annotation, ...))
        except PydanticSchemaGenerationError:
            return TypeError(
                f"tool {tool_name!r}: parameter {param!r} has type {_type_name(annotation)}, "
                "which cannot be described to a model (no JSON schema). A context for the "
                "tool itself is annotated adk.ToolContext and left out of the schema (its "
                "run_context is the calling agent's RunContext); what the model passes needs "
                "JSON types or pydantic models"
            )
        except PydanticUserError as refused:
            # A type pydantic refuses in words of its own: ``typing.TypedDict`` before Python
            # 3.12 ("use typing_extensions.TypedDict"), raised bare, naming neither the tool
            # nor the parameter.
            return TypeError(f"tool {tool_name!r}: parameter {param!r}: {refused}")
    return TypeError(f"tool {tool_name!r}: its parameters cannot be described to a model: {exc}")


def _type_name(annotation: Any) -> str:
    return annotation.__qualname__ if isinstance(annotation, type) else repr(annotation)


def _annotated_help(annotation: Any) -> str | None:
    """The help text of ``Annotated[T, "help", ...]``: its first plain ``str``. LangChain's
    ``@tool`` reads a parameter's description from there, and pydantic ignores a ``str`` it is
    given as metadata, so a ported tool's parameters reached the model without their help."""
    if get_origin(annotation) is Annotated:
        for item in get_args(annotation)[1:]:
            if isinstance(item, str):
                return item
    return None


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop pydantic's auto titles: they cost tokens and tell a model nothing."""
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        if isinstance(prop, dict):
            prop.pop("title", None)
    return schema


_REFUSALS = (ValidationError, ToolError, TypeError, KeyError)
"""What an argument model's validation raises for arguments it refuses: pydantic's error, and a
validator's ``ToolError``, ``TypeError`` or ``KeyError``, which pydantic passes through
unwrapped (a saved event's validator raising them refuses a resume alike, ``actions._run``)."""


def format_validation_error(tool_name: str, error: ValidationError) -> str:
    """A short, model-readable account of what was wrong with the arguments."""
    problems = error.errors(include_url=False)
    if any(p["type"] == "json_invalid" for p in problems):
        return f"Error: invalid JSON arguments for tool '{tool_name}': {problems[0]['msg']}"
    details = []
    for p in problems:
        where = ".".join(str(part) for part in p["loc"]) or "arguments"
        details.append(f"{where}: {p['msg']}")
    return f"Error: invalid arguments for tool '{tool_name}': " + "; ".join(details)


_PLAIN_JSON = frozenset({dict, list, float, bool})
"""The exact types of the values a tool returns most, after ``str`` and ``int``: ``_serialise``
sends them to ``to_json`` without asking whether they are a ``ToolResult``, a pydantic model or
None."""


def _serialise(value: Any) -> str | ToolResult:
    """The tool's return value as the text the model reads.

    The tool has already run by now, so a value JSON cannot hold (an arbitrary object, bytes that
    are not UTF-8) is sent as its ``str()``: reporting "tool failed" would make the model retry a
    call whose side effects already happened.

    The usual values are told by their exact type first: ``isinstance`` against a pydantic
    model class (``ToolResult``, ``BaseModel``) goes through its ABC metaclass, ~0.7k
    instructions a test, and ``to_json`` works an int's type out for ~4k where ``str`` writes
    its digits for ~0.1k (``tests/test_tools.py`` holds the texts equal).
    """
    kind = type(value)
    if kind is str:
        text: str = value  # (typed for mypy: ``is`` narrows nothing)
        return text
    if kind is int:
        # Past ``sys.get_int_max_str_digits()`` ``str`` refuses; ``to_json`` writes it below.
        try:
            return str(value)
        except ValueError:
            pass
    elif kind is list:
        if not _PART_CLASSES.isdisjoint(map(type, value)):  # a C loop: a list of rows pays little
            return _with_parts(value)
    elif kind not in _PLAIN_JSON:
        if isinstance(value, (str, ToolResult)):  # a tuple: `str | ToolResult` is built per call
            return value
        if kind in _PART_CLASSES:
            return ToolResult(content=part_placeholder(value), parts=(value,))
        if kind is tuple and not _PART_CLASSES.isdisjoint(map(type, value)):
            return _with_parts(value)
        if isinstance(value, BaseModel):
            # NaN as ``NaN``, as in a dict or a dataclass: the model's own JSON writes ``null``
            # (its ``ser_json_inf_nan`` default), and the model would read a value the tool
            # never gave. The model itself is the result's ``structured`` value, as an MCP
            # tool's structured content is: code reading the tool's event (a ``ReActAgent``'s
            # tool message's ``metadata["structured"]``, a ``ToolResponseEvent.structured``)
            # reads its fields, not the text parsed back. ``after_tool`` callbacks see the text,
            # as before: ``_ModelResult``.
            return _ModelResult(content=_nan_json(value), structured=value)
        if value is None:
            return ""
    try:
        return pydantic_core.to_json(value, fallback=_unwritten).decode()
    except (pydantic_core.PydanticSerializationError, ValueError):
        return str(value)


_PART_CLASSES = frozenset({ImagePart, AudioPart, FilePart})


_RANGE_WRITTEN_UP_TO = 10_000
"""The longest ``range`` written as the numbers it holds. A range costs nothing however long it
is, its list one slot per number: ``return range(10**9)`` would build gigabytes (and stall the run
building them) for a result no model reads. Ten thousand numbers are already ~50 KB of JSON, more
than a model makes use of; a longer range is written as its text, ``range(0, 1000000000)``, which
says what it is in a line. A dict's views are not bounded: their dict is in memory already and
their ``str()`` is as long as their list."""


def _unwritten(value: Any) -> Any:
    """What JSON cannot hold, as the model reads it: a ``range`` or a dict's keys, values or
    items (``return stock.keys()``) as the list they hold, not ``dict_keys(['a', 'b'])``; a range
    longer than ``_RANGE_WRITTEN_UP_TO`` and anything else as its ``str()``."""
    if isinstance(value, range):
        # len() of a range past sys.maxsize items (range(10**20)) is an OverflowError; its
        # slice to one more than the limit has a length that fits.
        short = len(value[: _RANGE_WRITTEN_UP_TO + 1]) <= _RANGE_WRITTEN_UP_TO
        return list(value) if short else str(value)
    if isinstance(value, (KeysView, ValuesView, ItemsView)):
        return list(value)
    return str(value)


class _ModelResult(ToolResult):
    """The result of a pydantic model a function tool (or a tool callback) returned: its JSON
    the ``content``, the model the ``structured`` value. ``after_tool`` callbacks get its
    ``content``, a ``str``, as they got such a result before it carried the model (tracing.md,
    google_adk.md): a callback that rewrites text results (a redaction) would otherwise pass it
    by, and the model read what it hides. Kept whole when no callback replaces it; a
    replacement is the result, so a redacted text goes without the model beside it
    (``adk.callbacks``). Shown and compared as the ``ToolResult`` it is to its readers."""

    def __repr_name__(self) -> str:
        return "ToolResult"

    def __eq__(self, other: object) -> bool:
        """Equal to the ``ToolResult`` it shows as (pydantic's equality wants the same class)."""
        if type(other) is ToolResult or type(other) is _ModelResult:
            return self.__dict__ == other.__dict__
        return NotImplemented

    __hash__ = ToolResult.__hash__  # defining __eq__ would otherwise drop it


def _with_parts(items: list[Any] | tuple[Any, ...]) -> ToolResult:
    """A tool's list of text and parts (``["the chart:", ImagePart(...)]``) as its result: the
    parts as they are, the text of each item in order (a part's placeholder for it) as content."""
    texts: list[str] = []
    parts: list[ImagePart | AudioPart | FilePart] = []
    for item in items:
        if type(item) in _PART_CLASSES:
            parts.append(item)
            texts.append(part_placeholder(item))
        else:
            text = _serialise(item)
            texts.append(text if isinstance(text, str) else text.content)
    return ToolResult(content="\n".join(texts), parts=tuple(parts))


_APPROVED_SLOT = "approved"
"""Where a call cleared to run that then paused on its own saves that it was cleared (beside its
own state): approved by a person, or needing no approval by a ``require_approval`` function. On
resume it goes on without asking again (the function is not asked again either), and the person's
answer to its own question is not read as an approval decision. ``True`` in both cases, so a
checkpoint saved by this version resumes under an older one alike."""


def _mark_approved(exc: Interrupt, address: str) -> None:
    if exc._signal is None:
        exc._signal = _InterruptSignal.single(address, exc.info, exc.state)
    exc._signal.save(address, True, _APPROVED_SLOT)


def _doc_of(fn: Callable[..., Any]) -> str | None:
    """The docstring that describes ``fn``: a partial's function's, a callable object's
    ``__call__``'s or else its class's."""
    if isinstance(fn, functools.partial):
        return _doc_of(fn.func)
    if inspect.isroutine(fn):
        return fn.__doc__
    return type(fn).__call__.__doc__ or type(fn).__doc__


def _is_unbound_self(
    fn: Callable[..., Any], first: inspect.Parameter, hints: dict[str, Any]
) -> bool:
    """Whether ``first`` is the ``self`` (or ``cls``) of a method ``@tool`` was put on inside its
    class: a plain function whose first parameter has that name and no annotation. Made a tool, it
    would ask the model for a ``self`` argument and fail every call. (A bound method, a partial or
    a callable object has no ``self`` in its signature.)"""
    return (
        inspect.isfunction(fn)
        and first.name in ("self", "cls")
        and first.kind in (first.POSITIONAL_ONLY, first.POSITIONAL_OR_KEYWORD)
        and first.name not in hints
    )


def _bound_keywords(fn: Callable[..., Any]) -> frozenset[str]:
    """The parameters a ``functools.partial`` binds by keyword (nested partials are flattened by
    Python). Its signature still lists them, as keyword-only parameters whose default is the
    bound value, so without this the model was offered them: a dependency bound so (a database
    connection, a client) refused the tool for want of a JSON schema, and a bound key went to the
    model provider as a default the model could override."""
    return frozenset(fn.keywords) if isinstance(fn, functools.partial) else frozenset()


def _target(fn: Callable[..., Any]) -> Callable[..., Any]:
    """What to read the name and type hints from: a ``functools.partial``'s function, a callable
    object's class's ``__call__``, else the function itself (the signature always comes from the
    callable as given, so a partial's arguments bound by position and an object's ``self`` are
    not shown; those bound by keyword are left out by :func:`_bound_keywords`)."""
    if isinstance(fn, functools.partial):
        return _target(fn.func)
    if not inspect.isroutine(fn) and callable(fn):
        call: Callable[..., Any] = type(fn).__call__  # unbound: its hints, not its signature
        return call
    return fn


def _check_inline_timeout(timeout: object, thread: bool, is_async: bool, where: str) -> None:
    if timeout is not None and not thread and not is_async:
        # Run inline, the function holds the event loop until it returns: the timeout could
        # only fire after it, reporting a finished call as timed out.
        raise ValueError(
            f"{where}: timeout= needs the function to run in a thread or be async, but "
            "thread=False runs it inline on the event loop, where no timeout can stop it"
        )


def _set_timeout(tool: FunctionTool[..., Any], value: Any) -> Any:
    """``timeout`` assigned after the tool is made, checked as when made."""
    label = _tool_label(tool.spec.name)
    _check_timeout(value, label)
    _check_inline_timeout(value, tool._thread, tool._is_async, label)
    return value


class FunctionTool(Generic[_P, _R]):
    """A tool made from a sync or async function (see the module docstring)."""

    def __init__(
        self,
        fn: Callable[_P, _R],
        *,
        name: str | None = None,
        description: str | None = None,
        require_approval: bool | _ApprovalCheck = False,
        thread: bool = True,
        timeout: float | None = None,
        progress: bool = False,
    ) -> None:
        _check_function(fn)
        # The function of a require_approval that decides per call (None for a bool), checked first.
        label = _tool_label(name or getattr(fn, "__name__", None))
        check = _approval_rule(require_approval, label)
        check_flag(thread, "thread", label)
        _check_timeout(timeout, label)
        check_flag(progress, "progress", label)
        if description is not None:
            check_description(description, label)
        self.fn = fn
        self._require_approval = require_approval
        self._approval_check = check
        self._thread = thread
        # Its calls run in a task, so its ``ctx.report_progress`` reaches the caller as it runs
        # (``tools._executor``); a tool that reports nothing keeps the inline call.
        self._emits_events = progress
        target = _target(fn)
        self._is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(target)
        _check_inline_timeout(timeout, thread, self._is_async, label)
        self._timeout = timeout  # checked above
        tool_name = name or getattr(fn, "__name__", "") or getattr(target, "__name__", "")
        if not tool_name or tool_name in ("<lambda>", "__call__"):
            if tool_name == "<lambda>":
                # The model calls a tool by name, and a lambda's is "<lambda>" for every one.
                raise ValueError(
                    "a function tool needs a name, and a lambda has no name of its own: pass "
                    "name= (FunctionTool(lambda ..., name='lookup')), or write a def"
                )
            raise ValueError(
                f"a function tool needs a name: pass name= for {fn!r}"
                if tool_name == "__call__" or isinstance(fn, functools.partial)
                else "a function tool needs a name"
            )
        if not isinstance(tool_name, str) or not _is_tool_name(tool_name):
            size = len(str(tool_name))
            shown = repr(tool_name) if size <= 64 else f"{str(tool_name)[:20]!r}... ({size} chars)"
            raise ValueError(
                f"invalid tool name {shown}: model APIs accept 1 to 64 letters, digits, '_' and "
                "'-' (no spaces or dots); pass name= to choose another"
            )
        if inspect.isasyncgenfunction(fn) or inspect.isasyncgenfunction(target):
            # Called, it returns an async generator object, which the result would show the model
            # as its repr: every call would "succeed" with "<async_generator object ...>".
            raise TypeError(
                f"tool {tool_name!r} is an async generator function (it yields): a tool call "
                "returns one result, so collect the items and return them (a list, or a str)"
            )
        summary, arg_help = _parse_docstring(_doc_of(fn))
        hints = _type_hints(tool_name, target)
        fields: dict[str, Any] = {}
        names: list[tuple[str, str]] = []  # (model field, parameter)
        positional: list[str] = []  # positional-only parameters, passed by position
        self._context_param: str | None = None
        bound = _bound_keywords(fn)
        parameters = [
            param for param in inspect.signature(fn).parameters.values() if param.name not in bound
        ]
        taken = {param.name for param in parameters}
        if parameters and _is_unbound_self(fn, parameters[0], hints):
            raise TypeError(
                f"tool {tool_name!r}: its first parameter is {parameters[0].name!r}, so it is a "
                "method decorated in its class, and the model would be asked for "
                f"{parameters[0].name!r}; make the tool of the bound method instead: "
                f"FunctionTool(instance.{getattr(fn, '__name__', tool_name)})"
            )
        for param in parameters:
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                # A decorator's wrapper without ``functools.wraps`` is all that is seen of the
                # function it wraps: say so, or the user looks for *args in their own function.
                unwrapped = (
                    f"; {fn.__qualname__!r} looks like a decorator's wrapper: a decorator that "
                    "does not use functools.wraps hides the parameters of the function it wraps"
                    if inspect.isfunction(fn)
                    and fn.__name__ != "<lambda>"
                    and not hasattr(fn, "__wrapped__")
                    and "<locals>" in fn.__qualname__
                    and {p.kind for p in parameters} <= {param.VAR_POSITIONAL, param.VAR_KEYWORD}
                    else ""
                )
                raise TypeError(
                    f"tool {tool_name!r}: *args/**kwargs cannot be described to a model{unwrapped}"
                )
            if param.name in _CONTEXT_NAMES and param.name not in hints:
                # With a default (``ctx=None``) a call does not fail: the framework never fills
                # it in, and the model is offered it. The error says which.
                fate = (
                    "every call would fail without it"
                    if param.default is inspect.Parameter.empty
                    else "the framework would never fill it in"
                )
                raise TypeError(
                    f"tool {tool_name!r}: parameter {param.name!r} has no type hint, so the model "
                    f"would be asked for it and {fate}; annotate it "
                    f"{param.name}: adk.ToolContext for the framework to fill it in"
                )
            annotation = hints.get(param.name, Any)
            if _is_tool_context(annotation):
                if param.kind is param.POSITIONAL_ONLY:
                    positional.append(param.name)
                self._context_param = param.name
                continue
            if param.kind is param.POSITIONAL_ONLY:
                positional.append(param.name)
            default = ... if param.default is inspect.Parameter.empty else param.default
            if isinstance(default, FieldInfo):
                # ``limit: int = Field(10, description=...)``, as pydantic's ``validate_call``
                # and the OpenAI Agents SDK take it: the field it describes, its default (or
                # ``default_factory``) and constraints kept. Taken as a plain default, the model
                # was offered no default and the function, called without the argument, got
                # the ``FieldInfo`` itself as its value.
                annotation, default = Annotated[annotation, default], PydanticUndefined
            # A parameter named like a BaseModel attribute (json, schema, copy...) gets another
            # field name and keeps its own name as the alias the model sees; so does one with a
            # leading underscore (``_cache``), which pydantic refuses as a field's name.
            field = param.name
            if hasattr(BaseModel, field) or field.startswith("_"):
                field = f"p{field}_" if field.startswith("_") else f"{field}_"
                while field in fields or field in taken or hasattr(BaseModel, field):
                    field += "_"  # not another parameter's name (``json`` beside ``json_``)
            extra: dict[str, Any] = {}
            help_text = arg_help.get(param.name) or _annotated_help(annotation)
            if help_text:
                extra["description"] = help_text
            if field != param.name:
                # The parameter's own name as the alias overrides a Field's: refuse that one
                # here, as the merged field's is below for every other parameter.
                for given in (
                    get_args(annotation)[1:] if get_origin(annotation) is Annotated else ()
                ):
                    if isinstance(given, FieldInfo):
                        _check_alias(tool_name, param.name, given)
                extra["alias"] = param.name
            fields[field] = (annotation, Field(default, **extra))
            names.append((field, param.name))
        self._positional = tuple(positional)
        try:
            self._args_model: type[BaseModel] = create_model(
                f"{tool_name}_arguments",
                __config__=ConfigDict(extra="forbid"),
                **fields,
            )
        except PydanticUserError as exc:  # no schema, or a type pydantic refuses (TypedDict)
            raise _unshowable(tool_name, fields, names, exc) from exc
        for field, param_name in names:
            _check_alias(tool_name, param_name, self._args_model.model_fields[field])
        self._field_names = tuple(names)
        # No parameter renamed: the validated instance's ``__dict__`` is the arguments by name.
        self._same_names = all(field == param for field, param in names)
        self._spec = ToolSpec(
            name=tool_name,
            description=description if description is not None else summary,
            parameters=_clean_schema(self._args_model.model_json_schema()),
        )

    @property
    def timeout(self) -> float | None:
        """Seconds a call may take (``None``: no limit). May be set after the tool is made,
        checked as when made (a property: a ``__setattr__`` of the class cost every run's tool
        call ~600 instructions, benchmark (b), where this read costs less)."""
        return self._timeout

    @timeout.setter
    def timeout(self, value: float | None) -> None:
        # Checked once the tool is made (``_spec`` is set last): a subclass may set it before
        # ``super().__init__``, which checks what it is given.
        self._timeout = _set_timeout(self, value) if hasattr(self, "_spec") else value

    @property
    def spec(self) -> ToolSpec:
        """Built once: name and description from the function (unless given), argument help from
        its docstring, the JSON schema from its type hints (``ToolContext`` parameters left out)."""
        return self._spec

    @property
    def name(self) -> str:
        """The name the model calls the tool by (``spec.name``)."""
        return self._spec.name

    @property
    def require_approval(self) -> bool | _ApprovalCheck:
        """Whether a call pauses for a person's approval: a bool, or a function deciding per
        call. May be set after the tool is made, checked as at construction."""
        return self._require_approval

    @require_approval.setter
    def require_approval(self, value: bool | _ApprovalCheck) -> None:
        # The function deciding per call is what a call asks (``_approval_check``): set with it,
        # or a function set later paused every call without being asked.
        self._approval_check = _approval_rule(value, _tool_label(self.name))
        self._require_approval = value

    async def run(self, arguments: str, ctx: ToolContext) -> str | ToolResult:
        """Validate the arguments (invalid ones return an error result the model can correct)
        and call the function: sync ones in a worker thread unless ``thread=False``."""
        plan = ctx.run_context._run.plan
        resume = plan.resume_for(ctx.address) if plan is not None else None
        # A resumed call that paused for approval: the person's decision, whether or not the tool
        # still requires approval (a denial must hold after a redeploy that dropped the flag).
        decision = (
            adk._approval.decision_of(resume, plan.info_at(ctx.address), ctx)
            if resume and plan
            else None
        )
        try:
            parsed = self._args_model.model_validate_json(arguments or "{}")
        except _REFUSALS as exc:
            if resume is None:
                if isinstance(exc, (TypeError, KeyError)):  # a first call: the tool failed, so
                    raise  # the model reads it, as for an exception the function raises
                if isinstance(exc, ToolError) and str(exc):  # a validator's ModelRetry: its words
                    raise
                if isinstance(exc, ToolError):  # without words: "tool failed" would say it ran
                    problems = f"invalid arguments for tool '{self.name}': {self._problems(exc)}"
                    return ToolResult.error(f"Error: {problems}")
                return ToolResult.error(format_validation_error(self.name, exc))
            if isinstance(decision, ToolResult):  # denied: nothing to run, nothing lost
                return decision
            # Valid when the call paused: the tool's parameters changed since (a redeploy). An
            # error result would leave the model to work around a call a person answered.
            raise self._unfit(ctx, exc) from None
        if self._same_names:  # its fields and nothing else (extra="forbid"), in their order
            kwargs = dict(parsed.__dict__)
        else:
            kwargs = {param: getattr(parsed, field) for field, param in self._field_names}
        if decision is not None:
            if isinstance(decision, ToolResult):
                return decision
            if plan is not None and self._require_approval:
                # Approved: that pause was the framework's, not the function's, so the function
                # runs as on a first call (``ctx.resume`` None). It saw the approval's resume
                # before, and the documented ``if ctx.resume is None: raise Interrupt(question)``
                # skipped its question and took the decision (``True``) for the person's answer.
                # A function that raised the approval request itself (asking for some calls
                # only) keeps its resume: it is how it knows the call was approved.
                plan.consume(ctx.address)
        elif self._require_approval:
            await self._check_approval(kwargs, ctx, resume)
        if self._context_param is not None:
            kwargs[self._context_param] = ctx
        if self._positional:
            args = [kwargs.pop(name) for name in self._positional]
            call: Callable[..., Any] = functools.partial(self.fn, *args)
        else:
            call = self.fn
        try:
            if self._timeout is not None:
                return _serialise(await self._timed(call, kwargs, self._timeout))
            if self._is_async:
                return _serialise(await call(**kwargs))
            if self._thread:
                given_up: list[bool] = []  # told to the thread reading a lazy result (``_read``)
                try:
                    value = await asyncio.to_thread(_read, call, given_up, **kwargs)
                finally:
                    given_up.append(True)
            else:
                value = call(**kwargs)
                if _is_lazy(value):
                    value = list(value)
            if inspect.isawaitable(value):  # a sync wrapper around a coroutine function
                value = await value
        except Interrupt as exc:
            # A call cleared to run (approved, or needing no approval by the require_approval
            # function) pausing on its own: remember it was cleared.
            if self._require_approval:
                _mark_approved(exc, ctx.address)
            raise
        return _serialise(value)

    async def _timed(self, call: Callable[..., Any], kwargs: dict[str, Any], limit: float) -> Any:
        """The function's value, or a ``ToolError`` naming the tool and ``limit`` when it takes
        longer. The run's own cancellation and a ``TimeoutError`` the function raises itself (its
        own deadline) go through unchanged: only this limit's expiry is the tool's timeout. A
        sync function's thread, one of its own (``_in_own_thread``), runs on past the limit (no
        thread can be killed); cancelling the await drops its result, which then reaches no one."""
        scope = asyncio.timeout(limit)
        try:
            async with scope:
                if self._is_async:
                    return await call(**kwargs)
                given_up: list[bool] = []
                try:
                    value = await _in_own_thread(
                        functools.partial(_read, call, given_up, **kwargs), self.name
                    )
                finally:
                    given_up.append(True)
                if inspect.isawaitable(value):  # a sync wrapper around a coroutine function
                    value = await value
                return value
        except TimeoutError:
            if not scope.expired():
                raise
            # pyadk's words, no content: an execute_tool span keeps them without content capture
            # (``adk.tracing._content_free``), so a timeout is told from the tool's own failure.
            raise _own_words(
                ToolError(
                    f"tool {self.name!r} timed out: no result within its limit of {limit:g} s"
                )
            ) from None

    async def _check_approval(
        self, kwargs: dict[str, Any], ctx: ToolContext, resume: ResumeContext | None
    ) -> None:
        """Before a call of a tool that requires approval and was not just approved: pause for
        the person's decision on the first call (with a ``require_approval`` function, if it says
        this call needs one). A resumed call whose pause was not the approval request goes on
        only if it was cleared before that pause: approved, or let through by the function (the
        function paused on its own afterwards, and ``_mark_approved`` saved that it was
        cleared). The function is not asked again on resume: its answer could have changed
        (it reads the session, the time, a limit), and a call half done would then pause for an
        approval it did not need, or one that needed it run without. A call never cleared
        (``require_approval`` added since the pause) is refused rather than run unapproved."""
        if resume is None:
            check = self._approval_check
            if check is not None and not await adk._approval.asks(check, ctx, dict(kwargs)):
                return  # this call needs no approval
            raise Interrupt(
                adk._approval.approval_request(
                    self.name, pydantic_core.to_jsonable_python(kwargs), ctx
                )
            )
        self._check_approved(ctx)

    def _check_approved(self, ctx: ToolContext) -> None:
        """Refuse a resumed call of this tool that paused without having been approved."""
        plan = ctx.run_context._run.plan
        approved = plan.resume_for(ctx.address, _APPROVED_SLOT) if plan is not None else None
        if approved is None or approved.state is not True:
            raise CheckpointError(
                f"the paused call {ctx.address!r} cannot resume: tool '{self.name}' requires "
                "approval, and the call paused without having been approved (require_approval "
                "was added since the pause?)",
                reason="incompatible",
            )

    def _adk_check_arguments(self, arguments: str) -> str | None:
        """What is wrong with ``arguments`` (JSON text) for this tool, or None: a person's edit of
        a call's arguments is checked with this before the resume runs anything
        (``adk._approval.edited_call``), as the call would check them on running."""
        try:
            self._args_model.model_validate_json(arguments)
        except _REFUSALS as exc:
            return self._problems(exc)
        return None

    def _problems(self, exc: Exception) -> str:
        """What is wrong with arguments the argument model refused (``exc``, one of
        ``_REFUSALS``): pydantic's account, or the words of a validator raising ``ToolError`` (a
        Pydantic AI port's ``ModelRetry``), a ``TypeError`` or a ``KeyError``, which pydantic
        passes through unwrapped (those two named, a bug in the validator as likely as a no)."""
        if isinstance(exc, ToolError):
            return str(exc) or "the argument model's validator rejected them (adk.ToolError)"
        if not isinstance(exc, ValidationError):
            return f"the argument model's validator raised {type(exc).__name__}: {exc}"
        problems = format_validation_error(self.name, exc)
        return problems.removeprefix(f"Error: invalid arguments for tool '{self.name}': ")

    def _unfit(self, ctx: ToolContext, exc: Exception) -> CheckpointError:
        """The refusal of a resumed call whose saved arguments no longer fit the tool."""
        problems = self._problems(exc)
        return CheckpointError(
            f"the paused call {ctx.address!r} cannot resume: its arguments no longer fit "
            f"tool '{self.name}', whose parameters changed since the pause ({problems})",
            reason="incompatible",
        )

    def _adk_check_resume(self, arguments: str, ctx: ToolContext) -> None:
        """Raise the ``CheckpointError`` that ``run`` would raise for this resumed call (its
        arguments no longer fit, or it was never approved), before any call of its round runs:
        a call beside it that ran first would run again on the next resume, as the refused
        resume keeps the checkpoint (see ``tools._executor.check_resumed_calls``)."""
        plan = ctx.run_context._run.plan
        resume = plan.resume_for(ctx.address) if plan is not None else None
        if plan is None or resume is None or not resume.is_target:
            return
        if plan.callback_at(ctx.address) is not None:
            return  # a before_tool callback's pause: the tool runs as on a first call
        decision = adk._approval.decision_of(resume, plan.info_at(ctx.address), ctx)
        if isinstance(decision, ToolResult):  # denied: nothing runs, nothing to refuse
            return
        try:
            self._args_model.model_validate_json(arguments or "{}")
        except _REFUSALS as exc:
            raise self._unfit(ctx, exc) from None
        if decision is None and self._require_approval:
            self._check_approved(ctx)

    @property
    def _adk_origin(self) -> str:
        """The function, for an error naming two tools of one name (``tools._origin``)."""
        return function_origin(self.fn)

    def __repr__(self) -> str:
        return f"FunctionTool({self.name!r})"


def _in_own_thread(call: Callable[[], Any], tool_name: str) -> asyncio.Future[Any]:
    """``asyncio.to_thread(call)`` in a daemon thread of its own, for a timed sync function,
    which may outlive its call: in the loop's default executor a call that hangs kept a worker
    for good (a pool of ``min(32, CPUs + 4)``: a few hung calls and every later ``to_thread`` of
    the process, sync tools and the loop's ``getaddrinfo`` included, waited behind them), and
    ``asyncio.run`` joins that executor's threads at its end, so the program never returned. A
    daemon does not hold the interpreter's exit either. The thread costs a start per call (tens
    of µs), paid by timed sync tools only. Its outcome reaches the future unless the call was
    given up (the future cancelled) or the loop has closed: then no one waits for it."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()  # as to_thread: the thread sees the call's contextvars

    def settle(value: Any, error: BaseException | None) -> None:
        if future.done():  # timed out, or the run cancelled: the outcome reaches no one
            return
        if error is None:
            future.set_result(value)
        else:
            future.set_exception(error)

    def work() -> None:
        value: Any = None
        error: BaseException | None = None
        try:
            value = context.run(call)
        except BaseException as exc:  # as to_thread's executor keeps any, for the awaiting call
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop has closed since: no one to tell
            loop.call_soon_threadsafe(settle, value, error)

    threading.Thread(target=work, name=f"adk-tool-{tool_name}", daemon=True).start()
    return future


_EAGER = frozenset({str, dict, list, int, float, bool, type(None), tuple, bytes})
"""What sync functions return most, none an iterator: ``_is_lazy`` answers them at one lookup."""


def _is_lazy(value: Any) -> bool:
    """Whether ``value`` is an iterator a sync function returns unread: a generator function's
    generator, ``return map(fetch, ids)``, a generator expression, ``itertools.islice(...)``, a
    sqlite3 cursor. ``_read`` reads them in the function's thread; returned as they were, the
    result's serialisation read them on the event loop, where a blocking step in them (a file,
    a paged query, the ``fetch``) stalled every run and no ``timeout=`` could fire, and a cursor
    (usable only in the thread that made it) read as its repr."""
    # isinstance, not a look-up of ``__next__`` on the type: pydantic's model class answers a
    # missing attribute through its metaclass, ~1 µs a call.
    return type(value) not in _EAGER and isinstance(value, Iterator)


def _read(call: Callable[..., Any], given_up: list[bool], /, *args: Any, **kwargs: Any) -> Any:
    """A sync function's value, an iterator it returns unread (``_is_lazy``) read into a list where
    the function ran. Once ``given_up`` holds anything (the call timed out, or its run was
    cancelled) the reading stops at the next item and a generator is closed (its ``finally``
    runs): read on, an endless one (a feed, a poll) grew its list until memory ran out."""
    value = call(*args, **kwargs)
    if not _is_lazy(value):
        return value
    items = []
    for item in value:
        if given_up:
            if type(value) is types.GeneratorType:
                value.close()
            return None  # no one waits for it
        items.append(item)
    return items


def _tool_label(name: object) -> str:
    return f"tool {name!r}" if isinstance(name, str) and name else "a function tool"


def _check_timeout(value: object, where: str) -> None:
    """Refuse a ``timeout`` that is not ``None`` or a positive, finite number of seconds: a str
    would fail at the first call, a bool would pass for 1 s, 0 or a negative number would time out
    every call before it ran, and NaN or infinity would never fire."""
    if value is None:
        return
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise TypeError(f"{where}: timeout must be a number of seconds > 0, got {shown(value)}")
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"{where}: timeout must be a number of seconds > 0, got {value!r}")


def _approval_rule(value: object, where: str) -> _ApprovalCheck | None:
    """The function of a ``require_approval`` that decides per call (None for a bool), checked
    where the tool is made: anything but a bool or a function taking ``(ctx, arguments)`` is a
    ``TypeError``. A string or a number would be truthy and pause every call without a word; a
    function of another shape (the OpenAI Agents SDK's ``(context, params, call_id)``, Google
    ADK's arguments by keyword) would fail every call when first asked."""
    if type(value) is bool:
        return None
    expected = (
        "True, False, or a function (ctx: adk.ToolContext, arguments: dict) -> bool (or an "
        "awaitable of one) that decides per call"
    )
    if not callable(value):
        raise TypeError(f"{where}: require_approval must be {expected}, got {shown(value)}")
    try:
        signature = inspect.signature(value)
    except (TypeError, ValueError):  # a builtin without one: taken as it is
        return value
    try:
        signature.bind(None, None)
    except TypeError:
        raise TypeError(
            f"{where}: require_approval is a function taking {signature}, which cannot be "
            f"called with (ctx, arguments); it must be {expected}. The call's id and name are "
            "ctx.tool_call_id and ctx.tool_name, the run's context ctx.run_context"
        ) from None
    return value


@overload
def tool(fn: Callable[_Params, _Result], /) -> FunctionTool[_Params, _Result]: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    require_approval: bool | _ApprovalCheck = False,
    thread: bool = True,
    timeout: float | None = None,
    progress: bool = False,
) -> Callable[[Callable[_Params, _Result]], FunctionTool[_Params, _Result]]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    require_approval: bool | _ApprovalCheck = False,
    thread: bool = True,
    timeout: float | None = None,
    progress: bool = False,
) -> FunctionTool[..., Any] | Callable[[Callable[..., Any]], FunctionTool[..., Any]]:
    """Decorator: ``@tool`` or ``@tool(name=..., require_approval=True, timeout=5)``."""

    def wrap(f: Callable[..., Any]) -> FunctionTool[..., Any]:
        return FunctionTool(
            f,
            name=name,
            description=description,
            require_approval=require_approval,
            thread=thread,
            timeout=timeout,
            progress=progress,
        )

    return wrap(fn) if fn is not None else wrap
