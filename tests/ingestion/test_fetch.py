"""SSRF-safe fetching: every blocked case proves that no request left the process."""

from __future__ import annotations

import asyncio
import gzip
import socket
import tracemalloc
import zlib
from collections.abc import AsyncIterator, Callable
from ipaddress import ip_address
from itertools import pairwise

import brotli
import httpx
import pytest
import respx

from app.ingestion.fetch import (
    NOT_A_WEB_ADDRESS,
    BlockedURL,
    Fetcher,
    FetchError,
    FetchResult,
    check_url,
    github_raw_url,
    validate_url,
)

# Routes are asserted one by one; a route that must stay uncalled is part of the test.
pytestmark = pytest.mark.respx(assert_all_called=False)

PUBLIC_V4 = "93.184.216.34"
PUBLIC_V6 = "2606:2800:220:1:248:1893:25c8:1946"
HTML = {"Content-Type": "text/html; charset=UTF-8"}
HINT = "INGESTION__ALLOWED_HOSTS can allow this host"


class FakeResolver:
    """Answers from a table and records every lookup; unknown hosts fail like NXDOMAIN."""

    def __init__(self, table: dict[str, list[str]] | None = None) -> None:
        self.table = table or {}
        self.calls: list[tuple[str, int]] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.calls.append((host, port))
        if host not in self.table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return self.table[host]


class Body(httpx.AsyncByteStream):
    """A response body without Content-Length that respx passes on chunk by chunk, unread."""

    def __init__(self, *chunks: bytes) -> None:
        self._chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self._chunks:
            yield chunk


@pytest.fixture
def resolver() -> FakeResolver:
    return FakeResolver({"example.com": [PUBLIC_V4], "raw.githubusercontent.com": ["185.199.108.133"]})


@pytest.fixture
async def fetcher(resolver: FakeResolver) -> AsyncIterator[Fetcher]:
    fetcher = Fetcher(resolver=resolver)
    yield fetcher
    await fetcher.aclose()


@pytest.fixture
def trap(respx_mock: respx.MockRouter) -> respx.Route:
    """Matches any request at all: blocked cases assert it was never reached."""
    return respx_mock.route()


# --- check_url ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://example.com/a?b=1#c", ("https", "example.com", 443)),
        ("HTTP://Example.COM.:80/", ("http", "example.com", 80)),
        ("https://example.com:443/", ("https", "example.com", 443)),
        ("https://bücher.de/", ("https", "xn--bcher-kva.de", 443)),
        ("http://0x5db8d822/", ("http", PUBLIC_V4, 80)),
        ("http://[2606:2800:220:1:248:1893:25c8:1946]/", ("http", PUBLIC_V6, 80)),
    ],
)
def test_check_url_returns_normalised_parts(url: str, expected: tuple[str, str, int]) -> None:
    assert check_url(url) == expected


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("file:///etc/passwd", "the scheme file is not allowed (only http and https)"),
        ("ftp://example.com/file.txt", "the scheme ftp is not allowed (only http and https)"),
        ("gopher://example.com:70/_GET", "the scheme gopher is not allowed (only http and https)"),
        ("example.com/page", "the URL must start with http:// or https://"),
        (
            "http://example.com:8080/",
            "the port 8080 is not allowed (only 80 for http; INGESTION__ALLOWED_HOSTS can allow example.com:8080)",
        ),
        (
            "https://example.com:80/",
            "the port 80 is not allowed (only 443 for https; INGESTION__ALLOWED_HOSTS can allow example.com:80)",
        ),
        ("http://user:secret@example.com/", "the URL must not contain a user name or password"),
        ("http://example.com\\@127.0.0.1/", "the URL must not contain a user name or password"),
        ("http:///path", "the URL has no host"),
        ("http://1.2.3.999/", "the host 1.2.3.999 is not a valid IPv4 address"),
        ("http://08.0.0.1/", "the host 08.0.0.1 is not a valid IPv4 address"),
        ("http://127.0.0.%31/", "the host 127.0.0.%31 is not a valid name"),
        ("http://[fe80::1%25eth0]/", "the URL is not valid (IPv6 zone index)"),
        ("https://example.com/" + "a" * 2048, "the URL is longer than 2048 characters"),
    ],
)
def test_check_url_rejects(url: str, message: str) -> None:
    with pytest.raises(BlockedURL) as caught:
        check_url(url)
    assert str(caught.value) == message


