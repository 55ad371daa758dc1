"""The pydantic model of memwire's settings (see ``_config`` for where they are read from).

A module of its own so that importing memwire does not import pydantic: ``_config`` loads it on
the first config built.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ._errors import ConfigError
from ._mode_names import normalize_mode
from .memory._lifecycle import Scoring
from .policies._dates import zone

__all__ = ["Config", "make_config", "raise_config_error"]


class Config(BaseModel):
    """Every setting memwire reads. Environment: ``MEMWIRE_<FIELD>`` (upper case)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, frozen=False)

    mode: str = Field("contextPerTurn", description="startup | systemPromptPerTurn | contextPerTurn")
    history: Literal["drop", "replay"] = Field(
        "replay", description="contextPerTurn: drop earlier turns' blocks, or replay them in place"
    )
    replay_max_tokens: int = Field(
        4000, ge=0, le=1_000_000, description="history=replay: replayed memory tokens per session before a compaction"
    )
    max_tokens: int = Field(600, ge=16, le=100_000, description="token budget of one memory block")
    startup_max_tokens: int = Field(
        1200, ge=16, le=100_000,
        description="token budget of the profile block (startup, and contextPerTurn with profile)",
    )
    profile: bool = Field(
        False, description="contextPerTurn: also the session's profile block after the system prompt, "
                           "byte-stable for the session"
    )
    top_k: int = Field(6, ge=1, le=100, description="memories retrieved per turn at most")
    min_score: float | None = Field(
        None, ge=0, le=1,
        description="minimum retrieval score, 0..1 (a share of the query's weight); None = the index default",
    )
    retrieval: Literal["bm25", "hybrid"] = Field(
        "bm25", description="'hybrid': BM25 and, beside it, a local embedding model's static embeddings "
                            "(memwire[semantic] and embedding_model; without them, BM25 after one warning)"
    )
    embedding_model: str | None = Field(
        None, description="retrieval=hybrid: a model2vec or sentence-transformers model directory; the latter's "
                          "static embeddings are distilled once and cached under home (MEMWIRE_EMBEDDING_MODEL)"
    )
    memory_role: Literal["user", "system", "developer"] = Field(
        "user", description="OpenAI chat role of the hidden memory message"
    )
    placement: Literal["message", "merge"] = Field(
        "message", description="'message': own message; 'merge': leading content part of the user message"
    )
    side_requests: Literal["skip", "inject"] = Field(
        "skip", description="'skip': no memory for an agent's own requests (titles, summaries: no tools)"
    )
    capture: Literal["auto", "review", "off"] = Field(
        "auto",
        description="explicit statements ('remember that ...'): 'auto' stores them, 'review' puts them in the inbox",
    )
    distill_model: str | None = Field(
        None, description="opt-in: a model (any litellm can call) that reads finished exchanges for durable facts"
    )
    distill_api_base: str | None = Field(
        None, description="distillation: the model server's base URL (litellm api_base)"
    )
    distill_via_upstream: bool = Field(
        False, description="proxy: distill through the request's own upstream with the caller's credentials (opt-in)"
    )
    distill_min_confidence: float = Field(0.7, ge=0, le=1, description="distillation: proposals below it are dropped")
    distill_session_tokens: int = Field(
        20_000, ge=0, le=10_000_000, description="distillation: tokens (prompt and reply) one session may spend"
    )
    distill_timeout: float = Field(30.0, gt=0, le=600, description="distillation: seconds per model call")
    timeout_ms: float = Field(1000.0, gt=0, description="retrieval time budget; past it the call goes unchanged")
    memo_size: int = Field(1024, ge=1, description="turns remembered for turn-stable bytes (LRU)")
    shared_memos: bool = Field(
        False, description="keep the turn memos of startup, drop and systemPromptPerTurn in the session's ledger "
                           "file: every process on the directory, and a restart, gives a turn the same block "
                           "(the proxy turns it on)")
    dir: Path = Field(Path(".memwire"), description="project memory directory (MEMWIRE_DIR)")
    store: str | None = Field(
        None, repr=False, description="where memories are kept: unset = the markdown directory (dir); "
                                      "postgresql://user@host/db = a database many proxy replicas share "
                                      "(MEMWIRE_STORE; needs memwire[postgres])")
    home: Path | None = Field(None, description="global memory directory (MEMWIRE_HOME; default ~/.memwire)")
    use_global: bool = Field(True, description="also search the global directory")
    proxy_key: str | None = Field(
        None, repr=False, description="proxy: clients must send it in x-memwire-key (MEMWIRE_PROXY_KEY)"
    )
    proxy_keys_file: Path | None = Field(
        None, description="proxy: a keys file binding client keys to namespaces (`memwire keys`; docs/proxy.md)"
    )
    anthropic_cache_breakpoint: bool = Field(
        True, description="proxy: add a cache_control breakpoint before the memory message"
    )
    proxy_header_timeout: float = Field(
        10.0, gt=0, le=3600, description="proxy: seconds a connection may take to send a request's headers"
    )
    proxy_body_timeout: float = Field(
        120.0, gt=0, le=3600, description="proxy: seconds a client may take to send a request body (408 after)"
    )
    proxy_max_connections: int = Field(
        1000, ge=1, le=1_000_000, description="proxy: open connections at most; past it requests get 503"
    )
    proxy_new_namespaces_per_minute: int = Field(
        60, ge=0, le=1_000_000, description="proxy: new namespaces one client may start per minute (429 after)"
    )
    proxy_workers: int = Field(
        0, ge=0, le=1024, description="proxy: worker processes over the one memory directory (0: one per core)"
    )
    proxy_max_namespaces: int = Field(
        10_000, ge=0, le=10_000_000, description="proxy: namespaces in the memory directory at most (429 after)"
    )
    proxy_request_log: Path | None = Field(
        None, description="proxy: append each request's figures (never message text) to this JSON Lines file "
                          "(bounded: 1 MiB, then one older file); `memwire stats --requests --log FILE` reads it"
    )

    half_lives: dict[str, float] = Field(
        default_factory=dict, description="lifecycle: days for a category's memories to lose half their stability "
                                          "(e.g. {decision = 30}; env: decision=30,fact=60)")
    cue_weights: dict[str, float] = Field(
        default_factory=dict,
        description="lifecycle: weight of how a memory got in (explicit, captured, distilled, imported)")
    category_caps: dict[str, int] = Field(
        default_factory=dict, description="lifecycle: memories per category before a sweep archives the weakest")
    rank_prior: float = Field(0.1, ge=0, le=1, description="lifecycle: how much stability reorders retrieval (0: not)")
    timezone: str | None = Field(
        None, description="the user's IANA time zone (Europe/Paris): 'tomorrow' in a new memory is dated from the day "
                          "it was said there, unless the user stated a zone; unset = UTC")

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        zone(value)  # an unknown name: ValueError naming it
        return value.strip()

    @field_validator("store")
    @classmethod
    def _store_url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        if not value.startswith(("postgresql://", "postgres://")):
            raise ValueError("store must be a PostgreSQL URL (postgresql://user@host:5432/db); "
                             "leave it unset for the markdown directory (dir)")
        return value

    @field_validator("half_lives", "cue_weights", "category_caps", mode="before")
    @classmethod
    def _table(cls, v: Any) -> Any:
        if isinstance(v, str):  # from the environment: "decision=30,fact=60"
            pairs = [p.split("=", 1) for p in v.split(",") if p.strip()]
            if any(len(p) != 2 for p in pairs):
                raise ValueError("write it as name=number,name=number")
            return {k.strip(): val.strip() for k, val in pairs}
        return v

    @model_validator(mode="after")
    def _scoring(self) -> Config:
        self.scoring()  # unknown categories or cues, or a weight that is not positive: named here
        return self

    def scoring(self) -> Scoring:
        """The lifecycle's ``Scoring`` these settings describe."""
        return Scoring(cue_weights=self.cue_weights, half_lives=self.half_lives, caps=self.category_caps,
                       rank_prior=self.rank_prior)

    @field_validator("mode", mode="before")
    @classmethod
    def _mode(cls, v: Any) -> str:
        return normalize_mode(v)

    @property
    def global_dir(self) -> Path:
        return self.home if self.home is not None else Path.home() / ".memwire"


def raise_config_error(exc: ValidationError, source: str) -> None:
    problems = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"]) or "(config)"
        if err["type"] == "extra_forbidden":
            problems.append(f"unknown key {key!r}; valid keys: {', '.join(Config.model_fields)}")
        else:
            msg = err["msg"].removeprefix("Value error, ")
            problems.append(f"{key}: {msg} (got {err.get('input')!r})" if err["loc"] else msg)
    raise ConfigError(f"{source}: " + "; ".join(problems)) from None


def make_config(values: Mapping[str, Any], source: str = "config") -> Config:
    """Validate settings; a bad key or value raises ConfigError naming it."""
    try:
        return Config(**values)
    except ValidationError as exc:
        raise_config_error(exc, source)
    raise AssertionError("unreachable")
