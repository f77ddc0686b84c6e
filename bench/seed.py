"""A fast SQL seeder for a large, realistic-looking knowledge set, and the questions to ask it
(``bench.query``, ``bench.load``, ``bench.stream``, ``bench.console``).

Seeding by SQL (not through ingestion) is what makes 100,000 chunks affordable in a benchmark:

* rows are written exactly as ingestion writes them (``app/ingestion/repository.py``): one org,
  ``--kbs`` knowledge bases (``chunk_count`` kept by the chunks' triggers), ``ready``
  documents with their ``chunk_count``, one agent per knowledge base (``agent_assignments``), and chunks with
  ``embedding_model = openai:text-embedding-3-small:<dims>``, ``embedding_dim = <dims>`` and
  ``tsv = setweight(to_tsvector(title || ' ' || section), 'A') || to_tsvector(text)``;
* chunk texts are English sentences generated from word lists (a domain per knowledge base, a
  deterministic seed), or with ``corpus="squad"`` paragraphs of ../shared/eval/squad-dev's
  Wikipedia articles; vectors are unit-random of the configured dimension;
* chunks go through binary ``COPY`` into an unlogged staging table, then one ``INSERT ... SELECT``
  per half of the knowledge bases on two connections computes the tsvectors on both cores;
* the HNSW index ``ix_chunks_hnsw_<dims>`` is dropped before loading and built once afterwards
  (inserting 100k rows into HNSW one by one is far slower); the service finds it at start-up.

Run on its own, it seeds a fresh throw-away database and prints how long each step took::

    .venv/bin/python -m bench.seed --dims 512
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import itertools
import json
import random
import re
import struct
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import numpy as np

from app.evaluation.dataset import DatasetError, load_documents, load_questions
from app.query.repository import HNSW_INDEX_SQL
from bench.harness import (
    REPO_ROOT,
    BenchError,
    Harness,
    alter_system,
    pg_connect,
    service_env,
    stop_postgres,
    terminate_on_sigterm,
)
from bench.metering import CpuMeter, machine_info
from bench.report import now_iso

EMBEDDING_MODEL = "text-embedding-3-small"
NAMESPACE = uuid.UUID("5b3f0a52-8f0e-4a57-9a51-3c1f2d0b7e11")


def model_key(dims: int) -> str:
    return f"openai:{EMBEDDING_MODEL}:{dims}"


# ---------------------------------------------------------------------------------------------
# Text: a domain per knowledge base, sentences from word lists


@dataclass(frozen=True)
class Domain:
    name: str
    brand: tuple[str, ...]
    nouns: tuple[str, ...]
    adjectives: tuple[str, ...]
    verbs: tuple[str, ...]
    topics: tuple[str, ...]


def _w(text: str) -> tuple[str, ...]:
    return tuple(text.split())


DOMAINS: tuple[Domain, ...] = (
    Domain(
        "dental", _w("Brightsmile Dentaline Pearlcare"),
        _w("appointment cleaning filling crown implant hygienist dentist checkup x-ray brace aligner "
           "whitening extraction gum tooth retainer invoice insurer referral emergency anaesthetic "
           "denture veneer plaque cavity molar"),
        _w("routine painless urgent cosmetic annual gentle sensitive damaged loose"),
        _w("book cancel reschedule cover refer polish repair replace examine numb"),
        _w("Appointments Treatments Payments Insurance Emergencies Children"),
    ),
    Domain(
        "telecom", _w("Telvia Nordline Quickmobile"),
        _w("router modem contract tariff roaming sim signal outage bundle data allowance handset "
           "fibre broadband engineer installation voicemail number porting bill upgrade hotspot "
           "coverage mast antenna voucher"),
        _w("unlimited prepaid monthly mobile wireless faulty weak international unused"),
        _w("activate port restart upgrade cancel top-up connect install unlock renew"),
        _w("Coverage Billing Devices Roaming Broadband Contracts"),
    ),
    Domain(
        "insurance", _w("Safeharbor Everguard Keystone"),
        _w("policy claim premium excess deductible windscreen accident theft flood assessor "
           "renewal beneficiary certificate quote cover garage courtesy-car liability inspection "
           "broker valuation receipt photo witness report"),
        _w("comprehensive third-party annual optional pending approved rejected fraudulent"),
        _w("claim renew cancel assess settle insure report approve pay adjust"),
        _w("Claims Policies Renewals Payments Vehicles Homes"),
    ),
    Domain(
        "travel", _w("Skyreach Bluewing Meridian"),
        _w("flight booking baggage boarding gate seat upgrade layover passport visa check-in "
           "itinerary refund voucher delay lounge suitcase cabin crew terminal transfer "
           "reservation fare connection shuttle"),
        _w("delayed cancelled overbooked economy business oversized domestic connecting"),
        _w("board rebook refund upgrade check transfer reserve cancel depart land"),
        _w("Bookings Baggage Delays Refunds Lounges Visas"),
    ),
    Domain(
        "banking", _w("Northbank Civico Ledgerly"),
        _w("account card transfer overdraft mortgage loan interest statement branch cheque "
           "deposit withdrawal pin fraud limit standing-order savings isa fee mandate "
           "payee iban sort-code balance"),
        _w("joint current contactless frozen overdue fixed variable suspicious"),
        _w("transfer deposit withdraw freeze unblock open close verify borrow repay"),
        _w("Accounts Cards Loans Mortgages Fraud Savings"),
    ),
    Domain(
        "retail", _w("Homecraft Urbanmart Fernway"),
        _w("order parcel delivery courier return refund exchange receipt voucher warranty "
           "store stock size colour discount basket checkout collection locker invoice "
           "gift-card loyalty point promotion"),
        _w("damaged faulty missing late express standard seasonal refurbished"),
        _w("order return exchange collect deliver track refund redeem reserve ship"),
        _w("Orders Returns Delivery Stores Loyalty Warranty"),
    ),
    Domain(
        "software", _w("Cloudnest Taskly Formwise"),
        _w("licence subscription workspace seat invoice login password integration export "
           "backup migration plan trial admin permission api token webhook dashboard "
           "report outage status sso"),
        _w("annual enterprise expired locked inactive shared encrypted premium"),
        _w("upgrade downgrade export import reset invite revoke sync restore configure"),
        _w("Plans Security Integrations Billing Accounts Support"),
    ),
    Domain(
        "energy", _w("Greenvolt Heatwise Solaro"),
        _w("meter reading tariff direct-debit boiler smart-meter outage engineer supply "
           "solar panel battery heat-pump radiator thermostat bill credit deposit "
           "switch connection emergency leak"),
        _w("estimated fixed variable renewable faulty annual quarterly peak"),
        _w("read switch install repair submit connect disconnect service inspect credit"),
        _w("Meters Tariffs Billing Repairs Solar Moving"),
    ),
    Domain(
        "pharmacy", _w("Wellpoint Careway Medisun"),
        _w("prescription refill pharmacist dosage tablet vaccine consultation repeat "
           "doctor allergy label pack delivery exemption certificate inhaler ointment "
           "reminder appointment sample side-effect"),
        _w("repeat urgent generic controlled over-the-counter expired seasonal travel"),
        _w("refill collect deliver prescribe dispense vaccinate consult renew order remind"),
        _w("Prescriptions Vaccines Delivery Consultations Exemptions Travel"),
    ),
    Domain(
        "automotive", _w("Motorcare Autopoint Gearhouse"),
        _w("service inspection tyre brake oil battery warranty courtesy-car recall mot "
           "alignment exhaust clutch gearbox windscreen estimate invoice mechanic "
           "booking part diagnostic"),
        _w("annual worn faulty electric hybrid manual genuine extended"),
        _w("book inspect replace repair align diagnose collect deliver quote service"),
        _w("Servicing Repairs Tyres Recalls Warranty Bookings"),
    ),
)  # fmt: skip

_KINDS = _w("guide policy handbook FAQ overview procedure terms checklist")
_PLACES = (
    "in the app", "at the front desk", "by phone", "on our website", "in any branch",
    "by email", "through the customer portal", "at the service counter", "by post",
)  # fmt: skip
_TIMES = (
    "within {n} days", "after {n} hours", "before the end of the month", "every {n} weeks",
    "within {n} working days", "on the next business day", "at least {n} days in advance",
    "during the first {n} months", "before {h} am", "after {h} pm",
)  # fmt: skip
_DAYS = _w("Monday Tuesday Wednesday Thursday Friday Saturday Sunday")
_NAMES = _w("Alex Maria Sam Priya Jonas Fatima Lucas Emma Omar Chloe")
_SECTIONS = (
    "Before you start", "Eligibility", "How it works", "Costs and fees", "Time limits",
    "Exceptions", "What you need", "Step by step", "Common problems", "Contact options",
    "After you apply", "Frequently asked questions", "Special cases", "Opening hours",
)  # fmt: skip
_ADVERBS = _w("usually always normally immediately quickly automatically manually promptly")


def _a(word: str) -> str:
    return f"an {word}" if word[0] in "aeiou" else f"a {word}"


def _third(verb: str) -> str:
    if verb.endswith(("s", "sh", "ch", "x", "z")):
        return verb + "es"
    if verb.endswith("y") and verb[-2:-1] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def _plural(noun: str) -> str:
    if noun.endswith(("s", "sh", "ch", "x")):
        return noun + "es"
    if noun.endswith("y") and noun[-2:-1] not in "aeiou":
        return noun[:-1] + "ies"
    return noun + "s"


class TextMaker:
    """Sentences, chunks and titles for one knowledge base; same seed, same text."""

    def __init__(self, kb_index: int, seed: int) -> None:
        self.rng = random.Random(seed * 1_000_003 + kb_index)
        self.domain = DOMAINS[kb_index % len(DOMAINS)]
        self.brand = f"{self.domain.brand[kb_index % len(self.domain.brand)]} {kb_index}"

    def _time(self) -> str:
        r = self.rng
        return r.choice(_TIMES).format(n=r.randint(2, 60), h=r.randint(1, 11))

    def sentence(self) -> str:
        r, d = self.rng, self.domain
        n1, n2, n3 = r.choice(d.nouns), r.choice(d.nouns), r.choice(d.nouns)
        adj, verb = r.choice(d.adjectives), r.choice(d.verbs)
        form = r.randrange(12)
        if form == 0:
            return f"The {adj} {n1} {_third(verb)} the {n2} {self._time()}."
        if form == 1:
            return f"Customers who need to {verb} {_a(adj)} {n1} should contact us {r.choice(_PLACES)}."
        if form == 2:
            return f"If your {n1} is {adj}, we {r.choice(_ADVERBS)} {verb} the {n2} at no extra cost."
        if form == 3:
            return f"Our {n1} team handles about {r.randint(5, 900)} {_plural(n2)} every week."
        if form == 4:
            return (
                f"{self.brand} offers {_a(adj)} {n1} for {r.randint(3, 400)}.{r.randint(0, 99):02d} euros "
                f"per {r.choice(('month', 'year', 'visit', 'order'))}."
            )
        if form == 5:
            return f"You can {verb} your {n1} {r.choice(_PLACES)}, {self._time()}."
        if form == 6:
            return f"Please bring your {n1} and {_a(n2)} to every {n3} appointment."
        if form == 7:
            return f"{_a(adj).capitalize()} {n1} is required before we can {verb} the {n2}."
        if form == 8:
            return f"Most {_plural(n1)} are handled {self._time()}, except {adj} {_plural(n2)}."
        if form == 9:
            d1 = r.randrange(5)
            return (
                f"The {n1} desk is open {_DAYS[d1]} to {_DAYS[d1 + r.randint(1, 2)]}, "
                f"{r.randint(7, 10)} am to {r.randint(4, 8)} pm, except on public holidays."
            )
        if form == 10:
            return (
                f"The fee for {_a(adj)} {n1} is {r.randint(5, 250)} euros, and {_plural(n2)} are "
                f"refunded {self._time()}."
            )
        return f"Ask for {r.choice(_NAMES)} at the {n1} counter if the {n2} does not {verb}."

    def title(self, doc_index: int) -> str:
        r = self.rng
        return f"{self.brand} {r.choice(self.domain.topics).lower()} {r.choice(_KINDS)} {doc_index + 1}"

    def chunk(self) -> tuple[str, str]:
        """``(section, text)``: one heading and 10 to 22 sentences (about 150 to 350 words)."""
        r = self.rng
        section = r.choice(_SECTIONS)
        return section, " ".join(self.sentence() for _ in range(r.randint(10, 22)))


_STOP = frozenset(
    _w(
        """a about above after again all also am an and any are as at be because been before being
    below between both but by can could did do does doing down during each every except few for
    from further had has have having her here him his how i if in into is it its just me more
    most my no nor not now of off on once only or other our out over own per same she should so
    some such than that the their them then there these they this those through to too under
    until up very was we were what when where which while who whom why will with would you your
    euros extra cost need please team week month year visit order desk public holidays open
    required handled refunded offers customers contact bring ask counter"""
    )
)
_WORD = re.compile(r"[a-z][a-z'-]{3,}")


def content_words(text: str) -> list[str]:
    """Distinct words of ``text`` worth asking about (no stop words, at least four letters)."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(text.lower()):
        if word not in _STOP:
            seen.setdefault(word, None)
    return list(seen)