# --- github_raw_url -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (
            "https://github.com/acme/docs/blob/main/guide/setup.md",
            "https://raw.githubusercontent.com/acme/docs/main/guide/setup.md",
        ),
        (
            "https://www.github.com/acme/docs/blob/v1.2/README.md?plain=1#L10",
            "https://raw.githubusercontent.com/acme/docs/v1.2/README.md",
        ),
        ("https://github.com/acme/docs/tree/main/guide", "https://github.com/acme/docs/tree/main/guide"),
        ("https://github.com/acme/docs/blob/main", "https://github.com/acme/docs/blob/main"),
        ("https://example.com/acme/docs/blob/main/a.md", "https://example.com/acme/docs/blob/main/a.md"),
    ],
)
def test_github_raw_url(url: str, expected: str) -> None:
    assert github_raw_url(url) == expected


# --- blocked before any connection ----------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://127.0.0.1/", "the address 127.0.0.1 is not allowed (loopback)"),
        ("http://[::1]/", "the address ::1 is not allowed (loopback)"),
        (
            "http://169.254.169.254/latest/meta-data/",
            "the address 169.254.169.254 is not allowed (link-local, cloud metadata)",
        ),
        ("http://2130706433/", "the address 127.0.0.1 is not allowed (loopback)"),
        ("http://0x7f000001/", "the address 127.0.0.1 is not allowed (loopback)"),
        ("http://0177.0.0.1/", "the address 127.0.0.1 is not allowed (loopback)"),
        ("http://127.1/", "the address 127.0.0.1 is not allowed (loopback)"),
        ("http://0/", "the address 0.0.0.0 is not allowed (this network)"),
        ("http://１２７.０.０.１/", "the address 127.0.0.1 is not allowed (loopback)"),
        (
            "http://[::ffff:127.0.0.1]/",
            "the address ::ffff:7f00:1 is not allowed (loopback, embedded 127.0.0.1)",
        ),
        (
            "http://[::ffff:7f00:1]/",
            "the address ::ffff:7f00:1 is not allowed (loopback, embedded 127.0.0.1)",
        ),
        (
            "http://[fd00:ec2::254]/",
            "the address fd00:ec2::254 is not allowed (unique local, private network)",
        ),
        ("http://localhost/", "the host localhost is not allowed (local name)"),
        ("http://LOCALHOST./admin", "the host localhost is not allowed (local name)"),
        ("http://api.localhost/", "the host api.localhost is not allowed (local name)"),
        ("http://printer.local/", f"the host printer.local is not allowed (local name; {HINT})"),
        (
            "http://metadata.google.internal/",
            f"the host metadata.google.internal is not allowed (local name; {HINT})",
        ),
        ("http://intranet/", f"the host intranet is not allowed (a name without a dot is local; {HINT})"),
        ("file:///etc/passwd", "the scheme file is not allowed (only http and https)"),
        ("ftp://example.com/", "the scheme ftp is not allowed (only http and https)"),
        ("gopher://example.com/", "the scheme gopher is not allowed (only http and https)"),
        (
            "http://example.com:8080/",
            "the port 8080 is not allowed (only 80 for http; INGESTION__ALLOWED_HOSTS can allow example.com:8080)",
        ),
        ("http://admin:admin@example.com/", "the URL must not contain a user name or password"),
    ],
)
async def test_fetch_blocks_without_resolving_or_connecting(
    fetcher: Fetcher,
    resolver: FakeResolver,
    respx_mock: respx.MockRouter,
    trap: respx.Route,
    url: str,
    message: str,
) -> None:
    with pytest.raises(BlockedURL) as caught:
        await fetcher.fetch(url)
    assert str(caught.value) == message
    assert resolver.calls == []
    assert trap.called is False
    assert respx_mock.calls.call_count == 0


