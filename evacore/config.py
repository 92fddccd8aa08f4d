"""Settings of one evacore instance (R12.1): environment `EVACORE_*`, then `<data dir>/evacore.toml`.

Must not: read `os.environ` anywhere else; settings are built once here and passed down.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated, Any

import platformdirs
from pydantic import BaseModel, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, PydanticBaseSettingsSource, SettingsConfigDict

from evacore.redact import remember


def default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("evacore", appauthor=False))


class AgentSettings(BaseModel):
    """The agent loop and its tools (docs/tools.md); `EVACORE_AGENT__<NAME>` or `[agent]`."""

    max_steps: int = Field(default=16, ge=1)
    """Provider requests per tour before the loop stops (R5.1)."""
    shell_timeout: float = Field(default=60.0, gt=0)
    """Seconds a `shell` call may run before its process group is killed."""
    shell_max_timeout: float = Field(default=600.0, gt=0)
    """Largest `timeout` a `shell` call may ask for; a larger one is lowered to it."""
    shell_output_cap: int = Field(default=200_000, ge=1)
    """Bytes of shell output kept; the rest is dropped with a note."""
    shell_kill_grace: float = Field(default=2.0, ge=0)
    """Seconds between SIGTERM and SIGKILL when a shell's process group is stopped."""
    read_max_bytes: int = Field(default=256_000, ge=1)
    """Bytes of text one `read_file` call returns at most."""
    write_max_bytes: int = Field(default=10_000_000, ge=1)
    """Largest content `write_file` / `write_diff` will write."""
    list_max_entries: int = Field(default=1_000, ge=1)
    """Entries one `list_dir` call returns at most."""
    client_op_timeout: float = Field(default=60.0, gt=0)
    """Seconds a client op may take before it becomes an `error:` result (R9.2)."""
    tool_timeouts: dict[str, float] = Field(default_factory=dict)
    """Per tool name, seconds replacing that tool's own timeout."""
    tool_policy: dict[str, Any] = Field(default_factory=dict)
    """Per-role overrides of the tool table, e.g. {"trusted": {"allow": ["shell"]}}."""

    @field_validator("tool_policy")
    @classmethod
    def _valid_policy(cls, value: dict[str, Any]) -> dict[str, Any]:
        from evacore.agent.registry import ToolPolicy
        from evacore.errors import EvacoreError

        try:
            ToolPolicy.from_dict(value)
        except EvacoreError as exc:
            raise ValueError(exc.message) from None
        return value

    @field_validator("tool_timeouts")
    @classmethod
    def _positive_timeouts(cls, value: dict[str, float]) -> dict[str, float]:
        for name, seconds in value.items():
            if seconds <= 0:
                raise ValueError(f"tool_timeouts.{name} must be a positive number of seconds")
        return value


class ContextSettings(BaseModel):
    tool_result_max_chars: int = Field(default=20_000, ge=0)
    """Cap on a tool's output as put into the prompt (R5.3); the stored result is whole."""
    shift_chunk: float = Field(default=0.25, gt=0)
    """Share of the budget freed at once when history must be cut (R2.7)."""


MiB = 1024 * 1024


class LimitSettings(BaseModel):
    """Request and stream caps (docs/api.md "Limits"); `EVACORE_LIMITS__<NAME>` or `[limits]`."""

    max_body_bytes: int = Field(default=32 * MiB, ge=1024)
    """Largest request body of a JSON route; a larger one is answered 413 before it is read
    further, parsed or its sender authenticated (a declared `Content-Length` at once, a
    chunked body the moment it passes the limit)."""
    max_upload_bytes: int = Field(default=128 * MiB, ge=1024)
    """Largest file an upload route takes (card, chat, lorebook and preset imports; the
    multipart envelope may add 256 KiB). The file kinds have lower caps of their own."""
    event_queue_bytes: int = Field(default=1 * MiB, ge=4096)
    """Bytes of a streaming tour's events waiting for a slow client; once they are queued
    the provider's stream is read no faster than the client reads the answer."""


def _id_list(value: Any) -> Any:
    """Telegram user ids as a JSON list or comma-separated (`"1, 2"`), or one number."""
    if isinstance(value, int) and not isinstance(value, bool):
        return [value]
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return []
        if text.startswith("["):
            import json

            try:
                return json.loads(text)
            except ValueError:
                raise ValueError("a JSON list of Telegram user ids, or ids separated by commas"
                                 ) from None
        return [part.strip() for part in text.split(",") if part.strip()]
    return value


