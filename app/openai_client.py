"""The client for OpenAI (or any OpenAI-compatible server): the SDK's, over aiohttp, with one
lean request for the two a query_knowledge call makes.

A call sends two requests, the question's embedding and the answer. Through ``post_json``
below each costs about a third of the service's CPU it took through the SDK's ``post`` over
its default httpx transport: 0.30 to 0.36 ms against 0.94 to 1.21 ms in one sitting on the
development machine (``python -m bench.provider_client``, docs/BENCHMARKS.md). So:

- The SDK runs over aiohttp (``openai.DefaultAioHttpClient``, the SDK's own option), which
  parses HTTP in C where httpcore and anyio do it in Python. Everything the SDK sends (the
  answer's stream, the readiness check) goes the same way, on one connection pool.
- ``post_json`` skips the SDK's request layer (options models, header merging, URL
  preparation) and sends the body with the headers the SDK would, prepared once; errors are
  the SDK's own types, made the SDK's way, so callers handle them as they would the SDK's.
- No cookie jar: httpx reads every reply into one (building urllib's request and response
  objects for it, about 0.1 ms a request), and an API authenticated by its key has no use for
  what a proxy in front of it sets.

The request still goes through ``httpx.AsyncClient.send``, where respx, mocking at httpx's
level, sees it: the tests assert what is sent as before. The aiohttp transport under it is
tested against a real server (tests/test_openai_client.py).
"""

from __future__ import annotations

from typing import Any

import aiohttp
import httpx
import httpx_aiohttp.transport
import msgspec
import openai

from app.config import Settings

# Per request the caller passes its own timeout; this bounds the rest (the readiness check,
# ingestion's batches) where the SDK's default would wait 600 s.
DEFAULT_TIMEOUT_S = 30.0


class _NoCookies(httpx.Cookies):
    """A jar that keeps nothing and reads nothing."""

    def extract_cookies(self, response: httpx.Response) -> None:
        return None


class _ProviderHTTP(openai.DefaultAioHttpClient):
    """httpx's client over aiohttp (the SDK's defaults), without a cookie jar."""

    @property
    def cookies(self) -> httpx.Cookies:
        return _NO_COOKIES

    @cookies.setter
    def cookies(self, cookies: Any) -> None:
        if cookies:
            raise ValueError("the provider's client keeps no cookies")


_NO_COOKIES = _NoCookies()

# httpx-aiohttp 0.2 maps every aiohttp connection error that is not a timeout (a refused
# connection, a reset) to httpx's ConnectTimeout, which the SDK reports as a timeout: the
# logs and the caller's error would say "did not answer in time" of a provider that is down.
# NetworkError is httpx's name for it; aiohttp's timeouts keep their own, earlier entries.
httpx_aiohttp.transport.AIOHTTP_EXC_MAP[aiohttp.ClientConnectionError] = httpx.NetworkError


class OpenAIClient(openai.AsyncOpenAI):
    """``openai.AsyncOpenAI`` plus ``post_json``. ``with_options`` and ``copy`` keep the class
    and share the HTTP client."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._json_headers: dict[str, str] | None = None
        self._urls: dict[str, httpx.URL] = {}

    def _prepared_headers(self) -> dict[str, str]:
        """What the SDK would send with this request (its user agent, organisation and project,
        the key), minus the headers it omits. The key is a string here (``openai_client``),
        never a provider the SDK would call to refresh it. Built at the first request, inside
        the event loop: the SDK names the async library it runs on (X-Stainless-Async), and
        says "false" when asked outside one, as at start-up."""
        headers = {name: value for name, value in self.default_headers.items() if isinstance(value, str)}
        self._json_headers = {**headers, **self.auth_headers}
        return self._json_headers

    async def post_json(self, path: str, body: dict[str, Any], *, timeout: float | None = None) -> bytes:
        """POST ``body`` as JSON to ``path`` under the base URL; the reply's bytes.

        Raises what the SDK's ``post`` would, without retrying: ``openai.APIStatusError`` (its
        subclass for the status) for a 4xx or 5xx reply, ``openai.APITimeoutError``, and
        ``openai.APIConnectionError`` for anything else that fails on the way."""
        url = self._urls.get(path)
        if url is None:
            url = self._urls[path] = self.base_url.join(path.lstrip("/"))
        request = self._client.build_request(
            "POST",
            url,
            content=msgspec.json.encode(body),
            headers=self._json_headers or self._prepared_headers(),
            timeout=self.timeout if timeout is None else timeout,
        )
        try:
            response = await self._client.send(request)
        except httpx.TimeoutException as exc:
            raise openai.APITimeoutError(request=request) from exc
        except Exception as exc:
            raise openai.APIConnectionError(request=request) from exc
        if response.is_error:
            raise self._make_status_error_from_response(response)
        return response.content


def make_openai_client(settings: Settings) -> OpenAIClient | None:
    """The provider's client when an API key is set; None offline."""
    if settings.openai_api_key is None:
        return None
    return openai_client(settings.openai_api_key.get_secret_value(), settings.openai_base_url)


def openai_client(api_key: str, base_url: str | None = None, *, max_retries: int = 0) -> OpenAIClient:
    """The client as the service makes it. Retries are decided by each caller: the call path
    cannot afford the SDK's backoff, and ingestion retries on its own terms
    (app/embeddings/openai.py)."""
    return OpenAIClient(
        api_key=api_key,
        base_url=base_url,
        max_retries=max_retries,
        timeout=DEFAULT_TIMEOUT_S,
        http_client=_ProviderHTTP(timeout=DEFAULT_TIMEOUT_S),
    )


__all__ = ["DEFAULT_TIMEOUT_S", "OpenAIClient", "make_openai_client", "openai_client"]
