"""Intranet sources the operator opened (INGESTION__ALLOWED_HOSTS / INGESTION__ALLOWED_NETWORKS).

Every refused case proves that no request left the process; every allowed one asserts
the address, port and Host header the request was sent with.
"""

from __future__ import annotations

from ipaddress import ip_network

import pytest
import respx
from pydantic import ValidationError

from app.config import IngestionSettings, Settings
from app.ingestion.fetch import BlockedURL, Fetcher, IntranetAccess, check_url, validate_url
from app.main import create_app
from tests.ingestion.test_fetch import PUBLIC_V4, FakeResolver

pytestmark = pytest.mark.respx(assert_all_called=False)

WIKI = "10.20.1.5"
TEXT = {"Content-Type": "text/plain"}
HINT = "INGESTION__ALLOWED_HOSTS can allow this host"


@pytest.fixture
def resolver() -> FakeResolver:
    return FakeResolver(
        {
            "example.com": [PUBLIC_V4],
            "wiki.corp": [WIKI],
            "docs.corp": [WIKI],
            "other.corp": [WIKI],
            "outside.corp": ["10.30.0.7"],
            "meta.corp": ["169.254.169.254"],
            "meta6.corp": ["fd00:ec2::254"],
            "self.corp": ["127.0.0.1"],
        }
    )


@pytest.fixture
def trap(respx_mock: respx.MockRouter) -> respx.Route:
    """Matches any request at all (and first): only refused cases use it, to prove none was sent."""
    return respx_mock.route()


async def fetch_refused(resolver: FakeResolver, url: str, intranet: IntranetAccess | None) -> str:
    fetcher = Fetcher(resolver=resolver, intranet=intranet)
    try:
        with pytest.raises(BlockedURL) as caught:
            await fetcher.fetch(url)
    finally:
        await fetcher.aclose()
    return str(caught.value)


# --- off by default -------------------------------------------------------------------------


def test_settings_open_nothing_by_default() -> None:
    settings = IngestionSettings()
    assert (settings.allowed_hosts, settings.allowed_networks) == ((), ())
    assert settings.intranet == IntranetAccess()


@pytest.mark.parametrize(
    ("url", "message"),
    [
        (
            "https://wiki.corp/page",
            f"the host wiki.corp resolves to {WIKI}, which is not allowed (private network; {HINT})",
        ),
        (
            "http://docs.corp:8443/page",
            "the port 8443 is not allowed (only 80 for http; INGESTION__ALLOWED_HOSTS can allow docs.corp:8443)",
        ),
        ("http://wiki.internal/", f"the host wiki.internal is not allowed (local name; {HINT})"),
    ],
)
async def test_intranet_urls_are_refused_by_default(
    resolver: FakeResolver, respx_mock: respx.MockRouter, trap: respx.Route, url: str, message: str
) -> None:
    assert await fetch_refused(resolver, url, None) == message
    with pytest.raises(BlockedURL) as caught:
        await validate_url(url, resolver=resolver)
    assert str(caught.value) == message
    assert trap.called is False
    assert respx_mock.calls.call_count == 0


# --- allowed hosts --------------------------------------------------------------------------


async def test_allowed_host_with_private_address_and_its_port_is_fetched(
    resolver: FakeResolver, respx_mock: respx.MockRouter
) -> None:
    route = respx_mock.get(f"https://{WIKI}:8443/kb/page").respond(200, text="wiki", headers=TEXT)
    intranet = IntranetAccess.parse(hosts=["docs.corp:8443"])
    await validate_url("https://docs.corp:8443/kb/page", resolver=resolver, intranet=intranet)
    fetcher = Fetcher(resolver=resolver, intranet=intranet)
    result = await fetcher.fetch("https://Docs.Corp.:8443/kb/page")
    await fetcher.aclose()
    assert (result.url, result.status, result.content) == ("https://docs.corp:8443/kb/page", 200, b"wiki")
    request = route.calls.last.request
    assert str(request.url) == f"https://{WIKI}:8443/kb/page"
    assert request.headers["Host"] == "docs.corp:8443"
    assert request.extensions["sni_hostname"] == "docs.corp"
    assert resolver.calls == [("docs.corp", 8443), ("docs.corp", 8443)]
    assert respx_mock.calls.call_count == 1


