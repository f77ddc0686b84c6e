"""Deterministic, realistic-looking markdown documents for benchmarks.

Each document reads like a page of a customer-service knowledge base: a title, an introduction,
several ``##`` sections (some with ``###`` subsections, bullet lists or a small table) and
paragraphs of grammatical sentences. Words, product names, numbers and section plans are drawn
from a seeded generator, so the same seed always gives the same corpus, and no two documents (nor
two chunks) share their text: the service's embedding cache, keyed on the chunk text, cannot turn
the benchmark into a cache benchmark.
"""

from __future__ import annotations

import random


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


_ADJECTIVES = _words(
    """
    annual automatic available basic certified current daily default digital eligible extended
    external final flexible free full general initial internal late local main manual monthly new
    official online optional original partial personal premium previous primary private public
    recent regular remote secure separate shared short special standard temporary total unused
    urgent valid weekly wireless written damaged faulty refurbished seasonal
    """
)
_NOUNS = _words(
    """
    account address agent appointment balance battery booking branch cable charge claim code
    contract customer delivery deposit device discount document driver email engineer fee form
    guarantee installation invoice item licence limit manager member message method network notice
    number offer order owner package parcel partner password payment period plan policy price
    printer product profile receipt record refund repair request reservation return router schedule
    screen service session setting shipment signature statement store subscription supplier ticket
    transfer update upgrade voucher warehouse warranty website window
    """
)
_VERBS = _words(
    """
    activates approves blocks cancels changes checks confirms covers creates delays deletes
    describes extends includes limits lists moves notifies processes protects receives records
    reduces renews replaces requires resets returns reviews schedules sends shows stores supports
    suspends tracks transfers updates validates verifies
    """
)
_ADVERBS = _words(
    """
    automatically usually always only normally immediately quickly securely manually once again
    directly separately promptly eventually
    """
)
_PLACES = (
    "in the app", "at the counter", "by phone", "on the website", "in any branch", "by email",
    "at checkout", "in the customer portal", "through the help line", "by post", "in the settings menu",
)  # fmt: skip
_TIMES = (
    "within {n} days", "after {n} hours", "before the end of the month", "every {n} weeks",
    "within {n} working days", "on the next business day", "at least {n} days in advance",
    "no later than {n} days after delivery", "during the first {n} months",
)  # fmt: skip
# Short phrases, kept several to a line.
_TOPICS = (
    "Returns", "Refunds", "Shipping", "Warranty", "Billing", "Installation", "Troubleshooting",
    "Account security", "Subscriptions", "Repairs", "Store opening hours", "Gift cards", "Privacy",
    "Delivery tracking", "Price matching", "Trade-in", "Spare parts", "Business customers",
)  # fmt: skip
_KINDS = ("policy", "guide", "FAQ", "terms", "overview", "checklist", "handbook", "procedure")
_SECTION_WORDS = (
    "Before you start", "Eligibility", "How it works", "Costs and fees", "Time limits", "Exceptions",
    "What you need", "Step by step", "Common problems", "Contact options", "After you apply",
    "Frequently asked questions", "Special cases", "Documents to keep", "Who to call",
)  # fmt: skip
_SYLLABLES = _words(
    """
    ka lo ve tri sun dor mi zen ar qua lux no pen ro tex
    """
)


def _product(rng: random.Random) -> str:
    name = "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize()
    return f"{name} {rng.randint(100, 9999)}"


def _time(rng: random.Random) -> str:
    return rng.choice(_TIMES).format(n=rng.randint(2, 90))


def _a(word: str) -> str:
    return f"an {word}" if word[0] in "aeiou" else f"a {word}"


