"""Request formats: the names kept for their importers. Each wire API is one module of
:mod:`memwire.middleware.formats`, registered there."""

from __future__ import annotations

from .formats import APIS, FORMATS, Format, Scan, View, format_for, format_for_path, get_format, text_of
from .formats.anthropic_messages import AnthropicMessages
from .formats.openai_chat import OpenAIChat
from .formats.openai_responses import OpenAIResponses

__all__ = [
           "APIS",
           "FORMATS",
           "AnthropicMessages",
           "Format",
           "OpenAIChat",
           "OpenAIResponses",
           "Scan",
           "View",
           "format_for",
           "format_for_path",
           "get_format",
           "text_of",
]
