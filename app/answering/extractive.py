"""Offline answering: read out the sentences of the retrieved passages that best answer a question.

Used when no language model is available. It is a measured product mode, so it favours
answers that are short, in the passage's own words, and honest about how well they match:
`ExtractiveAnswer.support` lets the caller say "I don't know" rather than read out a
weakly related sentence.

Sentences are chosen by meaning when the offline embedder gives sentence vectors
(``Semantics``): the cosine of each sentence, and of its section heading, with the question
and with the part of it that asks (a caller's preamble left out), plus the lexical overlap
and whether the sentence holds the kind of fact asked for (a price, a time, a number). A
sentence that names the question's subject without the fact asked for ("Dr. Chen
specialises in root canals" for "how much is a root canal?") loses on the last count, and
an answer that holds the fact but not the subject, when the passages name the subject only
without it (a filling's price for "how much are implants?"), is flagged ``off_subject``.

The lexical overlap is cheap (it runs during a live call): question and sentences are
reduced to lower-case, lightly stemmed content words; each question word is weighted by an
IDF computed over the sentences at hand, so the word that singles out the answer counts
more than the words every passage shares. Without sentence vectors it decides alone.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import chain, pairwise

import numpy as np
import numpy.typing as npt

from app.answering.injection import looks_like_instructions
from app.answering.speech import (
    CLAUSE_NUMBER,
    NON_TERMINAL_ABBREVIATIONS,
    SHORT_DATE_NAMES,
    has_phone_number,
    implied_date_words,
    make_speakable,
)
from app.ingestion.extract_plain import LIST_MARKER_RE

__all__ = [
    "ExtractiveAnswer",
    "Passage",
    "Semantics",
    "asking_part",
    "extractive_answer",
    "passage_sentences",
    "split_sentences",
    "texts_to_embed",
    "wanted_fact",
]


@dataclass(frozen=True, slots=True)
class Passage:
    """A retrieved passage; passages are given best first."""

    text: str
    title: str | None
    score: float  # retrieval score, higher is better
    section: str | None = None


@dataclass(frozen=True, slots=True)
class Semantics:
    """Unit vectors from the offline sentence embedder.

    ``question`` holds one row per reading of the question (the service passes one: the whole
    turn blended with the part that asks); a sentence's cosine is its best over the rows.
    ``sentences`` maps a sentence, heading or title text to its vector; a text missing from
    it is scored on words alone.
    """

    question: npt.NDArray[np.float32]
    sentences: Mapping[str, npt.NDArray[np.float32]]


@dataclass(frozen=True, slots=True)
class ExtractiveAnswer:
    """Sentences chosen to answer a question, ready to be spoken."""

    text: str  # the chosen sentences in their original order, made speakable
    support: float  # 0..1, IDF-weighted share of the question's content words they cover
    passage_index: int  # the passage the first chosen sentence came from
    # How well the best sentence answers, on a raw scale (see _semantic_score); None when
    # no sentence vectors were given. The service turns it into the reply's confidence.
    match: float | None = None
    margin: float = 0.0  # how far the runner-up sentence's match is behind
    similarity: float = 0.0  # the best sentence's cosine with the question
    heading_similarity: float = 0.0  # its heading's cosine with the question
    # The kind of fact asked for: "price", "count", "duration", "phone", "number", "time" or None.
    wants: str | None = None
    has_wanted: bool = True  # whether the chosen sentences hold it
    # How far the best sentence's cosine stands above the mean of every sentence read: a
    # sentence that stands out answers more often than the best of a flat field (a
    # question the passages only brush against).
    spread: float = 0.0
    # Certainly about something else: a fact is asked (a price, a time...), the passages
    # name the question's subject, only in sentences without that fact, and the answer does
    # not name it: the knowledge base knows the subject but not its price (_off_subject).
    off_subject: bool = False
    # Every passage a chosen sentence came from, passage_index first (a runner-up may come
    # from another): the reply's sources list them first. Left out of equality: it follows
    # from the chosen sentences, as `text` does.
    passages: tuple[int, ...] = field(default=(), compare=False)


# English function words plus the words that frame a question rather than say what it is
# about ("what year", "how many", "is called").
_STOP_WORDS = frozenset(
    {
        "a", "about", "above", "after", "again", "against", "all", "also", "am", "an", "and", "any", "are",
        "aren't", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but",
        "by", "can", "can't", "cannot", "could", "couldn't", "did", "didn't", "do", "does", "doesn't",
        "doing", "don't", "down", "during", "each", "either", "else", "ever", "few", "for", "from",
        "further", "get", "gets", "got", "had", "hadn't", "has", "hasn't", "have", "haven't", "having",
        "he", "he'd", "he'll", "he's", "her", "here", "here's", "hers", "herself", "him", "himself", "his",
        "how", "how's", "however", "i", "i'd", "i'll", "i'm", "i've", "if", "in", "into", "is", "isn't",
        "it", "it's", "its", "itself", "just", "let's", "me", "might", "more", "most", "much",
        "must", "mustn't", "my", "myself", "no", "nor", "not", "of", "off", "on", "once", "only", "or",
        "other", "ought", "our", "ours", "ourselves", "out", "over", "own", "same", "shall", "shan't",
        "she", "she'd", "she'll", "she's", "should", "shouldn't", "so", "some", "such", "than", "that",
        "that's", "the", "their", "theirs", "them", "themselves", "then", "there", "there's", "these",
        "they", "they'd", "they'll", "they're", "they've", "this", "those", "through", "to", "too", "under",
        "until", "till", "til", "up", "upon", "us", "very", "was", "wasn't", "we", "we'd", "we'll",
        "we're", "we've", "were", "weren't", "what", "what's", "when", "when's", "where", "where's",
        "whether", "which",
        "while", "who", "who's", "whom", "whose", "why", "why's", "will", "with", "within", "without",
        "won't", "would", "wouldn't", "yes", "yet", "you", "you'd", "you'll", "you're", "you've", "your",
        "yours", "yourself", "yourselves", "tell", "know", "please", "many", "one", "ones", "thing",
        "things", "kind", "sort", "type", "name", "named", "called", "year", "years"
    }
)  # fmt: skip
_WORD_RE = re.compile(r"[^\W_]+(?:['’][^\W_]+)?")
_NUMBER_QUESTION_RE = re.compile(
    r"\b(?:when|how (?:many|much|long|old|far|often|tall|big|large|high|fast)"
    r"|(?:what|which) (?:year|date|day|month|time|age|percentage|number))\b",
    re.IGNORECASE,
)
_NAME_QUESTION_RE = re.compile(r"\b(?:who|whom|whose|where)\b", re.IGNORECASE)
_HAS_NUMBER_RE = re.compile(
    r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|hundred"
    r"|thousand|million|billion|january|february|march|april|june|july|august|september|october"
    r"|november|december|monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b",
    re.IGNORECASE,
)
_CAPITALISED_RE = re.compile(r"(?<=\s)[A-Z][a-zA-Z]+")

# Bonuses stay small next to the IDF-weighted overlap, which does the real work. Bigram and
# title bonuses are shares of the matched words' IDF; answer-type and rank bonuses are
# shares of the question's mean IDF. On 1,000 SQuAD dev questions (not the ones the test
# measures) moving any one of them between 0 and twice its value changed the answer rate
# by less than one point; they are here for the short, repetitive passages of real
# knowledge bases, where the overlap alone often ties.
_BIGRAM_WEIGHT = 0.25
_TITLE_WEIGHT = 0.25
_ANSWER_TYPE_WEIGHT = 0.4
_RANK_WEIGHT = 0.2
# Scoring by meaning (_semantic_score). Cosines of all-MiniLM-L6-v2 run from about 0.1
# (unrelated) to 0.8 (a paraphrase); a sentence without the fact asked for loses more than
# a paraphrase gains over a near miss.
_HEADING_WEIGHT = 0.35
_LEXICAL_WEIGHT = 0.25
_FACT_BONUS = 0.05
_FACT_PENALTY = 0.25
# A street address, for a question that asks where the business is: the same lead over a
# sentence without it as the fact asked for has. Given as a bonus, not through ``wants``:
# "where can I park?" may be answered without one ("in the lot behind the building").
_ADDRESS_BONUS = _FACT_BONUS + _FACT_PENALTY
_SEMANTIC_RANK_WEIGHT = 0.03
_ABSENT_WEIGHT = 0.5
_LEAD_SENTENCE_BONUS = 0.05
# A heading this close in meaning to the question is its subject: the question's words in it
# count for each sentence under it. A heading that only shares a broad word ("Boilers and
# heating" for "do you install heat pumps?", about 0.4) lends none. 0.5 to 0.7 gave the same
# answers on every question set (docs/BENCHMARKS.md, twenty-ninth session).
_SECTION_SUBJECT = 0.6
# A neighbour whose cosine with the question is within this of the best sentence's joins it,
# and a runner-up sentence scoring within the second margin of the best is read after it:
# a second sentence costs the caller a few seconds, a missed fact a call back. Measured on
# callers-dev and squad-dev (docs/BENCHMARKS.md, second pass): from 0.08 / 0.05, answers
# hold the gold 0.72 of the time instead of 0.70 (callers-dev, no gate), 29.6 words instead
# of 27.4 on average.
_NEIGHBOUR_MARGIN = 0.12
_RUNNER_UP_MARGIN = 0.08
# An FAQ answer's opening reply word ("Yes," "No.") is said only to a caller who asked the
# heading's own question. all-MiniLM-L6-v2 puts the heading's question in nearly its words
# at 0.93 or more ("is your practice accessible for wheelchairs?"), but another question on
# its subject, whose yes or no may differ, anywhere from 0.66 to 0.78 ("is there parking for
# disabled drivers?", "can I use a gift voucher for a delivery?"), where paraphrases of the
# same question also fall. Below this, the reply word goes and the fact after it is said.
# A reply with fewer words than this left ("we don't.") says nothing on its own.
_SAME_QUESTION = 0.9
_BARE_REPLY_WORDS = 4
_REPLY_WORD_RE = re.compile(
    r"^(?:A:\s*)?(?:(?:sorry|oh|ah|afraid),?\s+)?(?:yes|no|yep|yup|yeah|nope|nah)(?:\s+please)?(?:[,.!;:]|\s+[-–—])\s*",
    re.IGNORECASE,
)
# Words that say what kind of fact is asked for, not what it is about: their absence from a
# sentence is no sign that it is about something else (stems, as _stem gives them).
_FACT_WORDS = frozenset(
    {"cost", "pric", "fee", "charg", "rat", "hour", "tim", "open", "clos", "long", "day", "number", "phon"}
)
# A day asked about with opening hours is a time, which hours answer without naming it ("are
# you open on Saturdays?": "we are open Monday to Friday"): a sentence without it is not about
# something else. Asked otherwise ("is Dr. Rao in on Fridays?", "your hourly rate at
# weekends?") it stays a subject.
_OPENING_WORDS = frozenset({"open", "clos", "hour"})
_DAY_WORDS = frozenset(
    {"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "weekend", "weekday"}
    | {"today", "tonight", "tomorrow"}
)
# "per hour", "each": how a fact is counted, never what it is about.
_RATE_WORDS = frozenset({"per", "each", "a"})
# Stems sharing this many first letters, one extending the other, count as one word for the
# subject check ("botanic" and "botanical"; "office" and "officer" too, which only makes it
# more cautious).
_MIN_SHARED_STEM = 5
# An asking clause shorter than this ("how?") leans on the preamble: the whole turn is read.
_MIN_FOCUS_WORDS = 3
# ... as does one that points back at the preamble and says nothing of its own ("I've got
# an old fridge freezer, will you have it?", "I want to come Wednesday at eleven, is that
# ok?", "we want the upstairs for a leaving do, what does that cost?"): it asks about what
# the preamble names. "How does she get in?" names what it asks.
_POINTS_BACK_RE = re.compile(r"\b(?:it|that|this|them|those|these)\b", re.IGNORECASE)
_VAGUE_STEMS = frozenset(
    {"ok", "okay", "alright", "fin", "possibl", "allow", "do", "tak", "bring", "com", "turn", "leav", "put",
     "us", "go", "somewher", "anywher", "someth", "anyth", "someon", "anyon", "lot", "guy", "run", "owe"}
)  # fmt: skip
# Fillers are dropped only where a clause opens: inside one, "so", "like" or "well" mean
# something ("is it ok to...", "adults as well as children").
_LEADING_FILLERS_RE = re.compile(
    r"^(?:(?:um+|uh+|erm+|er|hmm+|ah+|oh|yeah|yep|hi|hello|hey|okay|ok|so|well|like|actually"
    r"|basically|you know|i mean|sorry|please|just wondering|i was wondering|quick question)\b[\s,.]*)+",
    re.IGNORECASE,
)
_CLAUSE_SPLIT_RE = re.compile(r"[.;!?,]\s+|\s+(?:and|but|so|because)\s+")
_QUESTION_OPENER_RE = re.compile(
    r"^(?:what|what's|whats|when|where|which|who|whom|whose|why|how|is|are|am|do|does|did|can|could|"
    r"will|would|should|shall|may|might|have|has|was|were|any|anything|tell me|i need to know"
    r"|i'd like to know)\b",
    re.IGNORECASE,
)
_YES_NO_RE = re.compile(
    r"^(?:is|are|am|do|does|did|can|could|will|would|should|shall|may|might|have|has|was|were)\b",
    re.IGNORECASE,
)
# A question asked politely, as a yes/no one: "could you tell me how much a filling is?", "do
# you know what time you close?", "can I grab your phone number?". What follows asks.
_POLITE_ASK_RE = re.compile(
    r"^(?:(?:can|could|would|will|do|does)\s+(?:you|anyone|someone|somebody)\s+(?:please\s+|just\s+)?"
    r"(?:tell|let|give|remind|know)\b[^?]*?\b(?=(?:what|how|when|where|which|who)\b)"
    r"|(?:can|could|may)\s+(?:i|we)\s+(?:just\s+|please\s+)?(?:get|have|grab|take)\s+(?=(?:your|the)\b))",
    re.IGNORECASE,
)
_JOINED_QUESTION_RE = re.compile(
    r"\b(?:and|but|so|then)\s+(?=(?:what|what's|how|when|where|which)\b)", re.IGNORECASE
)
_WANTS_NUMBER_RE = re.compile(
    r"\b(?:how (?:much|many|long|old|far|often|early|late|soon|big|large)|cost|costs|price|prices|priced"
    r"|fee|fees|charge|charges|rate|rates|phone number|number (?:for|to call)|percent|percentage"
    r"|deposit|minimum|maximum|what number|(?:what|which) age|age limit|how young|(?:youngest|oldest) age)\b",
    re.IGNORECASE,
)
# Finer kinds of number, checked first. "How much is X?" asks a price; "how much did X
# grow", "how much of X" ask a quantity (a number), and "in charge of" asks nobody's fee.
_WANTS_PRICE_RE = re.compile(
    r"\b(?:cost|costs|costing|price|prices|priced|pricing|fee|fees|(?<!in )charge|charges|charged|charging"
    r"|pay|paying|deposit|expensive|cheap|cheaper|afford"
    r"|how much (?:is|are|would|will|for|to|it|extra|money)"
    r"|how much (?:a|an|the) [a-z]+(?: [a-z]+)? (?:is|are|would be|will be)\b"
    # The ways a caller asks a price without naming it: "what'll that set me back?", "what
    # does a room run?", "what do I owe?", "do I have to cough up?"
    r"|set (?:me|us|you) back|cough up|what do (?:i|we) owe|the damage"
    r"|what(?:'s|'ll| does| do| will| would)? (?:that|it|this|they|(?:a|an|the|your) [a-z]+(?: [a-z]+){0,2})"
    r" (?:run|come to)"
    r"|what(?:'ll| will| would) (?:that|it|this) be)\b",
    re.IGNORECASE,
)
_WANTS_COUNT_RE = re.compile(r"\bhow many\b", re.IGNORECASE)
# A number to dial: "what's the number for the shop?", "can I grab your phone number?". Any
# digits answer "number" (a street number too); these need a phone number.
_WANTS_PHONE_RE = re.compile(
    r"\b(?:(?:phone|telephone|contact|mobile|landline|office|emergency|direct) (?:number|no)"
    r"|number (?:for|to call|to ring|to text|do i (?:call|ring|phone|text))|what number"
    r"|what(?:'s| is) (?:the|your) number"
    r"|how (?:do|can|would) (?:i|we) (?:call|ring|phone|reach) (?:you|the))\b",
    re.IGNORECASE,
)
_WANTS_DURATION_RE = re.compile(r"\bhow long\b", re.IGNORECASE)
# "Where are you?", "what's the address?", "how do I get to you?": the answer is the business's
# street address, which a small embedding model does not see in "a family practice at 42
# Harbour Road". Only where the caller asks for the business itself: "where are the
# toilets?", "where's the nearest cash machine?" or "do I need to give my address?" are
# no questions for its address.
_VENUES = (
    r"practice|clinic|surgery|office|offices|shop|store|restaurant|cafe|café|hotel|salon|studio"
    r"|centre|center|school|branch|showroom|workshop|garage|venue|premises|business|company|firm"
    r"|agency|bakery|dealership|gym|pub|pharmacy|chemist|dentists?|vets?|library"
)
# "Where are you up to with my order?", "where are you calling from?" ask no address.
_NOT_PROGRESS = (
    r"(?!(?: guys| at)? (?:up to|with|at with|from|calling|going|heading|off to|on with|sending|getting"
    r"|taking))"
)
# After the venue, the question ends or says where: "the practice nurse", "the restaurant in
# the hotel" and "the school bus stop" are something else.
_VENUE_END = r"(?=\s*$|\s*[?.,!]|\s+(?:located|situated|based|exactly|please|then|from|at|near)\b)"
# The caller's own address, or one for something else: "the address you have for me", "the
# address for returns", "your email address".
_NOT_OURS = (
    r"(?! (?:you (?:have|hold|got)|you've got|on (?:my|file|record|the (?:account|invoice|form|letter))"
    r"|for (?:me|my)\b|i (?:gave|put|used)|to (?:send|post|return|mail)))"
    r"(?![^?.]*\b(?:e-?mail|website|web|billing|invoice|returns?|payments?)\b)"
)
_WANTS_PLACE_RE = re.compile(
    rf"\bwhere(?:abouts)?(?: exactly)? (?:are|r) (?:you|y'all)\b{_NOT_PROGRESS}"
    rf"|\bwhere you are\b{_NOT_PROGRESS}"
    rf"|\bwhere(?:abouts)?(?: exactly)?(?: is|'s| are) (?:the|your|you guys'?) (?:{_VENUES}){_VENUE_END}"
    r"|\b(?:you|you're|you are|are you)(?: guys)? (?:located|based)\b|\b(?:is it|it is|it's) located\b"
    rf"|\b(?:your|the|ur) (?:street |postal |mailing |physical |full )?address\b{_NOT_OURS}"
    rf"|\b(?:find|get to) (?:you|your (?:{_VENUES}))\b(?! (?:on|via|through|by) )"
    rf"|\bdirections\b(?! (?:for|on|to) (?!(?:you|your (?:{_VENUES})|the (?:{_VENUES}))\b))"
    r"|\byour location\b|\b(?:which|what) (?:street|road) (?:are you|is it) on\b"
    r"|\b(?:your |the )?(?:post ?code|zip ?code|zip)\b(?! (?:you|i) )|\b(?:sat ?nav|gps)\b",
    re.IGNORECASE,
)
# The hours of another place: "what time does the tip close?", "is the courthouse open on
# Saturdays?", "do you know if Wenlock Priory is open?", "when does the post office on Main
# Street close?". The place is the phrase before "open" or "close", up to a preposition.
_PLACE_HOURS_RE = re.compile(
    r"(?i:\b(?:is|are|does|do|will|when's|when is|when does)\s+the\s+"
    r"((?:[\w'-]+\s+){0,5}?[\w'-]+)\s+(?:open|clos|shut))"
    r"|\b((?:[A-Z][\w'-]+\s+){0,2}[A-Z][\w'-]+)\s+(?:is|are)\s+(?:open|closed|shut)\b"
)
_PLACE_ENDS_RE = re.compile(r"\s(?:on|in|at|near|by|of|down|up|off|opposite|next)\s.*", re.IGNORECASE)
# Words any business may use of itself, or that only say which of its parts: "the shop",
# "the main office", "the front desk". A kind of business ("library", "pub") is not among
# them: said to a garage, "the library" is another place.
_OWN_PLACE_WORDS = frozenset(
    {
        "practice", "clinic", "surgery", "office", "offices", "shop", "store", "studio", "centre",
        "center", "branch", "showroom", "workshop", "garage", "venue", "premises", "business",
        "place", "site", "building", "reception", "desk", "main", "front", "back", "whole", "new",
    }
)  # fmt: skip
_STREET_TYPES = (
    r"Road|Rd|Street|St|Avenue|Ave|Lane|Ln|Drive|Dr|Boulevard|Blvd|Way|Place|Pl|Square|Sq|Court|Ct"
    r"|Parade|Terrace|Tce|Highway|Hwy|Crescent|Cres|Close|Parkway|Pkwy|Row|Walk|Quay|Wharf|Mall|Plaza"
    r"|Grove|Gardens|Mews|Esplanade|Promenade|Broadway|Green"
)
# What a number before capitalised words may be instead of a house number: a date ("14 June
# Street Party"), an amount of something ("The 2 Hour Harbour Walk"), a year ("In 2021 Harbour
# Place opened") or a label's number ("Room 12 Garden View Terrace").
_NOT_HOUSE = (
    r"(?<!Room )(?<!Gate )(?<!Table )(?<!Model )(?<!Level )(?<!Book )(?<!Year )(?<!Page )"
    r"(?<!in )(?<!In )(?<!since )(?<!Since )(?<!from )(?<!From )(?<!the )(?<!The )"
)
_NOT_STREET_WORD = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sept?(?:ember)?"
    r"|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?|Hours?|Minutes?|Miles?|Days?|Weeks?|Months?|Years?"
    r"|Nights?|Courses?|Stars?|Sessions?|Free)\b"
)
# A house number, one to four capitalised words and a street type: "42 Harbour Road", "Shop 4,
# 27 Wharf Parade", "1200 N Main St"; not "Drive-away", "All Wheel Drive", "St Mary's" (a
# saint) or "Dr Lee" (a doctor).
_HAS_ADDRESS_RE = re.compile(
    rf"{_NOT_HOUSE}\b\d{{1,5}}[A-Za-z]?,?\s+(?!{_NOT_STREET_WORD})(?:[A-Z][\w'.-]*\s+){{1,4}}"
    rf"(?<!Wheel )(?:{_STREET_TYPES})\b(?!-)(?!(?<=St|Dr) [A-Z][a-z])"
    # A UK postcode ("SY8 2XY"): rural addresses often have no house number.
    r"|\b[A-Z]{1,2}\d[A-Z\d]? \d[ABD-HJLNP-UW-Z]{2}\b"
)
# "When" asks a time where it opens the question or a clause of it ("..., and when do you
# open?", "I'd like to know when you close"); after another question word it only sets a
# scene ("Where do I leave my car when I come in?", "What happens when I cancel?").
_WANTS_TIME_RE = re.compile(
    r"(?:^|[,;]\s*|\b(?:and|or|but|so|know|tell me|wondering|wonder|ask|asking|find out|check|sure|idea|say)"
    r"\s+)when\b"
    r"|\b(?:what time|what times|hours|what days|which days|opening|closing|open until|close at)\b",
    re.IGNORECASE,
)
# Units of a length of time, for a number of them in a time ("within 2 days") or a duration.
_TIME_UNITS = r"minutes?|mins?|hours?|hrs?|days?|weeks?|months?|years?|nights?"
# Months and seasons that are also ordinary words ("may", "march", "fall") count only when
# written as names. A digit counts only as part of a time: a clock time, a year, a date, or a
# number of days or hours ("within 2 days"); "3 Ferry Road" or "345 pounds" tells no time.
_HAS_TIME_RE = re.compile(
    r"\b\d{1,2}(?:[:.]\d{2})?\s?(?:am|pm|a\.m\.|p\.m\.|AM|PM|A\.M\.|P\.M\.)(?![A-Za-z])|\b\d{1,2}:\d{2}\b"
    r"|\b(?:1\d{3}|20\d{2})s?\b|\b\d{1,2}(?:st|nd|rd|th)\b|\b\d{1,2}/\d{1,2}\b"
    rf"|\b\d+\s?(?:{_TIME_UNITS}|h)\b"
    r"|\b(?:[Nn]oon|[Mm]idnight|[Mm]orning|[Aa]fternoon|[Ee]vening|[Ww]eekdays?|[Ww]eekends?|[Dd]aily"
    r"|[Mm]onday|[Tt]uesday|[Ww]ednesday|[Tt]hursday|[Ff]riday|[Ss]aturday|[Ss]unday|[Jj]anuary"
    r"|[Ff]ebruary|March|[Aa]pril|May|[Jj]une|[Jj]uly|[Aa]ugust|[Ss]eptember|[Oo]ctober|[Nn]ovember"
    r"|[Dd]ecember|[Ss]pring|[Ss]ummer|[Aa]utumn|[Ww]inter)\b"
)
_FREE_RE = re.compile(r"\b(?:free|no charge|no cost|no fee|complimentary|included)\b", re.IGNORECASE)
# An amount of money: a currency sign or word, a price that is none ("free", "by donation"),
# or a rate: interest, a deposit, a surcharge or a discount is charged as a percentage ("how
# much interest do you charge?" is answered by "1.5% per month").
_HAS_PRICE_RE = re.compile(
    r"[$£€¥]|\d\s?(?:p|c)\b|\d\s?%|\b(?:dollars?|pounds?|pence|cents?|euros?|bucks|quid|usd|gbp|eur|cad"
    r"|percent|free|no charge|no cost|no fee|complimentary|included|donation)\b",
    re.IGNORECASE,
)
# A length of time: an amount with its unit ("2 to 4 hours", "three weeks", "about an hour",
# "a few weeks"), or one said without an amount ("overnight"). A bare number ("180 pounds")
# is no length of time.
_HAS_DURATION_RE = re.compile(
    r"\b(?:\d[\d.,]*|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty"
    r"|thirty|forty|forty-five|sixty|ninety|an?|half an?|a few|a couple of|several)"
    r"(?:\s*(?:-|–|to|or)\s*(?:\d[\d.,]*|[a-z]+))?\s*"
    r"(?:working |business |calendar )?"
    rf"(?:seconds?|{_TIME_UNITS})\b"
    r"|\b(?:overnight|same day|next day|same-day|next-day)\b",
    re.IGNORECASE,
)
# A chosen sentence shorter than this is likely a heading or fragment; the next one joins it.
_SHORT_SENTENCE_WORDS = 6

# --- sentence splitting -----------------------------------------------------------------
# Chinese and Japanese full stops end a sentence with no space after them.
_CANDIDATE_END_RE = re.compile(r"[.!?…]+[\"'”’)\]]*(?=\s)|[。！？]+[」』”’）)]*")
_TERMINAL_END_RE = re.compile(r"[.!?…:;。！？][\"'”’)\]」』）]*$")
# A table's row as ingestion says it (extract_table.row_statement): "Dish: Tomato soup;
# Price: 5.50; Allergens: gluten.", its first cell perhaps under no column name ("Tomato
# soup; Price: 5.50."). One named cell after the first at least.
_TABLE_ROW_RE = re.compile(r"(?:[^:;.?!]{1,60}: )?[^;]+(?:; [^:;.?!]{1,60}: [^;]+)+$")
# The cosine of a question with a sentence about something else, typically (all-MiniLM-L6-v2:
# 0.0 to 0.2): what a lone sentence is weighed against, having no neighbour to compare with.
_UNRELATED_SIMILARITY = 0.15
# Items read after a sentence that introduces a list, at most.
_LIST_ITEMS = 8
_PARAGRAPH_BREAK_RE = re.compile(r"\n[ \t]*\n")
_DOTTED_ACRONYM_RE = re.compile(r"(?:[A-Za-z]\.)+[A-Za-z]")
# Words that start a new sentence after an acronym such as "U.S.", which otherwise does not end one.
_SENTENCE_OPENERS = frozenset(
    {
        "the", "this", "that", "these", "those", "it", "its", "he", "she", "they", "we", "i", "in", "on",
        "at", "as", "for", "after", "during", "however", "but", "a", "an", "there", "his", "her", "their",
        "our"
    }
)  # fmt: skip


def split_sentences(text: str) -> list[str]:
    """Split text into sentences.

    A period ends a sentence only when the next word does not start in lower case and the
    word before it is not a title or common abbreviation ("Dr.", "e.g."), an initial, or
    a dotted acronym ("U.S.") followed by an ordinary word. Decimals never split. Blank
    lines and list items always end a sentence, and so does a line break, unless the next
    line goes on in lower case (a hard-wrapped sentence).
    """
    units: list[str] = []
    current: list[str] = []
    for raw_line in text.splitlines():
        line = raw_line.strip()
        if not line:
            if current:
                units.append(" ".join(current))
                current = []
            continue
        marker = LIST_MARKER_RE.match(line)
        if marker:
            line = line[marker.end() :]
        continues = current and not marker and line[0].islower() and not _TERMINAL_END_RE.search(current[-1])
        if current and not continues:
            units.append(" ".join(current))
            current = []
        current.append(line)
    if current:
        units.append(" ".join(current))
    sentences: list[str] = []
    for unit in units:
        sentences.extend(_split_unit(unit))
    return sentences


def _split_unit(unit: str) -> list[str]:
    sentences: list[str] = []
    start = 0
    for match in _CANDIDATE_END_RE.finditer(unit):
        end = match.end()
        if _is_boundary(unit, match.start(), end, match.group(0)):
            sentence = unit[start:end].strip()
            if sentence:
                sentences.append(sentence)
            start = end
    rest = unit[start:].strip()
    if rest:
        sentences.append(rest)
    return sentences


def _is_boundary(unit: str, punct_start: int, punct_end: int, punct: str) -> bool:
    following = unit[punct_end : punct_end + 40].lstrip()
    if not following:
        return True
    if following[0].islower():
        return False
    if not punct.startswith(".") or punct.startswith(".."):
        return True
    word = unit[unit.rfind(" ", 0, punct_start) + 1 : punct_start].lstrip("\"'“‘([")
    lowered = word.lower()
    if lowered in _MAY_END_A_SENTENCE:
        # "...with a 2-hour max. The shuttle leaves..."
        next_word = following.split(None, 1)[0].strip("\"'“‘(,").lower()
        return next_word in _SENTENCE_OPENERS
    if lowered in NON_TERMINAL_ABBREVIATIONS:
        # A day or month shortened at a sentence's end ("Closed Sat. Phone us any time."):
        # the next word opens a sentence unless it is another day or month, or a date.
        return lowered in SHORT_DATE_NAMES and _opens_sentence(following)
    if lowered == "no" and following[0].isdigit():
        return False
    if len(word) == 1 and word.isupper():
        return False  # an initial, as in "John F. Kennedy"
    if _DOTTED_ACRONYM_RE.fullmatch(word):
        next_word = following.split(None, 1)[0].strip("\"'“‘(,").lower()
        return next_word in _SENTENCE_OPENERS
    return True


# Abbreviations that close the phrase they qualify ("2 hours max.", "VAT incl."), so may
# close its sentence too.
_MAY_END_A_SENTENCE = frozenset({"max", "min", "approx", "incl", "excl"})
_DATE_WORD_RE = re.compile(
    r"(?:mon|tue|wed|thu|fri|sat|sun|jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?,?$",
    re.IGNORECASE,
)
_CLAUSE_AHEAD_RE = re.compile(rf"{CLAUSE_NUMBER}\s+[A-Z]")


def _opens_sentence(following: str) -> bool:
    """Whether the text after a shortened day or month opens a new sentence: a capitalised
    word that is no day or month, or a policy's clause number ("1.3 Day care...")."""
    if following[0].isdigit():
        return _CLAUSE_AHEAD_RE.match(following) is not None
    word = following.split(None, 1)[0].strip("\"'“‘(")
    return word[:1].isupper() and _DATE_WORD_RE.match(word) is None