def _sentence(rng: random.Random, product: str) -> str:
    a, n1, n2 = rng.choice(_ADJECTIVES), rng.choice(_NOUNS), rng.choice(_NOUNS)
    forms = (
        lambda: f"The {a} {n1} {rng.choice(_VERBS)} the {rng.choice(_ADJECTIVES)} {n2} {_time(rng)}.",
        lambda: f"Customers with {_a(a)} {n1} can request {_a(n2)} {rng.choice(_PLACES)}.",
        lambda: f"If the {n1} is {a}, our team {rng.choice(_ADVERBS)} {rng.choice(_VERBS)} your {n2}.",
        lambda: (
            f"For the {product}, the {n1} costs {rng.randint(1, 499)}.{rng.randint(0, 99):02d} euros "
            f"and {rng.choice(_VERBS)} {_a(a)} {n2}."
        ),
        lambda: f"Please keep the {a} {n1} until the {n2} {rng.choice(_VERBS)} your request.",
        lambda: f"About {rng.randint(2, 98)} percent of {n1} requests are handled {_time(rng)}.",
        lambda: f"You will receive {_a(a)} {n1} {rng.choice(_PLACES)} once the {n2} is confirmed.",
        lambda: (
            f"{_a(n1).capitalize()} that {rng.choice(_VERBS)} the {n2} must be {a} "
            f"and signed by the {rng.choice(_NOUNS)}."
        ),
        lambda: f"Does the {n1} cover {_a(a)} {n2}? Only when it is registered {_time(rng)}.",
    )
    return rng.choice(forms)()


def _paragraph(rng: random.Random, product: str) -> str:
    return " ".join(_sentence(rng, product) for _ in range(rng.randint(3, 7)))


def _block(rng: random.Random, product: str) -> str:
    roll = rng.random()
    if roll < 0.15:
        items = [_sentence(rng, product).rstrip(".") for _ in range(rng.randint(3, 6))]
        return "\n".join(f"- {item}" for item in items)
    if roll < 0.2:
        rows = [
            f"| {rng.choice(_NOUNS)} | {rng.randint(1, 120)} days | {rng.randint(0, 250)} EUR |"
            for _ in range(rng.randint(2, 4))
        ]
        return "\n".join(["| Item | Time limit | Fee |", "| --- | --- | --- |", *rows])
    return _paragraph(rng, product)


def make_document(rng: random.Random, index: int, target_bytes: int) -> tuple[str, str]:
    """One ``(title, markdown)`` of roughly ``target_bytes`` (±10 %)."""
    product = _product(rng)
    title = f"{rng.choice(_TOPICS)} {rng.choice(_KINDS)} for the {product} (#{index})"
    size = int(target_bytes * rng.uniform(0.9, 1.1))
    parts = [f"# {title}", _paragraph(rng, product)]
    length = sum(len(p) + 2 for p in parts)
    sections = rng.sample(_SECTION_WORDS, k=len(_SECTION_WORDS))
    while length < size:
        heading = sections.pop() if sections else f"Notes on the {rng.choice(_NOUNS)}"
        level = "###" if rng.random() < 0.25 else "##"
        parts.append(f"{level} {heading}")
        # Sections of very different lengths: short ones become one chunk, long ones are split,
        # as in real knowledge-base pages.
        for _ in range(rng.choice((1, 1, 2, 3, 4, 6))):
            parts.append(_block(rng, product))
        length = sum(len(p) + 2 for p in parts)
    text = "\n\n".join(parts)
    if len(text) > size * 1.1:
        # Trim the last paragraph at a sentence end rather than overshoot the size.
        cut = text.rfind(". ", 0, int(size * 1.05))
        text = text[: cut + 1] if cut > len(text) // 2 else text
    return title, text + "\n"


def make_corpus(count: int, *, target_bytes: int = 5000, seed: int = 20241121) -> list[tuple[str, str]]:
    """``count`` distinct ``(title, markdown)`` documents, the same for the same arguments."""
    rng = random.Random(seed)
    return [make_document(rng, index, target_bytes) for index in range(count)]


if __name__ == "__main__":
    corpus = make_corpus(3)
    print(corpus[0][1])
    sizes = [len(body.encode()) for _, body in make_corpus(1000)]
    print(f"1000 documents: {sum(sizes) / 1e6:.2f} MB, {min(sizes)}..{max(sizes)} bytes each")