_QUESTIONS = (
    "What about the {0} {1} and the {2}?",
    "How does the {0} {1} work with the {2}?",
    "Can you tell me about the {0} {1} for {2}?",
    "Where can I find the {0} {1} {2}?",
    "When do I get the {0} {1} for my {2}?",
    "Is the {0} {1} {2} included?",
    "What happens to the {0} {1} if the {2} is {3}?",
    "Do you {0} the {1} {2} {3}?",
)


_LEAD_INS = ("Tell me,", "I'd like to know,", "Quick question,", "Could you tell me,")


class QuestionMaker:
    """Distinct questions for agents, built from words of their own chunks, so full-text search
    finds the chunk and the question is never a cache hit (unless repeated on purpose). Given
    ``questions`` (the squad corpus, whose KBs all draw on the same articles), it asks those
    instead, each text once."""

    def __init__(
        self, material: dict[str, list[list[str]]], seed: int, questions: Sequence[str] | None = None
    ) -> None:
        self.material = {agent: [w for w in words if len(w) >= 3] for agent, words in material.items()}
        self.agents = sorted(self.material)
        self.rng = random.Random(seed)
        self.questions = list(questions or [])
        self.rng.shuffle(self.questions)
        self.asked = 0
        self.seen: set[tuple[str, str]] = set()

    def one(self, agent: str | None = None) -> tuple[str, str]:
        r = self.rng
        for _ in range(1000):
            who = agent or r.choice(self.agents)
            if self.questions:
                return who, self._next_real_question()
            words = r.choice(self.material[who])
            template = r.choice(_QUESTIONS)
            needed = 4 if "{3}" in template else 3
            if len(words) < needed:
                continue
            question = template.format(*r.sample(words, needed))
            key = (who, question.lower())
            if key not in self.seen:
                self.seen.add(key)
                return who, question
        raise BenchError("could not make a new distinct question; seed more chunk material")

    @classmethod
    def of(cls, seeded: SeedResult, seed: int) -> QuestionMaker:
        """Questions for a seeded database, from its corpus."""
        return cls(seeded.material, seed, seeded.questions)

    def many(self, count: int) -> list[tuple[str, str]]:
        return [self.one() for _ in range(count)]

    def _next_real_question(self) -> str:
        """Each question text once, whatever the agent: the service caches a question's
        embedding by its text, and a repeat would skip the provider call. Past the last one,
        the pool comes round again behind a spoken lead-in, a new text."""
        lap, index = divmod(self.asked, len(self.questions))
        self.asked += 1
        question = self.questions[index]
        if lap == 0:
            return question
        return f"{_LEAD_INS[(lap - 1) % len(_LEAD_INS)]} {question[0].lower()}{question[1:]}"