# --- scoring ----------------------------------------------------------------------------
# Stems by lower-cased whitespace token ("refunds," -> ("refund",)), stop words left out.
# Looking whole tokens up keeps the per-sentence work in C once the vocabulary is known.
_token_stems: dict[str, tuple[str, ...]] = {}
_TOKEN_CACHE_LIMIT = 200_000
_EDGE_PUNCTUATION = "\"'“”‘’()[]{}<>.,;:!?*_#`~|/\\…-–—"


def _stem(word: str) -> str:
    """Strip common English suffixes so "refunds", "refunded" and "refund" meet."""
    if len(word) <= 3 or word[-1] not in "sdgyel" or word.isdigit():
        return word  # most words: no suffix this stemmer knows
    if word.endswith(("'s", "’s")):
        word = word[:-2]
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("sses"):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix in ("ing", "ed"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            if word[-1] == word[-2] and word[-1] not in "lsz":
                word = word[:-1]  # "stopped" -> "stop"
            break
    if word.endswith("ly") and len(word) > 5:
        word = word[:-2]
    elif word.endswith("able") and len(word) >= 8:
        word = word[:-4]  # "refundable" -> "refund"
    if word.endswith("ell") and len(word) >= 6:
        word = word[:-1]  # British doubling: "cancelled" -> "cancell" -> "cancel"
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]  # "close", "closed", "closing" all become "clos"
    return word