@pytest.mark.parametrize(
    ("answers", "message"),
    [
        (["10.1.2.3"], f"resolves to 10.1.2.3, which is not allowed (private network; {HINT})"),
        ([PUBLIC_V4, "127.0.0.1"], "resolves to 127.0.0.1, which is not allowed (loopback)"),
        (
            [PUBLIC_V6, "fd00:ec2::254"],
            "resolves to fd00:ec2::254, which is not allowed (unique local, private network)",
        ),
    ],
    ids=["private", "public-and-loopback", "public-and-ula"],
)
async def test_fetch_blocks_host_with_any_private_answer(
    respx_mock: respx.MockRouter, trap: respx.Route, answers: list[str], message: str
) -> None:
    resolver = FakeResolver({"docs.example.com": answers})
    fetcher = Fetcher(resolver=resolver)
    with pytest.raises(BlockedURL) as caught:
        await fetcher.fetch("https://docs.example.com/page")
    await fetcher.aclose()
    assert str(caught.value) == f"the host docs.example.com {message}"
    assert resolver.calls == [("docs.example.com", 443)]
    assert trap.called is False
    assert respx_mock.calls.call_count == 0


@pytest.mark.parametrize(
    ("location", "message"),
    [
        ("http://10.0.0.1/admin", f"the address 10.0.0.1 is not allowed (private network; {HINT})"),
        (
            "http://169.254.169.254/latest/meta-data/",
            "the address 169.254.169.254 is not allowed (link-local, cloud metadata)",
        ),
        (
            "https://internal.example.com/",
            "the host internal.example.com resolves to 192.168.1.5, which is not allowed "
            f"(private network; {HINT})",
        ),
        ("file:///etc/passwd", "the scheme file is not allowed (only http and https)"),
    ],
)
async def test_redirect_to_forbidden_target_is_blocked_before_connecting(
    respx_mock: respx.MockRouter, location: str, message: str
) -> None:
    resolver = FakeResolver({"example.com": [PUBLIC_V4], "internal.example.com": ["192.168.1.5"]})
    first = respx_mock.get(f"https://{PUBLIC_V4}/start").respond(302, headers={"Location": location})
    fetcher = Fetcher(resolver=resolver)
    with pytest.raises(BlockedURL) as caught:
        await fetcher.fetch("https://example.com/start")
    await fetcher.aclose()
    assert str(caught.value) == message
    assert first.call_count == 1
    assert respx_mock.calls.call_count == 1


@pytest.mark.parametrize(
    "location",
    [
        "mailto:a@b.c",
        "data:text/html,hi",
        "http:foo",
        "http://xn--ls8h.la/",
        "http://a]b/",
        "//[",
        "http://0251.0376.0251.0376/",
        "http://a\tb/",
    ],
)
async def test_redirect_to_what_is_no_web_address_is_blocked(
    fetcher: Fetcher, respx_mock: respx.MockRouter, location: str
) -> None:
    first = respx_mock.get(f"https://{PUBLIC_V4}/start").respond(302, headers={"Location": location})
    with pytest.raises(BlockedURL) as caught:
        await fetcher.fetch("https://example.com/start")
    assert (str(caught.value), first.call_count, respx_mock.calls.call_count) == (NOT_A_WEB_ADDRESS, 1, 1)


# --- validate_url ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("0.1.2.3", "this network"),
        ("100.64.0.1", f"carrier-grade NAT; {HINT}"),
        ("172.16.5.4", f"private network; {HINT}"),
        ("192.0.0.8", f"IETF protocol assignments; {HINT}"),
        ("192.0.2.1", f"documentation; {HINT}"),
        ("192.88.99.1", f"6to4 relay; {HINT}"),
        ("198.18.0.1", f"benchmarking; {HINT}"),
        ("198.51.100.7", f"documentation; {HINT}"),
        ("203.0.113.9", f"documentation; {HINT}"),
        ("224.0.0.251", "multicast"),
        ("240.0.0.1", f"reserved; {HINT}"),
        ("255.255.255.255", "broadcast"),
        ("::", "unspecified"),
        ("::7f00:1", "IPv4-compatible, deprecated"),
        ("::ffff:10.0.0.1", f"private network, embedded 10.0.0.1; {HINT}"),
        ("64:ff9b::a9fe:a9fe", "link-local, cloud metadata, embedded 169.254.169.254"),
        ("100::1", f"discard-only; {HINT}"),
        ("2001::1", f"Teredo; {HINT}"),
        ("2001:db8::1", f"documentation; {HINT}"),
        ("2001:2::1", f"IETF protocol assignments; {HINT}"),
        ("2002:7f00:1::1", f"6to4; {HINT}"),
        ("fe80::1%eth0", "link-local"),
        ("fec0::1", f"site-local, deprecated; {HINT}"),
        ("ff02::1", "multicast"),
        ("4000::1", f"not a global unicast address; {HINT}"),
    ],
)
async def test_validate_url_blocks_special_addresses(address: str, reason: str) -> None:
    resolver = FakeResolver({"example.com": [address]})
    with pytest.raises(BlockedURL) as caught:
        await validate_url("https://example.com/", resolver=resolver)
    shown = ip_address(address.partition("%")[0])  # the message shows the canonical form
    assert str(caught.value) == f"the host example.com resolves to {shown}, which is not allowed ({reason})"


