"""`crux serve`: the HTTP API and the codec server, an ASGI app served by uvicorn.

```python
from crux.serve import ServeSettings, create_app

app = create_app(Settings.from_env(os.environ), ServeSettings.from_env(os.environ))
```

or `crux serve` (`python -m crux.serve`). The OpenAPI document is at `/openapi.json`;
docs/how-to/http-api.md is the guide. The app's own names load FastAPI and PyJWT (the
`serve` extra) on first use, so that the `crux` command registers `serve` without them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from crux.serve._command import add_serve_command, run_serve, serve
from crux.serve._settings import SERVE_ENVIRONMENT, ServeSettings, hash_api_key

if TYPE_CHECKING:
    from crux.serve._app import create_app
    from crux.serve._auth import Authenticator, Tenant
    from crux.serve._tenancy import TenantScope

__all__ = [
    "SERVE_ENVIRONMENT",
    "Authenticator",
    "ServeSettings",
    "Tenant",
    "TenantScope",
    "add_serve_command",
    "create_app",
    "hash_api_key",
    "run_serve",
    "serve",
]

_LAZY = {
    "create_app": "crux.serve._app",
    "Authenticator": "crux.serve._auth",
    "Tenant": "crux.serve._auth",
    "TenantScope": "crux.serve._tenancy",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'crux.serve' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
