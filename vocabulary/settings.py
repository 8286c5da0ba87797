"""Runtime settings, built once from the environment and passed down explicitly."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from vocabulary.errors import ConfigurationError

DEFAULT_TEMPORAL_ADDRESS = "localhost:7233"
DEFAULT_TEMPORAL_NAMESPACE = "default"
DEFAULT_TASK_QUEUE = "crux"
DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"
DEFAULT_ANTHROPIC_BASE_URL = "https://api.anthropic.com"


class Settings(BaseModel):
    """Everything a worker, the CLI or the facade needs to connect.

    Secrets (`openai_api_key`, `anthropic_api_key`) stay in this object on the worker side
    and never enter workflow inputs, results or history.

    The Temporal connection is configured the way the Temporal CLI and SDKs configure it
    (`temporalio.envconfig`): the `TEMPORAL_*` variables below, laid over a profile of a
    TOML configuration file (`TEMPORAL_CONFIG_FILE`, else the platform's default
    `temporalio/temporal.toml`, profile `TEMPORAL_PROFILE`, else `default`). A field left
    unset takes the profile's value, then the default. An API key turns TLS on unless
    `TEMPORAL_TLS=false`. PostgreSQL TLS is configured in `CRUX_DATABASE_URL`
    (`sslmode`, `sslrootcert`, `sslcert`, `sslkey`) or with the standard `PGSSLMODE`,
    `PGSSLROOTCERT`, `PGSSLCERT` and `PGSSLKEY` variables, which the driver reads itself.

    Attributes:
        temporal_address: `host:port` of the Temporal frontend (`TEMPORAL_ADDRESS`);
            unset, the profile's address, else `localhost:7233`.
        temporal_namespace: Temporal namespace (`TEMPORAL_NAMESPACE`); unset, the
            profile's namespace, else `default`.
        temporal_profile: The profile of the Temporal configuration file to use
            (`TEMPORAL_PROFILE`); unset, `default` (which may be absent).
        temporal_config_file: The Temporal configuration file (`TEMPORAL_CONFIG_FILE`);
            unset, the platform's default location, when it exists.
        temporal_api_key: API key sent as `authorization: Bearer <key>` to Temporal
            (`TEMPORAL_API_KEY`), as Temporal Cloud expects; turns TLS on.
        temporal_tls: Use TLS to Temporal (`TEMPORAL_TLS`): `true` with the system's
            trusted authorities unless a CA certificate is given, `false` to turn it off
            even with an API key. Unset: on when an API key or a TLS setting is given.
        temporal_tls_server_name: The name the Temporal server's certificate must be
            issued for (`TEMPORAL_TLS_SERVER_NAME`), when it is not the address's host.
        temporal_tls_server_ca_cert_path: File of the authority that signed the Temporal
            server's certificate (`TEMPORAL_TLS_SERVER_CA_CERT_PATH`), PEM.
        temporal_tls_server_ca_cert_data: The same certificate inline, PEM
            (`TEMPORAL_TLS_SERVER_CA_CERT_DATA`).
        temporal_tls_client_cert_path: Client certificate for mutual TLS
            (`TEMPORAL_TLS_CLIENT_CERT_PATH`), PEM.
        temporal_tls_client_cert_data: The client certificate inline, PEM
            (`TEMPORAL_TLS_CLIENT_CERT_DATA`).
        temporal_tls_client_key_path: The client certificate's private key
            (`TEMPORAL_TLS_CLIENT_KEY_PATH`), PEM.
        temporal_tls_client_key_data: The private key inline, PEM
            (`TEMPORAL_TLS_CLIENT_KEY_DATA`).
        task_queue: Task queue of the Crux worker (`CRUX_TASK_QUEUE`).
        database_url: PostgreSQL URL (`CRUX_DATABASE_URL`); `None` means "not configured".
            TLS goes in its query: `?sslmode=verify-full&sslrootcert=/path/ca.crt`
            (client certificates: `sslcert`, `sslkey`), or in `PGSSLMODE`,
            `PGSSLROOTCERT`, `PGSSLCERT` and `PGSSLKEY`.
        openai_base_url: Base URL of an OpenAI-compatible API (`OPENAI_BASE_URL`).
        openai_api_key: Key for that API (`OPENAI_API_KEY`).
        openai_output_cap_field: Body field carrying the output cap
            (`OPENAI_OUTPUT_CAP_FIELD`): `auto` sends `max_completion_tokens` to api.openai.com
            and `max_tokens` elsewhere (llama.cpp, vLLM, Ollama); `max_tokens`,
            `max_completion_tokens` or `both` force one.
        anthropic_base_url: Base URL of the Anthropic API (`ANTHROPIC_BASE_URL`).
        anthropic_api_key: Key for the Anthropic API (`ANTHROPIC_API_KEY`).
        default_model: Model used when a caller names none (`CRUX_MODEL`).
        log_format: `json` or `console` (`CRUX_LOG_FORMAT`); `auto` picks by terminal.
        log_level: Minimum log level (`CRUX_LOG_LEVEL`).
        migrate_on_start: Apply SQL migrations when a worker starts (`CRUX_MIGRATE`).
        register_search_attributes: Register missing search attributes at worker start
            (`CRUX_REGISTER_SEARCH_ATTRIBUTES`): `auto` does so on a loopback (dev) server
            only and otherwise stops with the `temporal operator` command to run.
        staging_retention_seconds: Age after which staged text of generations that never
            finished, and ad-hoc replies nobody read, are swept
            (`CRUX_STAGING_RETENTION_SECONDS`, default one day).
        sweep_interval_seconds: How often a worker sweeps (`CRUX_SWEEP_INTERVAL_SECONDS`;
            0 turns the periodic sweep off, `crux db sweep` still works).
        shutdown_grace_seconds: How long a stopping worker lets the provider calls, tools
            and commits it runs finish before cancelling them (`CRUX_SHUTDOWN_GRACE_SECONDS`,
            default 25 s, inside Kubernetes' default 30 s termination grace). It polls for
            nothing new meanwhile. A cancelled call is retried on another worker and paid
            for twice; 0 cancels at once.
        health_file: Readiness file a worker writes once it polls and refreshes while it
            runs (`CRUX_HEALTH_FILE`); `crux health` checks it. Unset, no file is written.
        otel_endpoint: OTLP/HTTP collector base URL (`OTEL_EXPORTER_OTLP_ENDPOINT`): when
            set, workers export OpenTelemetry spans and metrics there; off when `None`.
        prometheus_address: `host:port` on which a worker serves the Crux metrics and the
            Temporal SDK's for Prometheus (`CRUX_PROMETHEUS_ADDRESS`); off when `None`.
        deployment_name: Temporal worker deployment the worker belongs to
            (`CRUX_DEPLOYMENT_NAME`). When set, the worker uses worker versioning: runs are
            pinned to the build that started them, and a new build takes new runs once it is
            made the deployment's current version. Off (an unversioned worker) when `None`.
        build_id: The worker's build id within its deployment (`CRUX_BUILD_ID`); by default
            `crux-v<N>`, where N is the workflows' command version.
        codec_keys: Encryption keys of the payload codec (`CRUX_CODEC_KEYS`), as
            `kid:base64key,...`, the first one current (`crux.codec`). When set (or
            `codec_key_file` is), every payload a worker or client writes to Temporal is
            AES-GCM ciphertext; off when `None`.
        codec_key_file: A file holding the codec keys instead (`CRUX_CODEC_KEY_FILE`): one
            `kid:base64key` per line, the first one current.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    temporal_address: str = DEFAULT_TEMPORAL_ADDRESS
    temporal_namespace: str = DEFAULT_TEMPORAL_NAMESPACE
    temporal_profile: str | None = None
    temporal_config_file: str | None = None
    temporal_api_key: SecretStr | None = None
    temporal_tls: bool | None = None
    temporal_tls_server_name: str | None = None
    temporal_tls_server_ca_cert_path: str | None = None
    temporal_tls_server_ca_cert_data: str | None = None
    temporal_tls_client_cert_path: str | None = None
    temporal_tls_client_cert_data: str | None = None
    temporal_tls_client_key_path: str | None = None
    temporal_tls_client_key_data: SecretStr | None = None
    task_queue: str = DEFAULT_TASK_QUEUE
    database_url: str | None = None
    openai_base_url: str = DEFAULT_OPENAI_BASE_URL
    openai_api_key: SecretStr | None = None
    openai_output_cap_field: Literal["auto", "max_tokens", "max_completion_tokens", "both"] = "auto"
    anthropic_base_url: str = DEFAULT_ANTHROPIC_BASE_URL
    anthropic_api_key: SecretStr | None = None
    default_model: str = "offline:echo"
    log_format: str = Field(default="auto", pattern="^(auto|json|console)$")
    log_level: str = "info"
    migrate_on_start: bool = False
    register_search_attributes: Literal["auto", "true", "false"] = "auto"
    staging_retention_seconds: float = Field(default=86_400.0, gt=0)
    sweep_interval_seconds: float = Field(default=3_600.0, ge=0)
    shutdown_grace_seconds: float = Field(default=25.0, ge=0)
    health_file: str | None = None
    otel_endpoint: str | None = None
    prometheus_address: str | None = None
    deployment_name: str | None = None
    build_id: str | None = None
    codec_keys: SecretStr | None = None
    codec_key_file: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        """Build settings from an environment mapping (pass `os.environ` in programs).

        Args:
            env: The variables to read; tests pass a plain dict.

        Returns:
            The frozen settings.

        Raises:
            ConfigurationError: A variable has an invalid value.
        """
        values: dict[str, object] = {}
        names = {
            "TEMPORAL_ADDRESS": "temporal_address",
            "TEMPORAL_NAMESPACE": "temporal_namespace",
            "TEMPORAL_PROFILE": "temporal_profile",
            "TEMPORAL_CONFIG_FILE": "temporal_config_file",
            "TEMPORAL_API_KEY": "temporal_api_key",
            "TEMPORAL_TLS": "temporal_tls",
            "TEMPORAL_TLS_SERVER_NAME": "temporal_tls_server_name",
            "TEMPORAL_TLS_SERVER_CA_CERT_PATH": "temporal_tls_server_ca_cert_path",
            "TEMPORAL_TLS_SERVER_CA_CERT_DATA": "temporal_tls_server_ca_cert_data",
            "TEMPORAL_TLS_CLIENT_CERT_PATH": "temporal_tls_client_cert_path",
            "TEMPORAL_TLS_CLIENT_CERT_DATA": "temporal_tls_client_cert_data",
            "TEMPORAL_TLS_CLIENT_KEY_PATH": "temporal_tls_client_key_path",
            "TEMPORAL_TLS_CLIENT_KEY_DATA": "temporal_tls_client_key_data",
            "CRUX_TASK_QUEUE": "task_queue",
            "CRUX_DATABASE_URL": "database_url",
            "OPENAI_BASE_URL": "openai_base_url",
            "OPENAI_API_KEY": "openai_api_key",
            "OPENAI_OUTPUT_CAP_FIELD": "openai_output_cap_field",
            "ANTHROPIC_BASE_URL": "anthropic_base_url",
            "ANTHROPIC_API_KEY": "anthropic_api_key",
            "CRUX_MODEL": "default_model",
            "CRUX_LOG_FORMAT": "log_format",
            "CRUX_LOG_LEVEL": "log_level",
            "CRUX_REGISTER_SEARCH_ATTRIBUTES": "register_search_attributes",
            "CRUX_STAGING_RETENTION_SECONDS": "staging_retention_seconds",
            "CRUX_SWEEP_INTERVAL_SECONDS": "sweep_interval_seconds",
            "CRUX_SHUTDOWN_GRACE_SECONDS": "shutdown_grace_seconds",
            "CRUX_HEALTH_FILE": "health_file",
            "OTEL_EXPORTER_OTLP_ENDPOINT": "otel_endpoint",
            "CRUX_PROMETHEUS_ADDRESS": "prometheus_address",
            "CRUX_DEPLOYMENT_NAME": "deployment_name",
            "CRUX_BUILD_ID": "build_id",
            "CRUX_CODEC_KEYS": "codec_keys",
            "CRUX_CODEC_KEY_FILE": "codec_key_file",
        }
        for variable, field in names.items():
            raw = env.get(variable)
            if raw is not None and raw.strip():
                values[field] = raw.strip()
        migrate = env.get("CRUX_MIGRATE", "").strip().lower()
        if migrate:
            if migrate not in ("1", "0", "true", "false", "yes", "no"):
                raise ConfigurationError("CRUX_MIGRATE must be a boolean (1/0/true/false)")
            values["migrate_on_start"] = migrate in ("1", "true", "yes")
        try:
            return cls.model_validate(values)
        except ValidationError as error:
            fields = sorted({str(e["loc"][0]) for e in error.errors() if e["loc"]})
            raise ConfigurationError(f"invalid settings: {', '.join(fields)}") from None

    def require_database_url(self) -> str:
        """Return the database URL or raise a clear error when it is missing.

        Raises:
            ConfigurationError: `CRUX_DATABASE_URL` is not set.
        """
        if not self.database_url:
            raise ConfigurationError("CRUX_DATABASE_URL is not set")
        return self.database_url