@pytest.mark.parametrize(
    "answers", [[PUBLIC_V4], [PUBLIC_V6], ["64:ff9b::5db8:d822"], [PUBLIC_V4, PUBLIC_V6]]
)
async def test_validate_url_accepts_public_addresses_after_one_lookup(answers: list[str]) -> None:
    resolver = FakeResolver({"example.com": answers})
    await validate_url("https://example.com/page", resolver=resolver)
    assert resolver.calls == [("example.com", 443)]


async def test_validate_url_blocks_unresolvable_host() -> None:
    with pytest.raises(BlockedURL) as caught:
        await validate_url("https://nowhere.example/", resolver=FakeResolver())
    assert str(caught.value) == "the host nowhere.example could not be resolved"


# --- successful fetches ---------------------------------------------------------------------


async def test_fetch_connects_to_checked_ip_with_hostname_for_host_and_sni(
    fetcher: Fetcher, resolver: FakeResolver, respx_mock: respx.MockRouter
) -> None:
    route = respx_mock.get(f"https://{PUBLIC_V4}/docs/page", params={"x": "1"}).respond(
        200,
        content=b"<html>hi</html>",
        headers={**HTML, "ETag": '"v1"', "Last-Modified": "Wed, 01 Jan 2025 00:00:00 GMT"},
    )
    result = await fetcher.fetch("https://example.com/docs/page?x=1#section")
    assert result == FetchResult(
        url="https://example.com/docs/page?x=1",
        status=200,
        content=b"<html>hi</html>",
        content_type="text/html",
        charset="utf-8",
        etag='"v1"',
        last_modified="Wed, 01 Jan 2025 00:00:00 GMT",
    )
    assert resolver.calls == [("example.com", 443)]
    request = route.calls.last.request
    assert str(request.url) == f"https://{PUBLIC_V4}/docs/page?x=1"
    assert request.headers["Host"] == "example.com"
    assert request.extensions["sni_hostname"] == "example.com"
    assert request.headers["User-Agent"] == "voice-knowledge-fetcher/1.0"
    assert request.headers["Accept-Encoding"] == "gzip, deflate, br"
    assert "If-None-Match" not in request.headers
    assert respx_mock.calls.call_count == 1


async def test_fetch_over_ipv6_uses_bracketed_address(respx_mock: respx.MockRouter) -> None:
    route = respx_mock.get(f"http://[{PUBLIC_V6}]/").respond(
        200, text="plain", headers={"Content-Type": "text/plain"}
    )
    fetcher = Fetcher(resolver=FakeResolver({"example.com": [PUBLIC_V6]}))
    result = await fetcher.fetch("http://example.com/")
    await fetcher.aclose()
    assert (result.url, result.content, result.charset) == ("http://example.com/", b"plain", None)
    request = route.calls.last.request
    assert request.headers["Host"] == "example.com"
    assert "sni_hostname" not in request.extensions  # plain http has no TLS


async def test_fetch_of_public_ip_literal_skips_resolver_and_sni(
    fetcher: Fetcher, resolver: FakeResolver, respx_mock: respx.MockRouter
) -> None:
    route = respx_mock.get(f"https://{PUBLIC_V4}/").respond(
        200, text="ok", headers={"Content-Type": "text/plain"}
    )
    result = await fetcher.fetch("https://0x5db8d822/")
    assert result.url == f"https://{PUBLIC_V4}/"
    assert resolver.calls == []
    assert route.calls.last.request.headers["Host"] == PUBLIC_V4
    assert "sni_hostname" not in route.calls.last.request.extensions