async def test_allowed_host_without_port_keeps_to_80_and_443(
    resolver: FakeResolver, respx_mock: respx.MockRouter
) -> None:
    intranet = IntranetAccess.parse(hosts=["wiki.internal", "wiki.corp"])
    route = respx_mock.get(f"http://{WIKI}/").respond(200, text="home", headers=TEXT)
    resolver.table["wiki.internal"] = [WIKI]
    fetcher = Fetcher(resolver=resolver, intranet=intranet)
    result = await fetcher.fetch("http://wiki.internal/")
    await fetcher.aclose()
    assert (result.content, route.calls.last.request.headers["Host"]) == (b"home", "wiki.internal")
    message = await fetch_refused(resolver, "https://wiki.corp:8443/", intranet)
    assert message == (
        "the port 8443 is not allowed (only 443 for https; INGESTION__ALLOWED_HOSTS can allow wiki.corp:8443)"
    )
    assert route.call_count == 1


async def test_other_host_on_the_same_private_address_is_still_refused(
    resolver: FakeResolver, respx_mock: respx.MockRouter, trap: respx.Route
) -> None:
    intranet = IntranetAccess.parse(hosts=["docs.corp:8443"])
    assert await fetch_refused(resolver, "https://other.corp/", intranet) == (
        f"the host other.corp resolves to {WIKI}, which is not allowed (private network; {HINT})"
    )
    # The port belongs to the host it was named with.
    assert await fetch_refused(resolver, "https://other.corp:8443/", intranet) == (
        "the port 8443 is not allowed (only 443 for https; INGESTION__ALLOWED_HOSTS can allow other.corp:8443)"
    )
    assert respx_mock.calls.call_count == 0


@pytest.mark.parametrize(
    ("host", "message"),
    [
        ("meta.corp", "resolves to 169.254.169.254, which is not allowed (link-local, cloud metadata)"),
        ("meta6.corp", "resolves to fd00:ec2::254, which is not allowed (unique local, private network)"),
        ("self.corp", "resolves to 127.0.0.1, which is not allowed (loopback)"),
    ],
)
async def test_allowed_host_never_opens_loopback_or_metadata(
    resolver: FakeResolver, respx_mock: respx.MockRouter, trap: respx.Route, host: str, message: str
) -> None:
    intranet = IntranetAccess.parse(hosts=[host])
    assert await fetch_refused(resolver, f"http://{host}/", intranet) == f"the host {host} {message}"
    assert respx_mock.calls.call_count == 0


# --- allowed networks -----------------------------------------------------------------------


async def test_allowed_network_opens_its_addresses_only(
    resolver: FakeResolver, respx_mock: respx.MockRouter
) -> None:
    intranet = IntranetAccess.parse(networks=["10.20.0.0/16"])
    route = respx_mock.get(f"https://{WIKI}/page").respond(200, text="in", headers=TEXT)
    fetcher = Fetcher(resolver=resolver, intranet=intranet)
    result = await fetcher.fetch("https://other.corp/page")
    literal = respx_mock.get("http://10.20.9.9/").respond(200, text="literal", headers=TEXT)
    by_address = await fetcher.fetch("http://10.20.9.9/")
    await fetcher.aclose()
    assert (result.content, route.calls.last.request.headers["Host"]) == (b"in", "other.corp")
    assert (by_address.content, literal.call_count) == (b"literal", 1)
    assert await fetch_refused(resolver, "https://outside.corp/page", intranet) == (
        f"the host outside.corp resolves to 10.30.0.7, which is not allowed (private network; {HINT})"
    )
    assert respx_mock.calls.call_count == 2