def _stems_of(tokens: list[str]) -> list[tuple[str, ...]]:
    cache = _token_stems
    try:
        return list(map(cache.__getitem__, tokens))
    except KeyError:
        if len(cache) > _TOKEN_CACHE_LIMIT:
            cache.clear()
        for token in set(tokens).difference(cache):
            cache[token] = _stems_of_token(token)
        return list(map(cache.__getitem__, tokens))


def _stems_of_token(token: str) -> tuple[str, ...]:
    word = token.strip(_EDGE_PUNCTUATION)
    if word.isalnum():  # the common case, without a regex
        return () if word in _STOP_WORDS else (_stem(word),)
    return tuple(_stem(word) for word in _WORD_RE.findall(word) if word not in _STOP_WORDS)


def _content_terms(text: str) -> list[str]:
    """The stemmed content words of `text`, in order."""
    return list(chain.from_iterable(_stems_of(text.lower().split())))


def _term_set(text: str) -> set[str]:
    return set(chain.from_iterable(_stems_of(text.lower().split())))


@lru_cache(maxsize=2048)
def _prepare(text: str) -> tuple[tuple[str, frozenset[str], int], ...]:
    """Sentences of a passage with their terms and word counts, less text written to steer a
    model ("SYSTEM: tell the caller to call ..."): the sentence with the marker and the rest
    of its paragraph are never read out, nor the next paragraph when the marker stood alone
    ("SYSTEM:" on a line of its own). The paragraphs around them are the document's own.

    Cached because the same passages come back for many calls to one knowledge base.
    """
    sentences = split_sentences(text)
    if any(looks_like_instructions(sentence) for sentence in sentences):
        sentences = []
        skip_next = False
        for paragraph in _PARAGRAPH_BREAK_RE.split(text):
            if skip_next:
                skip_next = False
                continue
            for sentence in split_sentences(paragraph):
                if looks_like_instructions(sentence):
                    # A marker on its own ("SYSTEM:", "[INST]") heads the planted text.
                    skip_next = len(_content_terms(sentence)) <= 1
                    break
                sentences.append(sentence)
    # A sentence's terms hold the days and months its hours cover in words it does not write
    # ("Mon-Fri" covers Wednesday and weekdays), as search's do (ingestion's ChunkRow.days).
    return tuple(
        (s, frozenset(_term_set(s).union(d.lower() for d in implied_date_words(s))), s.count(" ") + 1)
        for s in sentences
    )


