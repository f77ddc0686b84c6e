"""Fetch admin-supplied web pages without letting a URL reach the service's own network (SSRF).

Every hop of a fetch goes through the same steps: parse the URL strictly, refuse local
names and literal addresses in any spelling, resolve the host once, refuse the whole host
if any of its addresses lies in a non-public range, then connect to a checked address
itself, keeping the hostname only for the Host header and the TLS server name, so that no
second DNS answer can be swapped in between check and use. Redirects are followed by hand
so each Location passes the same checks before any connection is made.

Intranet hosts are refused unless the operator opens them (IntranetAccess, from
INGESTION__ALLOWED_HOSTS and INGESTION__ALLOWED_NETWORKS): a named host may then resolve to
private addresses and use the ports named with it. The machine itself and the cloud metadata
service stay closed unless a network that lies inside their range is named outright.

Bodies are decoded here in bounded steps rather than by httpx: httpx hands a whole network
chunk to zlib/brotli at once, and 64 KB of Brotli can expand to gigabytes in that one call.
"""

from __future__ import annotations

import asyncio
import re
import socket
import ssl
import zlib
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address, ip_network
from typing import Protocol
from urllib.parse import urljoin, urlsplit

import brotli
import httpx
import idna

__all__ = [
    "BlockedURL",
    "FetchError",
    "FetchResult",
    "Fetcher",
    "IntranetAccess",
    "PinnedURL",
    "Resolver",
    "UnsupportedContentType",
    "check_url",
    "github_raw_url",
    "parse_allowed_host",
    "parse_allowed_network",
    "pinned_urls",
    "validate_url",
]

Resolver = Callable[[str, int], Awaitable[list[str]]]
"""Resolves (host, port) to IP address strings; the default uses the event loop's getaddrinfo."""

_Address = IPv4Address | IPv6Address
_Network = IPv4Network | IPv6Network

MAX_URL_LENGTH = 2048
_DEFAULT_PORTS = {"http": 80, "https": 443}
# validate_url has no fetch deadline around it, so a hanging resolver needs its own bound.
_RESOLVE_TIMEOUT_S = 10.0
# Largest piece a decoder may produce per step: the byte cap is checked between pieces.
_DECODE_STEP = 65_536
_GZIP_MAGIC = b"\x1f\x8b"
_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})

DEFAULT_ALLOWED_TYPES = frozenset(
    {"text/html", "application/xhtml+xml", "text/plain", "text/markdown", "application/pdf"}
)

# Explicit lists on purpose: ipaddress.is_private/is_global were wrong before Python 3.12.4
# (CVE-2024-4032). The first matching entry names the reason, so narrower ranges come first.
_BLOCKED_V4: tuple[tuple[IPv4Network, str], ...] = tuple(
    (IPv4Network(network), reason)
    for network, reason in (
        ("0.0.0.0/8", "this network"),
        ("10.0.0.0/8", "private network"),
        ("100.64.0.0/10", "carrier-grade NAT"),
        ("127.0.0.0/8", "loopback"),
        ("169.254.0.0/16", "link-local, cloud metadata"),
        ("172.16.0.0/12", "private network"),
        ("192.0.0.0/24", "IETF protocol assignments"),
        ("192.0.2.0/24", "documentation"),
        ("192.88.99.0/24", "6to4 relay"),
        ("192.168.0.0/16", "private network"),
        ("198.18.0.0/15", "benchmarking"),
        ("198.51.100.0/24", "documentation"),
        ("203.0.113.0/24", "documentation"),
        ("224.0.0.0/4", "multicast"),
        ("255.255.255.255/32", "broadcast"),
        ("240.0.0.0/4", "reserved"),
    )
)
_BLOCKED_V6: tuple[tuple[IPv6Network, str], ...] = tuple(
    (IPv6Network(network), reason)
    for network, reason in (
        ("::/128", "unspecified"),
        ("::1/128", "loopback"),
        ("::/96", "IPv4-compatible, deprecated"),
        ("::ffff:0:0:0/96", "IPv4-translated"),
        ("64:ff9b:1::/48", "local-use NAT64"),
        ("100::/64", "discard-only"),
        ("2001::/32", "Teredo"),
        ("2001:db8::/32", "documentation"),
        ("2001::/23", "IETF protocol assignments"),
        ("2002::/16", "6to4"),
        ("3fff::/20", "documentation"),
        ("5f00::/16", "segment routing"),
        ("fc00::/7", "unique local, private network"),
        ("fe80::/10", "link-local"),
        ("fec0::/10", "site-local, deprecated"),
        ("ff00::/8", "multicast"),
    )
)
# These two carry an IPv4 address that decides the verdict: the v4 address is what is reached.
_IPV4_MAPPED = IPv6Network("::ffff:0:0/96")
_NAT64 = IPv6Network("64:ff9b::/96")
# Only 2000::/3 is allocated for global unicast; anything else cannot be a public web server.
_GLOBAL_UNICAST_V6 = IPv6Network("2000::/3")