@pytest.mark.parametrize(
    ("networks", "url", "message"),
    [
        (
            ["0.0.0.0/0", "::/0"],
            "http://169.254.169.254/latest/meta-data/",
            "the address 169.254.169.254 is not allowed (link-local, cloud metadata)",
        ),
        (
            ["169.254.0.0/16"],
            "http://169.254.169.254/latest/meta-data/",
            "the address 169.254.169.254 is not allowed (link-local, cloud metadata)",
        ),
        (
            ["169.0.0.0/8"],
            "http://meta.corp/",
            "the host meta.corp resolves to 169.254.169.254, which is not allowed (link-local, cloud metadata)",
        ),
        (
            ["fd00::/8"],
            "http://meta6.corp/",
            "the host meta6.corp resolves to fd00:ec2::254, which is not allowed (unique local, private network)",
        ),
        (
            ["0.0.0.0/0"],
            "http://[::ffff:169.254.169.254]/",
            "the address ::ffff:a9fe:a9fe is not allowed (link-local, cloud metadata, embedded 169.254.169.254)",
        ),
        (
            ["0.0.0.0/0"],
            "http://self.corp/",
            "the host self.corp resolves to 127.0.0.1, which is not allowed (loopback)",
        ),
    ],
)
async def test_broad_network_does_not_open_loopback_or_metadata(
    resolver: FakeResolver,
    respx_mock: respx.MockRouter,
    trap: respx.Route,
    networks: list[str],
    url: str,
    message: str,
) -> None:
    intranet = IntranetAccess.parse(networks=networks)
    assert await fetch_refused(resolver, url, intranet) == message
    assert respx_mock.calls.call_count == 0


async def test_network_inside_a_protected_range_opens_it(
    resolver: FakeResolver, respx_mock: respx.MockRouter
) -> None:
    # What the crawl benchmark does for its site on loopback.
    intranet = IntranetAccess.parse(hosts=["127.0.0.1:8765"], networks=["127.0.0.1/32"])
    route = respx_mock.get("http://127.0.0.1:8765/sitemap.xml").respond(200, text="map", headers=TEXT)
    fetcher = Fetcher(resolver=resolver, intranet=intranet)
    result = await fetcher.fetch("http://127.0.0.1:8765/sitemap.xml")
    await fetcher.aclose()
    assert (result.content, route.call_count) == (b"map", 1)
    assert resolver.calls == []


# --- redirects ------------------------------------------------------------------------------


async def test_redirect_to_an_internal_host_not_allowed_is_refused(
    resolver: FakeResolver, respx_mock: respx.MockRouter
) -> None:
    first = respx_mock.get(f"https://{PUBLIC_V4}/start").respond(
        302, headers={"Location": "https://other.corp/secret"}
    )
    inside = respx_mock.get(f"https://{WIKI}/secret").respond(200, text="secret", headers=TEXT)
    intranet = IntranetAccess.parse(hosts=["wiki.corp"])
    assert await fetch_refused(resolver, "https://example.com/start", intranet) == (
        f"the host other.corp resolves to {WIKI}, which is not allowed (private network; {HINT})"
    )
    assert (first.call_count, inside.called) == (1, False)
    assert respx_mock.calls.call_count == 1


async def test_redirect_to_an_allowed_host_and_port_is_followed(
    resolver: FakeResolver, respx_mock: respx.MockRouter
) -> None:
    respx_mock.get(f"https://{PUBLIC_V4}/start").respond(
        302, headers={"Location": "https://docs.corp:8443/kb"}
    )
    inside = respx_mock.get(f"https://{WIKI}:8443/kb").respond(200, text="kb", headers=TEXT)
    fetcher = Fetcher(resolver=resolver, intranet=IntranetAccess.parse(hosts=["docs.corp:8443"]))
    result = await fetcher.fetch("https://example.com/start")
    await fetcher.aclose()
    assert (result.url, result.content) == ("https://docs.corp:8443/kb", b"kb")
    assert inside.calls.last.request.headers["Host"] == "docs.corp:8443"