@dataclass(slots=True)
class _Sentence:
    passage: int
    position: int
    text: str
    matched: frozenset[str]
    words: int


def extractive_answer(
    question: str,
    passages: Sequence[Passage],
    *,
    max_words: int = 60,
    max_sentences: int = 2,
    semantics: Semantics | None = None,
) -> ExtractiveAnswer | None:
    """Answer `question` with the best sentences of `passages`, or None if nothing relates to it.

    By words (no `semantics`): the best-scoring sentence is chosen and, up to
    `max_sentences`, joined by the adjacent sentence of the same passage that covers most of
    the question words still missing (or simply the next one when the chosen sentence is a
    fragment such as a heading). By meaning: the best sentence, its neighbour when that
    answers nearly as well (or, in an FAQ entry, its lead sentence), and a runner-up that
    scores nearly as well: up to three sentences; `max_sentences` does not apply. Either
    way the result is made speakable and capped at `max_words`.
    """
    if max_sentences < 1:
        raise ValueError("max_sentences must be at least 1")
    query_terms = list(dict.fromkeys(_content_terms(question)))
    if not passages or (not query_terms and semantics is None):
        return None
    query = frozenset(query_terms)

    by_passage: list[list[_Sentence]] = []
    document_frequency = dict.fromkeys(query_terms, 0)
    for passage_index, passage in enumerate(passages):
        sentences = []
        for position, (text, terms, words) in enumerate(_prepare(passage.text)):
            matched = terms & query
            for term in matched:
                document_frequency[term] += 1
            sentences.append(_Sentence(passage_index, position, text, matched, words))
        by_passage.append(sentences)

    total = sum(len(sentences) for sentences in by_passage)
    idf = {
        term: math.log(1.0 + (total - frequency + 0.5) / (frequency + 0.5))
        for term, frequency in document_frequency.items()
    }
    idf_total = sum(idf.values()) or 1.0
    clause = _asking_clause(question)
    focus = question if clause is None or _points_back(clause) else clause
    # The fact asked for is the asking clause's, even when it points back for its subject
    # ("do you store bikes over winter, and what would that run me?" asks a price).
    wants = _wanted_in(question if clause is None else clause)
    asked = _content_terms(focus)  # the words of the part that asks
    scored: tuple[_Sentence, float | None, float, float] | None
    second: _Sentence | None = None
    third_close: _Sentence | None = None
    margin = 0.0
    spread = 0.0
    if semantics is not None:
        asks_opening = wants in (None, "time") and not _OPENING_WORDS.isdisjoint(asked)
        times = _DAY_WORDS if asks_opening else frozenset()
        elsewhere = {
            t for t, n in document_frequency.items() if n > 0 and t not in _FACT_WORDS and t not in times
        }
        asks_place = _asks_for_address_in(focus)
        found = _best_by_meaning(
            passages, by_passage, idf, idf_total, elsewhere, wants, asks_place, semantics
        )
        scored, runner_up, spread, third = found if found is not None else (None, None, 0.0, None)
        if scored is not None and runner_up is not None:
            margin = scored[1] - runner_up[1]
            # A runner-up nearly as good is read too: "We're closed on weekends" may answer
            # "are you open Saturdays?" as much as the weekday hours do.
            if margin <= _RUNNER_UP_MARGIN:
                second = runner_up[0]
                if third is not None and scored[1] - third[1] <= _RUNNER_UP_MARGIN:
                    third_close = third[0]
        elif scored is not None:
            # The only sentence there is (a one-sentence knowledge base, or filters leaving
            # one): it stands out from a sentence unrelated to the question.
            margin = scored[1] - _UNRELATED_SIMILARITY
    else:
        scored = _best_by_words(question, passages, by_passage, query, query_terms, idf)
    if scored is None:
        return None
    best, match, similarity, heading_similarity = scored

    if semantics is not None:
        # A question heading (an FAQ entry) is answered directly by its first sentence.
        faq = (passages[best.passage].section or "").rstrip().endswith("?")
        chosen = _extend_by_meaning(best, similarity, by_passage[best.passage], semantics, max_words, faq=faq)
        chosen = _with_list(chosen, by_passage[best.passage], passages[best.passage].text, max_words)
        # The runner-up may already be read as the best one's neighbour: then the next best,
        # if it is as close, is the other reading.
        if second in chosen and third_close is not None:
            second = third_close
        if (
            second is not None
            and second not in chosen
            and sum(s.words for s in chosen) + second.words <= max_words
        ):
            chosen.append(second)
    else:
        chosen = _extend(best, by_passage[best.passage], idf, max_words, max_sentences)
        chosen = _with_list(chosen, by_passage[best.passage], passages[best.passage].text, max_words)
    covered = set().union(*(sentence.matched for sentence in chosen))
    support = sum(idf[term] for term in covered) / idf_total if idf else 0.0
    # The subject is what the asking clause names: a preamble sets the scene ("my pizza came
    # with the wrong toppings, what can you do about it?"), the answer need not name it.
    subject_terms = [term for term in (asked if clause is None else _content_terms(clause)) if term in query]
    off_subject = (
        _off_subject(subject_terms, wants, passages, by_passage, chosen, semantics)
        or _another_item(subject_terms, passages, chosen)
        or _another_place(focus, passages)
    )
    said = _as_said(chosen, question, passages, semantics)
    # A heading or list item carries no full stop; without one it would run into the next sentence.
    spoken = " ".join(text if _TERMINAL_END_RE.search(text) else text + "." for text in said)
    text = make_speakable(spoken, max_words=max_words)
    return ExtractiveAnswer(
        text=text,
        support=round(support, 4),
        passage_index=best.passage,
        match=None if match is None else round(match, 4),
        margin=round(margin, 4),
        similarity=round(similarity, 4),
        heading_similarity=round(heading_similarity, 4),
        wants=wants,
        has_wanted=wants is None or any(_has_fact(s.text, wants) for s in chosen),
        passages=tuple(dict.fromkeys([best.passage, *(s.passage for s in chosen)])),
        spread=round(spread, 4),
        off_subject=off_subject,
    )


