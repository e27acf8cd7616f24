"""The HTTP layer under the Bot API client: one httpx pool, form posts, raw status and body.

It does what python-telegram-bot's `HTTPXRequest.do_request` did for the client (the same
pool limits, timeouts and form encoding), without importing the `telegram` package: its
`__init__` loads every Bot API class (about 50 ms), a third of a cron poll's start-up, for
objects the poll never builds. Transport errors are raised as httpx's own exceptions;
`results.classify_exception` reads them (the one place that decides "not sent").
"""

from __future__ import annotations

import logging
from typing import Any

import httpx

from state.version import VERSION

__all__ = ["Files", "HttpPool", "PoolClosed"]


_USER_AGENT = f"piw-channels/{VERSION} (httpx)"
Files = dict[str, tuple[str, bytes, str]]
_HTTPX_LOG = logging.getLogger("httpx")


class PoolClosed(RuntimeError):
    """The pool was shut down: the request was refused before anything was written."""


class HttpPool:
    """An httpx AsyncClient with a bounded pool (HTTP/1.1), created open and reopenable."""

    def __init__(self, *, connection_pool_size: int = 256, connect_timeout: float = 5.0,
                 read_timeout: float = 5.0, write_timeout: float = 5.0,
                 pool_timeout: float = 1.0, httpx_kwargs: dict[str, Any] | None = None) -> None:
        self._kwargs: dict[str, Any] = {
            "timeout": httpx.Timeout(connect=connect_timeout, read=read_timeout,
                                     write=write_timeout, pool=pool_timeout),
            "limits": httpx.Limits(max_connections=connection_pool_size),
            "http1": True, "http2": False, "headers": {"User-Agent": _USER_AGENT},
            **(httpx_kwargs or {}),
        }
        self._client = httpx.AsyncClient(**self._kwargs)
        self._urls: dict[str, httpx.URL] = {}

    async def initialize(self) -> None:
        if self._client.is_closed:
            self._client = httpx.AsyncClient(**self._kwargs)

    async def shutdown(self) -> None:
        if not self._client.is_closed:
            await self._client.aclose()

    async def do_request(self, *, url: str, method: str, fields: dict[str, str],
                         read_timeout: float, write_timeout: float, connect_timeout: float,
                         pool_timeout: float, files: Files | None = None) -> tuple[int, bytes]:
        """POST the fields form-encoded (multipart with `files`: name -> (file name, bytes,
        content type)); (HTTP status, body). Raises PoolClosed before sending when shut
        down (nothing is awaited between that check and the request's start), else what
        httpx raises.

        The request goes straight to the client's transport for its URL (the one its proxy
        settings chose): the client's own `request` adds, per call, what a Bot API call never
        uses (a cookie jar read and written, redirect and auth steps, the URL and headers
        merged again), a third of a call's CPU time on a cron pass's work path (issue 27)."""
        client = self._client
        if client.is_closed:
            raise PoolClosed("the HTTP pool is shut down")
        timeout = httpx.Timeout(connect=connect_timeout, read=read_timeout, write=write_timeout,
                                pool=pool_timeout)
        parsed = self._urls.get(url)
        if parsed is None:  # one per method: the base URL and token do not change
            parsed = self._urls[url] = httpx.URL(url)
        request = httpx.Request(method, parsed, data=fields, files=files or None,
                                headers=client.headers,
                                extensions={"timeout": timeout.as_dict()})
        response = await client._transport_for_url(parsed).handle_async_request(request)
        try:
            content = await response.aread()
        finally:
            await response.aclose()
        # The line the client logs for each request (redacted like every log line: the URL
        # holds the token), so a debug log reads as before.
        _HTTPX_LOG.info('HTTP Request: %s %s "%s %d %s"', method, parsed,
                        response.http_version, response.status_code, response.reason_phrase)
        return response.status_code, content
