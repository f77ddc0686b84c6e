"""The crawl's pure rules: URL normalisation, what one site is, path patterns, links and
titles, sitemaps (hostile XML included)."""

from __future__ import annotations

import pytest

from app.crawl.site import (
    MAX_LINKS_PER_PAGE,
    ParsedPage,
    PathFilter,
    SitemapError,
    normalise_url,
    parse_page,
    parse_robots,
    parse_sitemap,
    same_page_canonical,
    same_site,
)
from app.ingestion.fetch import IntranetAccess


@pytest.mark.parametrize(
    ("link", "expected"),
    [
        ("HTTPS://Docs.Example.COM", "https://docs.example.com/"),
        ("https://docs.example.com:443/a#part", "https://docs.example.com/a"),
        ("http://docs.example.com:80/a?x=1", "http://docs.example.com/a?x=1"),
        ("../b/./c", "https://docs.example.com/b/c"),
        ("/x y", "https://docs.example.com/x y"),
        ("mailto:help@example.com", None),
        ("javascript:alert(1)", None),
        ("https://docs.example.com:8443/a", None),  # a port nobody allowed
        ("https://user:pw@docs.example.com/", None),
    ],
)
def test_links_are_normalised_against_the_page(link, expected):
    assert normalise_url(link, base="https://docs.example.com/guide/page") == expected


def test_an_allowed_port_is_kept():
    intranet = IntranetAccess.parse(["wiki.corp:8443"])
    assert normalise_url("https://wiki.corp:8443/a", intranet=intranet) == "https://wiki.corp:8443/a"


def test_one_site_is_one_host_with_or_without_www_over_either_scheme():
    start = "https://example.com/"
    assert same_site("http://www.example.com/a", start)
    assert not same_site("https://docs.example.com/a", start)
    assert not same_site("https://example.com.evil.org/a", start)
    assert not same_site("https://example.com:8443/a", start)


def test_patterns_match_the_path_and_exclude_wins():
    paths = PathFilter(include=("/docs/*", "/faq"), exclude=("*/internal/*",))
    assert paths.allows("https://e.com/docs/a/b?x=1")
    assert paths.allows("https://e.com/faq")
    assert not paths.allows("https://e.com/faq/more")
    assert not paths.allows("https://e.com/docs/internal/keys")
    assert not paths.allows("https://e.com/Docs/a")
    assert PathFilter().allows("https://e.com/anything")


def test_page_links_title_base_and_nofollow():
    html = (
        b"<html><head><title> Parking \n guide </title><base href='/base/'></head><body>"
        b"<a href='a'>a</a><a href='a#x'>again</a><a rel='nofollow' href='/secret'>no</a>"
        b"<area href='/map'><a href='tel:123'>call</a></body></html>"
    )
    page = parse_page(html, "utf-8", "https://e.com/dir/page", None)
    assert page.title == "Parking guide"
    assert page.links == ["https://e.com/base/a", "https://e.com/map"]
    robots = parse_page(
        b'<meta name="robots" content="noindex, nofollow"><a href="/x">x</a>', None, "https://e.com/", None
    )
    assert robots.links == []


def test_a_page_names_its_canonical_address():
    html = b'<html><head><link rel="Canonical" href="/prices#top"></head><body>Prices</body></html>'
    assert (
        parse_page(html, None, "https://e.com/prices?utm_source=mail", None).canonical
        == "https://e.com/prices"
    )
    assert parse_page(b"<p>No canonical</p>", None, "https://e.com/", None).canonical is None


@pytest.mark.parametrize(
    ("canonical", "page", "expected"),
    [
        ("https://e.com/prices", "https://e.com/prices?utm_source=mail", "https://e.com/prices"),
        ("https://www.e.com/prices/", "http://e.com/prices", "https://www.e.com/prices/"),
        ("https://e.com/help/", "https://e.com/help/index.html", "https://e.com/help/"),
        # Another path (a site naming its home page everywhere) or site: not this page.
        ("https://e.com/", "https://e.com/prices", None),
        ("https://other.com/prices", "https://e.com/prices?x=1", None),
        ("https://e.com/prices", "https://e.com/prices", None),
        (None, "https://e.com/prices", None),
    ],
)
def test_a_canonical_counts_only_for_the_same_page(canonical, page, expected):
    assert same_page_canonical(canonical, page) == expected