async def test_fetch_tries_next_checked_address_when_connect_fails(respx_mock: respx.MockRouter) -> None:
    down = respx_mock.get(f"https://[{PUBLIC_V6}]/").mock(side_effect=httpx.ConnectError("unreachable"))
    up = respx_mock.get(f"https://{PUBLIC_V4}/").respond(
        200, text="ok", headers={"Content-Type": "text/plain"}
    )
    resolver = FakeResolver({"example.com": [PUBLIC_V6, PUBLIC_V4]})
    fetcher = Fetcher(resolver=resolver)
    result = await fetcher.fetch("https://example.com/")
    await fetcher.aclose()
    assert result.content == b"ok"
    assert (down.call_count, up.call_count) == (1, 1)
    assert resolver.calls == [("example.com", 443)]


async def test_github_blob_url_is_fetched_raw(fetcher: Fetcher, respx_mock: respx.MockRouter) -> None:
    route = respx_mock.get("https://185.199.108.133/acme/docs/main/guide/setup.md").respond(
        200, text="# Setup", headers={"Content-Type": "text/plain; charset=utf-8"}
    )
    result = await fetcher.fetch("https://github.com/acme/docs/blob/main/guide/setup.md")
    assert result.url == "https://raw.githubusercontent.com/acme/docs/main/guide/setup.md"
    assert result.content == b"# Setup"
    assert route.calls.last.request.headers["Host"] == "raw.githubusercontent.com"
    assert route.calls.last.request.extensions["sni_hostname"] == "raw.githubusercontent.com"
    assert respx_mock.calls.call_count == 1


@pytest.mark.parametrize(
    ("encoding", "encode"),
    [
        ("gzip", gzip.compress),
        ("deflate", zlib.compress),
        ("deflate", lambda data: zlib.compress(data)[2:-4]),  # raw deflate, as some servers send
        ("br", brotli.compress),
    ],
    ids=["gzip", "deflate-zlib", "deflate-raw", "br"],
)
async def test_fetch_decodes_content_encoding(
    fetcher: Fetcher, respx_mock: respx.MockRouter, encoding: str, encode: Callable[[bytes], bytes]
) -> None:
    page = b"<p>" + b"knowledge " * 20_000 + b"</p>"
    respx_mock.get(f"https://{PUBLIC_V4}/").respond(
        200, content=encode(page), headers={**HTML, "Content-Encoding": encoding}
    )
    result = await fetcher.fetch("https://example.com/")
    assert result.content == page


def _split_at(data: bytes, *cuts: int) -> tuple[bytes, ...]:
    bounds = [0, *cuts, len(data)]
    return tuple(data[a:b] for a, b in pairwise(bounds))


@pytest.mark.parametrize(
    "chunks",
    [
        lambda first, second: (first + second,),
        # The next member's magic split across two network chunks.
        lambda first, second: _split_at(first + second, len(first) + 1),
        lambda first, second: (first, second),
        # Zero padding between members, as some servers write.
        lambda first, second: (first, b"\0" * 7, second),
    ],
    ids=["one-chunk", "magic-split", "member-per-chunk", "zero-padding"],
)
async def test_fetch_reads_every_member_of_a_gzip_body(
    fetcher: Fetcher, respx_mock: respx.MockRouter, chunks: Callable[[bytes, bytes], tuple[bytes, ...]]
) -> None:
    first, second = b"<p>first part of the page</p>", b"<p>" + b"second part " * 10_000 + b"</p>"
    respx_mock.get(f"https://{PUBLIC_V4}/").respond(
        200,
        stream=Body(*chunks(gzip.compress(first), gzip.compress(second))),
        headers={**HTML, "Content-Encoding": "gzip"},
    )
    result = await fetcher.fetch("https://example.com/")
    assert result.content == first + second


