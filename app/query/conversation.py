"""Conversation context: a follow-up question made standalone before it is searched.

A voice model often passes the caller's words as said: "How much is it?", "And on
Saturdays?". Searched alone, such a question finds nothing or the wrong passage. With the
last few turns of the call (``history``), the question is restated as one that stands
alone, and that standalone question is what is embedded, searched, answered, cached and
logged beside the caller's own.

Two ways, one test:

- ``needs_context`` decides, offline and in microseconds, whether a question leans on the
  conversation at all. A question that stands alone ("What are your opening hours?") is
  left exactly as it is, and never inherits an earlier subject, whichever way is in use.
- With an answering model configured, a question that needs context is rewritten by the
  chat model (prompts ``rewrite.system.md`` and ``rewrite.user.md``) within
  ``query.rewrite_timeout_s``. Its reply is checked (one short line, no number the call
  never said); on a timeout, an error or a reply that fails the checks, the offline
  completion is used instead.
- Offline (no model, or the model failed), ``complete_offline`` fills what the question
  leaves out from the earlier user turns. See docs/INTEGRATION.md, "Conversation
  context", for the rule and its limits.

The offline rule, in short. A question's words are sorted into four kinds: stop words
(function words, fillers, question words, all-purpose verbs), *aspects* (what is asked
about a thing: price, hours, booking, how long), *qualifiers* (when and for whom: days,
times of day, children, students) and *entities* (everything else: the things themselves,
"crown", "gluten-free base", "meeting room"). A question needs context when

1. it opens with a continuation and the rest is a fragment ("And on Saturdays?", "What
   about the kids' one?", "Or by card?"), or is itself a fragment that opens with a
   preposition ("For children?");
2. it points back: it, that, this, these, those, they, them, their, there (at the end),
   "one" standing for a noun ("the cheaper one"), "the same"; not the empty "it" of "is it
   possible", nor a relative "that" after a noun; and it names at most three entities
   (a long question that also says "it" usually says what "it" is);
3. or it names no entity and at most one other content word ("How much?", "Price?").

The context is the subject of the earlier user turns, resolved in order (a follow-up's
subject is its own words completed from the one before), and the question takes from it
what it lacks: the entities when it names none or points back, the aspects when it asks
about none, the qualifiers when it has none. "How much is a crown?" then "What about a
filling?" gives "What about a filling (how much)?"; "What time do you open?" then "And on
Saturdays?" gives "And on Saturdays (time open)?". The words added are the earlier turn's
own, so nothing is added that the caller did not say.

Limits: English word lists only (a question in another language is judged by its number
of words alone, so it is mostly left as it is); the assistant's turns are not read offline
(a subject only the assistant named is not found); "they" meaning the business itself
("Do they take cards?") still borrows the earlier subject, which costs little when that
subject is the business's own; and ambiguous words (is "book" a thing or an action?) are
sorted by one fixed list.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from app.answering.llm import ChatAnswerer, LLMError
from app.config import QuerySettings
from app.observability.metrics import PROVIDER_ERRORS
from app.prompting import ConversationTurn, PromptSet

__all__ = [
    "Contextualiser",
    "Method",
    "Standalone",
    "Turn",
    "complete_offline",
    "needs_context",
    "usable_history",
]

log = logging.getLogger(__name__)

Role = Literal["user", "assistant"]
Method = Literal["none", "offline", "model"]


@dataclass(frozen=True, slots=True)
class Turn:
    """One earlier turn of the call."""

    role: Role
    content: str


@dataclass(frozen=True, slots=True)
class Standalone:
    """The question that is searched and answered, and how it was made: ``none`` (the
    caller's question as it is), ``offline`` (completed from earlier turns by word rules)
    or ``model`` (rewritten by the chat model)."""

    question: str
    method: Method
    needs_context: bool = False
    model_error: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def debug(self, original: str) -> dict[str, Any]:
        return {
            "question": original,
            "standalone_question": self.question,
            "method": self.method,
            "needs_context": self.needs_context,
            "model_error": self.model_error,
            **self.details,
        }


def usable_history(history: Sequence[Turn], settings: QuerySettings) -> list[Turn]:
    """The turns of ``history`` the question is read with: those that say something (an
    assistant turn that only called a tool says nothing), the last ``history_max_turns`` of
    them, each cut to its last ``history_max_turn_chars`` characters, and as many of the
    latest as fit in ``history_max_total_chars``.

    A voice model or a runtime that sends more is not refused: a 422 would lose the caller's
    question over turns that matter least, the oldest and the longest-winded.
    """
    kept: list[Turn] = []
    total = 0
    for turn in reversed([t for t in history if _WORD.search(t.content)][-settings.history_max_turns :]):
        content = turn.content.strip()
        if len(content) > settings.history_max_turn_chars:
            content = content[-settings.history_max_turn_chars :]
            # From the first whole word on: half a word would read as another word.
            content = content[content.find(" ") + 1 :] if " " in content else content
        left = settings.history_max_total_chars - total
        if len(content) > left:
            if kept:
                break
            # The latest turn alone is over the total (set below a turn's length): its end.
            content = content[-left:]
            content = content[content.find(" ") + 1 :] if " " in content else content
        total += len(content)
        kept.append(Turn(turn.role, content))
    return kept[::-1]


# --- The offline rule --------------------------------------------------------------------


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_WORD = re.compile(r"[^\W_]+(?:['’\-][^\W_]+)*['’]?")
_TRAILING = re.compile(r"[\s?!.,;:]+$")
_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")

_FILLERS = _words(
    "um umm uh uhh erm er hmm hi hello hey hiya yeah yes yep yup ok okay so well oh right sorry "
    "please thanks thank cheers great cool alright just actually basically quick question"
)
_STOP = _FILLERS | _words(
    """a an the of to in on at for from with by about as into over under after before during
    without within and or but if then than because while is are was were be been being am do
    does did done doing have has had having can could will would shall should may might must
    i me my mine myself we us our ours you your yours he him his she her hers it its itself
    they them their theirs this that these those there here what whats which who whom whose
    when where why how not no any some all each every other another same such very really too
    also only more most many lot lots get got gets getting go going goes went make made want
    wanted need needed like know tell let say said ask asking wondering wonder think guess
    mean try see look looking able anything something everything nothing anyone someone
    everyone thing things way guys bit kind sort one ones still even though else out up down
    off back away few put
    i'm i'd i'll i've you're you've we're we'd it's that's there's what's how's they're
    don't doesn't didn't can't won't isn't aren't wasn't"""
)
# What is asked about a thing, rather than the thing.
_ASPECTS = _words(
    """much cost costs price prices pricing priced fee fees charge charges charged expensive cheap
    cheaper pay paying paid payment payments deposit refund refunds hours hour open opening opens
    close closing closes closed time times long late early book booking bookings reserve
    reservation cancel cancelling canceling cancellation available availability discount
    discounts free allowed allow bring number address located location minimum maximum age
    take takes accept accepted need required wait"""
)
# When and for whom.
_QUALIFIERS = _words(
    """monday mondays tuesday tuesdays wednesday wednesdays thursday thursdays friday fridays
    saturday saturdays sunday sundays weekend weekends weekday weekdays weeknight weeknights
    morning mornings afternoon afternoons evening evenings tonight today tomorrow old year-old
    holiday holidays kid kids child children adult adults senior seniors student students teen
    teens teenager teenagers member members non-member non-members beginner beginners
    toddler toddlers baby babies year years two three four five six seven eight nine ten eleven
    twelve"""
)
_CONTINUATIONS = frozenset({"and", "or", "also", "plus", "but", "then"})
_ABOUT = frozenset({"what", "how"})  # "what about X", "how about X"
_PREPOSITIONS = _words(
    "on at in for during with without after before from by over under around near until till to via"
)
# A clause opens with one of these: the rest after "and" is then a question of its own.
_CLAUSE_OPENERS = _words(
    """what whats what's when where which who whom whose why how do does did is are was were can
    could will would should shall may might must have has had am i i'm i'd we you it's
    is there"""
)
_POINTERS = frozenset({"it", "its", "itself", "they", "them", "their", "theirs", "same"})
_DEICTICS = frozenset({"this", "that", "these", "those"})
# "Is it possible / ok / worth ..." says nothing about an earlier subject.
_EMPTY_IT_NEXT = _words(
    "possible ok okay alright true necessary worth fine normal safe better best easier easy hard "
    "likely quicker faster quick raining"
)
_SUBJECT_PRONOUNS = frozenset({"i", "you", "we", "he", "she", "my", "your", "our", "the", "a", "an"})
_ONE_DETERMINERS = frozenset({"no", "any", "every", "some", "each", "at", "than"})
# A question naming more entities than this says what it is about even when it says "it".
_MAX_ENTITIES_WITH_POINTER = 3
# An earlier subject lends at most this many words of each kind.
_MAX_BORROWED = 6

Kind = Literal["entity", "aspect", "qualifier"]


@dataclass(frozen=True, slots=True)
class _Word:
    surface: str
    key: str
    kind: Kind


@dataclass(frozen=True, slots=True)
class _Reading:
    """One question read by the offline rule."""

    words: tuple[_Word, ...]
    needs_context: bool
    points_back: bool
    continues: bool

    def of(self, kind: Kind) -> list[_Word]:
        return [w for w in self.words if w.kind == kind]


def _key(token: str) -> str:
    token = token.casefold().replace("’", "'")
    if token.endswith("'s"):
        token = token[:-2]
    return token.rstrip("'")


def _kind(key: str) -> Kind:
    if key in _ASPECTS:
        return "aspect"
    if key in _QUALIFIERS:
        return "qualifier"
    return "entity"


def _read(question: str) -> _Reading:
    tokens = [m.group(0) for m in _WORD.finditer(question)]
    keys = [_key(t) for t in tokens]
    # Fillers where the question opens are no part of it: "um, yeah, and on Saturdays?"
    start = 0
    while start < len(keys) and keys[start] in _FILLERS:
        start += 1
    tokens, keys = tokens[start:], keys[start:]
    words = tuple(
        # "how much", "how long": the aspect reads as the caller said it when lent to a follow-up.
        _Word(f"how {t}" if i and keys[i - 1] == "how" and k in {"much", "long"} else t, k, _kind(k))
        for i, (t, k) in enumerate(zip(tokens, keys, strict=True))
        if k not in _STOP
    )
    continues = _continues(keys)
    points_back = _points_back(keys)
    entities = sum(1 for w in words if w.kind == "entity")
    needs = (
        continues
        or (points_back and entities <= _MAX_ENTITIES_WITH_POINTER)
        or (entities == 0 and len(words) <= 1)
    )
    return _Reading(words, needs, points_back, continues)


def _continues(keys: list[str]) -> bool:
    """An opening that carries on from the turn before, followed by a fragment; or a
    fragment opening with a preposition ("For children?")."""
    if not keys:
        return False
    rest = keys
    if keys[0] in _ABOUT and len(keys) > 1 and keys[1] == "about":
        return True
    if keys[0] in _CONTINUATIONS:
        rest = keys[1:]
        if len(rest) > 1 and rest[0] in _ABOUT and rest[1] == "about":
            return True
        if not rest:
            return True
        return rest[0] not in _CLAUSE_OPENERS
    return rest[0] in _PREPOSITIONS


def _points_back(keys: list[str]) -> bool:
    for i, key in enumerate(keys):
        before = keys[i - 1] if i > 0 else ""
        after = keys[i + 1] if i + 1 < len(keys) else ""
        if key in _POINTERS:
            if key == "it" and after in _EMPTY_IT_NEXT:
                continue
            if key == "same" and before != "the":
                continue
            return True
        if key in _DEICTICS:
            # "a class that is ...", "do you know that I ...": a relative or a conjunction.
            if (before and before not in _STOP) or after in _SUBJECT_PRONOUNS:
                continue
            return True
        if key == "there" and not after and before not in {"is", "are", "was", "were"}:
            return True  # "How do I get there?"; not "Is there?" alone
        # "the cheaper one", "which one", "book one"; not "one hour" (a number) nor "no one".
        if key in {"one", "ones"} and before not in _ONE_DETERMINERS and (not after or after in _STOP):
            return True
    return False


def needs_context(question: str) -> bool:
    """Whether ``question`` leans on earlier turns (module docstring, the offline rule)."""
    return _read(question).needs_context


def _subject(history: Sequence[Turn]) -> list[_Word]:
    """The subject of the user turns, oldest first: each turn that stands alone and says
    something sets it; each follow-up completes its own words from it."""
    subject: list[_Word] = []
    for turn in history:
        if turn.role != "user":
            continue
        reading = _read(turn.content)
        if reading.needs_context:
            subject = [*reading.words, *_borrowed(reading, subject)]
        elif reading.words:
            subject = list(reading.words)
    return subject


def _borrowed(reading: _Reading, subject: Sequence[_Word]) -> list[_Word]:
    """What a follow-up takes from the subject: each kind of word it lacks, in the
    subject's order, without the words it already has. It lacks the entities when it
    names none or points back ("Is it covered by insurance?" still needs "crown"); the
    aspects when it asks about none and either continues ("What about a filling?" asks
    what was asked of the crown) or names no entity ("And for kids?")."""
    own = {w.key for w in reading.words}
    entities = bool(reading.of("entity"))
    lacks = {
        "entity": reading.points_back or not entities,
        "aspect": not reading.of("aspect") and (reading.continues or not entities),
        "qualifier": not reading.of("qualifier"),
    }
    taken: list[_Word] = []
    counts: dict[str, int] = {}
    for word in subject:
        if not lacks[word.kind] or word.key in own or any(w.key == word.key for w in taken):
            continue
        if counts.get(word.kind, 0) >= _MAX_BORROWED:
            continue
        counts[word.kind] = counts.get(word.kind, 0) + 1
        taken.append(word)
    return taken


def complete_offline(question: str, history: Sequence[Turn]) -> Standalone:
    """The question completed from the earlier user turns by the offline rule; returned as
    it is (method ``none``) when it stands alone or nothing earlier completes it."""
    reading = _read(question)
    if not reading.needs_context:
        return Standalone(question, "none")
    added = _borrowed(reading, _subject(history))
    if not added:
        return Standalone(question, "none", needs_context=True)
    text = question.strip()
    end = _TRAILING.search(text)
    body, tail = (text[: end.start()], text[end.start() :].strip()) if end else (text, "")
    mark = "?" if "?" in tail else tail[:1]
    completed = f"{body} ({' '.join(w.surface for w in added)}){mark}"
    return Standalone(completed, "offline", needs_context=True, details={"added": [w.surface for w in added]})


# --- The model rewrite -------------------------------------------------------------------

# A rewrite is a restatement: it may be longer than the caller's question (it names what
# "it" was), never a paragraph.
_MAX_REWRITE_CHARS = 400
_QUOTES = "\"'“”‘’`"


class _Refused(LLMError):
    """The model answered, with something that is not a standalone question."""


class Contextualiser:
    """Makes a call's question standalone: by the chat model when one is configured and
    the question needs context, by the offline rule otherwise or when the model fails."""

    def __init__(self, llm: ChatAnswerer | None, settings: QuerySettings) -> None:
        self.llm = llm
        self.settings = settings
        # A third of the call's deadline at most: retrieval and the answer need the rest.
        self.timeout_s = min(settings.rewrite_timeout_s, settings.deadline_s / 3)

    async def standalone(
        self,
        question: str,
        history: Sequence[Turn],
        prompt: PromptSet,
        *,
        debug: bool = False,
        skip_model: bool = False,
    ) -> tuple[Standalone, float]:
        """The standalone question and the time spent waiting for the model (ms); by the
        offline rule alone when ``skip_model`` (a playground run that never calls a model)."""
        # A call without history (most calls) pays nothing here.
        if not history or not needs_context(question):
            return Standalone(question, "none"), 0.0
        if self.llm is None or skip_model:
            return complete_offline(question, history), 0.0
        messages = prompt.rewrite_messages(
            question=question, turns=[ConversationTurn(t.role, t.content) for t in history]
        )
        model = prompt.rewrite_model.model or self.settings.llm_model
        details: dict[str, Any] = {"rewrite_messages": messages, "rewrite_model": model} if debug else {}
        t = time.perf_counter()
        try:
            result = await self.llm.complete(
                messages,
                model=model,
                temperature=prompt.rewrite_model.temperature,
                max_tokens=prompt.rewrite_model.max_tokens,
                timeout=self.timeout_s,
            )
            rewritten = _checked(result.text, question, history)
        except LLMError as exc:
            reason = exc.reason
            if not isinstance(exc, _Refused):
                PROVIDER_ERRORS.labels("chat").inc()
            log.warning("rewriting a follow-up question failed (%s); completing it offline", reason)
            offline = complete_offline(question, history)
            return Standalone(
                offline.question,
                offline.method,
                needs_context=True,
                model_error=reason,
                details={**offline.details, **details},
            ), (time.perf_counter() - t) * 1000
        waited = (time.perf_counter() - t) * 1000
        method: Method = "none" if rewritten == question.strip() else "model"
        return Standalone(rewritten, method, needs_context=True, details=details), waited


def _checked(text: str, question: str, history: Sequence[Turn]) -> str:
    """The model's rewrite when it is one short line that adds no number; _Refused else."""
    lines = [line.strip().strip(_QUOTES).strip() for line in text.strip().splitlines() if line.strip()]
    if not lines or not lines[0] or "NOT_FOUND" in lines[0]:
        raise _Refused("the rewrite gave no question")
    rewritten = lines[0]
    if len(lines) > 1 or len(rewritten) > max(_MAX_REWRITE_CHARS, 2 * len(question)):
        raise _Refused("the rewrite was not one short question")
    said = " ".join([question, *(t.content for t in history)])
    known = set(_NUMBER.findall(said))
    if any(number not in known for number in _NUMBER.findall(rewritten)):
        # A number nobody said is a fact the model brought: never searched for.
        raise _Refused("the rewrite added a number")
    return rewritten
