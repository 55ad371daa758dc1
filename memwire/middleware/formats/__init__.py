"""The wire formats, one module each, and their registry.

A :class:`Format` owns everything about its API: reading a body (the view, message identity),
inserting a block, the proxy routes it serves, reading replies and usage (streamed and not), the
shape of a distillation call, and any rewrite the provider's prompt cache wants. The rest of memwire
asks the registry (:func:`format_for`, :func:`format_for_path`) and never compares API names.

A new API: a module here with a ``Format`` subclass, and one line below that registers it
(docs/architecture.md, "A new wire format").
"""

from __future__ import annotations

from ..._errors import RequestFormatError
from ._base import Format, ReplyText, Scan, Usage, View, text_of
from .anthropic_messages import AnthropicMessages
from .openai_chat import OpenAIChat
from .openai_responses import OpenAIResponses

__all__ = [
    "APIS",
    "FORMATS",
    "Format",
    "ReplyText",
    "Scan",
    "Usage",
    "View",
    "format_for",
    "format_for_path",
    "get_format",
    "register",
    "text_of",
]

FORMATS: dict[str, Format] = {}   # api -> its format, in registration order
_BY_PATH: dict[str, Format] = {}  # proxy route -> its format


def register(fmt: Format) -> Format:
    """Make ``fmt`` known by its ``api`` name and its proxy ``paths``."""
    FORMATS[fmt.api] = fmt
    for path in fmt.paths:
        _BY_PATH[path] = fmt
    return fmt


# the registrations: the first is the default of ``prepare_request(api=...)`` and the SDK wrappers
for _fmt in (OpenAIChat(), AnthropicMessages(), OpenAIResponses()):
    register(_fmt)

APIS = tuple(FORMATS)


def format_for(api: str) -> Format:
    """The format of an API name (``Format.api``); an unknown name is a :class:`RequestFormatError`."""
    try:
        return FORMATS[api]
    except KeyError:
        raise RequestFormatError(f"unknown api {api!r}; expected one of {', '.join(FORMATS)}") from None


get_format = format_for  # the earlier name


def format_for_path(path: str) -> Format | None:
    """The format of a proxy POST route (``/v1/chat/completions``), or None for any other path."""
    return _BY_PATH.get(path)