@pytest.mark.parametrize("chunk_size", [None, 65_536], ids=["one-chunk", "64k-chunks"])
async def test_fetch_reads_a_gzip_member_after_one_larger_than_a_decoding_step(
    fetcher: Fetcher, respx_mock: respx.MockRouter, chunk_size: int | None
) -> None:
    # The first member ends inside the decoder's step loop: zlib then keeps the next one's
    # bytes as unconsumed input, and the loop spun on them for ever.
    first, second = b"<p>" + b"hello " * 300_000 + b"</p>", b"<p>world</p>"
    body = gzip.compress(first) + gzip.compress(second)
    chunks = (
        [body] if chunk_size is None else [body[i : i + chunk_size] for i in range(0, len(body), chunk_size)]
    )
    fetcher = Fetcher(resolver=FakeResolver({"example.com": [PUBLIC_V4]}), max_bytes=4_000_000)
    respx_mock.get(f"https://{PUBLIC_V4}/").respond(
        200, stream=Body(*chunks), headers={**HTML, "Content-Encoding": "gzip"}
    )
    result = await fetcher.fetch("https://example.com/")
    await fetcher.aclose()
    assert result.content == first + second


async def test_fetch_ignores_what_follows_the_last_gzip_member(
    fetcher: Fetcher, respx_mock: respx.MockRouter
) -> None:
    page = b"<p>the whole page</p>"
    respx_mock.get(f"https://{PUBLIC_V4}/").respond(
        200,
        stream=Body(gzip.compress(page) + b"\0\0", b"junk after the page " * 3),
        headers={**HTML, "Content-Encoding": "gzip"},
    )
    result = await fetcher.fetch("https://example.com/")
    assert result.content == page