# Naming a host does not open these: it would let one DNS record reach the service's own
# machine or the cloud metadata service (169.254.169.254, fd00:ec2::254). Only a network in
# INGESTION__ALLOWED_NETWORKS that lies inside one of them opens it, never a broader one.
# The first range containing an address is its own, so narrower ranges come first.
_PROTECTED: tuple[_Network, ...] = tuple(
    ip_network(network)
    for network in (
        "0.0.0.0/8",
        "127.0.0.0/8",
        "169.254.169.254/32",
        "169.254.0.0/16",
        "224.0.0.0/4",
        "255.255.255.255/32",
        "::1/128",
        "::/96",
        "fd00:ec2::254/128",
        "fe80::/10",
        "ff00::/8",
    )
)
_HOSTS_HINT = "INGESTION__ALLOWED_HOSTS can allow this host"

_LOCAL_SUFFIXES = ("localhost", "local", "internal", "localdomain", "home.arpa")
_LABEL = re.compile(r"[a-z0-9_-]{1,63}")
# inet_aton accepts each part as hex (0x..), octal (leading 0) or decimal.
_IPV4_PART = re.compile(r"0[xX][0-9a-fA-F]*|0[0-7]*|[1-9][0-9]*")
_NUMERIC_LABEL = re.compile(r"0[xX][0-9a-fA-F]*|[0-9]+")


NOT_A_WEB_ADDRESS = "the page redirects to something that is not a web address"


# The name is part of the agreed interface, hence no "Error" suffix.
class BlockedURL(Exception):
    """The URL may not be fetched; ``str(exc)`` says why in words an admin can act on."""


