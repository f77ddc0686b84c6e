"""What belongs to a crawled site, and what its pages, sitemaps and robots.txt say.

Pure functions: no I/O here, so each rule is tested on its own. The runner fetches, these
decide.
"""

from __future__ import annotations

import fnmatch
import io
import re
import urllib.robotparser
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit
from xml.etree.ElementTree import Element

import lxml.etree
import lxml.html

# defusedxml ships no type stubs (and the project adds no stub packages).
from defusedxml import ElementTree  # type: ignore[import-untyped]
from defusedxml.common import DefusedXmlException  # type: ignore[import-untyped]

from app.ingestion.extract_model import ExtractionError
from app.ingestion.extract_plain import decode_text
from app.ingestion.fetch import BlockedURL, IntranetAccess, check_url

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
SITEMAP_TYPES = frozenset({"application/xml", "text/xml"})
ROBOTS_TYPES = frozenset({"text/plain"})
CRAWL_TYPES = HTML_TYPES | SITEMAP_TYPES | ROBOTS_TYPES
# The token a robots.txt group names to address this crawler.
ROBOTS_AGENT = "voice-knowledge-fetcher"
MAX_TITLE = 300
# Links read from one page, at most: a page of 450,000 links took a minute of the worker's
# CPU to resolve, for a run that uses a few hundred. Beyond this, a page is a link farm.
MAX_LINKS_PER_PAGE = 10_000
_SPACES = re.compile(r"\s+")
_MAX_SITEMAP_DEPTH = 8  # <urlset><url><image:image><image:loc> is 4
_RATE_LINE = re.compile(r"\s*(?:crawl-delay|request-rate)\s*:", re.IGNORECASE)


def normalise_url(url: str, *, base: str | None = None, intranet: IntranetAccess | None = None) -> str | None:
    """The canonical form of a link, or None when it cannot be a page of a site.

    Resolved against ``base``; scheme and host lower case (IDNA), default port dropped, the
    fragment dropped, an empty path made ``/``. Only http(s) URLs the fetcher would accept
    (``check_url``) come back; addresses are checked when the page is fetched.
    """
    try:
        absolute = urljoin(base, url.strip()) if base else url.strip()
        parts = urlsplit(absolute)
        scheme, host, port = check_url(absolute, intranet=intranet)
    except (ValueError, BlockedURL):
        return None
    netloc = f"[{host}]" if ":" in host else host
    if port != (443 if scheme == "https" else 80):
        netloc = f"{netloc}:{port}"
    return urlunsplit((scheme, netloc, parts.path or "/", parts.query, ""))


def site_key(url: str) -> tuple[str, int]:
    """The site a URL belongs to: its host without a leading ``www.``, and its port.

    http and https of one host are one site (sites move to https and link both ways);
    ``www.example.com`` and ``example.com`` are one site. Other subdomains are other
    sites: without the public suffix list, ``a.co.uk`` and ``b.co.uk`` cannot be told
    apart from ``a.example.com`` and ``b.example.com``.
    """
    parts = urlsplit(url)
    host = (parts.hostname or "").removeprefix("www.")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    # One site over both schemes: the default ports count as one.
    return host, 0 if port in (80, 443) else port


def same_site(url: str, start_url: str) -> bool:
    return site_key(url) == site_key(start_url)


@dataclass(frozen=True, slots=True)
class PathFilter:
    """Include/exclude glob patterns on a URL's path (the query is not matched).

    ``*`` matches any characters, ``/`` included; ``?`` one character; ``[abc]`` one of
    them; matching is case-sensitive, as paths are. No include patterns: every path is
    included. Exclude wins over include.
    """

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def allows(self, url: str) -> bool:
        path = urlsplit(url).path or "/"
        if any(fnmatch.fnmatchcase(path, pattern) for pattern in self.exclude):
            return False
        return not self.include or any(fnmatch.fnmatchcase(path, pattern) for pattern in self.include)


@dataclass(slots=True)
class ParsedPage:
    title: str | None
    links: list[str] = field(default_factory=list)
    nofollow: bool = False
    canonical: str | None = None  # its <link rel="canonical">, normalised


_INDEX_FILE = re.compile(r"/(?:index|default)\.(?:html?|php|aspx?)$", re.IGNORECASE)


def same_page_canonical(canonical: str | None, page_url: str) -> str | None:
    """The address a page names as its own (``rel="canonical"``) when it is this page at
    another address: on the same site, the same path up to a trailing slash or an index
    file, the query aside ("/prices?utm_source=mail" names "/prices"). A canonical naming
    another path is ignored: sites that name their home page on every page would otherwise
    lose all the others."""
    if canonical is None or canonical == page_url or not same_site(canonical, page_url):
        return None
    return canonical if _bare_path(canonical) == _bare_path(page_url) else None


def _bare_path(url: str) -> str:
    return _INDEX_FILE.sub("/", urlsplit(url).path or "/").rstrip("/")