async def test_fetch_refuses_a_gzip_body_whose_second_member_is_cut_off(
    fetcher: Fetcher, respx_mock: respx.MockRouter
) -> None:
    second = gzip.compress(bytes(range(256)) * 400)
    respx_mock.get(f"https://{PUBLIC_V4}/").respond(
        200,
        content=gzip.compress(b"<p>first</p>") + second[: len(second) // 2],
        headers={**HTML, "Content-Encoding": "gzip"},
    )
    with pytest.raises(FetchError) as caught:
        await fetcher.fetch("https://example.com/")
    assert (str(caught.value), caught.value.retryable) == ("the page was cut off before its end", True)


@pytest.mark.parametrize(
    ("encoding", "encode"),
    [("gzip", gzip.compress), ("deflate", zlib.compress), ("br", brotli.compress)],
    ids=["gzip", "deflate", "br"],
)
async def test_fetch_refuses_a_compressed_page_cut_off_before_its_end(
    fetcher: Fetcher, respx_mock: respx.MockRouter, encoding: str, encode: Callable[[bytes], bytes]
) -> None:
    whole = encode(b"<p>" + bytes(range(256)) * 400 + b"</p>")
    respx_mock.get(f"https://{PUBLIC_V4}/").respond(
        200, content=whole[: len(whole) // 2], headers={**HTML, "Content-Encoding": encoding}
    )
    with pytest.raises(FetchError) as caught:
        await fetcher.fetch("https://example.com/")
    assert (str(caught.value), caught.value.retryable) == ("the page was cut off before its end", True)


# --- redirects ------------------------------------------------------------------------------


async def test_fetch_follows_three_redirects_rechecking_each_host(respx_mock: respx.MockRouter) -> None:
    resolver = FakeResolver({"example.com": [PUBLIC_V4], "www.example.org": ["93.184.215.14"]})
    hop1 = respx_mock.get(f"http://{PUBLIC_V4}/old").respond(
        301, headers={"Location": "https://example.com/old"}
    )
    hop2 = respx_mock.get(f"https://{PUBLIC_V4}/old").respond(
        302, headers={"Location": "https://www.example.org/a/b"}
    )
    hop3 = respx_mock.get("https://93.184.215.14/a/b").respond(307, headers={"Location": "../new?p=1"})
    final = respx_mock.get("https://93.184.215.14/new", params={"p": "1"}).respond(
        200, text="done", headers={"Content-Type": "text/plain"}
    )
    fetcher = Fetcher(resolver=resolver)
    result = await fetcher.fetch("http://example.com/old")
    await fetcher.aclose()
    assert (result.url, result.content) == ("https://www.example.org/new?p=1", b"done")
    assert [route.call_count for route in (hop1, hop2, hop3, final)] == [1, 1, 1, 1]
    assert final.calls.last.request.headers["Host"] == "www.example.org"
    assert final.calls.last.request.extensions["sni_hostname"] == "www.example.org"
    assert resolver.calls == [
        ("example.com", 80),
        ("example.com", 443),
        ("www.example.org", 443),
        ("www.example.org", 443),
    ]


async def test_fetch_stops_after_three_redirects(fetcher: Fetcher, respx_mock: respx.MockRouter) -> None:
    hops = [
        respx_mock.get(f"https://{PUBLIC_V4}/r{n}").respond(302, headers={"Location": f"/r{n + 1}"})
        for n in range(4)
    ]
    fifth = respx_mock.get(f"https://{PUBLIC_V4}/r4").respond(200, text="never", headers=HTML)
    with pytest.raises(FetchError) as caught:
        await fetcher.fetch("https://example.com/r0")
    assert str(caught.value) == "too many redirects (more than 3)"
    assert caught.value.retryable is False
    assert [hop.call_count for hop in hops] == [1, 1, 1, 1]
    assert fifth.called is False


# --- limits ---------------------------------------------------------------------------------


async def test_fetch_rejects_declared_length_above_cap(respx_mock: respx.MockRouter) -> None:
    respx_mock.get(f"https://{PUBLIC_V4}/big").respond(200, content=b"x" * 2_001, headers=HTML)
    fetcher = Fetcher(resolver=FakeResolver({"example.com": [PUBLIC_V4]}), max_bytes=2_000)
    with pytest.raises(FetchError) as caught:
        await fetcher.fetch("https://example.com/big")
    await fetcher.aclose()
    assert str(caught.value) == "the page is larger than 2 kB"
    assert caught.value.retryable is False


async def test_fetch_stops_streaming_body_at_cap(respx_mock: respx.MockRouter) -> None:
    sent: list[int] = []

    class Endless(httpx.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            for _ in range(1_000):
                sent.append(1_000)
                yield b"y" * 1_000

    respx_mock.get(f"https://{PUBLIC_V4}/stream").respond(200, headers=HTML, stream=Endless())
    fetcher = Fetcher(resolver=FakeResolver({"example.com": [PUBLIC_V4]}), max_bytes=10_000)
    with pytest.raises(FetchError) as caught:
        await fetcher.fetch("https://example.com/stream")
    await fetcher.aclose()
    assert str(caught.value) == "the page is larger than 10 kB"
    assert sum(sent) == 11_000  # stopped at the first chunk past the cap, not at the end of the stream


@pytest.mark.parametrize(
    ("encoding", "compress"),
    [
        ("gzip", lambda data: gzip.compress(data, compresslevel=1)),
        ("br", lambda data: brotli.compress(data, quality=1)),
    ],
    ids=["gzip", "br"],
)
async def test_fetch_caps_decoded_size_of_compression_bomb(
    respx_mock: respx.MockRouter, encoding: str, compress: Callable[[bytes], bytes]
) -> None:
    bomb = compress(b"\0" * 100_000_000)
    # One network chunk: a decoder that expands a whole chunk at once (as httpx's do)
    # would hold all 100 MB in memory before any cap could be checked.
    respx_mock.get(f"https://{PUBLIC_V4}/bomb").respond(
        200, stream=Body(bomb), headers={**HTML, "Content-Encoding": encoding}
    )
    fetcher = Fetcher(resolver=FakeResolver({"example.com": [PUBLIC_V4]}), max_bytes=1_000_000)
    tracemalloc.start()
    try:
        with pytest.raises(FetchError) as caught:
            await fetcher.fetch("https://example.com/bomb")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    await fetcher.aclose()
    assert str(caught.value) == "the page is larger than 1 MB"
    assert peak < 10_000_000


@pytest.mark.parametrize(
    ("encoding", "message"),
    [
        ("zstd", "the content encoding zstd is not supported"),
        ("gzip, gzip", "the content encoding gzip, gzip is not supported"),
    ],
)
async def test_fetch_refuses_unsupported_content_encoding(
    fetcher: Fetcher, respx_mock: respx.MockRouter, encoding: str, message: str
) -> None:
    respx_mock.get(f"https://{PUBLIC_V4}/").respond(
        200,
        stream=Body(gzip.compress(gzip.compress(b"x"))),
        headers={**HTML, "Content-Encoding": encoding},
    )
    with pytest.raises(FetchError) as caught:
        await fetcher.fetch("https://example.com/")
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("content_type", "message"),
    [
        ("application/octet-stream", "the content type application/octet-stream is not supported"),
        ("image/svg+xml; charset=utf-8", "the content type image/svg+xml is not supported"),
        (None, "the content type (none) is not supported"),
    ],
)
async def test_fetch_refuses_content_type_outside_allow_list(
    fetcher: Fetcher, respx_mock: respx.MockRouter, content_type: str | None, message: str
) -> None:
    headers = {} if content_type is None else {"Content-Type": content_type}
    respx_mock.get(f"https://{PUBLIC_V4}/file").respond(200, content=b"\x00\x01", headers=headers)
    with pytest.raises(FetchError) as caught:
        await fetcher.fetch("https://example.com/file")
    assert str(caught.value) == message
    assert caught.value.retryable is False


@pytest.mark.parametrize(("status", "retryable"), [(404, False), (403, False), (429, True), (503, True)])
async def test_fetch_turns_error_status_into_fetch_error(
    fetcher: Fetcher, respx_mock: respx.MockRouter, status: int, retryable: bool
) -> None:
    respx_mock.get(f"https://{PUBLIC_V4}/").respond(status, text="nope", headers=HTML)
    with pytest.raises(FetchError) as caught:
        await fetcher.fetch("https://example.com/")
    assert str(caught.value) == f"the server answered HTTP {status}"
    assert caught.value.retryable is retryable


async def test_fetch_reports_connection_failure_as_retryable(
    fetcher: Fetcher, respx_mock: respx.MockRouter
) -> None:
    respx_mock.get(f"https://{PUBLIC_V4}/").mock(side_effect=httpx.ConnectError("refused"))
    with pytest.raises(FetchError) as caught:
        await fetcher.fetch("https://example.com/")
    assert str(caught.value) == "could not connect to example.com"
    assert caught.value.retryable is True


async def test_fetch_reports_unresolvable_host_as_retryable(
    fetcher: Fetcher, respx_mock: respx.MockRouter
) -> None:
    with pytest.raises(FetchError) as caught:
        await fetcher.fetch("https://nowhere.example/")
    assert str(caught.value) == "the host nowhere.example could not be resolved"
    assert caught.value.retryable is True
    assert respx_mock.calls.call_count == 0


async def test_fetch_deadline_covers_the_whole_fetch(respx_mock: respx.MockRouter) -> None:
    reached: list[httpx.Request] = []
    cancelled: list[httpx.Request] = []
    never = asyncio.Event()

    async def stalled(request: httpx.Request) -> httpx.Response:
        # The page never comes: only the fetch deadline can end this, by cancelling the wait.
        reached.append(request)
        try:
            await never.wait()
        except asyncio.CancelledError:
            cancelled.append(request)
            raise
        return httpx.Response(200, text="late", headers=HTML)

    respx_mock.get(f"https://{PUBLIC_V4}/slow").mock(side_effect=stalled)
    fetcher = Fetcher(resolver=FakeResolver({"example.com": [PUBLIC_V4]}), timeout_s=0.05)
    try:
        with pytest.raises(FetchError) as caught:
            # Only a guard against hanging the run if the deadline is broken, not a speed check.
            await asyncio.wait_for(fetcher.fetch("https://example.com/slow"), timeout=60)
    finally:
        await fetcher.aclose()
    assert str(caught.value) == "the page did not load within 0.05 s"
    assert caught.value.retryable is True
    assert [request.headers["Host"] for request in reached] == ["example.com"]
    assert cancelled == reached


# --- conditional requests -------------------------------------------------------------------


async def test_conditional_fetch_sends_validators_and_returns_304(
    fetcher: Fetcher, respx_mock: respx.MockRouter
) -> None:
    route = respx_mock.get(f"https://{PUBLIC_V4}/doc").respond(304, headers={"ETag": '"v2"'})
    result = await fetcher.fetch(
        "https://example.com/doc", etag='"v1"', last_modified="Wed, 01 Jan 2025 00:00:00 GMT"
    )
    assert result == FetchResult(
        url="https://example.com/doc",
        status=304,
        content=b"",
        content_type="",
        charset=None,
        etag='"v2"',
        last_modified="Wed, 01 Jan 2025 00:00:00 GMT",
    )
    request = route.calls.last.request
    assert request.headers["If-None-Match"] == '"v1"'
    assert request.headers["If-Modified-Since"] == "Wed, 01 Jan 2025 00:00:00 GMT"