# ---------------------------------------------------------------------------------------------
# Seeding


@dataclass
class SeedConfig:
    kbs: int = 100
    chunks_per_kb: int = 1000
    docs_per_kb: int = 20
    dims: int = 512
    seed: int = 20250101
    material_chunks: int = 64  # chunks per agent whose words questions are made from
    build_index: bool = True  # False: leave the HNSW index to the service's start-up (or to nobody)
    # "synthetic": generated pages (a few hundred words per domain, BM25's near-worst case);
    # "squad": Wikipedia paragraphs and real questions of ../shared/eval/squad-dev.
    corpus: str = "synthetic"


@dataclass
class SeedResult:
    org_id: str
    kb_ids: list[str]
    agent_ids: list[str]
    material: dict[str, list[list[str]]]  # agent id -> content words of some of its chunks
    questions: list[str] | None = None  # the squad corpus: real questions, asked of any agent
    timings_s: dict[str, float] = field(default_factory=dict)
    sizes: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        return {
            "org_id": self.org_id,
            "kbs": len(self.kb_ids),
            "agents": len(self.agent_ids),
            "timings_s": self.timings_s,
            "sizes": self.sizes,
        }


STAGE_SQL = """
CREATE UNLOGGED TABLE IF NOT EXISTS bench_chunk_stage (
    kb_id uuid NOT NULL, document_id uuid NOT NULL, ordinal integer NOT NULL, title text NOT NULL,
    section text, text text NOT NULL, token_count integer NOT NULL, embedding vector NOT NULL
)"""