class TelegramSettings(BaseModel):
    """The Telegram channel (R14.2, docs/telegram.md); `EVACORE_TELEGRAM__<NAME>` or
    `[telegram]`. The channel runs inside `evacore serve` when `token` is set."""

    token: SecretStr | None = None
    """The bot token from @BotFather."""
    api_url: str = "https://api.telegram.org"
    """The Bot API server: methods at `{api_url}/bot{token}/{method}`, files at
    `{api_url}/file/bot{token}/{file_path}`."""
    master_ids: Annotated[list[int], NoDecode] = Field(default_factory=list)
    """Telegram user ids of the master (a JSON list or comma-separated)."""
    trusted_ids: Annotated[list[int], NoDecode] = Field(default_factory=list)
    guests: bool = False
    """Answer people on neither list (as guests); off: they get nothing and nothing of theirs
    is stored."""
    connection: str | None = None
    """Connection id or name of new chats; default: the default connection."""
    character: str | None = None
    """Character id or name of new chats; default: the built-in character."""
    mode: str = Field(default="polling", pattern="^(polling|webhook)$")
    webhook_url: str | None = None
    """The public URL Telegram posts updates to (ends in /v1/telegram/webhook)."""
    webhook_secret: SecretStr | None = None
    """Checked against the `X-Telegram-Bot-Api-Secret-Token` header of each webhook call."""

    @field_validator("master_ids", "trusted_ids", mode="before")
    @classmethod
    def _ids(cls, value: Any) -> Any:
        return _id_list(value)

    @field_validator("webhook_secret")
    @classmethod
    def _secret_shape(cls, value: SecretStr | None) -> SecretStr | None:
        import re

        if value is not None and not re.fullmatch(r"[A-Za-z0-9_-]{1,256}",
                                                  value.get_secret_value()):
            raise ValueError("webhook_secret: 1-256 characters of A-Z, a-z, 0-9, _ and -")
        return value

    def model_post_init(self, context: Any, /) -> None:
        if self.mode == "webhook" and self.token is not None and (
                not self.webhook_url or self.webhook_secret is None):
            raise ValueError("telegram.mode webhook needs webhook_url and webhook_secret")


class Settings(BaseSettings):
    """Everything an operator can set. Nested fields use `__`, e.g. `EVACORE_AGENT__MAX_STEPS`."""

    model_config = SettingsConfigDict(
        env_prefix="EVACORE_", env_nested_delimiter="__", extra="ignore"
    )

    data_dir: Path = Field(default_factory=default_data_dir)
    """Where the database, plugins, workspace and logs live."""
    database_url: str | None = None
    """SQLAlchemy URL; default `sqlite+aiosqlite:///<data dir>/evacore.db`."""
    master_token: SecretStr | None = None
    """The master's bearer token; without it the first start creates one and prints it once."""
    workspace: Path | None = None
    """Folder the file and shell tools are confined to; default `<data dir>/workspace`."""
    host: str = "127.0.0.1"
    port: int = 8700
    log_format: str = "auto"
    """`json`, `console` or `auto` (JSON when stderr is not a terminal)."""
    log_level: str = "INFO"
    instance_id: str | None = None
    """Name of this instance when several serve one database; default: derived from the host
    name and the data folder, so a restarted instance knows its previous life's tours."""
    heartbeat_seconds: float = Field(default=5.0, gt=0, le=60)
    """How often an instance writes its sign of life (R14.5)."""
    stale_seconds: float = Field(default=20.0, gt=0, le=600)
    """An instance silent this long is gone; the others mark its running tours interrupted."""
    agent: AgentSettings = Field(default_factory=AgentSettings)
    context: ContextSettings = Field(default_factory=ContextSettings)
    limits: LimitSettings = Field(default_factory=LimitSettings)
    telegram: TelegramSettings = Field(default_factory=TelegramSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, _TomlSource(settings_cls, init_settings, env_settings))

    def model_post_init(self, context: Any, /) -> None:
        # the redactor removes the master token and the database password wherever they
        # would show (errors, logs)
        from urllib.parse import urlsplit

        secrets = [self.master_token.get_secret_value() if self.master_token else None]
        for secret in (self.telegram.token, self.telegram.webhook_secret):
            secrets.append(secret.get_secret_value() if secret else None)
        try:
            secrets.append(urlsplit(self.database_url or "").password)
        except ValueError:
            pass
        remember(secrets)

    @property
    def db_url(self) -> str:
        return self.database_url or f"sqlite+aiosqlite:///{self.data_dir / 'evacore.db'}"

    @property
    def workspace_dir(self) -> Path:
        return self.workspace or (self.data_dir / "workspace")

    @property
    def plugins_dir(self) -> Path:
        return self.data_dir / "plugins"


class _TomlSource(PydanticBaseSettingsSource):
    """Reads `<data dir>/evacore.toml`; the data dir itself comes from init or env."""

    def __init__(self, settings_cls: type[BaseSettings], *sources: PydanticBaseSettingsSource):
        super().__init__(settings_cls)
        self._sources = sources

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        data_dir = None
        for source in self._sources:
            values = source()
            if values.get("data_dir"):
                data_dir = Path(values["data_dir"])
                break
        path = (data_dir or default_data_dir()) / "evacore.toml"
        if not path.is_file():
            return {}
        with path.open("rb") as f:
            return tomllib.load(f)


def load_settings(**overrides: Any) -> Settings:
    return Settings(**overrides)
