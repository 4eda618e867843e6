"""``[platform]`` settings of the Mastodon platform."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field


class MastodonConfig(BaseModel):
    """``[platform]`` settings of the Mastodon platform."""

    model_config = ConfigDict(extra="forbid")
    #: where tokens live, how fast and how patiently the server is talked to
    machinery_settings: ClassVar[frozenset[str]] = frozenset({
        "tokens", "tokens_env", "token_store", "write_parallelism", "read_parallelism", "request_timeout", "max_retries",
        "backoff_base", "backoff_cap", "ratelimit_method", "max_ratelimit_wait"})

    base_url: str = Field(min_length=1)
    #: a file of access tokens (see :mod:`.accounts`); None: ``tokens_env`` or API sign-up
    tokens: str | None = None
    #: an environment variable holding the tokens (newline or comma separated)
    tokens_env: str | None = None
    #: folder for sign-up tokens (outside the run directory); default $XDG_STATE_HOME/townsquare/mastodon
    token_store: str | None = None
    visibility: Literal["private", "unlisted", "public", "direct"] = "private"
    bot: bool = True
    update_profile: bool = True
    #: appended to every profile bio, e.g. a line naming the study and a contact
    note_suffix: str = ""
    home_source: Literal["all", "following"] = "all"
    include_public: bool = True
    candidate_window: int = Field(500, gt=0)
    window_hours: float = Field(48.0, gt=0)
    page_size: int = Field(40, gt=0, le=40)
    max_pages: int = Field(10, gt=0)
    write_parallelism: int = Field(1, ge=1, le=32)
    read_parallelism: int = Field(4, ge=1, le=32)
    request_timeout: float = Field(30.0, gt=0)
    max_retries: int = Field(5, ge=0)
    backoff_base: float = Field(0.5, ge=0)
    backoff_cap: float = Field(30.0, ge=0)
    ratelimit_method: Literal["pace", "wait", "throw"] = "pace"
    max_ratelimit_wait: float = Field(300.0, ge=0)
    #: Mastodon's own per-account limits, counted here in wall-clock time (0 disables)
    status_cap: int = Field(300, ge=0)
    status_cap_hours: float = Field(3.0, gt=0)
    follow_cap: int = Field(400, ge=0)
    follow_cap_hours: float = Field(24.0, gt=0)
    signup_email_domain: str = "example.com"
    username_prefix: str = Field("ts", pattern=r"^[a-z0-9_]{0,10}$")
    app_name: str = "townsquare"