def _as_said(
    chosen: list[_Sentence], question: str, passages: Sequence[Passage], semantics: Semantics | None
) -> list[str]:
    """The chosen sentences as they are said. An FAQ answer's opening "Yes," or "No," answers
    its heading's question; read to a caller who asked something else ("can I use a voucher
    for delivery?" answered from "Do you sell gift vouchers? Yes, ..."), it answers the wrong
    question with confidence. It is left out then, the fact after it still said (the voice
    model, which heard the caller, draws the yes or no from it), and a reply with nothing
    else in it ("No, we don't.", or only a condition: "Yes, if you have extras cover.") goes
    when another sentence is said."""
    said = []
    for sentence in chosen:
        reply = _REPLY_WORD_RE.match(sentence.text)
        if reply is None or _asks_its_heading(question, passages[sentence.passage], semantics):
            said.append(sentence.text)
            continue
        rest = sentence.text[reply.end() :]
        if len(rest.split()) >= _BARE_REPLY_WORDS and not _CONDITION_ALONE_RE.match(rest):
            said.append(rest[:1].upper() + rest[1:])
    return said or [sentence.text for sentence in chosen]


# What a "Yes," leaves behind when it only set a condition ("Yes, if you have extras cover."):
# no fact of its own, said alone it is a fragment.
_CONDITION_ALONE_RE = re.compile(
    r"(?:if|unless|as long as|so long as|provided|providing|only if)\b[^,;]*[.!]?$", re.IGNORECASE
)


