"""A typed user's images, sounds and files in messages and tool results (checked by mypy
--strict, not run)."""

from __future__ import annotations

from typing import assert_type

import adk
from adk import AudioPart, FilePart, ImagePart, Message, ToolResult, tool

PNG = b"\x89PNG\r\n\x1a\n"


@tool
def screenshot() -> ImagePart:
    """Takes a screenshot."""
    return ImagePart(mime_type="image/png", data=PNG)


@tool
def chart(metric: str) -> list[str | ImagePart]:
    """Draws a chart."""
    return [f"the chart of {metric}:", ImagePart(mime_type="image/png", data=PNG)]


def question() -> Message:
    # A list mixing kinds is annotated: inferred alone, its type is the kinds' private base.
    parts: list[adk.Part] = [
        ImagePart(mime_type="image/png", data=PNG),
        FilePart(uri="s3://b/r.pdf"),
    ]
    return Message.user("what is this?", parts=parts)


def answer(message: Message) -> list[str]:
    kinds: list[str] = []
    for part in message.parts:
        assert_type(part, ImagePart | AudioPart | FilePart)
        if isinstance(part, FilePart):
            assert_type(part.data, bytes | None)
        else:
            assert_type(part.data, bytes)
        kinds.append(part.mime_type)
    return kinds


def result() -> ToolResult:
    sound = AudioPart(mime_type="audio/wav", data=b"RIFF")
    return ToolResult(content="[audio: audio/wav]", parts=(sound,))


def as_tool(text: str) -> Message:
    return Message.tool(
        text, tool_call_id="c1", parts=[adk.ImagePart(mime_type="image/png", data=PNG)]
    )
