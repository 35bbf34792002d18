"""Turning MCP content blocks into the text and parts a chat model reads.

Text blocks and embedded text resources pass through as text; binary blocks (images, audio, blobs)
become parts (``ImagePart``, ``AudioPart``, ``FilePart``), and short bracketed placeholders in the
text, so a model that takes text only still knows something was there. Resource links stay
placeholders: the bytes are the server's to give.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from mcp.types import (
    AudioContent,
    BlobResourceContents,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from ..messages import AudioPart, FilePart, ImagePart, Message, Role
from ..tools.base import ToolResult

__all__ = ["block_part", "block_text", "blocks_message", "blocks_parts", "blocks_text", "result_of"]


_UNTYPED = "application/octet-stream"
"""The type of a blob whose resource gives none: what its ``FilePart`` and its text say."""


def block_text(block: object) -> str:
    """``block`` as text; a binary block as the placeholder of the part it becomes
    (:func:`block_part`, ``part_placeholder``), so a model given the text alone
    (``parts="text"``) is sent it as it is, the parts adding no line of their own."""
    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, ImageContent):
        return _binary_text("image", block.mime_type)
    if isinstance(block, AudioContent):
        return _binary_text("audio", block.mime_type)
    if isinstance(block, ResourceLink):
        return f"[resource link: {block.name} <{block.uri}>]"
    if isinstance(block, EmbeddedResource):
        resource = block.resource
        if isinstance(resource, TextResourceContents):
            return resource.text
        if isinstance(resource, BlobResourceContents):
            return f"[resource: {resource.uri} ({resource.mime_type or _UNTYPED})]"
    return f"[{getattr(block, 'type', type(block).__name__)} content]"


def _binary_text(kind: str, mime_type: str) -> str:
    """An image or audio block's placeholder: ``[image: image/png]``, or a file part's for one
    whose type is not its kind's (it becomes a ``FilePart``, :func:`block_part`)."""
    if mime_type.startswith(kind + "/"):
        return f"[{kind}: {mime_type}]"
    return f"[file: unnamed ({mime_type})]"


def blocks_text(blocks: Iterable[object]) -> str:
    return "\n".join(block_text(block) for block in blocks)


def block_part(block: object) -> ImagePart | AudioPart | FilePart | None:
    """The part a binary block carries, or None: a text block, a link, or data that is not the
    base64 MCP says it is (its placeholder stays in the text, so nothing is hidden)."""
    try:
        # A block whose type says otherwise (an image sent as application/octet-stream) is
        # still its bytes: a file part, which a model takes by its type or not at all.
        if isinstance(block, ImageContent):
            if block.mime_type.startswith("image/"):
                return ImagePart(mime_type=block.mime_type, data=block.data)
            return FilePart(mime_type=block.mime_type, data=block.data)
        if isinstance(block, AudioContent):
            if block.mime_type.startswith("audio/"):
                return AudioPart(mime_type=block.mime_type, data=block.data)
            return FilePart(mime_type=block.mime_type, data=block.data)
        if isinstance(block, EmbeddedResource) and isinstance(block.resource, BlobResourceContents):
            resource = block.resource
            return FilePart(
                mime_type=resource.mime_type or _UNTYPED,
                data=resource.blob,
                uri=str(resource.uri),
            )
    except ValueError:  # pydantic's ValidationError: bad base64, an image typed text/plain
        return None
    return None


def blocks_parts(blocks: Iterable[object]) -> tuple[ImagePart | AudioPart | FilePart, ...]:
    """The parts of ``blocks``, in order (text blocks have none)."""
    return tuple(
        part
        for block in blocks
        if not isinstance(block, TextContent)
        for part in (block_part(block),)
        if part is not None
    )


def blocks_message(role: str, blocks: list[object]) -> Message:
    """A message of MCP's ``role`` ("user" or "assistant") holding ``blocks``, as a server's prompt
    or sampling message is given to a model: the blocks' text, with a placeholder standing for
    each image and sound where it sat (``[image: image/png]``), and those as its ``parts``, as an
    MCP tool's result holds them. An assistant's message keeps its parts too, for a model that
    takes them there (``OpenAIChatModel`` sends neither API parts on an assistant message, only
    its text with the placeholders). A message of text alone is built as it always was."""
    text = blocks_text(blocks)
    parts = () if all(type(block) is TextContent for block in blocks) else blocks_parts(blocks)
    if role == "user":
        return Message.user(text, parts=parts)
    if parts:
        return Message(role=Role.ASSISTANT, content=text, parts=parts)
    return Message.assistant(text)


def result_of(content: Sequence[object], structured: Any, is_error: bool | None) -> ToolResult:
    """A tool's result as the model reads it, from MCP's result fields (a ``CallToolResult``'s,
    or a ``tool_result`` block's in a sampling request): the blocks' text, or the structured
    content as JSON when there is no text, its parts, and an error's text ``Error: ``
    prefixed."""
    text = blocks_text(content)
    if not text and structured is not None:
        text = json.dumps(structured, ensure_ascii=False)
    parts = blocks_parts(content)
    if is_error:
        text = text or "the tool reported an error without a message"
        if not text.startswith("Error:"):
            text = f"Error: {text}"
        return ToolResult(content=text, is_error=True, structured=structured, parts=parts)
    return ToolResult(content=text, structured=structured, parts=parts)
