"""``@tool`` / ``FunctionTool``: a Python function as a tool.

The name comes from the function, the description and per-argument help from its docstring (Google
style ``Args:`` or reST ``:param x:``), the JSON schema and validation from its type hints through a
pydantic model built once. A parameter annotated ``ToolContext`` is injected and hidden from the
model. Sync functions run inline (most tools are tiny); pass ``thread=True`` for blocking ones.
"""

from __future__ import annotations

import asyncio
import inspect
import re
from collections.abc import Callable
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin, get_type_hints, overload

import pydantic_core
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from ..interrupts import Interrupt
from .base import ToolContext, ToolResult, ToolSpec

__all__ = ["FunctionTool", "format_validation_error", "tool"]

# Docstring patterns, compiled by ``re`` on first use (and cached there) rather than at import:
# compiling them costs ~1 ms that ``import adk`` would otherwise charge every program.
_SECTION = r"^\s*(Args|Arguments|Parameters|Returns|Raises|Yields|Examples?|Notes?):\s*$"
_ARG_LINE = r"^\s*\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$"
_REST_PARAM = r"^\s*:param\s+(?:[\w\[\], ]+\s+)?(\w+)\s*:\s*(.*)$"


def _parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """The summary (text before the first section) and the per-argument help."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    summary: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    for line in lines:
        header = re.match(_SECTION, line)
        if header:
            section, current = header.group(1), None
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
        elif section in ("Args", "Arguments", "Parameters"):
            arg = re.match(_ARG_LINE, line)
            if arg and (not line.startswith((" ", "\t")) or current is None or _indent(line) <= 4):
                current = arg.group(1)
                params[current] = arg.group(2).strip()
            elif current is not None and line.strip():
                params[current] = f"{params[current]} {line.strip()}".strip()
        elif section == "rest" and current is not None and line.strip():
            params[current] = f"{params[current]} {line.strip()}".strip()
    return "\n".join(summary).strip(), params


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


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop pydantic's auto titles: they cost tokens and tell a model nothing."""
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        if isinstance(prop, dict):
            prop.pop("title", None)
    return schema


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


def _serialise(value: Any) -> str | ToolResult:
    if isinstance(value, str | ToolResult):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    if value is None:
        return ""
    return pydantic_core.to_json(value).decode()


class FunctionTool:
    """A tool made from a sync or async function (see the module docstring)."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        require_approval: bool = False,
        thread: bool = False,
    ) -> None:
        self.fn = fn
        self.require_approval = require_approval
        self._thread = thread
        self._is_async = inspect.iscoroutinefunction(fn)
        tool_name = name or getattr(fn, "__name__", "")
        if not tool_name or tool_name == "<lambda>":
            raise ValueError("a function tool needs a name")
        summary, arg_help = _parse_docstring(fn.__doc__)
        hints = get_type_hints(fn, include_extras=True)
        fields: dict[str, Any] = {}
        names: list[tuple[str, str]] = []  # (model field, parameter)
        self._context_param: str | None = None
        for param in inspect.signature(fn).parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise TypeError(
                    f"tool {tool_name!r}: *args/**kwargs cannot be described to a model"
                )
            annotation = hints.get(param.name, Any)
            if _is_tool_context(annotation):
                self._context_param = param.name
                continue
            default = ... if param.default is inspect.Parameter.empty else param.default
            # A parameter named like a BaseModel attribute (json, schema, copy...) gets another
            # field name and keeps its own name as the alias the model sees.
            field = f"{param.name}_" if hasattr(BaseModel, param.name) else param.name
            extra: dict[str, Any] = {}
            if param.name in arg_help:
                extra["description"] = arg_help[param.name]
            if field != param.name:
                extra["alias"] = param.name
            fields[field] = (annotation, Field(default, **extra))
            names.append((field, param.name))
        self._args_model: type[BaseModel] = create_model(
            f"{tool_name}_arguments",
            __config__=ConfigDict(extra="forbid"),
            **fields,
        )
        self._field_names = tuple(names)
        self._spec = ToolSpec(
            name=tool_name,
            description=description if description is not None else summary,
            parameters=_clean_schema(self._args_model.model_json_schema()),
        )

    @property
    def spec(self) -> ToolSpec:
        return self._spec

    @property
    def name(self) -> str:
        return self._spec.name

    async def run(self, arguments: str, ctx: ToolContext) -> str | ToolResult:
        try:
            parsed = self._args_model.model_validate_json(arguments or "{}")
        except ValidationError as exc:
            return ToolResult.error(format_validation_error(self.name, exc))
        kwargs = {param: getattr(parsed, field) for field, param in self._field_names}
        if self.require_approval:
            denial = self._check_approval(kwargs, ctx)
            if denial is not None:
                return denial
        if self._context_param is not None:
            kwargs[self._context_param] = ctx
        if self._is_async:
            value = await self.fn(**kwargs)
        elif self._thread:
            value = await asyncio.to_thread(self.fn, **kwargs)
        else:
            value = self.fn(**kwargs)
        return _serialise(value)

    def _check_approval(self, kwargs: dict[str, Any], ctx: ToolContext) -> ToolResult | None:
        """Pause for a person's decision on the first call; on resume, go on only if approved."""
        resume = ctx.resume
        if resume is None or not resume.was_interrupted:
            info = {
                "type": "approval",
                "tool": self.name,
                "arguments": pydantic_core.to_jsonable_python(kwargs),
                "tool_call_id": ctx.tool_call_id,
            }
            raise Interrupt(info)
        decision = resume.data
        if isinstance(decision, dict):
            approved = bool(decision.get("approved"))
            reason = decision.get("reason")
        else:
            approved = decision is True or (
                isinstance(decision, str) and decision.strip().lower() in ("y", "yes", "approve")
            )
            reason = None
        if approved:
            return None
        text = f"Error: the call to '{self.name}' was not approved"
        return ToolResult(content=f"{text}: {reason}" if reason else text, is_error=True)

    def __repr__(self) -> str:
        return f"FunctionTool({self.name!r})"


@overload
def tool(fn: Callable[..., Any], /) -> FunctionTool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    require_approval: bool = False,
    thread: bool = False,
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    require_approval: bool = False,
    thread: bool = False,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Decorator: ``@tool`` or ``@tool(name=..., require_approval=True)``."""

    def wrap(f: Callable[..., Any]) -> FunctionTool:
        return FunctionTool(
            f, name=name, description=description, require_approval=require_approval, thread=thread
        )

    return wrap(fn) if fn is not None else wrap
