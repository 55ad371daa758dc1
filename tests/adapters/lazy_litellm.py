"""litellm for the tests, imported by the first test that needs it, not when the test modules are
collected: importing it takes ~3 s of CPU, which every xdist worker paid at collection, whether or
not it then ran one of these tests."""

from __future__ import annotations

import functools
from types import SimpleNamespace
from typing import Any


@functools.cache
def litellm() -> Any:
    """The ``litellm`` module, set up for the tests."""
    import litellm as module

    module.disable_aiohttp_transport = True  # async calls go through httpx, where respx intercepts them
    module.suppress_debug_info = True
    return module


@functools.cache
def types() -> SimpleNamespace:
    """The litellm classes the tests build or check for."""
    litellm()
    from litellm import ModelResponse
    from litellm.litellm_core_utils.streaming_handler import CustomStreamWrapper
    from litellm.proxy._types import LitellmUserRoles, UserAPIKeyAuth
    from litellm.types.llms.openai import OutputTextDeltaEvent, ResponseCompletedEvent, ResponsesAPIResponse
    from litellm.types.utils import ModelResponseStream

    return SimpleNamespace(
        ModelResponse=ModelResponse, CustomStreamWrapper=CustomStreamWrapper, LitellmUserRoles=LitellmUserRoles,
        UserAPIKeyAuth=UserAPIKeyAuth, OutputTextDeltaEvent=OutputTextDeltaEvent,
        ResponseCompletedEvent=ResponseCompletedEvent, ResponsesAPIResponse=ResponsesAPIResponse,
        ModelResponseStream=ModelResponseStream,
    )


def auth(**fields: Any) -> Any:
    """A ``UserAPIKeyAuth``: what the LiteLLM proxy's auth hands its callbacks."""
    return types().UserAPIKeyAuth(**fields)


def callback(**kwargs: Any) -> Any:
    """A ``MemwireCallback`` (the adapter builds that class at first use, on litellm's CustomLogger)."""
    litellm()
    from memwire.adapters.litellm import MemwireCallback

    return MemwireCallback(**kwargs)
