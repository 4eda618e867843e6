"""The settings of an OpenAI-compatible endpoint that the LLM provider ``openai`` and the
embedder ``openai_embedder`` share: where it is and where its keys live (read through
:mod:`townsquare.lib.secret_files`, never logged)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict, field_validator

from townsquare.secrets import remember_url_secrets
from .secret_files import resolve_secrets


class EndpointConfig(BaseModel):
    """Where an OpenAI-compatible endpoint is and where its keys live: the settings the LLM
    provider ``openai`` and the embedder ``openai`` share (each adds its own)."""

    model_config = ConfigDict(extra="forbid")
    #: where the endpoint is and its keys steer the machinery: ``resume --set`` may change them
    machinery_settings: ClassVar[frozenset[str]] = frozenset({"base_url", "api_key_env", "api_key_file"})

    #: None: ``$OPENAI_BASE_URL`` (read by the SDK), else OpenAI
    base_url: str | None = None
    #: the environment variable holding the key ("" with no file: the endpoint takes no key)
    api_key_env: str | None = "OPENAI_API_KEY"
    #: a file of keys, one a line (relative to the scenario's folder); read instead of api_key_env
    api_key_file: str | None = None

    @field_validator("base_url")
    @classmethod
    def _an_http_url(cls, value: str | None) -> str | None:
        """A URL the endpoint can be reached at, checked before any call (not retried per call)."""
        if value is None:
            return value
        from urllib.parse import urlsplit

        parts = urlsplit(value.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{value!r} is not an http(s) URL (e.g. http://127.0.0.1:8080/v1)")
        remember_url_secrets(value)
        return value.strip()

    def api_keys(self, base_dir: str = ".", what: str = "API key") -> list[str]:
        """The endpoint's keys (:func:`resolve_secrets`); never logged. A key in the URL's
        user part (``http://user:KEY@host``, from ``$OPENAI_BASE_URL`` too) is a secret as well."""
        if self.base_url:
            remember_url_secrets(self.base_url)
        return resolve_secrets(env=self.api_key_env, file=self.api_key_file, base_dir=base_dir, what=what)
