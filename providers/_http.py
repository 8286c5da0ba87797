"""HTTP plumbing shared by the adapters: one POST, one streamed POST, one error mapping.

There is no retry loop here on purpose: Temporal's retry policy is the only one, so every
failure surfaces at once as a classified `ProviderError`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import aclosing, asynccontextmanager
from typing import Any, cast

import httpx

from providers import _json
from providers._errors import error_from_exception, error_from_response, malformed
from providers._sse import SSEEvent, iter_sse
from providers.types import ChatResponse, StreamDone, StreamEvent
from vocabulary.errors import ProviderError


def _at(error: ProviderError, url: str) -> ProviderError:
    """Name the host an error came from (never the path or query: keys may live there)."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, ValueError):
        return error
    if parsed.host:
        error.host = f"{parsed.host}:{parsed.port}" if parsed.port else parsed.host
    return error


def join_url(base_url: str, path: str) -> str:
    """`base_url` (with or without a trailing slash) followed by `path`."""
    return base_url.rstrip("/") + "/" + path.lstrip("/")


async def post_json(
    http: httpx.AsyncClient,
    provider: str,
    url: str,
    body: Mapping[str, Any],
    headers: Mapping[str, str],
) -> dict[str, Any]:
    """POST `body` as JSON and return the decoded JSON object of a 2xx answer."""
    try:
        response = await http.post(url, content=_json.dumps_bytes(body), headers=dict(headers))
    except httpx.HTTPError as exc:
        raise _at(error_from_exception(provider, exc), url) from None
    if response.status_code >= 300:
        raise _at(
            error_from_response(provider, response.status_code, response.headers, response.content),
            url,
        )
    try:
        data: Any = json.loads(response.content)
    except (ValueError, UnicodeDecodeError):
        raise malformed(provider, "body is not JSON") from None
    if not isinstance(data, dict):
        raise malformed(provider, "body is not a JSON object")
    return cast(dict[str, Any], data)


@asynccontextmanager
async def post_sse(
    http: httpx.AsyncClient,
    provider: str,
    url: str,
    body: Mapping[str, Any],
    headers: Mapping[str, str],
) -> AsyncGenerator[AsyncIterator[SSEEvent]]:
    """POST `body` and yield an iterator over the server-sent events of a 2xx answer."""
    request = http.build_request(
        "POST", url, content=_json.dumps_bytes(body), headers=dict(headers)
    )
    try:
        response = await http.send(request, stream=True)
    except httpx.HTTPError as exc:
        raise _at(error_from_exception(provider, exc), url) from None
    try:
        if response.status_code >= 300:
            try:
                content = await response.aread()
            except httpx.HTTPError as exc:
                raise _at(error_from_exception(provider, exc), url) from None
            raise _at(
                error_from_response(provider, response.status_code, response.headers, content),
                url,
            )
        yield _guarded(provider, iter_sse(response.aiter_bytes()))
    finally:
        await response.aclose()


async def _guarded(provider: str, events: AsyncIterator[SSEEvent]) -> AsyncIterator[SSEEvent]:
    try:
        async for event in events:
            yield event
    except httpx.HTTPError as exc:
        raise error_from_exception(provider, exc) from None
    except UnicodeDecodeError:
        raise malformed(provider, "stream is not UTF-8") from None


def load_event_json(provider: str, event: SSEEvent) -> dict[str, Any]:
    """The JSON object carried by an event's data."""
    try:
        data: Any = json.loads(event.data)
    except ValueError:
        raise malformed(provider, f"stream event {event.event!r} is not JSON") from None
    if not isinstance(data, dict):
        raise malformed(provider, f"stream event {event.event!r} is not a JSON object")
    return cast(dict[str, Any], data)


async def final_response(events: AsyncGenerator[StreamEvent], provider: str) -> ChatResponse:
    """Drain a stream and return its `StreamDone` response, closing the stream either way."""
    async with aclosing(events) as stream:
        async for event in stream:
            if isinstance(event, StreamDone):
                return event.response
    raise malformed(provider, "stream ended without a result")  # pragma: no cover