def parse_page(
    content: bytes, charset: str | None, page_url: str, intranet: IntranetAccess | None
) -> ParsedPage:
    """The page's title and its links, normalised, in document order, each once, from its
    first MAX_LINKS_PER_PAGE links.

    libxml2's HTML parser reads it: linear in the page however it is broken (the standard
    library's html.parser takes seconds for 20 kB of ``<a <a <a``, hours for a megabyte), and
    it stops nesting at 256 levels. Text no charset makes readable gives no links.
    """
    try:
        text = decode_text(content, [charset])
        parser = lxml.html.HTMLParser(encoding="utf-8")  # one a call: lxml's parsers are not shared
        root = lxml.html.document_fromstring(text.encode("utf-8"), parser=parser)
    except (ExtractionError, lxml.etree.ParserError):  # unreadable, or no element at all
        return ParsedPage(title=None)
    title = next((_SPACES.sub(" ", node.text_content()).strip() for node in root.iter("title")), "")
    nofollow = any(_says_nofollow(meta) for meta in root.iter("meta"))
    base = next((node.get("href", "").strip() for node in root.iter("base") if node.get("href")), "")
    try:
        base = urljoin(page_url, base) if base else page_url
    except ValueError:  # a base no URL can be made of: links are read against the page
        base = page_url
    canonical = next(
        (
            normalise_url(node.get("href", ""), base=base, intranet=intranet)
            for node in root.iter("link")
            if "canonical" in node.get("rel", "").lower().split() and node.get("href")
        ),
        None,
    )
    links: dict[str, None] = {}
    if not nofollow:
        read = 0
        for node in root.iter("a", "area"):
            href = node.get("href")
            if href and "nofollow" not in node.get("rel", "").lower().split():
                read += 1
                if read > MAX_LINKS_PER_PAGE:
                    break
                link = normalise_url(href, base=base, intranet=intranet)
                if link is not None:
                    links[link] = None
    return ParsedPage(
        title=title[:MAX_TITLE] or None, links=list(links), nofollow=nofollow, canonical=canonical
    )


def _says_nofollow(meta: Any) -> bool:
    if meta.get("name", "").strip().lower() != "robots":
        return False
    directives = {directive.strip() for directive in meta.get("content", "").lower().split(",")}
    return bool(directives & {"nofollow", "none"})


@dataclass(slots=True)
class Sitemap:
    pages: list[str] = field(default_factory=list)
    sitemaps: list[str] = field(default_factory=list)  # a sitemap index names further sitemaps


class SitemapError(Exception):
    """The file is not a sitemap this crawler can read."""


def parse_sitemap(content: bytes, *, max_urls: int) -> Sitemap:
    """The ``<loc>`` entries of a sitemap (``urlset``) or sitemap index (``sitemapindex``).

    defusedxml refuses entity expansion and external entities, so a hostile file cannot
    grow in memory or reach other files; at most ``max_urls`` entries are taken. The file is
    read as it is parsed, each entry let go once read: a 10 MB sitemap of empty elements held
    200 MB as a whole tree.
    """
    kind = ""
    found: list[str] = []
    depth = 0  # the root is at 1, its entries at 2, an entry's <loc> at 3
    try:
        for event, element in ElementTree.iterparse(io.BytesIO(content), events=("start", "end")):
            if event == "start":
                depth += 1
                if depth == 1:
                    kind = _local(element.tag)
                    if kind not in ("urlset", "sitemapindex"):
                        raise SitemapError(f"the XML root is <{kind}>, not <urlset> or <sitemapindex>")
                    root = element
                elif depth > _MAX_SITEMAP_DEPTH:
                    raise SitemapError(f"the sitemap nests elements more than {_MAX_SITEMAP_DEPTH} deep")
                continue
            if depth == 3 and _local(element.tag) == "loc" and element.text and element.text.strip():
                found.append(element.text.strip())
                if len(found) >= max_urls:
                    break
            elif depth == 2:
                root.clear()  # the entries read so far
            depth -= 1
    except (ElementTree.ParseError, DefusedXmlException, ValueError, LookupError) as exc:
        # LookupError: an XML declaration naming an encoding no codec knows ("hex")
        raise SitemapError(f"the sitemap is not valid XML ({type(exc).__name__})") from exc
    return Sitemap(pages=found) if kind == "urlset" else Sitemap(sitemaps=found)


def _local(tag: str | Element) -> str:
    return str(tag).rsplit("}", 1)[-1]


def parse_robots(content: bytes) -> urllib.robotparser.RobotFileParser:
    """A robots.txt's rules. The standard library takes any Unicode digit in a Crawl-delay or
    Request-rate for a number ("Crawl-delay: ²") and then fails to read it, as it does a
    5,000-digit one: if it fails, those lines are dropped and the rest read again."""
    lines = content.decode("utf-8", errors="replace").splitlines()
    parser = urllib.robotparser.RobotFileParser()
    try:
        parser.parse(lines)
    except ValueError:
        parser = urllib.robotparser.RobotFileParser()
        parser.parse([line for line in lines if not _RATE_LINE.match(line)])
    return parser