# --- settings -------------------------------------------------------------------------------


def test_settings_read_comma_separated_entries_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INGESTION__ALLOWED_HOSTS", " wiki.corp, Docs.Corp.:8443,[fd00::5]:8080 ")
    monkeypatch.setenv("INGESTION__ALLOWED_NETWORKS", "10.20.0.0/16,fd00:1::/64")
    intranet = Settings(_env_file=None).ingestion.intranet  # type: ignore[call-arg]
    assert intranet == IntranetAccess(
        hosts=frozenset({"wiki.corp", "docs.corp", "fd00::5"}),
        ports=frozenset({("docs.corp", 8443), ("fd00::5", 8080)}),
        networks=(ip_network("10.20.0.0/16"), ip_network("fd00:1::/64")),
    )
    assert check_url("http://[fd00::5]:8080/x", intranet=intranet) == ("http", "fd00::5", 8080)


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        (
            "INGESTION__ALLOWED_NETWORKS",
            "10.20.0.0/33",
            "'10.20.0.0/33' is not a network such as 10.20.0.0/16 "
            "('10.20.0.0/33' does not appear to be an IPv4 or IPv6 network)",
        ),
        (
            "INGESTION__ALLOWED_NETWORKS",
            "10.20.1.0/16",
            "'10.20.1.0/16' is not a network such as 10.20.0.0/16 (10.20.1.0/16 has host bits set)",
        ),
        (
            "INGESTION__ALLOWED_HOSTS",
            "docs.corp:99999",
            "'docs.corp:99999' is not a host or host:port (Port out of range 0-65535)",
        ),
        (
            "INGESTION__ALLOWED_HOSTS",
            "docs.corp:http",
            "'docs.corp:http' is not a host or host:port (Port could not be cast to integer value as 'http')",
        ),
        (
            "INGESTION__ALLOWED_HOSTS",
            "docs.corp:0",
            "'docs.corp:0' is not a host or host:port (the port must be 1 to 65535)",
        ),
        (
            "INGESTION__ALLOWED_HOSTS",
            "http://docs.corp/",
            "'http://docs.corp/' is not a host or host:port "
            "(expected a host name or address, optionally with :port)",
        ),
    ],
)
def test_invalid_setting_fails_at_start_with_the_entry_named(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, message: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValidationError) as caught:
        Settings(_env_file=None)  # type: ignore[call-arg]
    errors = caught.value.errors()
    field = variable.removeprefix("INGESTION__").lower()
    assert [(error["loc"], error["msg"]) for error in errors] == [
        (("ingestion", field), f"Value error, {message}")
    ]


async def test_app_checks_url_sources_with_the_operator_setting() -> None:
    database_url = "postgresql://unused/unused"  # the lifespan does not run: nothing connects
    resolver = FakeResolver({"docs.corp": [WIKI]})
    opened_settings = Settings(_env_file=None, ingestion=IngestionSettings(allowed_hosts=("docs.corp:8443",)))  # type: ignore[call-arg]
    closed_settings = Settings(_env_file=None)  # type: ignore[call-arg]
    opened = create_app(opened_settings, database_url=database_url, resolver=resolver, run_workers=False)
    closed = create_app(closed_settings, database_url=database_url, resolver=resolver, run_workers=False)
    await opened.state.validate_url("https://docs.corp:8443/kb")
    with pytest.raises(BlockedURL) as caught:
        await closed.state.validate_url("https://docs.corp/kb")
    assert (
        str(caught.value)
        == f"the host docs.corp resolves to {WIKI}, which is not allowed (private network; {HINT})"
    )
    assert resolver.calls == [("docs.corp", 8443), ("docs.corp", 443)]