# Same columns and tsv expression as app/ingestion/repository.py INSERT_CHUNKS_SQL.
MOVE_SQL = """
INSERT INTO chunks (org_id, kb_id, document_id, ordinal, text, section, page, token_count,
                    embedding_model, embedding_dim, embedding, tsv)
SELECT $1, s.kb_id, s.document_id, s.ordinal, s.text, s.section, NULL, s.token_count, $2, $3, s.embedding,
       setweight(to_tsvector('english', coalesce(s.title, '') || ' ' || coalesce(s.section, '')), 'A')
       || to_tsvector('english', s.text)
FROM bench_chunk_stage s
WHERE s.kb_id = ANY($4::uuid[])
"""


SQUAD_DIR = REPO_ROOT.parent / "shared" / "eval" / "squad-dev"


@dataclass(frozen=True)
class SquadCorpus:
    """The 20 Wikipedia articles of squad-dev as chunk texts, and its 6,814 questions (answerable
    and not). A chunk is one paragraph or two consecutive ones of an article (about 130 or 260
    words, as the synthetic chunks), so there are about 1,400 distinct chunks to draw a KB from."""

    chunks: list[tuple[str, str]]  # (section: the article's title, text)
    questions: list[str]

    @classmethod
    def load(cls, folder: Path = SQUAD_DIR) -> SquadCorpus:
        try:
            questions = load_questions(folder / "questions.jsonl")
            documents = load_documents(folder / "docs", questions)
        except (DatasetError, OSError) as exc:
            raise BenchError(f"--corpus squad needs ../shared/eval/squad-dev: {exc}") from exc
        chunks: list[tuple[str, str]] = []
        for document in documents.values():
            paragraphs = document.paragraphs
            chunks += [(document.title, p) for p in paragraphs]
            chunks += [(document.title, f"{a}\n\n{b}") for a, b in itertools.pairwise(paragraphs)]
        return cls(chunks, [q.question for q in questions])


