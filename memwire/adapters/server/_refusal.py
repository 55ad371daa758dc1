"""A request the HTTP server answers itself with an error, and how each of its APIs renders one.

Every route raises :class:`Refusal` (a status, a message, a code); :func:`refusal_response` renders
it in the format of the API the request was for:

- ``"openai"``: OpenAI's ``{"error": {"message", "type", "param", "code"}}``, the proxy's routes to an
  OpenAI-compatible upstream (and any other route, ``/metrics``);
- ``"anthropic"``: Anthropic's ``{"type": "error", "error": {"type", "message"}}``, its routes;
- ``"memory_api"``: ``/memwire/v1``'s ``{"error": {"code", "message"}}``;
- ``"page"``: ``/memwire/ui``'s HTML page saying why.

The server's own failures answered in an API's error format (an upstream unreachable, a store that
cannot be used, a bug, each with its error id) are refusals too; the page tells of its own
failures on pages of their own (``_ui``: "unavailable", "error"). Starlette's own errors (a 404 or
405 of its routing) are rendered alike (:meth:`Refusal.of`).

This module is light: ``memwire keys`` loads it through ``_keys``, whose access checks raise it.
"""

from __future__ import annotations

import json
from html import escape
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from starlette.responses import Response

__all__ = ["Refusal", "Style", "refusal_response"]

Style = Literal["openai", "anthropic", "memory_api", "page"]

_ANTHROPIC_TYPES = {
    400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 413: "request_too_large",
    429: "rate_limit_error", 502: "api_error", 504: "timeout_error",
}
# the memory API's code for an error raised without one (Starlette's routing)
_MEMORY_API_CODES = {404: "not_found", 405: "method_not_allowed"}


class Refusal(Exception):
    """A request refused (4xx), or failed on the server's side (5xx), in words for its client.
    ``code``: OpenAI's ``error.code`` and the memory API's (None: OpenAI's ``null``, the memory
    API's code for the status); Anthropic's error type and the page's title follow the status."""

    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.code = status, message, code

    @classmethod
    def of(cls, exc: Exception) -> Refusal:
        """``exc`` as a refusal: itself, or an HTTP error Starlette raised (its status and detail)."""
        if isinstance(exc, Refusal):
            return exc
        return cls(getattr(exc, "status_code", 500), str(getattr(exc, "detail", "")))


def refusal_response(refusal: Refusal, style: Style) -> Response:
    """``refusal`` as the response of an API of ``style``."""
    from starlette.responses import JSONResponse, Response  # start-up time: `memwire keys` loads this module

    status, message, code = refusal.status, refusal.message, refusal.code
    if style == "page":
        from ._ui_page import page_html  # start-up time, as above

        return page_html("memwire: refused", f'<p class="error">{escape(message)}</p>', status)
    if style == "memory_api":
        return JSONResponse({"error": {"code": code or _MEMORY_API_CODES.get(status, "error"), "message": message}},
                            status_code=status)
    body: dict[str, Any]
    if style == "anthropic":
        kind = _ANTHROPIC_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
        body = {"type": "error", "error": {"type": kind, "message": message}}
    else:
        kind = "server_error" if status >= 500 else "invalid_request_error"
        body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return Response(json.dumps(body), status, media_type="application/json")