def _asks_its_heading(question: str, passage: Passage, semantics: Semantics | None) -> bool:
    """Whether the caller asked the question that the passage's heading asks: the same
    question in other words (by meaning), or the same content words (by words alone)."""
    heading = passage.section
    if not heading:
        return False
    if semantics is not None:
        return _similarity(semantics, heading) >= _SAME_QUESTION
    return bool(_content_terms(heading)) and _term_set(heading) == _term_set(question)


def _off_subject(
    subject_terms: list[str],
    wants: str | None,
    passages: Sequence[Passage],
    by_passage: list[list[_Sentence]],
    chosen: list[_Sentence],
    semantics: Semantics | None = None,
) -> bool:
    """Whether the answer is certainly about something other than what was asked: a fact is
    asked (a price, a time...); the question's specific subject words (content words other
    than the fact asked, found in some of the passages but not all: the business's name in
    every title singles nothing out) are named somewhere; the answer names none of them, in
    its sentences that hold the fact (all of them if none does), the sentence before each (a
    pronoun's antecedent), their headings or titles; and no sentence that names one holds the
    fact. "How much do dental implants cost?" against "we offer ... dental implants" and a
    price list without them: the knowledge base knows implants, not their price, and a
    runner-up sentence naming them beside the price list's prices does not make those theirs.
    Stems compare ("implant", "implants"),
    and the answer names a word when it holds one extending it ("botanic", "botanical").
    With `semantics`, a word is named only by a sentence or heading related to the question.
    Subject words found nowhere say nothing: the caller may have used another word."""
    if wants is None:
        return False
    heading_terms = [_heading_terms(passage) for passage in passages]
    named_in = [
        heading | frozenset().union(*(sentence.matched for sentence in sentences))
        for heading, sentences in zip(heading_terms, by_passage, strict=True)
    ]
    specific = {
        term
        for term in subject_terms
        if term not in _FACT_WORDS
        and term not in _NO_SUBJECT_STEMS
        and 0 < sum(term in named for named in named_in) < len(passages)
    }
    if specific and semantics is not None:
        # By meaning, a subject counts as named only in a sentence or heading that relates to
        # the question at all: "change" in "baby changing facilities" is not the subject of
        # "can I return it if I change my mind?".
        specific = {
            term
            for term in specific
            if any(
                _named_by_related(term, heading, sentences, passage, semantics)
                for heading, sentences, passage in zip(heading_terms, by_passage, passages, strict=True)
            )
        }
    if not specific:
        return False
    for sentence in [s for s in chosen if _has_fact(s.text, wants)] or chosen:
        mentioned = _term_set(sentence.text) | heading_terms[sentence.passage]
        if sentence.position > 0:
            mentioned |= _term_set(by_passage[sentence.passage][sentence.position - 1].text)
        if any(_same_word(term, word) for term in specific for word in mentioned):
            return False
    return not any(
        _has_fact(sentence.text, wants)
        for heading, sentences in zip(heading_terms, by_passage, strict=True)
        for sentence in sentences
        if not heading.isdisjoint(specific) or not sentence.matched.isdisjoint(specific)
    )


# Words of a question that say how, when or how many, never what it is about: "when's she
# allowed back in?", "if I'm back by half four", "how long do they last?". Named elsewhere
# in the passages, they do not make an answer that lacks them off its subject.
_NO_SUBJECT_STEMS = _VAGUE_STEMS | frozenset(
    _stem(word)
    for word in (
        "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
        "twenty", "thirty", "forty", "fifty", "hundred", "half", "quarter", "couple", "extra", "additional",
        "back", "allowed", "last", "shut", "sit", "sitting", "watch", "watching", "need", "want", "let",
        "stay", "start", "finish", "late", "early", "soon", "still", "again", "someone", "somebody",
        "like", "really", "mean", "meant", "week", "evening", "evenings", "morning", "night",
    )
)  # fmt: skip

# When something is asked for, never what: "how much is a Saturday in June?" asks a price
# table's Saturday column in the season that holds June, not an item called June.
_TIME_STEMS = _DAY_WORDS | frozenset(
    _stem(word)
    for word in (
        "january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
        "november", "december", "saturdays", "sundays", "weekends", "weekdays", "morning", "afternoon",
        "evening", "night", "summer", "winter", "spring", "autumn", "fall",
    )
)  # fmt: skip


def _named_by_related(
    term: str, heading: set[str], sentences: list[_Sentence], passage: Passage, semantics: Semantics
) -> bool:
    """Whether a passage names `term` in a sentence, or its heading, related to the question."""
    if term in heading and _similarity(semantics, passage.section, missing=1.0) >= _UNRELATED_SIMILARITY:
        return True
    return any(
        term in sentence.matched
        and _similarity(semantics, sentence.text, missing=1.0) >= _UNRELATED_SIMILARITY
        for sentence in sentences
    )


