"""The plain-text message constructors build instances directly instead of validating (see
``adk/_fastmodel.py``). They must be indistinguishable from validated ones in every way a user or
the checkpoint codec can observe, and anything validation would change or reject must still go
through validation."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from adk import Message, Role, ToolCall
from adk._fastmodel import _validating, fast_builder

CASES: list[tuple[Callable[[], Message], dict[str, Any]]] = [
    (lambda: Message.system("be brief"), {"role": Role.SYSTEM, "content": "be brief"}),
    (lambda: Message.user("hi"), {"role": Role.USER, "content": "hi"}),
    (lambda: Message.assistant("ok"), {"role": Role.ASSISTANT, "content": "ok"}),
    (lambda: Message.assistant(), {"role": Role.ASSISTANT, "content": ""}),
    (
        lambda: Message.tool("3", tool_call_id="c1", name="add"),
        {"role": Role.TOOL, "content": "3", "tool_call_id": "c1", "name": "add"},
    ),
    (
        lambda: Message.tool("3", tool_call_id="c1"),
        {"role": Role.TOOL, "content": "3", "tool_call_id": "c1", "name": None},
    ),
]


@pytest.mark.parametrize(("build", "fields"), CASES)
def test_built_message_is_indistinguishable_from_a_validated_one(
    build: Callable[[], Message], fields: dict[str, Any]
) -> None:
    built, validated = build(), Message(**fields)
    assert built == validated
    assert built.__dict__ == validated.__dict__
    assert list(built.__dict__) == list(validated.__dict__)  # same field order in dumps
    assert built.model_fields_set == validated.model_fields_set
    assert built.__pydantic_extra__ is None and built.__pydantic_private__ is None
    assert built.model_dump() == validated.model_dump()
    assert built.model_dump_json() == validated.model_dump_json()
    assert built.model_dump(exclude_unset=True) == validated.model_dump(exclude_unset=True)
    assert repr(built) == repr(validated)
    assert Message.model_validate_json(built.model_dump_json()) == validated
    assert copy.deepcopy(built) == validated and built.model_copy() == validated
    assert type(built.role) is Role


def test_built_messages_own_their_mutable_fields() -> None:
    first, second = Message.assistant("a"), Message.assistant("b")
    first.metadata["k"] = 1
    first.tool_calls.append(ToolCall(id="c", name="n"))
    assert second.metadata == {} and second.tool_calls == []
    first.content = "changed"  # assignment still works and is recorded as set
    assert "content" in first.model_fields_set and json.loads(first.model_dump_json())["content"]


def test_anything_validation_would_touch_still_goes_through_it() -> None:
    class Tagged(str):
        pass

    text = Tagged("hi")
    assert type(Message.user(text).content) is str  # validation turned the subclass into a str
    with pytest.raises(ValidationError):
        Message.assistant(3)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        Message.tool("x", tool_call_id=5)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        Message.tool("x", tool_call_id="c", name=5)  # type: ignore[arg-type]


def test_subclasses_with_their_own_rules_are_validated() -> None:
    from pydantic import field_validator

    class Shouting(Message):
        @field_validator("content")
        @classmethod
        def upper(cls, value: str) -> str:
            return value.upper()

    message = Shouting.assistant("hey")
    assert type(message) is Shouting and message.content == "HEY"


def test_builder_falls_back_to_validation_for_models_it_cannot_build() -> None:
    class WithPrivate(BaseModel):
        _secret: int = 0
        text: str = ""

    build = fast_builder(WithPrivate)
    instance = build({"text": "x"}, {"text"})
    assert instance.text == "x" and instance._secret == 0  # private defaults were set up

    validating = _validating(Message)
    made = validating(
        {"role": Role.USER, "content": "hi", "name": None}, {"role", "content", "name"}
    )
    assert made == Message.user("hi") and made.model_fields_set == {"role", "content", "name"}


def test_a_replys_usage_is_built_as_validation_builds_it() -> None:
    """The OpenAI adapter builds a reply's ``Usage`` without validating (``usage_of``): from a
    server's ints it is a validated ``Usage`` in every respect, frozen too, and a value that is
    not an exact int (a bool, to ``isinstance`` an int) still goes through validation."""
    from types import SimpleNamespace

    from adk.messages import Usage
    from adk.models._openai_common import usage_of

    details = SimpleNamespace(cached_tokens=4)
    sent = SimpleNamespace(prompt_tokens=9, completion_tokens=1, total_tokens=10)
    sent.prompt_tokens_details = details
    built = usage_of(sent, "prompt_tokens", "completion_tokens")
    validated = Usage(
        input_tokens=9,
        output_tokens=1,
        total_tokens=10,
        cached_input_tokens=4,
        reasoning_output_tokens=0,
    )
    assert built is not None and type(built) is Usage
    assert built == validated and hash(built) == hash(validated)
    assert list(built.__dict__.items()) == list(validated.__dict__.items())
    assert built.model_fields_set == validated.model_fields_set
    again = usage_of(sent, "prompt_tokens", "completion_tokens")
    assert again is not None and again.model_fields_set is not built.model_fields_set
    assert built.__pydantic_extra__ is None and built.__pydantic_private__ is None
    assert built.model_dump_json() == validated.model_dump_json() and repr(built) == repr(validated)
    assert built + validated == validated + validated
    with pytest.raises(ValidationError):
        built.input_tokens = 1  # frozen, as a validated one is
    assert built.model_copy(update={"input_tokens": 2}).input_tokens == 2
    assert built.model_fields_set == validated.model_fields_set  # the copy did not share its set

    flagged = usage_of(SimpleNamespace(prompt_tokens=True), "prompt_tokens", "completion_tokens")
    assert flagged is not None and type(flagged.input_tokens) is int and flagged.input_tokens == 1