def _ids(kind: str, seed: int, count: int) -> list[uuid.UUID]:
    return [uuid.uuid5(NAMESPACE, f"{kind}-{seed}-{i}") for i in range(count)]


def _vector_codec_binary(value: bytes) -> bytes:
    return value


async def _stage_kb(
    conn: asyncpg.Connection,
    cfg: SeedConfig,
    kb_index: int,
    kb_id: uuid.UUID,
    doc_ids: Sequence[uuid.UUID],
    squad: SquadCorpus | None = None,
) -> tuple[list[tuple[uuid.UUID, str, int, int]], list[list[str]], int]:
    """Generate and COPY one knowledge base's chunks; returns its documents, question material and
    text bytes. With ``squad``, the chunks are a sample of its paragraphs, different per KB."""
    maker = TextMaker(kb_index, cfg.seed)
    drawn: Iterator[tuple[str, str]] | None = None
    if squad is not None:
        if len(squad.chunks) < cfg.chunks_per_kb:
            raise BenchError(f"squad-dev has {len(squad.chunks)} chunks, fewer than --chunks-per-kb")
        drawn = iter(random.Random(cfg.seed * 7919 + kb_index).sample(squad.chunks, cfg.chunks_per_kb))
    per_doc = cfg.chunks_per_kb // cfg.docs_per_kb
    rng = np.random.default_rng([cfg.seed, kb_index])
    vectors = rng.standard_normal((cfg.chunks_per_kb, cfg.dims), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    big_endian = vectors.astype(">f4")
    header = struct.pack(">HH", cfg.dims, 0)  # pgvector's binary form: dim, unused, float4 * dim
    records: list[tuple[Any, ...]] = []
    documents: list[tuple[uuid.UUID, str, int, int]] = []
    material: list[list[str]] = []
    pick = set(random.Random(cfg.seed + kb_index).sample(range(cfg.chunks_per_kb), cfg.material_chunks))
    text_bytes = 0
    row = 0
    for d, doc_id in enumerate(doc_ids):
        title = maker.title(d)
        count = per_doc if d < len(doc_ids) - 1 else cfg.chunks_per_kb - per_doc * (len(doc_ids) - 1)
        size = 0
        for ordinal in range(count):
            section, text = maker.chunk() if drawn is None else next(drawn)
            size += len(text)
            tokens = int(len(text.split()) * 1.3)
            records.append(
                (kb_id, doc_id, ordinal, title, section, text, tokens, header + big_endian[row].tobytes())
            )
            if row in pick:
                material.append(content_words(f"{section} {text}"))
            row += 1
        documents.append((doc_id, title, count, size))
        text_bytes += size
    await conn.copy_records_to_table(
        "bench_chunk_stage",
        records=records,
        columns=["kb_id", "document_id", "ordinal", "title", "section", "text", "token_count", "embedding"],
    )
    return documents, material, text_bytes


async def seed_database(pgdir: Path, cfg: SeedConfig, *, log: Any = print) -> SeedResult:
    """Fill the (migrated, org-bearing) database of ``pgdir``; builds the HNSW index at the end."""
    if cfg.chunks_per_kb % cfg.docs_per_kb:
        raise BenchError("--chunks-per-kb must be a multiple of --docs-per-kb")
    timings: dict[str, float] = {}
    t_all = time.perf_counter()
    conn = await pg_connect(pgdir)
    try:
        await conn.set_type_codec(
            "vector", schema="public", encoder=_vector_codec_binary, decoder=_vector_codec_binary,
            format="binary",
        )  # fmt: skip
        orgs = await conn.fetch("SELECT id FROM organisations")
        if len(orgs) != 1:
            raise BenchError(f"expected exactly one organisation (vk create-org), found {len(orgs)}")
        org_id: uuid.UUID = orgs[0]["id"]
        index = f"ix_chunks_hnsw_{cfg.dims}"
        await conn.execute(f"DROP INDEX IF EXISTS {index}")

        kb_ids = _ids("kb", cfg.seed, cfg.kbs)
        agent_ids = _ids("agent", cfg.seed, cfg.kbs)
        await conn.executemany(
            "INSERT INTO knowledge_bases (id, org_id, title, description, language, content_version, "
            "chunk_count, created_at, updated_at) VALUES ($1, $2, $3, $4, 'english', 1, 0, now(), now())",
            # chunk_count starts at 0: the chunks' triggers (migration 0009) count them in.
            [
                (kb, org_id, f"{TextMaker(i, cfg.seed).brand} knowledge", "seeded by bench.seed")
                for i, kb in enumerate(kb_ids)
            ],
        )  # fmt: skip
        await conn.executemany(
            "INSERT INTO agent_assignments (kb_id, agent_id, org_id) VALUES ($1, $2, $3)",
            [(kb, agent, org_id) for kb, agent in zip(kb_ids, agent_ids, strict=True)],
        )

        # 1. Generate and COPY into the staging table.
        t = time.perf_counter()
        await conn.execute(STAGE_SQL)
        await conn.execute("TRUNCATE bench_chunk_stage")
        material: dict[str, list[list[str]]] = {}
        squad = SquadCorpus.load() if cfg.corpus == "squad" else None
        doc_rows: list[tuple[Any, ...]] = []
        text_bytes = 0
        for i, kb in enumerate(kb_ids):
            doc_ids = _ids(f"doc-{i}", cfg.seed, cfg.docs_per_kb)
            documents, words, size = await _stage_kb(conn, cfg, i, kb, doc_ids, squad)
            material[str(agent_ids[i])] = words
            text_bytes += size
            for n, (doc_id, title, count, doc_size) in enumerate(documents):
                digest = hashlib.sha256(f"{doc_id}".encode()).hexdigest()
                doc_rows.append((doc_id, org_id, kb, title, count, digest, doc_size, n % 2 == 0))
            if (i + 1) % 20 == 0:
                log(f"  staged {i + 1}/{cfg.kbs} knowledge bases ({time.perf_counter() - t:.1f} s)")
        timings["generate_and_copy"] = round(time.perf_counter() - t, 2)

        t = time.perf_counter()
        await conn.executemany(
            "INSERT INTO documents (id, org_id, kb_id, title, source_kind, status, chunk_count, "
            "content_hash, size_bytes, progress_done, progress_total, attempts, created_at, updated_at, "
            "indexed_at, tags, attributes) VALUES ($1, $2, $3, $4, 'markdown', 'ready', $5, $6, $7, $5, $5, "
            "1, now(), now(), now(), CASE WHEN $8 THEN '{faq}' ELSE '{policy}' END::text[], "
            "jsonb_build_object('locale', CASE WHEN $8 THEN 'en-GB' ELSE 'en-US' END))",
            doc_rows,
        )
        timings["documents"] = round(time.perf_counter() - t, 2)

        # 2. Staging -> chunks on two connections (to_tsvector is the CPU-heavy part).
        t = time.perf_counter()
        halves = [kb_ids[0::2], kb_ids[1::2]]

        async def move(part: list[uuid.UUID]) -> None:
            other = await pg_connect(pgdir)
            try:
                await other.execute(MOVE_SQL, org_id, model_key(cfg.dims), cfg.dims, part)
            finally:
                await other.close()

        await asyncio.gather(*(move(part) for part in halves if part))
        await conn.execute("DROP TABLE bench_chunk_stage")
        timings["insert_chunks_with_tsv"] = round(time.perf_counter() - t, 2)

        t = time.perf_counter()
        await conn.execute("VACUUM (ANALYZE) chunks")
        # As autovacuum would after a bulk insert: sets the visibility map for index-only scans.
        await conn.execute("VACUUM (ANALYZE) chunk_terms")
        await conn.execute("ANALYZE documents")
        await conn.execute("ANALYZE knowledge_bases")
        await conn.execute("ANALYZE agent_assignments")
        timings["vacuum_analyze"] = round(time.perf_counter() - t, 2)
        timings["seed_total"] = round(time.perf_counter() - t_all, 2)

        # 3. The HNSW index, built once over everything (as app/query/indexes.py would at start-up).
        if cfg.build_index:
            log(f"  building {index} over {cfg.kbs * cfg.chunks_per_kb} vectors")
            t = time.perf_counter()
            await conn.execute("SET maintenance_work_mem = '2GB'")
            await conn.execute("SET max_parallel_maintenance_workers = 1")  # leader + 1 worker = 2 cores
            await conn.execute(HNSW_INDEX_SQL.format(dim=int(cfg.dims)))
            timings["hnsw_build"] = round(time.perf_counter() - t, 2)

        sizes = await conn.fetchrow(
            "SELECT count(*) AS chunks, pg_total_relation_size('chunks') AS chunks_bytes, "
            f"coalesce(pg_relation_size(to_regclass('{index}')), 0) AS hnsw_bytes, "
            "current_setting('shared_buffers') AS shared_buffers, "
            "current_setting('server_version') AS postgresql, "
            "(SELECT extversion FROM pg_extension WHERE extname = 'vector') AS pgvector FROM chunks"
        )
        result_sizes = dict(sizes)
        result_sizes["chunk_text_mb"] = round(text_bytes / 1e6, 1)
        result_sizes["chunks_mb"] = round(result_sizes.pop("chunks_bytes") / 1e6, 1)
        result_sizes["hnsw_mb"] = round(result_sizes.pop("hnsw_bytes") / 1e6, 1)
    finally:
        await conn.close()
    return SeedResult(
        org_id=str(org_id),
        kb_ids=[str(k) for k in kb_ids],
        agent_ids=[str(a) for a in agent_ids],
        material=material,
        questions=squad.questions if squad is not None else None,
        timings_s=timings,
        sizes=result_sizes,
    )


def seeded_service(
    harness: Harness,
    cfg: SeedConfig,
    *,
    workers: int = 0,
    name: str = "benchmark",
    env_extra: dict[str, str] | None = None,
    pg_settings: dict[str, str] | None = None,
) -> tuple[SeedResult, str, str]:
    """create-org, seed, start the service; returns the seed, the service URL and the admin key."""
    if harness.stub is None:
        raise BenchError("start the stub first")
    env = service_env(harness.pgdir, harness.stub.base_url, dims=cfg.dims, workers=workers, extra=env_extra)
    t = time.perf_counter()
    admin_key = harness.create_org(env, name)
    create_s = round(time.perf_counter() - t, 2)
    print(f"seeding {cfg.kbs} KBs x {cfg.chunks_per_kb} chunks, {cfg.dims} dimensions", flush=True)
    seed = asyncio.run(seed_database(harness.pgdir, cfg))
    seed.timings_s["create_org_and_migrate"] = create_s
    if pg_settings:
        # ALTER SYSTEM, then stop: the service's pgserver start-up starts it again with them.
        asyncio.run(alter_system(harness.pgdir, pg_settings))
        stop_postgres(harness.pgdir)
    base, ready_s = harness.start_service(env)
    seed.timings_s["service_start"] = ready_s
    # What the running server uses (an ALTER SYSTEM above takes effect only after the restart).
    seed.sizes["shared_buffers"] = harness.fetchrow("SELECT current_setting('shared_buffers') AS s")["s"]
    print(
        f"seeded in {seed.timings_s['seed_total']} s, HNSW built in {seed.timings_s.get('hnsw_build')} s; "
        f"service ready in {ready_s} s on {base}",
        flush=True,
    )
    return seed, base, admin_key


def _main() -> int:
    parser = argparse.ArgumentParser(description="Seed a throw-away database and report the timings.")
    parser.add_argument("--kbs", type=int, default=100)
    parser.add_argument("--chunks-per-kb", type=int, default=1000)
    parser.add_argument("--dims", type=int, default=512)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    terminate_on_sigterm()
    harness = Harness.create("vk-seed-")
    try:
        harness.start_stub(dims=args.dims)
        assert harness.stub is not None
        env = service_env(harness.pgdir, harness.stub.base_url, dims=args.dims)
        harness.create_org(env, "seed")
        meter = CpuMeter(harness.pids()).start()
        result = asyncio.run(
            seed_database(
                harness.pgdir, SeedConfig(kbs=args.kbs, chunks_per_kb=args.chunks_per_kb, dims=args.dims)
            )
        )
        out = {**result.summary(), "load": meter.stop(), "machine": machine_info(), "date": now_iso()}
        print(json.dumps(out, indent=2))
        if args.json:
            args.json.write_text(json.dumps(out, indent=2) + "\n")
    finally:
        harness.close()
    return 0


if __name__ == "__main__":
    sys.exit(_main())