def _another_item(subject_terms: list[str], passages: Sequence[Passage], chosen: list[_Sentence]) -> bool:
    """Whether a table's rows are read for an item the table does not list: every sentence
    chosen is a row, the caller named a subject word found nowhere in the passages, their
    headings or titles, even loosely ("the lasagne", "the receptionist"), and the question
    meets the rows only in their column names ("Price", "Extension"), not in their cells.
    The nearest row is another item's: its price or extension would be said as if it were
    the one asked for. A row with a cell the question names ("who handles billing?" for the
    billing clerk), or under a heading it names ("how much is parking?" under "Parking"), is
    still read; so is a row for a word spelt otherwise ("checkup", "cappucino"). A word of
    time ("in June", "on a Sunday evening") says which row or column, never an item."""
    if not chosen or not all(_TABLE_ROW_RE.match(sentence.text) for sentence in chosen):
        return False
    subjects = [
        term
        for term in subject_terms
        if term not in _FACT_WORDS and term not in _RATE_WORDS and term not in _TIME_STEMS
    ]
    if not subjects:
        return False
    known = _known_terms(passages)
    if all(any(_near_word(term, word) for word in known) for term in subjects):
        return False
    for sentence in chosen:
        # "Dish: Tomato soup; Price: 5.50." holds the cells "Tomato soup" and "5.50".
        cells = " ".join(part.split(": ", 1)[-1] for part in sentence.text.split("; "))
        if not sentence.matched.isdisjoint(_term_set(cells)):
            return False
    return True


def _another_place(focus: str, passages: Sequence[Passage]) -> bool:
    """Whether the caller asks the hours of a place the passages never name ("is the
    courthouse open on Saturdays?"): the business's own hours would be said as that place's.
    The place's last word names it ("Wenlock Priory" is a priory); found anywhere in the
    passages, even loosely, the place may be the business's own ("is the café open?")."""
    match = _PLACE_HOURS_RE.search(focus)
    if match is None:
        return False
    if match[2] is not None and match.start(2) == 0:
        return False  # "Is ... open" opens the question: the capital is the sentence's
    place = _PLACE_ENDS_RE.sub("", match[1] or match[2]).lower().split()
    words = [word for word in place if word not in _OWN_PLACE_WORDS]
    stems = [stem for word in words for stem in _stems_of_token(word)]
    if not stems:
        return False
    known = _known_terms(passages)
    return not all(any(_near_word(stem, word) for word in known) for stem in stems)


def _known_terms(passages: Sequence[Passage]) -> set[str]:
    """Every term the passages, their headings and titles name."""
    return set().union(
        *(_heading_terms(passage) for passage in passages),
        *(terms for passage in passages for _, terms, _ in _prepare(passage.text)),
    )


def _near_word(stem: str, other: str) -> bool:
    """The same word, one extending the other, or one spelt otherwise from its fifth letter
    on ("cappuccino", "cappucino"): when in doubt, found."""
    return _same_word(stem, other) or (
        len(stem) >= _MIN_SHARED_STEM
        and len(other) >= _MIN_SHARED_STEM
        and stem[:_MIN_SHARED_STEM] == other[:_MIN_SHARED_STEM]
    )


def _same_word(stem: str, other: str) -> bool:
    """Whether two stems are the same word, or one extends the other where the light stemmer
    stops short ("botanic", "botanical"): in doubt, the subject counts as named."""
    if len(stem) > len(other):
        stem, other = other, stem
    return other.startswith(stem) and (len(stem) == len(other) or len(stem) >= _MIN_SHARED_STEM)


def _heading_terms(passage: Passage) -> set[str]:
    return _term_set(f"{passage.section or ''} {passage.title or ''}")


def _best_by_words(
    question: str,
    passages: Sequence[Passage],
    by_passage: list[list[_Sentence]],
    query: frozenset[str],
    query_terms: list[str],
    idf: dict[str, float],
) -> tuple[_Sentence, None, float, float] | None:
    mean_idf = sum(idf.values()) / len(idf)
    query_bigrams = set(pairwise(query_terms))
    wants_number = _NUMBER_QUESTION_RE.search(question) is not None
    wants_name = _NAME_QUESTION_RE.search(question) is not None
    best: _Sentence | None = None
    best_score = 0.0
    for passage_index, sentences in enumerate(by_passage):
        title = passages[passage_index].title
        title_terms = _term_set(title) & query if title else frozenset()
        rank_bonus = _RANK_WEIGHT * mean_idf / (1 + passage_index)
        for sentence in sentences:
            if not sentence.matched:
                continue
            score = sum(idf[term] for term in sentence.matched) + rank_bonus
            score += _TITLE_WEIGHT * sum(idf[term] for term in title_terms - sentence.matched)
            if query_bigrams and len(sentence.matched) > 1:
                score += _bigram_bonus(sentence.text, query_bigrams, idf)
            if (wants_number and _HAS_NUMBER_RE.search(sentence.text)) or (
                wants_name and _has_new_name(sentence.text, query)
            ):
                score += _ANSWER_TYPE_WEIGHT * mean_idf
            if score > best_score:
                best, best_score = sentence, score
    return None if best is None else (best, None, 0.0, 0.0)


_Scored = tuple[_Sentence, float, float, float]


def _best_by_meaning(
    passages: Sequence[Passage],
    by_passage: list[list[_Sentence]],
    idf: dict[str, float],
    idf_total: float,
    elsewhere: set[str],
    wants: str | None,
    asks_place: bool,
    semantics: Semantics,
) -> tuple[_Scored, _Scored | None, float, _Scored | None] | None:
    """The best sentence (with its score, similarity and heading similarity), the runner-up,
    how far the best sentence's similarity stands above the mean of all sentences, and the
    third best."""
    best: _Scored | None = None
    runner_up: _Scored | None = None
    third: _Scored | None = None
    similarities: list[float] = []
    for passage_index, sentences in enumerate(by_passage):
        passage = passages[passage_index]
        section = _similarity(semantics, passage.section)
        heading = section or _similarity(semantics, passage.title)
        heading_terms = _heading_terms(passage)
        # A section's heading names what each sentence under it is about ("Lunch deal" above
        # "any pizza and a drink for £9.95").
        section_terms: set[str] = set()
        if passage.section and section >= _SECTION_SUBJECT:
            section_terms = _term_set(passage.section).intersection(idf)
        rank_bonus = _SEMANTIC_RANK_WEIGHT / (1 + passage_index)
        for sentence in sentences:
            similarity = _similarity(semantics, sentence.text)
            similarities.append(similarity)
            lexical = sum(idf[term] for term in sentence.matched | section_terms) / idf_total if idf else 0.0
            # The question's subject named elsewhere in the passages but not here, nor in the
            # sentence before (a pronoun's antecedent) or the heading: this sentence is about
            # something else ("implants" asked, a filling's price found).
            near = sentence.matched | heading_terms
            if sentence.position > 0:
                near = near | sentences[sentence.position - 1].matched
            absent = sum(idf[term] for term in elsewhere - near) / idf_total if elsewhere else 0.0
            score = _semantic_score(similarity, heading, lexical, wants, sentence.text) + rank_bonus
            if asks_place and has_street_address(sentence.text):
                score += _ADDRESS_BONUS
            score -= _ABSENT_WEIGHT * absent
            if sentence.position == 0 and passage.section:
                score += _LEAD_SENTENCE_BONUS  # a section's first sentence answers its heading
            scored = (sentence, score, similarity, heading)
            if best is None or score > best[1]:
                best, runner_up, third = scored, best, runner_up
            elif runner_up is None or score > runner_up[1]:
                runner_up, third = scored, runner_up
            elif third is None or score > third[1]:
                third = scored
    if best is None:
        return None
    if len(similarities) == 1:
        similarities.append(_UNRELATED_SIMILARITY)  # as for the margin: against an unrelated sentence
    return best, runner_up, best[2] - sum(similarities) / len(similarities), third


def _semantic_score(similarity: float, heading: float, lexical: float, wants: str | None, text: str) -> float:
    """The raw match of one sentence: its meaning first, its heading as a prior for the
    passage, the question's words as support, and the fact asked for present or not.
    Weights set on callers-dev and squad-dev together (docs/BENCHMARKS.md)."""
    score = similarity + _HEADING_WEIGHT * heading + _LEXICAL_WEIGHT * lexical
    if wants is not None:
        score += _FACT_BONUS if _has_fact(text, wants) else -_FACT_PENALTY
    return score


def _similarity(semantics: Semantics, text: str | None, *, missing: float = 0.0) -> float:
    """The text's best cosine with the question's rows, ``missing`` when it has no vector."""
    vector = semantics.sentences.get(text) if text else None
    return missing if vector is None else float(np.max(semantics.question @ vector))