def test_a_page_gives_its_first_links_only():
    # The tel: link counts as read though it gives no page: the cap is on the work done.
    anchors = "".join(f"<a href='/p{i}'>{i}</a>" for i in range(MAX_LINKS_PER_PAGE + 50))
    page = parse_page(f"<a href='tel:1'>call</a>{anchors}".encode(), "utf-8", "https://e.com/", None)
    assert page.links == [f"https://e.com/p{i}" for i in range(MAX_LINKS_PER_PAGE - 1)]


@pytest.mark.parametrize(
    "html",
    [
        # html.parser's worst cases: 40 kB of "<a " took it 14 s, a megabyte about three hours.
        pytest.param(b"<a " * 300_000, id="unclosed-tags"),
        pytest.param(b"<!--" * 300_000, id="unclosed-comments"),
        pytest.param(b"</" * 300_000, id="bare-end-tags"),
        # Nested past libxml2's 256 levels: the parser stops, and the link is not reached.
        pytest.param(b"<div>" * 100_000 + b'<a href="/deep">deep</a>', id="deep-nesting"),
    ],
)
def test_broken_markup_gives_no_links(html):
    assert parse_page(html, "utf-8", "https://e.com/", None) == ParsedPage(title=None, links=[])


def test_a_base_no_url_can_be_made_of_is_ignored():
    page = parse_page(b'<base href="http://[::1"><a href="/x">x</a>', None, "https://e.com/dir/", None)
    assert page.links == ["https://e.com/x"]


@pytest.mark.parametrize("charset", ["idna", "undefined", "punycode", "hex", "ibm037"])
def test_a_charset_label_that_names_no_page_charset_is_ignored(charset):
    page = parse_page("<title>Café</title><a href='/menu'>x</a>".encode(), charset, "https://e.com/", None)
    assert (page.title, page.links) == ("Café", ["https://e.com/menu"])


def test_sitemaps_and_indexes_are_read_up_to_a_cap():
    urlset = (
        b'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        b"<url><loc> https://e.com/a </loc></url><url><loc>https://e.com/b</loc></url>"
        b"<url><loc>https://e.com/c</loc></url></urlset>"
    )
    assert parse_sitemap(urlset, max_urls=2).pages == ["https://e.com/a", "https://e.com/b"]
    index = b"<sitemapindex><sitemap><loc>https://e.com/s1.xml</loc></sitemap></sitemapindex>"
    parsed = parse_sitemap(index, max_urls=10)
    assert (parsed.pages, parsed.sitemaps) == ([], ["https://e.com/s1.xml"])


@pytest.mark.parametrize(
    ("xml", "reason"),
    [
        (
            b'<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;">]>'
            b"<urlset><url><loc>&b;</loc></url></urlset>",
            "the sitemap is not valid XML (EntitiesForbidden)",
        ),
        (
            b'<?xml version="1.0"?><!DOCTYPE l [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
            b"<urlset><url><loc>&x;</loc></url></urlset>",
            "the sitemap is not valid XML (EntitiesForbidden)",
        ),
        (
            b"<html><body>not a sitemap</body></html>",
            "the XML root is <html>, not <urlset> or <sitemapindex>",
        ),
        (b"<urlset><url>", "the sitemap is not valid XML (ParseError)"),
        (b'<?xml version="1.0" encoding="hex"?><urlset/>', "the sitemap is not valid XML (LookupError)"),
        (b"<urlset>" + b"<a>" * 1_000_000, "the sitemap nests elements more than 8 deep"),
    ],
)
def test_hostile_or_broken_sitemaps_are_refused(xml, reason):
    with pytest.raises(SitemapError) as caught:
        parse_sitemap(xml, max_urls=10)
    assert str(caught.value) == reason


@pytest.mark.parametrize(
    "rate", ["Crawl-delay: \u00b2", "Request-rate: \u00b2/1", "Crawl-delay: " + "9" * 5000]
)
def test_robots_rates_no_number_can_be_made_of_are_dropped(rate):
    robots = parse_robots(f"User-agent: *\n{rate}\nDisallow: /private\n".encode())
    assert (
        robots.can_fetch("any", "https://e.com/private/a"),
        robots.can_fetch("any", "https://e.com/a"),
    ) == (
        False,
        True,
    )