class FetchError(Exception):
    """The fetch failed; ``retryable`` tells whether trying again later may succeed, ``status``
    is the HTTP status of an error answer (a crawl retires a page that answers 404 or 410)."""

    def __init__(self, message: str, *, retryable: bool = False, status: int | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.status = status


class UnsupportedContentType(FetchError):
    """The page is of a media type the fetcher was not asked for; its body was not read."""


# The longest validator headers kept (the columns' sizes): a longer one is no validator a
# server needs back, and storing it would fail the document or the whole crawl.
# How httpx words a redirect whose Location is no URL (httpx._client._redirect_url).
_BAD_LOCATION = "Invalid URL in location header"
_VALIDATOR_LIMITS = {"etag": 500, "last-modified": 100}


def _validator(response: httpx.Response, name: str) -> str | None:
    """The response's ETag or Last-Modified, or None when it has none or one too long to keep."""
    value = response.headers.get(name)
    return value if value and len(value) <= _VALIDATOR_LIMITS[name] else None


@dataclass(frozen=True, slots=True)
class FetchResult:
    """A fetched page, or a 304 answer (``content`` empty) to a conditional request."""

    url: str
    status: int
    content: bytes
    content_type: str
    charset: str | None
    etag: str | None
    last_modified: str | None


@dataclass(frozen=True, slots=True)
class IntranetAccess:
    """The internal hosts, ports and networks the operator opened; empty, the default, opens none.

    ``hosts`` may be reached under their own names and resolve to non-public addresses
    (but see _PROTECTED); ``ports`` are the extra ``(host, port)`` pairs beside 80 and 443;
    an address inside one of ``networks`` is allowed whatever host it belongs to.
    """

    hosts: frozenset[str] = frozenset()
    ports: frozenset[tuple[str, int]] = frozenset()
    networks: tuple[_Network, ...] = ()

    @classmethod
    def parse(cls, hosts: Iterable[str] = (), networks: Iterable[str] = ()) -> IntranetAccess:
        """Build from setting entries (``wiki.corp``, ``docs.corp:8443``, ``10.20.0.0/16``).

        Raises ValueError naming the entry that is not a host, host:port or CIDR network.
        """
        names: set[str] = set()
        ports: set[tuple[str, int]] = set()
        for entry in hosts:
            host, port = parse_allowed_host(entry)
            names.add(host)
            if port is not None:
                ports.add((host, port))
        return cls(
            hosts=frozenset(names),
            ports=frozenset(ports),
            networks=tuple(parse_allowed_network(entry) for entry in networks),
        )


_CLOSED = IntranetAccess()


def parse_allowed_host(entry: str) -> tuple[str, int | None]:
    """Parse ``host`` or ``host:port`` (IPv6 in brackets) into the normalised host and the port."""
    text = entry.strip()
    # A bare IPv6 address has colons but no port.
    bracketed = f"[{text}]" if text.count(":") > 1 and not text.startswith("[") else text
    try:
        parts = urlsplit(f"//{bracketed}")
        port = parts.port
        if parts.hostname is None or parts.netloc != bracketed or "@" in bracketed:
            raise ValueError("expected a host name or address, optionally with :port")
        if port == 0:
            raise ValueError("the port must be 1 to 65535")
        host, _ = _normalise_host(parts.hostname)
    except (ValueError, BlockedURL) as exc:
        raise ValueError(f"{entry!r} is not a host or host:port ({exc})") from exc
    return host, port


def parse_allowed_network(entry: str) -> _Network:
    """Parse a CIDR network such as ``10.20.0.0/16``; a bare address is one host's network."""
    try:
        return ip_network(entry.strip(), strict=True)
    except ValueError as exc:
        raise ValueError(f"{entry!r} is not a network such as 10.20.0.0/16 ({exc})") from exc


@dataclass(frozen=True, slots=True)
class _Target:
    url: httpx.URL  # hostname form, without fragment; the port only when not the default
    scheme: str
    host: str  # ASCII, lower case, no trailing dot, IPv6 without brackets
    port: int
    literal: _Address | None  # set when the host is an IP address in any spelling


def check_url(url: str, *, intranet: IntranetAccess | None = None) -> tuple[str, str, int]:
    """Check a URL's syntax and return ``(scheme, host, port)``.

    Only http and https on their default ports (or a port ``intranet`` names), with a host
    and without user name or password, up to 2048 characters. The host comes back
    normalised: lower-case ASCII (IDNA), without a trailing dot, IPv4 in any inet_aton
    spelling as a dotted quad.
    Raises BlockedURL. Addresses are not checked here; see validate_url.
    """
    target = _parse_url(url, intranet or _CLOSED)
    return target.scheme, target.host, target.port


def github_raw_url(url: str) -> str:
    """Turn a GitHub file page (``github.com/{owner}/{repo}/blob/{ref}/{path}``) into its raw URL.

    The page itself is GitHub's HTML around the file; the raw URL serves the file. Query
    and fragment (``?plain=1``, ``#L10``) are dropped. Any other URL is returned unchanged.
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        # Not a URL urllib can read (an unbalanced "[" of an IPv6 host): validate_url refuses
        # it with the reason.
        return url
    if parts.scheme.lower() not in _DEFAULT_PORTS or parts.netloc.lower() not in {
        "github.com",
        "www.github.com",
    }:
        return url
    segments = parts.path.split("/")
    # ["", owner, repo, "blob", ref, *path]
    if len(segments) < 6 or segments[3] != "blob" or not all(segments[1:6]):
        return url
    owner, repo, rest = segments[1], segments[2], "/".join(segments[4:])
    return f"https://raw.githubusercontent.com/{owner}/{repo}/{rest}"


async def validate_url(
    url: str, *, resolver: Resolver | None = None, intranet: IntranetAccess | None = None
) -> None:
    """Check a URL completely without connecting: syntax, host name, and every resolved address.

    Raises only BlockedURL, also when the host does not resolve: a URL that cannot be
    checked now cannot be accepted now, and the caller answers both with a 400.
    """
    access = intranet or _CLOSED
    target = _parse_url(url, access)
    try:
        async with asyncio.timeout(_RESOLVE_TIMEOUT_S):
            await _checked_addresses(target, resolver or _system_resolver, access)
    except TimeoutError as exc:
        raise BlockedURL(f"the host {target.host} could not be resolved in time") from exc
    except FetchError as exc:
        raise BlockedURL(str(exc)) from exc


@dataclass(frozen=True, slots=True)
class PinnedURL:
    """A request target whose host was checked and resolved: send to ``url`` (the checked
    address in place of the host) with ``host_header``, and ``sni_hostname`` as the TLS
    server name, so no second DNS answer is used between the check and the connection."""

    url: httpx.URL
    host_header: str
    sni_hostname: str | None


async def pinned_urls(
    url: str, *, resolver: Resolver | None = None, intranet: IntranetAccess | None = None
) -> list[PinnedURL]:
    """Check a URL as ``validate_url`` does and return one target per checked address.

    For callers that send their own requests (webhook deliveries). Raises BlockedURL when
    the URL may not be reached, FetchError (retryable) when its host does not resolve now.
    """
    access = intranet or _CLOSED
    target = _parse_url(url, access)
    try:
        async with asyncio.timeout(_RESOLVE_TIMEOUT_S):
            addresses = await _checked_addresses(target, resolver or _system_resolver, access)
    except TimeoutError as exc:
        raise FetchError(f"the host {target.host} could not be resolved in time", retryable=True) from exc
    sni = target.host if target.scheme == "https" and target.literal is None else None
    return [
        PinnedURL(target.url.copy_with(host=str(address)), target.url.netloc.decode("ascii"), sni)
        for address in addresses
    ]


class Fetcher:
    """Fetches pages over one long-lived httpx client; close it with ``aclose``.

    ``transport`` is for tests. A real transport passed in should also keep no idle
    connections (``httpx.Limits(max_keepalive_connections=0)``), for the reason noted
    where the client is built.
    """

    def __init__(
        self,
        *,
        resolver: Resolver | None = None,
        max_bytes: int = 10_000_000,
        timeout_s: float = 15.0,
        max_redirects: int = 3,
        allowed_types: frozenset[str] = DEFAULT_ALLOWED_TYPES,
        user_agent: str = "voice-knowledge-fetcher/1.0",
        intranet: IntranetAccess | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._resolver = resolver or _system_resolver
        self._intranet = intranet or _CLOSED
        self._max_bytes = max_bytes
        self._timeout_s = timeout_s
        self._max_redirects = max_redirects
        self._allowed_types = allowed_types
        self._client = httpx.AsyncClient(
            transport=transport,
            # Redirects are followed by hand so every hop is checked before connecting.
            follow_redirects=False,
            # Environment proxies would connect by name, undoing the address check, and
            # .netrc would attach credentials to arbitrary hosts.
            trust_env=False,
            timeout=httpx.Timeout(timeout_s),
            # Pooled connections are keyed by IP address only: a connection whose
            # certificate was checked for one hostname must not carry another's request.
            limits=httpx.Limits(max_keepalive_connections=0),
            headers={
                "User-Agent": user_agent,
                "Accept": ", ".join(sorted(allowed_types)),
                "Accept-Encoding": _ACCEPT_ENCODING,
            },
        )

    async def fetch(
        self, url: str, *, etag: str | None = None, last_modified: str | None = None
    ) -> FetchResult:
        """Fetch a page, following at most ``max_redirects`` redirects, within ``timeout_s`` overall.

        GitHub file pages are fetched as raw files. With ``etag``/``last_modified`` the
        request is conditional and an unchanged page comes back as status 304 with empty
        content (and an empty ``content_type``). Raises BlockedURL for a forbidden URL or
        redirect target, FetchError for everything else that goes wrong.
        """
        target = _parse_url(github_raw_url(url), self._intranet)
        headers: dict[str, str] = {}
        if etag:
            headers["If-None-Match"] = etag
        if last_modified:
            headers["If-Modified-Since"] = last_modified
        try:
            async with asyncio.timeout(self._timeout_s):
                return await self._follow(target, headers, etag, last_modified)
        except TimeoutError as exc:
            raise FetchError(f"the page did not load within {self._timeout_s:g} s", retryable=True) from exc

    async def aclose(self) -> None:
        """Close the underlying HTTP client."""
        await self._client.aclose()

    async def _follow(
        self, target: _Target, headers: dict[str, str], etag: str | None, last_modified: str | None
    ) -> FetchResult:
        redirects = 0
        while True:
            addresses = await _checked_addresses(target, self._resolver, self._intranet)
            try:
                try:
                    response = await self._send(target, addresses, headers)
                except (httpx.InvalidURL, ValueError) as exc:
                    # httpx reads a redirect's Location as it receives the answer, and a
                    # Location no URL can be made of (mailto:, a bad IDNA name) raises there.
                    raise BlockedURL(NOT_A_WEB_ADDRESS) from exc
                except httpx.RemoteProtocolError as exc:
                    # Or, for some (a tab, an octet over 255), it says so as a protocol error:
                    # the address is wrong, not the network, and trying again will not help.
                    if str(exc).startswith(_BAD_LOCATION):
                        raise BlockedURL(NOT_A_WEB_ADDRESS) from exc
                    raise
                try:
                    location = _redirect_location(response)
                    if location is None:
                        return await self._result(target, response, etag, last_modified)
                finally:
                    await response.aclose()
            except httpx.HTTPError as exc:
                raise _network_error(target.host, exc) from exc
            if redirects >= self._max_redirects:
                raise FetchError(f"too many redirects (more than {self._max_redirects})")
            redirects += 1
            try:
                following = urljoin(str(target.url), location)
            except ValueError as exc:  # "http://a]b/": an IPv6 bracket that never closes
                raise BlockedURL(NOT_A_WEB_ADDRESS) from exc
            target = _parse_url(following, self._intranet)

    async def _send(
        self, target: _Target, addresses: list[_Address], headers: dict[str, str]
    ) -> httpx.Response:
        # Every address has passed the check, so when one does not accept the connection
        # the next may be tried; nothing was sent to the failed one.
        for address in addresses[:-1]:
            try:
                return await self._send_to(target, address, headers)
            except (httpx.ConnectError, httpx.ConnectTimeout):
                continue
        return await self._send_to(target, addresses[-1], headers)

    async def _send_to(self, target: _Target, address: _Address, headers: dict[str, str]) -> httpx.Response:
        extensions: dict[str, str] = {}
        if target.scheme == "https" and target.literal is None:
            # The TLS server name and the certificate check use the hostname, not the IP.
            extensions["sni_hostname"] = target.host
        request = self._client.build_request(
            "GET",
            target.url.copy_with(host=str(address)),
            headers={**headers, "Host": target.url.netloc.decode("ascii")},
            extensions=extensions,
        )
        return await self._client.send(request, stream=True)

    async def _result(
        self, target: _Target, response: httpx.Response, etag: str | None, last_modified: str | None
    ) -> FetchResult:
        if response.status_code == 304:
            return FetchResult(
                url=str(target.url),
                status=304,
                content=b"",
                content_type="",
                charset=None,
                etag=_validator(response, "etag") or etag,
                last_modified=_validator(response, "last-modified") or last_modified,
            )
        media_type, charset = _parse_content_type(response.headers.get("content-type", ""))
        if media_type not in self._allowed_types:
            raise UnsupportedContentType(f"the content type {media_type or '(none)'} is not supported")
        decoder = _decoder_for(response.headers.get("content-encoding", ""))
        declared = response.headers.get("content-length", "")
        if declared.isascii() and declared.isdigit() and int(declared) > self._max_bytes:
            raise self._too_large()
        return FetchResult(
            url=str(target.url),
            status=response.status_code,
            content=await self._read_body(response, decoder),
            content_type=media_type,
            charset=charset,
            etag=_validator(response, "etag"),
            last_modified=_validator(response, "last-modified"),
        )

    async def _read_body(self, response: httpx.Response, decoder: _Decoder) -> bytes:
        body = bytearray()
        try:
            async for chunk in response.aiter_raw():
                for piece in decoder.decode(chunk):
                    body += piece
                    if len(body) > self._max_bytes:
                        raise self._too_large()
            for piece in decoder.flush():
                body += piece
                if len(body) > self._max_bytes:
                    raise self._too_large()
        except (zlib.error, brotli.error) as exc:
            raise FetchError("the page could not be decompressed") from exc
        except _CutOff as exc:
            raise FetchError("the page was cut off before its end", retryable=True) from exc
        return bytes(body)

    def _too_large(self) -> FetchError:
        return FetchError(f"the page is larger than {_format_size(self._max_bytes)}")


# --- URL parsing and address policy ---------------------------------------------------------


def _parse_url(url: str, intranet: IntranetAccess) -> _Target:
    if len(url) > MAX_URL_LENGTH:
        raise BlockedURL(f"the URL is longer than {MAX_URL_LENGTH} characters")
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise BlockedURL(f"the URL is not valid ({exc})") from exc
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        if not scheme:
            raise BlockedURL("the URL must start with http:// or https://")
        raise BlockedURL(f"the scheme {scheme} is not allowed (only http and https)")
    if "@" in parts.netloc:
        raise BlockedURL("the URL must not contain a user name or password")
    if not parts.hostname:
        raise BlockedURL("the URL has no host")
    default_port = _DEFAULT_PORTS[scheme]
    host, literal = _normalise_host(parts.hostname)
    url_host = f"[{host}]" if ":" in host else host
    if port is None or port == default_port:
        port, netloc = default_port, url_host
    elif (host, port) in intranet.ports:
        netloc = f"{url_host}:{port}"
    else:
        raise BlockedURL(
            f"the port {port} is not allowed (only {default_port} for {scheme}; "
            f"INGESTION__ALLOWED_HOSTS can allow {url_host}:{port})"
        )
    query = f"?{parts.query}" if parts.query else ""
    try:
        normalised = httpx.URL(f"{scheme}://{netloc}{parts.path or '/'}{query}")
    except httpx.InvalidURL as exc:
        raise BlockedURL(f"the URL is not valid ({exc})") from exc
    # The request is built by httpx: it must see exactly the host that was checked.
    if normalised.raw_host.decode("ascii") != host:
        raise BlockedURL("the URL is not valid (ambiguous host)")
    return _Target(url=normalised, scheme=scheme, host=host, port=port, literal=literal)


def _normalise_host(hostname: str) -> tuple[str, _Address | None]:
    """Return the ASCII host and, when it is an IP address in any spelling, that address."""
    if ":" in hostname:
        if "%" in hostname:
            raise BlockedURL("the URL is not valid (IPv6 zone index)")
        try:
            address = IPv6Address(hostname)
        except ValueError as exc:
            raise BlockedURL(f"the host {hostname} is not a valid IPv6 address") from exc
        return str(address), address
    if not hostname.isascii():
        try:
            # UTS 46 also maps look-alikes such as full-width digits, so the numeric
            # check below sees "１２７.０.０.１" as the 127.0.0.1 it resolves to.
            hostname = idna.encode(hostname, uts46=True).decode("ascii")
        except idna.IDNAError as exc:
            raise BlockedURL(f"the host {hostname} is not a valid name") from exc
    host = hostname.lower().removesuffix(".")
    labels = host.split(".")
    # As in browsers (WHATWG URL): a host whose last label is a number is an IPv4 address
    # or invalid, never a name to hand to the resolver.
    if _NUMERIC_LABEL.fullmatch(labels[-1]):
        address4 = _parse_ipv4(labels)
        if address4 is None:
            raise BlockedURL(f"the host {hostname} is not a valid IPv4 address")
        return str(address4), address4
    if len(host) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        raise BlockedURL(f"the host {hostname} is not a valid name")
    return host, None


def _parse_ipv4(parts: list[str]) -> IPv4Address | None:
    """Parse an IPv4 address the way inet_aton does: 1 to 4 parts, each hex, octal or decimal."""
    if len(parts) > 4 or not all(_IPV4_PART.fullmatch(part) for part in parts):
        return None
    values: list[int] = []
    for part in parts:
        if part[:2].lower() == "0x":
            values.append(int(part[2:] or "0", 16))
        elif part.startswith("0"):
            values.append(int(part, 8))
        else:
            values.append(int(part))
    *head, last = values
    # The last part fills the bytes the others left: 127.1 is 127.0.0.1.
    if any(value > 255 for value in head) or last >= 256 ** (4 - len(head)):
        return None
    number = last
    for index, value in enumerate(head):
        number += value << (8 * (3 - index))
    return IPv4Address(number)


def _host_reason(host: str) -> str | None:
    if any(host == suffix or host.endswith(f".{suffix}") for suffix in _LOCAL_SUFFIXES):
        return "local name"
    if "." not in host:
        return "a name without a dot is local"
    return None


def _address_reason(address: _Address) -> str | None:
    """Why an address must not be contacted, or None for a public one."""
    if isinstance(address, IPv4Address):
        return next((reason for network, reason in _BLOCKED_V4 if address in network), None)
    if address in _IPV4_MAPPED or address in _NAT64:
        embedded = IPv4Address(int(address) & 0xFFFFFFFF)
        reason = _address_reason(embedded)
        return None if reason is None else f"{reason}, embedded {embedded}"
    reason = next((reason for network, reason in _BLOCKED_V6 if address in network), None)
    if reason is None and address not in _GLOBAL_UNICAST_V6:
        return "not a global unicast address"
    return reason


def _refusal(address: _Address, intranet: IntranetAccess, *, host_allowed: bool) -> str | None:
    """Why the operator's settings leave an address closed, or None when it may be contacted."""
    reason = _address_reason(address)
    if reason is None:
        return None
    # A mapped or NAT64 address reaches its embedded IPv4 address: that one is judged.
    reached: _Address = address
    if isinstance(address, IPv6Address) and (address in _IPV4_MAPPED or address in _NAT64):
        reached = IPv4Address(int(address) & 0xFFFFFFFF)
    protected = next((network for network in _PROTECTED if reached in network), None)
    for network in intranet.networks:
        if reached in network and (protected is None or _within(network, protected)):
            return None
    if protected is not None:
        return reason
    return None if host_allowed else f"{reason}; {_HOSTS_HINT}"


def _within(inner: _Network, outer: _Network) -> bool:
    return (
        inner.version == outer.version
        and int(outer.network_address) <= int(inner.network_address)
        and int(inner.broadcast_address) <= int(outer.broadcast_address)
    )


async def _checked_addresses(target: _Target, resolver: Resolver, intranet: IntranetAccess) -> list[_Address]:
    """Resolve the target's host once and return its addresses, all of them checked."""
    host_allowed = target.host in intranet.hosts
    if target.literal is not None:
        reason = _refusal(target.literal, intranet, host_allowed=host_allowed)
        if reason is not None:
            raise BlockedURL(f"the address {target.literal} is not allowed ({reason})")
        return [target.literal]
    reason = None if host_allowed else _host_reason(target.host)
    if reason is not None:
        # localhost names the service's own machine: no setting of hosts opens that.
        hint = "" if reason == "local name" and target.host.endswith("localhost") else f"; {_HOSTS_HINT}"
        raise BlockedURL(f"the host {target.host} is not allowed ({reason}{hint})")
    try:
        answers = await resolver(target.host, target.port)
    except OSError as exc:
        raise FetchError(f"the host {target.host} could not be resolved", retryable=True) from exc
    addresses: list[_Address] = []
    for answer in dict.fromkeys(answers):
        try:
            # A scope suffix (fe80::1%eth0) only occurs on link-local addresses, blocked anyway.
            address = ip_address(answer.partition("%")[0])
        except ValueError as exc:
            raise BlockedURL(f"the host {target.host} resolves to an invalid address {answer!r}") from exc
        # One bad answer blocks the host: DNS rebinding mixes public and private answers.
        reason = _refusal(address, intranet, host_allowed=host_allowed)
        if reason is not None:
            raise BlockedURL(f"the host {target.host} resolves to {address}, which is not allowed ({reason})")
        addresses.append(address)
    if not addresses:
        raise FetchError(f"the host {target.host} has no addresses", retryable=True)
    return addresses


async def _system_resolver(host: str, port: int) -> list[str]:
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    return [str(info[4][0]) for info in infos]


# --- responses ------------------------------------------------------------------------------


def _redirect_location(response: httpx.Response) -> str | None:
    """Return the Location of a redirect, None for a final answer; raise for an error status."""
    status = response.status_code
    if status >= 400:
        retryable = status == 429 or status >= 500
        raise FetchError(f"the server answered HTTP {status}", retryable=retryable, status=status)
    if status in _REDIRECT_STATUSES:
        location: str | None = response.headers.get("location")
        if not location:
            raise FetchError(f"the server answered HTTP {status} without a Location")
        return location
    if 300 <= status < 400 and status != 304:
        raise FetchError(f"the server answered HTTP {status}")
    return None


def _parse_content_type(value: str) -> tuple[str, str | None]:
    media_type, _, parameters = value.partition(";")
    charset = None
    for parameter in parameters.split(";"):
        name, _, raw = parameter.partition("=")
        if name.strip().lower() == "charset":
            charset = raw.strip().strip('"').lower() or None
    return media_type.strip().lower(), charset


def _network_error(host: str, exc: httpx.HTTPError) -> FetchError:
    if _is_certificate_error(exc):
        return FetchError(f"the TLS certificate of {host} could not be verified")
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
        return FetchError(f"could not connect to {host}", retryable=True)
    if isinstance(exc, httpx.TimeoutException):
        return FetchError(f"{host} did not answer in time", retryable=True)
    return FetchError(f"the connection to {host} failed ({type(exc).__name__})", retryable=True)


def _is_certificate_error(exc: BaseException) -> bool:
    cause: BaseException | None = exc
    for _ in range(8):  # the chain is short (httpx <- httpcore <- ssl); the bound avoids cycles
        if cause is None:
            return False
        if isinstance(cause, ssl.SSLCertVerificationError):
            return True
        cause = cause.__cause__ or cause.__context__
    return False


def _format_size(size: int) -> str:
    if size >= 1_000_000:
        return f"{size / 1_000_000:g} MB"
    if size >= 1_000:
        return f"{size / 1_000:g} kB"
    return f"{size} bytes"


# --- bounded decoding -----------------------------------------------------------------------


class _CutOff(Exception):
    """The compressed body ended before its compressed stream did."""


class _Decoder(Protocol):
    def decode(self, data: bytes) -> Iterator[bytes]: ...

    def flush(self) -> Iterator[bytes]: ...


class _IdentityDecoder:
    def decode(self, data: bytes) -> Iterator[bytes]:
        yield data

    def flush(self) -> Iterator[bytes]:
        yield from ()


class _ZlibDecoder:
    """gzip or deflate, never more than _DECODE_STEP bytes of output per step. A gzip body may
    hold several members, one after another (RFC 1952, 2.2): each is read, as browsers do;
    zero padding and anything else after the last one are ignored."""

    def __init__(self, *, gzip: bool) -> None:
        self._gzip = gzip
        self._first = True
        # None between two gzip members.
        self._inflate: zlib._Decompress | None = zlib.decompressobj(
            16 + zlib.MAX_WBITS if gzip else zlib.MAX_WBITS
        )
        self._between = b""  # bytes after a finished member, too few yet to tell what follows
        self._trailing = False  # what follows the last member is not gzip: ignored

    def decode(self, data: bytes) -> Iterator[bytes]:
        while not self._trailing:
            inflate = self._inflate
            if inflate is None:
                data = self._next_member(data)
                if not data:
                    return
                inflate = self._inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
            yield from self._inflate_steps(inflate, data)
            # (A raw-deflate fallback may replace the inflater; gzip keeps this one.)
            if not (self._gzip and inflate.eof):
                return
            self._between, self._inflate, data = inflate.unused_data, None, b""

    def _inflate_steps(self, inflate: zlib._Decompress, data: bytes) -> Iterator[bytes]:
        try:
            out = inflate.decompress(data, _DECODE_STEP)
        except zlib.error:
            # "deflate" is sent both zlib-wrapped (as specified) and raw (as some servers do).
            if self._gzip or not self._first:
                raise
            inflate = self._inflate = zlib.decompressobj(-zlib.MAX_WBITS)
            out = inflate.decompress(data, _DECODE_STEP)
        self._first = False
        yield out
        # A full step may leave output pending inside zlib even with no input left over.
        # Once the stream (a gzip member) has ended, what is left is the next member's, and
        # zlib would only move it into unused_data, step after empty step.
        while not inflate.eof and (inflate.unconsumed_tail or len(out) == _DECODE_STEP):
            out = inflate.decompress(inflate.unconsumed_tail, _DECODE_STEP)
            if not out and not inflate.unconsumed_tail:
                return
            yield out

    def _next_member(self, data: bytes) -> bytes:
        """The input from the next member's first byte on, once it is known to start one;
        b"" while that is not known yet, or when what follows is not a member."""
        rest = (self._between + data).lstrip(b"\0")
        if len(rest) < len(_GZIP_MAGIC):
            self._between = rest
            return b""
        self._between = b""
        if not rest.startswith(_GZIP_MAGIC):
            self._trailing = True
            return b""
        return rest

    def flush(self) -> Iterator[bytes]:
        if self._inflate is None:
            return
        yield self._inflate.flush()
        if not self._first and not self._inflate.eof:
            raise _CutOff


class _BrotliDecoder:
    """Brotli with brotli>=1.2's output limit; without the limit one call may expand without bound."""

    def __init__(self) -> None:
        self._decompressor = brotli.Decompressor()
        self._received = False

    def decode(self, data: bytes) -> Iterator[bytes]:
        self._received = self._received or bool(data)
        yield self._decompressor.process(data, output_buffer_limit=_DECODE_STEP)
        while not self._decompressor.can_accept_more_data():
            yield self._decompressor.process(b"", output_buffer_limit=_DECODE_STEP)

    def flush(self) -> Iterator[bytes]:
        # can_accept_more_data() may turn true with output still buffered: drain it here.
        while not self._decompressor.is_finished():
            out: bytes = self._decompressor.process(b"", output_buffer_limit=_DECODE_STEP)
            if not out:
                break
            yield out
        if self._received and not self._decompressor.is_finished():
            raise _CutOff


def _brotli_is_bounded() -> bool:
    try:
        brotli.Decompressor().process(b"", output_buffer_limit=1)
    except TypeError:  # brotli < 1.2 has no output limit
        return False
    return True


_BROTLI = _brotli_is_bounded()
_ACCEPT_ENCODING = "gzip, deflate, br" if _BROTLI else "gzip, deflate"


def _decoder_for(content_encoding: str) -> _Decoder:
    codings = [coding.strip().lower() for coding in content_encoding.split(",")]
    codings = [coding for coding in codings if coding not in {"", "identity"}]
    if not codings:
        return _IdentityDecoder()
    # Stacked codings multiply the expansion ratio and no real server needs them.
    if len(codings) > 1:
        raise FetchError(f"the content encoding {content_encoding.strip()} is not supported")
    coding = codings[0]
    if coding in {"gzip", "x-gzip"}:
        return _ZlibDecoder(gzip=True)
    if coding == "deflate":
        return _ZlibDecoder(gzip=False)
    if coding == "br" and _BROTLI:
        return _BrotliDecoder()
    raise FetchError(f"the content encoding {coding} is not supported")