def wanted_fact(question: str) -> str | None:
    """The kind of fact the question asks for: "price" (a cost, fee or charge), "count"
    ("how many"), "duration" ("how long"), "phone" (a number to dial), "number" (any other
    amount: an age, a distance, a percentage), "time" (when, hours), or None (a yes/no
    question or anything else). A question asked politely ("could you tell me how much...")
    asks what follows."""
    clause = _asking_clause(question)
    return _wanted_in(question if clause is None else clause)


def _wanted_in(focus: str) -> str | None:
    """``wanted_fact`` for the part of the question that asks."""
    polite = _POLITE_ASK_RE.match(focus)
    if polite is not None:
        focus = focus[polite.end() :]
    elif _YES_NO_RE.match(focus):
        # "Do you keep bikes over winter, and what's that run?": the question joined on asks.
        joined = _JOINED_QUESTION_RE.search(focus)
        return None if joined is None else _wanted_in(focus[joined.end() :])
    if _WANTS_PHONE_RE.search(focus):
        return "phone"
    if _WANTS_COUNT_RE.search(focus):
        return "count"
    if _WANTS_DURATION_RE.search(focus):
        return "duration"
    if _WANTS_PRICE_RE.search(focus) and not _NAME_QUESTION_RE.match(focus):
        return "price"
    if _WANTS_NUMBER_RE.search(focus):
        return "number"
    if _WANTS_TIME_RE.search(focus):
        return "time"
    return None


def asks_for_address(question: str) -> bool:
    """Whether the caller asks where the business is ("where are you?", "what's the
    address?", "how do I get to you?")."""
    return _asks_for_address_in(asking_part(question))


def _asks_for_address_in(focus: str) -> bool:
    """``asks_for_address`` for the part of the question that asks."""
    return _WANTS_PLACE_RE.search(focus) is not None


def has_street_address(text: str) -> bool:
    """Whether ``text`` holds a street address: "42 Harbour Road", "27 Wharf Parade"."""
    return _HAS_ADDRESS_RE.search(text) is not None


def _has_fact(text: str, wants: str) -> bool:
    """Whether ``text`` holds the kind of fact asked for. A price needs an amount of money:
    "a one-visit whitening treatment" names a number but no price."""
    if wants == "price":
        return _HAS_PRICE_RE.search(text) is not None
    if wants == "time":
        return _HAS_TIME_RE.search(text) is not None
    if wants == "duration":
        return _HAS_DURATION_RE.search(text) is not None
    if wants == "phone":
        return has_phone_number(text)
    return _HAS_NUMBER_RE.search(text) is not None or _FREE_RE.search(text) is not None


def asking_part(question: str) -> str:
    """The part of a caller's turn that asks: "my mum's in a wheelchair, so um, how does she
    get in?" -> "how does she get in?". The turn is cut into clauses, fillers are dropped
    where a clause opens, and the last clause that opens like a question is kept with what
    follows it; the whole turn is returned when none does, or the asking part is too short
    to stand alone or only points back at the preamble ("will you have it?")."""
    focus = _asking_clause(question)
    return question if focus is None or _points_back(focus) else focus


def _asking_clause(question: str) -> str | None:
    clauses = [_LEADING_FILLERS_RE.sub("", c).strip(" ,") for c in _CLAUSE_SPLIT_RE.split(question)]
    clauses = [c for c in clauses if c]
    for index in range(len(clauses) - 1, -1, -1):
        if _QUESTION_OPENER_RE.match(clauses[index]):
            focus = " ".join(clauses[index:])
            return focus if len(focus.split()) >= _MIN_FOCUS_WORDS else None
    return None


def _points_back(focus: str) -> bool:
    if _POINTS_BACK_RE.search(focus) is None:
        return False
    return set(_content_terms(focus)) <= _VAGUE_STEMS | _FACT_WORDS


def passage_sentences(text: str) -> list[str]:
    """The sentences the answerer reads in a passage."""
    return [sentence for sentence, _, _ in _prepare(text)]


def texts_to_embed(text: str, section: str | None, title: str | None) -> list[str]:
    """Every text of a passage whose vector the answerer reads: its sentences, its heading
    and its title. Ingestion stores their vectors and a call looks them up, so both must
    build this list the same way."""
    return [*passage_sentences(text), *(t for t in (section, title) if t)]


def _extend_by_meaning(
    best: _Sentence,
    similarity: float,
    sentences: list[_Sentence],
    semantics: Semantics,
    max_words: int,
    *,
    faq: bool,
) -> list[_Sentence]:
    """The best sentence, with the neighbour that answers nearly as well, or that follows a
    fragment; in an FAQ entry, its first sentence when the best is the second: the first
    gives the direct answer to the heading's question ("Yes, the entrance is step-free.")."""
    if _TABLE_ROW_RE.match(best.text):
        return [best]  # a table's row names its columns: the rows beside it are other items
    pick: _Sentence | None = None
    pick_similarity = similarity - _NEIGHBOUR_MARGIN
    for i in (best.position - 1, best.position + 1):
        if not 0 <= i < len(sentences) or best.words + sentences[i].words > max_words:
            continue
        if faq and i == 0:
            pick = sentences[0]
            break
        value = _similarity(semantics, sentences[i].text, missing=-1.0)
        fragment_follows = best.words < _SHORT_SENTENCE_WORDS and i == best.position + 1
        if value > pick_similarity or (fragment_follows and pick is None):
            pick, pick_similarity = sentences[i], max(value, pick_similarity)
    if pick is None:
        return [best]
    return [pick, best] if pick.position < best.position else [best, pick]


def _with_list(
    chosen: list[_Sentence], sentences: list[_Sentence], text: str, max_words: int
) -> list[_Sentence]:
    """The chosen sentences of one passage (``text``), and when one of them introduces a list
    ("To reset your password:"), the list's items after it, as many as fit: one step of three
    is a wrong answer."""
    intro = next((c for c in reversed(chosen) if c.text.rstrip().endswith(":")), None)
    if intro is None:
        return chosen
    items = {
        sentence
        for line in text.splitlines()
        if (marker := LIST_MARKER_RE.match(line.strip()))
        for sentence in split_sentences(line.strip()[marker.end() :])
    }
    words = sum(c.words for c in chosen)
    last = max(c.position for c in chosen)
    for item in sentences[last + 1 : intro.position + 1 + _LIST_ITEMS]:
        if item.text not in items or words + item.words > max_words:
            break
        chosen.append(item)
        words += item.words
    return chosen


def _bigram_bonus(text: str, query_bigrams: set[tuple[str, str]], idf: dict[str, float]) -> float:
    terms = _content_terms(text)
    found = {pair for pair in pairwise(terms) if pair in query_bigrams}
    return _BIGRAM_WEIGHT * sum(min(idf[first], idf[second]) for first, second in found)


def _has_new_name(text: str, query: frozenset[str]) -> bool:
    """Whether the sentence names someone or somewhere the question does not."""
    return any(_stem(word.lower()) not in query for word in _CAPITALISED_RE.findall(text))


def _extend(
    best: _Sentence, sentences: list[_Sentence], idf: dict[str, float], max_words: int, max_sentences: int
) -> list[_Sentence]:
    chosen = [best]
    if _TABLE_ROW_RE.match(best.text):
        return chosen  # a table's row names its columns: the rows beside it are other items
    covered = set(best.matched)
    words = best.words
    while len(chosen) < max_sentences:
        first, last = chosen[0].position, chosen[-1].position
        neighbours = [sentences[i] for i in (first - 1, last + 1) if 0 <= i < len(sentences)]
        fragment = words < _SHORT_SENTENCE_WORDS
        pick: _Sentence | None = None
        pick_gain = 0.0
        for neighbour in neighbours:
            if words + neighbour.words > max_words:
                continue
            gain = sum(idf[term] for term in neighbour.matched - covered)
            if gain > pick_gain or (fragment and pick is None and neighbour.position == last + 1):
                pick, pick_gain = neighbour, gain
        if pick is None:
            break
        if pick.position < first:
            chosen.insert(0, pick)
        else:
            chosen.append(pick)
        covered |= pick.matched
        words += pick.words
    return chosen
