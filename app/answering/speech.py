"""Make answer text fit to be read aloud by a text-to-speech voice.

Answers come from a language model or are cut out of ingested documents, so they carry
markdown, links, emoji and notation that a TTS voice reads badly ("asterisk asterisk",
"h t t p s colon slash slash", "dollar sign five"). `make_speakable` rewrites them into
plain spoken sentences; `speech_problems` says what is still wrong with a text, for the
evaluation report.

Markdown: headings, list items, table rows and paragraphs each become sentences of their
own; emphasis, code and link syntax go while their words stay; images, struck-out text
and URLs in parentheses are dropped, unless dropping them would leave nothing to say.
Footnote markers and editors' marks from web pages ("[1]", "[citation needed]") are dropped.
Other URLs are read as their domain ("example.com"), e-mail addresses as "name at
example dot com". Emoji, pictographs and control characters are removed.

Rules for numbers and symbols are deliberately few and simple; each one exists because a
TTS voice gets the written form wrong:

- Plain numbers, decimals and years stay digits (voices read "1998" and "3.5" well).
- Ordinals become words ("21st" -> "twenty-first"; a UK postcode's "3RD" is none), as do
  "24/7" and phone numbers, which are read digit by digit, group by group ("555-123-4567"
  -> "five five five, one two three, four five six seven"). Words rather than digits keep
  the result stable when it is cleaned again. Digit groups are a phone number in the North
  American shape, after "+" or "(", after a word that announces one ("call", "phone",
  "number"...), or when they start with a zero ("01632 960318": no quantity does); other
  groups ("10 20 30", "1 234 567") stay as written.
- Money: "$5.50" -> "5 dollars 50 cents", "£4.2bn" -> "4.2 billion pounds", "-$5" ->
  "minus 5 dollars", "€5,50" -> "5 euros 50 cents", "C$20" -> "20 Canadian dollars",
  "R$149,90" -> "149 reais 90 centavos", "USD 25" -> "25 US dollars"; letters before "$"
  that name no known currency leave the amount as written. Rates after an amount are said:
  "$120/night", "$89/quarter", "£45 p/h", "£650 pcm" -> "650 pounds per calendar month".
- "%", "&", "@", "+", "~", "#3", "No. 3", "ext. 12", "≥", "≤", "<5", "> 30", "w/o",
  degrees and common units become words; a menu's path "Settings > Account" is "Settings,
  then Account".
- ISO dates become "March 5, 2024"; 24-hour times become "2:30 PM". A time with a
  one-digit hour and no AM/PM ("5:30") is ambiguous and stays as written unless the other
  side of its range is a 24-hour time ("9:00-17:00").
- A hyphen or en dash between numbers reads as a range: "9-5" -> "9 to 5"; three or more
  hyphenated parts are a code and stay ("978-3-16-148410-0", "1-800-FLOWERS"), and so does
  a zero-led second part ("2024-00123"). Times written with a dot
  ("5.30pm", "08.30-17.30", "by 9.30", "7.30-8.45") are read as times, days' short names
  in opening hours ("Sat 9-1"), and "Mon", "Tues", "Thurs", "Fri" anywhere, in full; a US
  ZIP code after its city and state ("Columbus, Ohio") or "ZIP" digit by digit. A spaced
  dash between a date or time and a day, or between ordinals, is "to" ("Fri 4pm - Mon
  11am", "1st-14th"); sizes are "by" ("a 5x10 unit"); "12pm" and "12am" are noon and
  midnight; numbers one dials for a public service ("call 999", "NHS 111", "police 100 /
  112") are said digit by digit; English school years ("Y3-Y6") are "Years 3 to 6"; South
  African and French times ("06h00") and "1030hrs" are clock times; Irish Eircodes and
  Canadian postal codes are said character by character, an Australian state's postcode
  digit by digit.
- Rand with cents or grouped thousands ("R1 250/day", "R2,85"), rupees written "Rs." or
  "INR", Indian grouping ("₹1,50,000" is 150,000 rupees), lakh and crore.
- Latin abbreviations are expanded: "e.g." -> "for example", "i.e." -> "that is",
  "etc." -> "and so on", "vs." -> "versus", "approx." -> "approximately" ("approximate"
  before a noun); "min." and "max." before a number or after a unit are "minimum" and
  "maximum", "pls" is "please".
- A policy's clause number opening a sentence ("2.1 We need 48 hours' notice") and an FAQ's
  "Q:" and "A:" labels are dropped: they are for the reader. A full stop that a shortened
  day or month took with it ("Open Mon-Fri. Closed Sat.") still ends the sentence.
"""

from __future__ import annotations

import html
import re
import unicodedata
from calendar import month_name
from collections.abc import Callable, Sequence

from num2words import num2words  # type: ignore[import-untyped]

__all__ = ["NON_TERMINAL_ABBREVIATIONS", "SERVICE_NUMBERS", "make_speakable", "speech_problems"]

# Abbreviations whose trailing period does not end a sentence (lower case, no final dot).
# Shared with the sentence splitter of the extractive answerer.
NON_TERMINAL_ABBREVIATIONS = frozenset(
    {
        "dr", "mr", "mrs", "ms", "prof", "st", "jr", "sr", "mt", "ft", "gen", "col", "lt", "sgt",
        "capt", "rev", "hon", "gov", "sen", "rep", "pres", "e.g", "i.e", "eg", "ie", "vs", "cf",
        "approx", "no", "nos", "fig", "figs", "vol", "ch", "sec", "pp", "p", "ca", "c", "est",
        "dept", "univ", "assn", "bros", "ave", "blvd", "rd", "jan", "feb", "mar", "apr", "jun",
        "jul", "aug", "sep", "sept", "oct", "nov", "dec", "mon", "tue", "tues", "wed", "thu",
        "thur", "thurs", "fri", "sat", "sun", "al", "op", "ed", "eds", "tel", "ext", "min", "max",
        "apt", "ste", "bldg", "fl", "hwy", "pkwy", "incl", "excl", "env", "арт", "rs", "ph", "acc", "ref",
        "reg", "appt", "appts", "pvt", "ct", "blk", "flr", "govt",
    }
)  # fmt: skip


def _char_class(ranges: tuple[tuple[int, int], ...], categories: frozenset[str]) -> str:
    """A regex character class of the code points in `ranges` that have one of `categories`."""
    parts: list[str] = []
    run_start: int | None = None
    previous = -2
    for start, end in ranges:
        for code in range(start, end + 1):
            if unicodedata.category(chr(code)) not in categories:
                continue
            if code != previous + 1:
                if run_start is not None:
                    parts.append(_class_run(run_start, previous))
                run_start = code
            previous = code
    if run_start is not None:
        parts.append(_class_run(run_start, previous))
    return "".join(parts)


def _class_run(start: int, end: int) -> str:
    return re.escape(chr(start)) if start == end else f"{re.escape(chr(start))}-{re.escape(chr(end))}"


# Blocks where emoji and pictographs live. Only their symbol characters (So/Sk) count, so
# that arrows or maths signs that happen to share a block are left alone.
_EMOJI_BLOCKS = (
    (0x00A9, 0x00A9),
    (0x00AE, 0x00AE),
    (0x2122, 0x2122),
    (0x2139, 0x2139),
    (0x2190, 0x21FF),
    (0x2300, 0x23FF),
    (0x2460, 0x24FF),
    (0x25A0, 0x27BF),
    (0x2900, 0x297F),
    (0x2B00, 0x2BFF),
    (0x3030, 0x3030),
    (0x303D, 0x303D),
    (0x3297, 0x3299),
    (0x1F000, 0x1FBFF),
)
# Joiners, variation selectors, the keycap mark and tag characters glue emoji sequences.
_EMOJI_GLUE = "\u200d\ufe00-\ufe0f\u20e3\U000e0020-\U000e007f"
_EMOJI_CLASS = _char_class(_EMOJI_BLOCKS, frozenset({"So", "Sk"})) + _EMOJI_GLUE
_EMOJI_RE = re.compile(f"[{_EMOJI_CLASS}]+")
# The same blocks without the category filter: a quick test that finds no emoji in most text.
_MAYBE_EMOJI_RE = re.compile(
    "[\u00a9\u00ae\u2122\u2139\u2190-\u21ff\u2300-\u27bf\u2900-\u297f\u2b00-\u2bff\u3030\u303d"
    f"\u3297\u3299\U0001f000-\U0001fbff{_EMOJI_GLUE}]"
)
_STARTS_WITH_EMOJI_RE = re.compile(f"\\s*[{_EMOJI_CLASS}]")

# Control and invisible format characters; newline and tab are handled as whitespace.
_CONTROL_RE = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u00ad\u200b\u200c\u200e\u200f"
    "\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\U000e0001]"
)
# Binds the words of one spoken number, amount, date or time ("five five five, one two
# three", "5 dollars 50 cents") so that the word cap cuts before or after it, never
# through it: a cut phone number or price is a wrong one. Input never holds it
# (_CONTROL_RE strips it); it becomes a space again once the text is capped.
_JOIN = "\u2060"
_SPACE_LIKE_RE = re.compile("[\t\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]")
_LINE_BREAK_RE = re.compile("\r\n?|[\u2028\u2029\u0085]")

# --- block-level markdown -------------------------------------------------------------
_FENCE_RE = re.compile(r"^\s*(?:`{3,}|~{3,})")
_RULE_RE = re.compile(r"^(?:(?:-\s*){3,}|(?:\*\s*){3,}|(?:_\s*){3,}|=+|-+)$")
_HEADING_RE = re.compile(r"^#{1,6}(?:\s+(.*?))?(?:\s+#+)?\s*$")
_BOLD_LINE_RE = re.compile(r"^(\*\*|__)(?=\S)(.+?)(?<=\S)\1:?$")
# "(555) 123-4567" or "(02) 9876 5432" at a line's start is an area code, not a list's item.
_LIST_ITEM_RE = re.compile(
    r"^(?:[-*+•◦‣●○–]|(?!\(\d{2,5}\)\s*\d{3,4}[ .-]?\d{3,4}(?!\d))\(?\d{1,3}[.)]|\(?[a-z]\))\s+(.*)$"
)
_TABLE_SEPARATOR_RE = re.compile(r"^\|?\s*:?-+:?\s*(?:\|\s*:?-+:?\s*)*\|?$")

# --- inline markdown and markup -------------------------------------------------------
_IMAGE_RE = re.compile(r"!\[([^\]]*)\]\((?:[^()\s]|\([^()\s]*\))*(?:\s+\"[^\"]*\")?\)")
_LINK_RE = re.compile(r"\[([^\]]+)\]\((?:[^()\s]|\([^()\s]*\))*(?:\s+\"[^\"]*\")?\)")
_REF_LINK_RE = re.compile(r"\[([^\]]+)\]\[[^\]]*\]")
# Footnote markers and editors' marks in square brackets, as web pages (Wikipedia above all)
# carry them: "[1]", "[3–5]", "[a]", "[note 2]", "[citation needed]", "[when?]", "[sic]".
# They are never said; a bracket that adds words to the text ("[that is, human-induced]",
# "[50 to 140 centimeters]") stays.
_NOTE_MARK_RE = re.compile(
    r"\[(?:\^?\d{1,3}(?:\s*[,–-]\s*\d{1,3})*|\^\w{1,20}|[a-z]{1,2}"
    r"|(?i:(?:note|nb|n)\.?\s*\d{1,3}|[a-z ]{0,40}?\bneeded|[a-z' ]{1,30}\?"
    r"|update[ds]?|dubious(?:\s*[–-]\s*discuss)?|vague|sic|not in citation given|failed verification))\]"
)
_AUTOLINK_RE = re.compile(r"<((?:https?|ftp)://[^<>\s]+|mailto:[^<>\s]+)>")
_INLINE_CODE_RE = re.compile(r"(`+)(.+?)\1")
_BR_RE = re.compile(r"<br\s*/?>", re.IGNORECASE)
_TAG_RE = re.compile(r"</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>")
# A tag the model never closed ("<break time=\"500ms\" at nine"): its name and quoted
# attributes are markup all the same. Without a quoted attribute, "a <b and c" stays words.
_UNCLOSED_TAG_RE = re.compile(
    r"</?[A-Za-z][A-Za-z0-9:-]*(?:\s+[A-Za-z_:][A-Za-z0-9_.:-]*\s*=\s*(?:\"[^\"<>]*\"|'[^'<>]*'))+\s*/?(?![\s\"'>])"
)
# A tag that ends a block, or an SSML pause, parts words: "FAQ</h1><p>Open" is "FAQ Open".
# Inline tags ("H<sub>2</sub>O") join them.
_BLOCK_TAG_RE = re.compile(
    r"</?(?:p|div|h[1-6]|li|ul|ol|dl|dt|dd|tr|td|th|table|thead|tbody|section|article|header|footer"
    r"|nav|aside|main|blockquote|pre|hr|speak|break|s|paragraph|sentence)\b[^<>]*>",
    re.IGNORECASE,
)
# What markup holds that is never read: scripts, styles, comments, each with its end
# ("<style guide>" without a "</style>" is words); CDATA wrappers' insides are kept (their
# text is the text).
_HIDDEN_MARKUP_RE = re.compile(r"<(script|style)\b[^>]*>.*?</\1\s*>|<!--.*?-->", re.IGNORECASE | re.DOTALL)
_CDATA_RE = re.compile(r"<!\[CDATA\[(.*?)(?:\]\]>|$)", re.DOTALL)
# A run of Latin letters and digits this long is no word (a base64 blob, a hash, 100 KB
# without a space): not said. Hyphens part words ("state-of-the-art"), letters with accents
# are a language's ("Überwachungsaufgabenübertragungsgesetz"), and scripts written without
# spaces (Chinese, Japanese, Thai) are never counted as one word.
_LONG_TOKEN_CHARS = 45
_LONG_TOKEN_RE = re.compile(f"[A-Za-z0-9+/=_]{{{_LONG_TOKEN_CHARS + 1},}}")
_SPACE_BEFORE_MARK_RE = re.compile(r" ([.,;:!?])")
_MD_ESCAPE_RE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|>~])")
_STRONG_RE = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
_EM_STAR_RE = re.compile(r"(?<![\w*])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\w*])")
_EM_UNDERSCORE_RE = re.compile(r"(?<!\w)_(?=[^\s_])(.+?)(?<=[^\s_])_(?!\w)")
_STRIKE_RE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_TIMES_STAR_RE = re.compile(r"(?<=\d)\s*\*\s*(?=\d)")
_STRAY_STAR_RE = re.compile(r"\*+")
# A phone menu's star key ("press * then 2"), which the rule above would drop.
_KEY_STAR_RE = re.compile(r"\b(press|dial|hit|tap|then|enter)\s+\*(?=[\s,.;]|$)", re.IGNORECASE)

# --- links and addresses --------------------------------------------------------------
_URL_BODY = r"(?:(?:https?|ftp)://|www\.)[^\s<>\"'`*\[\]{}()|]*(?:\([^\s()]*\)[^\s<>\"'`*\[\]{}()|]*)*"
_URL_RE = re.compile(_URL_BODY, re.IGNORECASE)
_PAREN_URL_RE = re.compile(r"\s*\(\s*(" + _URL_BODY + r")\s*\)", re.IGNORECASE)
_EMAIL_RE = re.compile(
    r"(?<![\w.+-])(?:mailto:)?([A-Za-z0-9._%+-]+)@([A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,})\b"
)

# --- abbreviations --------------------------------------------------------------------
_ABBREVIATION_RE = re.compile(
    r"\b(?:(e\.\s?g\.)(?=\W|$)|(i\.\s?e\.)(?=\W|$)|(etc\.)|(vs\b\.?)|(approx\.)|(no\.)\s*(?=\d)"
    r"|(ext\.?)\s*(?=\d))",
    re.IGNORECASE,
)
# A word after "approx." that is not a number or an article: "approx." says "approximate".
_NOUN_AHEAD_RE = re.compile(
    r"\s*(?!(?:a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty"
    r"|forty|fifty|sixty|hundred|half|quarter|every|each|per|from|between|up)\b)[A-Za-z]",
    re.IGNORECASE,
)
# Spoken forms by group of _ABBREVIATION_RE.
_ABBREVIATIONS = (
    "", "for example", "that is", "and so on", "versus", "approximately", "number ", "extension ",
)  # fmt: skip
# Shorthand small businesses write in their hours and notes ("Closed Xmas & BH", "Price
# TBC", "appts only", "Mon-Fri excl. BH"), which a voice would read letter by letter. "BH"
# counts only in capitals and alone ("BH1 2AB" is a postcode); "incl."/"excl." before a word
# mean "including"/"excluding", and at the end of a phrase ("Mon-Fri incl.") "inclusive".
_SHORTHAND_RE = re.compile(
    r"\b(Xmas|XMAS|xmas|TBC|TBA|FOC|ASAP|asap|[Aa]ppts?|[Bb]ank [Hh]ols?|BHs?|[Ii]ncl|[Ee]xcl|[Pp]ls)(\.?)"
    r"(?![\w&'-])"
)
_SHORTHAND = {
    "xmas": "Christmas", "tbc": "to be confirmed", "tba": "to be announced", "foc": "free of charge",
    "asap": "as soon as possible", "appt": "appointment", "appts": "appointments",
    "bank hol": "bank holiday", "bank hols": "bank holidays", "bh": "bank holidays", "bhs": "bank holidays",
    "pls": "please",
}  # fmt: skip
_SHORTHAND_HINT_RE = re.compile("mas|MAS|TB|FOC|ASAP|asap|ppt|ols|BH|ncl|xcl|[Pp]ls")
_DASH_RE = re.compile(r"\s*[-–]\s*")
_WORD_AHEAD_RE = re.compile(r"\s+[\w£$€(]")
_ONE_BEFORE_RE = re.compile(
    r"\b(?:the|a|every|each|this|next|that|Easter|Spring|Summer|May|August)\s+$", re.I
)
# Words that make a text opening hours: there, "1000-1400" and "9.30-4.30" are times.
_HOURS_WORD_RE = re.compile(
    r"\b(?:(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)days?|daily|week(?:day|end)s?|open(?:s|ing)?"
    r"|clos(?:e|es|ed|ing)|hours|last (?:entry|orders|admission)|(?:morning|afternoon|evening)s?"
    r"|(?:full|half|school) days?|lunch(?:time)?|sessions?)\b",
    re.IGNORECASE,
)
# Comparisons and a menu's path ("Settings > Account > Security"), which a voice reads as
# "greater than"; "w/" and "w/o" as written in notes.
_COMPARISONS = {"≥": " at least ", "≤": " at most ", "≠": " not equal to "}
_COMPARISON_RE = re.compile(r"\s*([≥≤≠])\s*")
_THAN_RE = re.compile(r"(?<![\w<>=-])\s*([<>])\s*(?=[$€£]?\d)")
_MENU_PATH_RE = re.compile(r"(?<=\w)\s+>\s+(?=[A-Z])")
# Lower-case only and after no number: "1.6 W/kg" and "5% w/w" are units.
_NOT_AVAILABLE_RE = re.compile(r"(?<![\w/])[Nn]/[Aa](?![\w/])")
_WITH_RE = re.compile(r"(?<![\w.%/])(?<!\d )w/(o\b|in\b|(?=\s?[a-z]{2,}))")
_DIGIT_RE = re.compile(r"\d")
_HASH_NUMBER_RE = re.compile(r"#\s?(?=\d)")
_HASHTAG_RE = re.compile(r"(?<![\w&])#(?=[A-Za-z])")
# A policy's clause number ("2.1", "3.2.1."); the sentence splitter reads it too.
CLAUSE_NUMBER = r"\d{1,2}(?:\.\d{1,2}){1,2}\.?"
# A capital, or a policy's clause number before one ("paid by 1 Dec. 1.3 Day care...").
_SENTENCE_GOES_ON_RE = re.compile(rf"\s+(?:{CLAUSE_NUMBER}\s+)?[A-Z]")
# A clause number opening a sentence of a policy ("2.1 We need a deposit", "2.3 A deposit"):
# a reference for the reader, read aloud it is noise.
# An FAQ's "Q:" and "A:" labels: the voice would read the letter.
_QA_LABEL_RE = re.compile(r"(?:^|(?<=[.!?]\s))[QA]:\s+(?=\S)")
_CLAUSE_NUMBER_RE = re.compile(rf"(?:^|(?<=[.!?]\s))(?:{CLAUSE_NUMBER})\s+(?=[A-Z][a-z]|[AI]\s)")
_DAY_NAMES = {
    "mon": "Monday", "tue": "Tuesday", "tues": "Tuesday", "wed": "Wednesday", "thu": "Thursday",
    "thur": "Thursday", "thurs": "Thursday", "fri": "Friday", "sat": "Saturday", "sun": "Sunday",
}  # fmt: skip
_SHORT_DAY = r"(?:Mon|Tues?|Wed|Thu(?:rs?)?|Fri|Sat|Sun)"
_SHORT_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sept?|Oct|Nov|Dec)"
_DAY_AHEAD_RE = re.compile(rf"\s+{_SHORT_DAY}")
_FULL_DAY = r"(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day"
_DAY = rf"({_SHORT_DAY})\.?"
_DAY_RANGE_RE = re.compile(rf"\b{_DAY}\s*[-–]\s*{_DAY}(?!\w)", re.IGNORECASE)
# A day's short name alone, as opening hours write it: capitalised, and before a time, a
# colon and a time or "closed", or another day ("Sat 9-1", "Wed: closed", "Sat & Sun",
# "Mon Tue Wed"), or after "closed" or "open" ("Closed Sun."). A voice would say "sat", "wed"
# and "sun"; names and words ("Dr Wei Sun", "Herald Sun 12 March", "Sun, sea and sand") are
# left alone. The names that are also words or names (Sun, Sat, Wed, Thu) count only where a
# list of hours puts them: first, after a list's mark, a sentence (not an initial), a time or
# "and", or before another day ("Sat 9-1", "Mon 9-5 Wed 9-1", "Sat & Sun", "Sun: closed"; not
# "Dr Sun 9-1", "J. Sun: 9-1", "Rising Sun: 12-11" or "defeated Sun 6-4"). The abbreviation's dot goes:
# "Sat. 9-1" is no sentence's end, and a word cap would take it for one.
_TIME_AHEAD = (
    r"\d{1,2}(?:[:.]\d\d)?\s?(?:[-–]|to\b|[AaPp]\.?[Mm]\b)|\d{1,2}:\d\d\b|[012]\d{3}\s?[-–]\s?[012]\d{3}\b"
    rf"|\d{{1,2}}(?:st|nd|rd|th)?\s+{_SHORT_MONTH}"
    r"|noon\b|midday\b|[Cc]losed\b|[012]\dh[0-5]\d\b"
)
_DAY_JOIN = r"(?:[&,/–-]|and\b|or\b|to\b|through\b)"
# "Sun & public holidays closed": a day beside the holidays that close with it.
_HOLIDAYS = r"(?:[Pp]ublic|[Bb]ank) [Hh]ol|BHs?\b"
_DAY_ALONE_RE = re.compile(
    rf"\b(?<!-)(?<![Cc]losed )(?<![Oo]pen )({_SHORT_DAY})(\.?)"
    rf"(?=\s*:?\s*(?:{_TIME_AHEAD})|\.?\s*{_DAY_JOIN}?\s*(?:{_SHORT_DAY}\b|{_HOLIDAYS}))"
)
# The short names that are no English word ("drop off Fri, collect Mon") are days anywhere.
# Not before a name ("Mon Cheri").
_PLAIN_DAY_RE = re.compile(r"(?<![\w'-])(Mon|Tues?|Thurs?|Fri)(?!\s+[A-Z][a-z])(\.?)(?![\w'-])")
_AMBIGUOUS_DAYS = frozenset({"Sun", "Sat", "Wed", "Thu"})
_LIST_BEFORE_RE = re.compile(
    r"(?:^|[,;:(|/&•*–-]|(?<!\bDr)(?<!\bMr)(?<!\bMs)(?<!\bMrs)(?<!\bSt)(?<!\b[A-Z])\."
    rf"|\d|\b[AaPp]\.?[Mm]\b\.?|\b(?:and|or|to|through|{_SHORT_DAY}|{_FULL_DAY})\.?)\s*$"
)
_DAY_NEXT_RE = re.compile(rf"\.?\s*{_DAY_JOIN}?\s*{_SHORT_DAY}\b")
# "Open Sun Lounge" is a place: a day after "open" ends there or is followed by a stop. Its
# dot stays: "Closed Sun. 10am-4pm on bank holidays" is two sentences.
_DAY_CLOSED_RE = re.compile(
    rf"\b([Cc]losed |[Oo]pen )({_SHORT_DAY})(\.?)(?!\w)"
    rf"(?:(?<=\.)|(?!\s+[A-Z])|(?=\s+(?:{_SHORT_DAY}|{_FULL_DAY})\b))"
)
# Cheap to look for in every answer; most name no day, or name it in full.
_SHORT_DAY_HINT_RE = re.compile(rf"{_SHORT_DAY}(?![a-z])")
# ... and the day after one ("Saturday & Sun closed", "Monday to Fri noon to 7 pm").
_DAY_AFTER_DAY_RE = re.compile(
    rf"({_FULL_DAY}\s*(?:&|and|or|to|through|,|/)\s*)({_SHORT_DAY})\.?(?!\w)"
    rf"(?=\s*(?:[,;.:&/)]|$|and\b|or\b|to\b|until\b|till\b|from\b|only\b|[Cc]losed\b|\d|noon\b|midday\b"
    rf"|{_SHORT_DAY}\b))"
)
_WEEK = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_FULL_DAY_WORD_RE = re.compile(rf"\b({_FULL_DAY})", re.IGNORECASE)
_DAY_CELL_RE = re.compile(
    rf"({_SHORT_DAY}|{_FULL_DAY})s?\.?(?:(\s*(?:[-–—/&+]|to\b|through\b|thru\b|and\b)\s*)({_SHORT_DAY}|{_FULL_DAY})s?\.?)?",
    re.IGNORECASE,
)
_FULL_MONTH = r"(?:January|February|March|April|May|June|July|August|September|October|November|December)"
_ANY_MONTH = rf"(?:{_FULL_MONTH}|{_SHORT_MONTH}\.?)"
_MONTH_NUMBERS = {
    name: i
    for i, name in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
    )
}
# Short day and month names, lower case, as the sentence splitter meets them before a dot.
SHORT_DATE_NAMES = frozenset(_DAY_NAMES) | frozenset(_MONTH_NUMBERS) | {"sept"}
_MONTH_HINT_RE = re.compile(_SHORT_MONTH)
# Two months joined as a range, each maybe after a day ("24 Dec - 2 Jan", "Apr–Oct").
_MONTH_RANGE_RE = re.compile(
    rf"\b({_ANY_MONTH})(?:\s\d{{4}})?\s*(?:[-–]|to\b|through\b|until\b|till\b)\s*(?:\d{{1,2}}(?:st|nd|rd|th)?\s)?({_ANY_MONTH})(?![a-z])"
)
# A short name beside a day or a year: "1 Mar", "1st Mar", "Mar 2026", "Mar 1st".
_MONTH_DATED_RE = re.compile(
    rf"(?<=\d )({_SHORT_MONTH})\.?(?![a-z])|(?<=\d(?:st|nd|rd|th) )({_SHORT_MONTH})\.?(?![a-z])"
    rf"|\b({_SHORT_MONTH})\.?(?= \d{{4}}\b| \d{{1,2}}(?:st|nd|rd|th)?\b)"
)
_FULL_MONTH_RE = re.compile(
    r"\b(January|February|March|April|May|June|July|August|September|October|November|December)\b"
)
_WEEK_PART_RE = re.compile(r"\b(week(?:end|day))s?\b", re.IGNORECASE)
_FULL_DAY_RANGE_RE = re.compile(
    rf"\b({_FULL_DAY})s?\s*(?:[-–]|to\b|through\b|thru\b|until\b|till\b)\s*({_FULL_DAY})", re.IGNORECASE
)
# "Mon/Wed/Fri": a voice would say "slash" between the days.
_DAYS_SLASH_RE = re.compile(
    "(?:" + "|".join(f"(?<={day})" for day in _DAY_NAMES.values()) + rf")\s?/\s?(?={_FULL_DAY}\b)"
)

# --- numbers, dates, times ------------------------------------------------------------
_TWENTY_FOUR_SEVEN_RE = re.compile(r"\b24\s?[/x]\s?7\b")
_ISO_DATE_RE = re.compile(
    r"(?<![\d-])(\d{4})-(\d{2})-(\d{2})"
    r"(?:T(\d{2}):(\d{2})(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?(?![\d-])"
)
# "13/03/2025" (day first) and "03/13/2025" (month first) can be told apart only where one
# side is over 12: those are said with the month's name, in their own order; "12/03/2025"
# stays as written (the 12th of March or the 3rd of December), as do two-digit years.
# A day and month without a year, where the day is over 12 ("closed 25/12 and 26/12"): only
# one reading; "6/2" could be either, and stays.
_DAY_MONTH_RE = re.compile(r"(?<![\w/.$€£¥₹])(1[3-9]|2\d|3[01])/(0?[1-9]|1[0-2])(?![\w/]|[.,]\d)")
_SLASH_DATE_RE = re.compile(r"(?<![\d/.])(\d{1,2})/(\d{1,2})/((?:19|20)\d\d)(?![\d/]|[.,]\d)")
# "0900-1730": 24-hour times without a colon, said as times, not dialled as a phone number:
# where one side starts with a zero (a range of years never does), or in opening hours
# ("Sat 1000-1400"). So is one such time after "at", "until" and the like in opening hours
# ("Closes at 1700 on Fridays"), on the hour or a quarter past, half past or to.
_HHMM_RANGE_RE = re.compile(
    r"(?<![\w.:/-])([01]\d|2[0-3])([0-5]\d)\s?[-–]\s?([01]\d|2[0-3])([0-5]\d)(?![\w:/-]|[.,]\d)"
)
_FOUR_DIGITS_RE = re.compile(r"\d{4}")
_HHMM_AFTER_RE = re.compile(
    r"\b((?:at|until|till|from|by|before|after|to) )([01]\d|2[0-3])([03]0|[14]5)(?![\w:/-]|[.,]\d)"
)
# "Text STOP to 60123": a short code is dialled, digit by digit, like a phone number.
_SHORT_CODE_RE = re.compile(
    r"\b((?:[Tt]ext|TEXT|SMS)(?: the word)? [\"“']?[A-Z][A-Z0-9]+[\"”']? to )(\d{4,6})(?![\d.,]\d|\w)"
)
# Digit groups (a UK number's "960318", a German "12345678" after its area code), one to
# three spaces apart as a flattened table leaves them; unbroken, only after a leading zero.
_PHONE_RE = re.compile(
    r"(?<![\w.,+\-/:$€£])(\+\d{1,3}[ .-]?)?(\(\d{1,5}\)[ .-]?)?"
    r"(?:\d{1,6}(?:(?:[.-]| {1,3})\d{1,8}){0,5}|0\d{7,11})(?![\w/:-]|[.,]\d)"
)
_PHONE_GROUP_RE = re.compile(r"\d+")
# "+44 (0)20 ...": the zero is dialled only from within the country; from abroad it is wrong
# (not in Italy, +39, whose numbers keep it).
_TRUNK_ZERO_RE = re.compile(r"(\+(?!39\b)\d{1,3})\s?\(0\)\s?(?=\d)")
_DIGIT_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
# A US ZIP code after its city and state ("Portland, ME 04101", ", IL 62704-1234") or after
# "ZIP": digit by digit, as people say them, not "four thousand one hundred one".
_STATES = (
    "AL|AK|AZ|AR|CA|CO|CT|DE|DC|FL|GA|HI|ID|IL|IN|IA|KS|KY|LA|ME|MD|MA|MI|MN|MS|MO|MT|NE|NV|NH|NJ"
    "|NM|NY|NC|ND|OH|OK|OR|PA|RI|SC|SD|TN|TX|UT|VT|VA|WA|WV|WI|WY"
)
# A state's code before its ZIP is said by name: "OH", "OR", "IN" and "ME" are heard as words.
_STATE_NAMES = dict(
    zip(
        _STATES.split("|"),
        [
            "Alabama", "Alaska", "Arizona", "Arkansas", "California", "Colorado", "Connecticut", "Delaware",
            "DC", "Florida", "Georgia", "Hawaii", "Idaho", "Illinois", "Indiana", "Iowa", "Kansas",
            "Kentucky", "Louisiana", "Maine", "Maryland", "Massachusetts", "Michigan", "Minnesota",
            "Mississippi", "Missouri", "Montana", "Nebraska", "Nevada", "New Hampshire", "New Jersey",
            "New Mexico", "New York", "North Carolina", "North Dakota", "Ohio", "Oklahoma", "Oregon",
            "Pennsylvania", "Rhode Island", "South Carolina", "South Dakota", "Tennessee", "Texas", "Utah",
            "Vermont", "Virginia", "Washington", "West Virginia", "Wisconsin", "Wyoming",
        ],
        strict=True,
    )
)  # fmt: skip
# An Irish Eircode ("D02 X285") or a Canadian postal code ("V6B 1A1"): a voice would read
# "X285" as "X two hundred eighty-five"; each character is said.
_CODE_POSTCODE_HINT_RE = re.compile(r"\b[A-Z]\d[\dA-Z] [A-Z\d]{3,4}\b")
_CODE_POSTCODE_RE = re.compile(
    r"\b([AC-FHKNPRTV-Y]\d{2}|D6W) ((?=[\dA-Z]*\d)(?=[\dA-Z]*[A-Z])[\dAC-FHKNPRTV-Y]{4})\b"
    r"|\b([ABCEGHJ-NPRSTVXY]\d[A-Z]) (\d[A-Z]\d)\b"
)
# An Australian state or territory before its four-digit postcode ("Geelong VIC 3220"): the
# state by name, the postcode digit by digit, as Australians say it.
_AU_STATES = {
    "NSW": "New South Wales", "VIC": "Victoria", "QLD": "Queensland", "WA": "Western Australia",
    "SA": "South Australia", "TAS": "Tasmania", "ACT": "ACT", "NT": "Northern Territory",
}  # fmt: skip
_AU_POSTCODE_HINT_RE = re.compile(r"\b(?:NSW|VIC|QLD|WA|SA|TAS|ACT|NT) \d{4}\b")
_AU_POSTCODE_RE = re.compile(r"\b([A-Z][a-z]+,? )(NSW|VIC|QLD|WA|SA|TAS|ACT|NT) (\d{4})\b(?![\d,-]|\.\d)")
# Not before another number, written or spelled: "OR 97201 (503) 555-0100" would run on.
_DIGIT_NAME = "(?:zero|one|two|three|four|five|six|seven|eight|nine)"
_ZIP_HINT_RE = re.compile(r"\b\d{5}\b")
_ZIP_RE = re.compile(
    rf"((?<=[a-z]), (?:{_STATES}) |\b(?:ZIP|[Zz]ip)(?: [Cc]ode)?:? )(\d{{5}}(?:-\d{{4}})?)\b"
    rf"(?!-?\d| \d(?!\d*(?:st|nd|rd|th)\b)| \(| {_DIGIT_NAME}\b|\s*[–-]\s*\d|\s+(?:to|through|or|and)\s+\d)"
)
# Numbers read digit by digit (_speak_phone: digits bound, groups parted by bound commas)
# listed with commas: "0800 123 4567, 0800 765 4321 or 01632 960 123".
_SPELLED_NUMBER = rf"(?<![\w{_JOIN}])(?:plus{_JOIN})?{_DIGIT_NAME}(?:,?{_JOIN}{_DIGIT_NAME})+(?![\w{_JOIN}])"
_PHONE_LIST_RE = re.compile(rf"{_SPELLED_NUMBER}(?:, {_SPELLED_NUMBER})+(?:,? (or|and) {_SPELLED_NUMBER})?")
_PHONE_LIST_COMMA_RE = re.compile(rf", (?={_SPELLED_NUMBER})")
# "555-123-4567 x204": an extension after a number read digit by digit (x and digits written
# together; "2 x 10" is a product, "scone x2" a count).
_EXTENSION_X_RE = re.compile(r" x\.?(?=\d{1,5}\b)")
# Seven digits with separators need at least eight such characters in a row.
_MAYBE_PHONE_RE = re.compile(r"[+(\d][\d ().+-]{6,}\d")
_LOCAL_PHONE_RE = re.compile(r"\d{3}-\d{4}")
# A number that starts with a zero is a code, never a quantity ("01632 960318",
# "07700900256"): read digit by digit wherever it stands. Its first group has two to five
# digits ("0 2 4 6 months" is a list of numbers) and spaces part the groups ("01-02-2024" is
# a date); 24-hour times ("0900 1700"), a date ("01 02 2024") and the rest of an amount
# ("€2 000 000 000") are none.
_LEADING_ZERO_RE = re.compile(r"0\d{1,4}(?: +\d+)*|0\d{7,11}")
_CLOCKS_RE = re.compile(r"(?:[01]\d|2[0-3])[0-5]\d(?: +(?:[01]\d|2[0-3])[0-5]\d)+")
_SPACED_DATE_RE = re.compile(r"(?:0[1-9]|[12]\d|3[01]) +(?:0[1-9]|1[0-2]) +(?:19|20)\d\d")
_AFTER_DIGITS_RE = re.compile(r"\d[ .,]$")
# Thousands that end in "000" ("1 400 000", "125 000 000") are an amount whatever word comes
# before them ("the number of visitors is 1 400 000"); other groups of three after such a
# word stay a number to dial ("call 1 800 123 456", Spanish "912 345 678").
_GROUPED_AMOUNT_RE = re.compile(r"[1-9]\d{0,2}(?:[ .]\d{3})*[ .]000")
# The North American shape (555-123-4567, 1 555 123 4567) is a phone number wherever it
# stands; other digit groups ("10 20 30 40", "1 234 567", "2019 2020 2021") are one only
# when they start with "+" or "(" or follow a word that announces one ("call 0800 123 456").
_NANP_RE = re.compile(r"(?:1[ .-])?\d{3}([ .-])\d{3}\1\d{4}")
_PHONE_CONTEXT_RE = re.compile(
    r"\b(?:call|phone|telephone|tel|dial|fax|line|number|ring|text|reach|contact|mobile|cell"
    r"|hotline|whatsapp|sms)\b\W*(?:\w+\W+){0,3}$",
    re.IGNORECASE,
)
# Three or more parts joined by hyphens (ISBNs, part numbers, "1-800-FLOWERS") are codes,
# not ranges.
_HYPHEN_RE = re.compile(r"(?<=[\w.])[-–](?=[\w$€£])")
# Two hyphenated numbers that are one code, not a range: a second part that starts with a
# zero ("2024-00123"; "2200-0100" is a range of times, "2008-09" of years). A ZIP+4 alone
# ("62704-1234") stays a range: "10000-8000 BC" is shaped alike.
_CODE_PAIR_RE = re.compile(r"\W*(?!\d{4}-\d{4}\W*$|\d{4}-\d\d\W*$)\d+-0\d+\W*")
_DOTTED_DATE_RE = re.compile(r"\d{1,2}\.\d{1,2}\.\d{2,4}")
_RANGE_RE = re.compile(r"(\d|\d ?[ap]m|[ap]\.m\.)\s*[-–]\s*(?=[$€£]?\d)", re.IGNORECASE)
# "5.30pm", "9.45 p.m.": a time written with a dot (British, Irish, Australian usage); and
# "08.30-17.30", a range of such times in 24 hours: whole or quarter hours, a side
# zero-padded ("08": "Mains 14.00-19.00" is prices), no currency before or after ("£15.00-20.00", "EUR
# 15.00-20.00", "15.00-20.00 €"), no unit or percent after ("13.00-15.00 kg", "10.15-13.45
# percent"), and no date ("20.12-03.01").
_AM_PM = r"[AaPp](?:\.[Mm]\.|[Mm]\b)"
_DOT_CLOCK_RE = re.compile(
    rf"\b(?<![:.,$€£¥])(\d{{1,2}})\.([0-5]\d)(?=\s?{_AM_PM}|\s*[-–]\s*\d{{1,2}}[.:][0-5]\d\s?{_AM_PM})"
)
_DOT_TIME_HINT_RE = re.compile(r"\d\.[0-5]\d")
# In opening hours, one side may be a whole hour ("9-5.30", "7.30-6"), and one time may
# follow "until" or "at" ("breakfast until 8.30", "gates open at 8.35").
_DOT_CLOCKS_RE = re.compile(
    r"\b(?<![:.,$€£¥])((?:[01]?\d|2[0-3])(?:\.(?:[03]0|[14]5))?)(\s*[-–]\s*)((?:[01]?\d|2[0-3])(?:\.(?:[03]0|[14]5))?)"
    r"(?![\d.,]?\d)"
)
_DOT_AFTER_RE = re.compile(
    r"\b((?:at|until|till|from|by|before|after) (?:about |around )?)((?:[01]?\d|2[0-3])\.[0-5]\d)"
    r"(?![\d.,]?\d)"
)
_NOT_CLOCKS_BEFORE_RE = re.compile(r"(?:[$€£¥₹]|\b[A-Z]{3})\s?$")
_NOT_CLOCKS_AFTER_RE = re.compile(
    r"\s?(?:[$€£¥₹%°]|[A-Z]{3}\b|percent\b|per cent\b|per\b|seconds?\b|euros?\b|pounds?\b|dollars?\b"
    r"|(?:hours?|hrs?|minutes?|mins?|miles?|metres?|meters?|kilometres?|inches|feet|litres?)\b"
    r"|(?:kg|g|mg|ml|l|km|m|cm|mm|lbs?|oz|ft|mi)\b)"
)
# Two times of one range: a side that can only be a 24-hour time makes the other one too
# ("9:00-17:00" is 9 AM to 5 PM). Two sides that could be either stay as written: "9:30-5:30"
# is no 5:30 AM, whatever else the paragraph says.
_CLOCK_PAIR_RE = re.compile(
    rf"\b(?<![:.])(\d{{1,2}}):([0-5]\d)((?:{_JOIN}|\s)(?:to|until|till|through|and)(?:{_JOIN}|\s)|\s*[-–]\s*)"
    rf"(\d{{1,2}}):([0-5]\d)(?![\d:]|\s?{_AM_PM})"
)
_CLOCK_RE = re.compile(r"(?<![\d:.])(\d{1,2}):([0-5]\d)(?![\d:])(?:\s?([AaPp])(?:\.[Mm]\.|[Mm]\b))?")
_HOUR_AMPM_RE = re.compile(r"(?<![\w:.])(\d{1,2})\s?([AaPp])(?:\.[Mm]\.|[Mm]\b)")
# "12 PM" is heard as either; a caller understands "noon" and "midnight".
_NOON = {"P": "noon", "A": "midnight"}
# A number's own suffix ("1st", "22nd", "13th"); "NW10 3ND" is a postcode, not an ordinal.
_ORDINAL_RE = re.compile(
    r"(?<![A-Z]\d )(?<![A-Z]\d\d )(?<![A-Z]\d[A-Z] )"
    r"\b(\d{0,5}(?:1(?=st)|2(?=nd)|3(?=rd)|1[123](?=th)|[04-9](?=th)))(?:st|nd|rd|th)\b",
    re.IGNORECASE,
)

# --- ranges, sizes and numbers one dials ---------------------------------------------
# "1st-14th September": the dash is "to" ("first to fourteenth").
_ORDINAL_RANGE_RE = re.compile(r"(\d(?:st|nd|rd|th))\s*[-–]\s*(?=\d{1,2}(?:st|nd|rd|th)\b)")
# "Monday 28 October - Friday 1 November", "Friday 4 PM - Monday 11 AM": a spaced dash
# between a date or time and a day is "to".
_DAY_RANGE_DASH_RE = re.compile(
    r"(?:(?<=\d)|(?<=[AP]M)|(?<=day)|(?<=ber)|(?<=uary)|(?<=March)|(?<=April)|(?<=May)|(?<=June)|(?<=July)"
    r"|(?<=August))\s+[-–]\s+(?=(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)\b)"
)
# South African and French clock times ("06h00-22h00"), and a military one ("1030hrs").
_H_CLOCK_RE = re.compile(r"\b([01]\d|2[0-3])h([0-5]\d)\b|\b([01]\d|2[0-3])([0-5]\d)\s?hrs?\b")
# An area code with a hyphen ("020-2543 8877", "0253-2345678", as India writes them): a
# phone number, not a range.
_TRUNK_HYPHEN_PHONE_RE = re.compile(r"(?<![\w.,-])(0\d{2,4})-(\d{4} \d{4}|\d{6,8})(?![\w-]|[.,]\d)")
# An account, VAT, reference or other number named so, of five digits or more in one run
# ("Acc. No. 62123456789", "branch code 250655"): said digit by digit, not as billions.
_REFERENCE_HINT_RE = re.compile(r"\d{5}")
_REFERENCE_RE = re.compile(
    r"(\b(?:[Nn]umber|NUMBER|[Aa]ccount|[Rr]eference|[Rr]ef\.?|VAT|[Cc]ode|ID|[Pp]olicy|[Mm]embership"
    r"|[Rr]egistration|IBAN|PIN)(?:\s+(?:is|number|no\.?))?:?\s)(\d{5,})(?![\w/-]|[.,]\d)"
)
# Sizes: "a 5x10 unit", "2 m x 1.5 m" ("5 by 10"); "3 x 10 minutes" may be a count, left.
_DIMENSIONS_RE = re.compile(
    r"(?<![\w.])([1-9]\d*(?:\.\d+)?)x(?=\d)|(?<![\w.])([1-9]\d*(?:\.\d+)?\s?(?:m|cm|mm|ft|in))\s?x\s?(?=\d)"
)
# "min. 8 week stay", "(2-hr min.)": a minimum; "5 min." stays minutes (_UNITS).
_MINIMUM_RE = re.compile(
    r"(?<![\w.])(?<!\d )min\.?(?=\s+\d)|(?<=[a-z] )min\.(?=\s*[),;]|\s*$)|\bMin\.(?=\s+[a-z])"
)
_MAXIMUM_RE = re.compile(
    r"(?<![\w.])max\.?(?=\s+\d)|(?<=[a-z] )max\.(?=\s*[),;]|\s*$)|\bMax\.(?=\s+(?:\d|[a-z]))"
)
# An English school's year groups ("Y1-Y4", "KS2 (Y3-Y6)"): "why one" is no year.
_SCHOOL_YEARS_RE = re.compile(r"\bY([1-9]|1[0-3])(?:\s*[-–]\s*Y([1-9]|1[0-3]))?\b")
# Emergency and public service numbers one dials ("call 999", "NHS 111", "dial 911") are said
# digit by digit, as they are known: not "nine hundred and eleven".
# Shared with the evaluation's gold check (app/evaluation/metrics.py).
SERVICE_NUMBERS = r"(?:999|911|111|112|101|988|000|995|10111|10177|100|102|108)"
_SERVICE_ENDS = r"\b(?![\d,.:]\d|\s?(?:%|percent|pounds|dollars|rupees|times|people|km|miles))"
_SERVICE_HINT_RE = re.compile(rf"\b{SERVICE_NUMBERS}\b")
_SERVICE_NUMBER_RE = re.compile(
    r"\b((?:[Cc]all|CALL|[Dd]ial|DIAL|[Rr]ing|[Pp]hone|[Tt]ext|NHS|[Pp]olice|[Aa]mbulance|[Ff]ire|SAPS"
    r"|[Ee]mergency(?: services)?)(?: on| number)?:? (?:\([A-Z]+\) )?)"
    rf"({SERVICE_NUMBERS}){_SERVICE_ENDS}"
)
# "call 112 or 999", "police 100 / 112": the next number of a list of them.
_SERVICE_NEXT_RE = re.compile(
    rf"((?:(?<=\bone)|(?<=\btwo)|(?<=\bzero)|(?<=\bnine)|(?<=\bseven)|(?<=\beight)|(?<=\bfive))\)?"
    rf"(?: \([A-Za-z]+\))?(?:,? or |,? and | ?/ ?|, ))({SERVICE_NUMBERS}){_SERVICE_ENDS}"
)

# --- money, percent, degrees, units ---------------------------------------------------
_CURRENCIES = {
    "$": ("dollar", "dollars", "cent", "cents"),
    "€": ("euro", "euros", "cent", "cents"),
    "£": ("pound", "pounds", "penny", "pence"),
    "¥": ("yen", "yen", "", ""),
    "₹": ("rupee", "rupees", "paisa", "paise"),
    "₩": ("won", "won", "", ""),
    "₱": ("peso", "pesos", "centavo", "centavos"),
}
# Dollars and reais written with letters before the "$" ("C$20", "HK$100", "R$149,90"), and
# ISO codes ("USD 25", "27 CHF"). Letters before "$" that are not here leave the amount as
# written: "XY$5" is no "XY5 dollars".
_US, _CANADIAN, _AUSTRALIAN, _SINGAPORE = (
    (f"{c} dollar", f"{c} dollars", "cent", "cents") for c in ("US", "Canadian", "Australian", "Singapore")
)
_NAMED_CURRENCIES = {
    "US": _US, "U.S.": _US, "C": _CANADIAN, "CA": _CANADIAN, "A": _AUSTRALIAN, "AU": _AUSTRALIAN,
    "S": _SINGAPORE, "SG": _SINGAPORE,
    "NZ": ("New Zealand dollar", "New Zealand dollars", "cent", "cents"),
    "HK": ("Hong Kong dollar", "Hong Kong dollars", "cent", "cents"),
    "NT": ("New Taiwan dollar", "New Taiwan dollars", "cent", "cents"),
    "MX": ("Mexican peso", "Mexican pesos", "centavo", "centavos"),
    "R": ("real", "reais", "centavo", "centavos"),
}  # fmt: skip
_CODES = {
    "USD": _NAMED_CURRENCIES["US"],
    "EUR": _CURRENCIES["€"],
    "GBP": _CURRENCIES["£"],
    "JPY": _CURRENCIES["¥"],
    "INR": _CURRENCIES["₹"],
    "KRW": _CURRENCIES["₩"],
    "CAD": _NAMED_CURRENCIES["C"],
    "AUD": _NAMED_CURRENCIES["A"],
    "NZD": _NAMED_CURRENCIES["NZ"],
    "HKD": _NAMED_CURRENCIES["HK"],
    "SGD": _NAMED_CURRENCIES["S"],
    "MXN": _NAMED_CURRENCIES["MX"],
    "BRL": _NAMED_CURRENCIES["R"],
    "CHF": ("Swiss franc", "Swiss francs", "centime", "centimes"),
}
_SCALES = {
    "k": "thousand", "thousand": "thousand", "m": "million", "mn": "million", "million": "million",
    "b": "billion", "bn": "billion", "billion": "billion", "trillion": "trillion", "tn": "trillion",
    "lakh": "lakh", "crore": "crore",
}  # fmt: skip
# Rupees written "Rs. 500", "Rs 1,000", "INR 500": the rupee sign's amount.
_RUPEES_WRITTEN_RE = re.compile(r"\b(?:Rs\.?|INR)\s?(?=\d)")
# "₹1,50,000": Indian grouping (lakhs), said as the number it is ("150,000 rupees").
_INDIAN_GROUPS_RE = re.compile(r"(?<=₹)\s?\d{1,2}(?:,\d\d)+,\d{3}\b")
# South African rand: "R450.00", "R2,85" (a decimal comma), "R1 250" (thousands by a space), or
# "R450/day"; a bare "R132" may be a road or a code, and stays.
_RAND_RE = re.compile(
    r"(?<![\w$])R ?(\d{1,3}(?:[ \u00a0]\d{3})+|\d+)(?:([.,])(\d\d))?(?=(/)|(?![\w-]|[.,]\d))"
)
_SYMBOLS = "".join(_CURRENCIES)
_AMOUNT = r"(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?"
# After a code, thousands may be grouped by spaces too ("EUR 23 800").
_GROUPED_AMOUNT = r"(\d{1,3}(?:[ \u00a0\u202f]\d{3})+|\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?"
# After a symbol, only in two groups ("€2 000 000"): one group is as often a price and the
# next number of a flattened menu or table ("Burger £12 650" calories, "£60\n300 Queen St").
_SPACED_AMOUNT = (
    r"(\d{1,3}(?:[ \u00a0\u202f]\d{3}){2,}(?![\w%+-]|\s(?:m|ml|cl|l|g|kg|km|cm|mm)\b)"
    r"|\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?"
)
_SCALE = r"(?:\s?(thousand|million|billion|trillion|lakh|crore|bn|mn|tn|[kmb])\b)?"
# "27.–" (Swiss and German price tags): a whole amount.
_WHOLE_MARK = r"(?:\.[–-](?!\w))?"
_MONEY_BEFORE_RE = re.compile(
    rf"(?:\b(US|U\.S\.) ?|(?<![A-Za-z]))([{_SYMBOLS}])\s?{_SPACED_AMOUNT}{_SCALE}{_WHOLE_MARK}",
    re.IGNORECASE,
)
_MONEY_AFTER_RE = re.compile(rf"(?<![\w.,]){_AMOUNT}{_SCALE}\s?([{_SYMBOLS}])", re.IGNORECASE)
# The amount ends here: no letter, digit, apostrophe grouping ("1'000") or decimal comma
# ("23,50") goes on from it, nor a group of thousands after a space. Anything else is left as
# written rather than said as another amount ("EUR 23,50" is no "23 euros,50").
_AMOUNT_ENDS = r"(?![\w'’]|[.,'’]\d|[ \u00a0\u202f]\d{3}\b)"
_PREFIXED_DOLLAR_RE = re.compile(rf"\b([A-Z]{{1,2}})\$\s?{_AMOUNT}{_SCALE}{_AMOUNT_ENDS}")
# Reais are written with a decimal comma ("R$149,90", "R$ 1.234,56"); English-style figures
# ("R$1.5 million", "R$1,234.56") are the rule above's.
_REAIS_RE = re.compile(r"\bR\$\s?(\d{1,3}(?:\.\d{3})+|\d+)(?:,(\d{2}))?(?![.,]?\d)")
# With a code, thousands are often grouped by spaces ("EUR 23 800"): one amount, not 23 euros
# and 800. A year after a code is a year ("constant USD 2015"); before one, only an amount no
# other number stands right before ("children under 12 100 EUR").
_GROUP_SPACE_RE = re.compile(r"[ \u00a0\u202f]")
_CODE_BEFORE_RE = re.compile(
    rf"\b({'|'.join(_CODES)})\s?(?!(?:19|20)\d\d\b(?!\.\d)){_GROUPED_AMOUNT}{_SCALE}{_WHOLE_MARK}{_AMOUNT_ENDS}"
)
_CODE_AFTER_RE = re.compile(
    rf"(?<![\w.,'’])(?<!\d[ \u00a0\u202f]){_AMOUNT}{_SCALE}{_WHOLE_MARK}\s?({'|'.join(_CODES)})\b"
)
_CENTS_ONLY_RE = re.compile(r"(?<![\w.])\$\.(\d{2})\b")
_MAYBE_CODE_RE = re.compile(rf"\b(?:{'|'.join(_CODES)})\b")
_PER_RE = re.compile(
    r"(?<=\w)\s?/\s?(month|mo|year|yr|week|wk|fortnight|quarter|qtr|day|hour|hr|night|person)\b"
)
# Other rates only after a number or an amount: "parent/child" and "call/visit" are no rates.
_PER_UNIT_RE = re.compile(
    r"/\s?(session|class|lesson|visit|appointment|consultation|item|unit|pet|child|adult|guest|room"
    r"|head|treatment|service|job|call|load|bag|box|vehicle|car|tooth|km|mi|mile|kg|lb|min|minute)\b"
)
_MONEY_NAMES = "|".join(
    sorted({n.rsplit(" ", 1)[-1] for names in (*_CURRENCIES.values(), *_CODES.values()) for n in names if n})
)
_AMOUNT_BEFORE_RE = re.compile(rf"(?:\d|{_MONEY_NAMES})\s?$")
_MONEY_NAMED_BEFORE_RE = re.compile(rf"(?:{_MONEY_NAMES})\s?$")
# Shorthand rates, only after an amount of money, already said in words: "£45 p/h", "£25pp",
# "£650 pcm", "£40 pppn" ("a 40 pp booklet" has pages).
_PER_SHORTHAND_RE = re.compile(r"\s?\b(p/hr?|p/w|p/m|p/p|pcm|pppn|pp)(?![\w/])", re.IGNORECASE)
_PER_SHORTHAND = {
    "p/h": "hour", "p/hr": "hour", "p/w": "week", "p/m": "month", "pcm": "calendar month", "p/p": "person",
    "pp": "person", "pppn": "person per night",
}  # fmt: skip
_PER_WORDS = {
    "mo": "month", "yr": "year", "wk": "week", "qtr": "quarter", "hr": "hour", "km": "kilometer",
    "mi": "mile", "kg": "kilogram", "lb": "pound", "min": "minute",
}  # fmt: skip
_PERCENT_RE = re.compile(r"\s?%")
_TEMPERATURE_RE = re.compile(r"(?<![\w.])([-−]?)(\d+(?:\.\d+)?)\s?°\s?([CF])\b")
_DEGREES_RE = re.compile(r"(?<=\d)\s?°")
_UNITS = {
    "km/h": ("kilometer per hour", "kilometers per hour"),
    "kph": ("kilometer per hour", "kilometers per hour"),
    "mph": ("mile per hour", "miles per hour"),
    "km": ("kilometer", "kilometers"),
    "cm": ("centimeter", "centimeters"),
    "mm": ("millimeter", "millimeters"),
    "kg": ("kilogram", "kilograms"),
    "mg": ("milligram", "milligrams"),
    "ml": ("milliliter", "milliliters"),
    "mL": ("milliliter", "milliliters"),
    "lb": ("pound", "pounds"),
    "lbs": ("pound", "pounds"),
    "oz": ("ounce", "ounces"),
    "ft": ("foot", "feet"),
    "sq ft": ("square foot", "square feet"),
    "cu ft": ("cubic foot", "cubic feet"),
    "t": ("tonne", "tonnes"),
    "kWh": ("kilowatt hour", "kilowatt hours"),
    "kW": ("kilowatt", "kilowatts"),
    "KB": ("kilobyte", "kilobytes"),
    "MB": ("megabyte", "megabytes"),
    "GB": ("gigabyte", "gigabytes"),
    "TB": ("terabyte", "terabytes"),
    "hr": ("hour", "hours"),
    "hrs": ("hour", "hours"),
    "min": ("minute", "minutes"),
    "h": ("hour", "hours"),
    "mins": ("minute", "minutes"),
    "sec": ("second", "seconds"),
    "secs": ("second", "seconds"),
    "wk": ("week", "weeks"),
    "wks": ("week", "weeks"),
    "yr": ("year", "years"),
    "yrs": ("year", "years"),
    "mos": ("month", "months"),
    "mi": ("mile", "miles"),
}
_OLD_AFTER_RE = re.compile(r"[\s-]old")
_UNIT_RE = re.compile(
    r"(?<![\w.])(\d+(?:,\d{3})*(?:\.\d+)?)\s?("
    + "|".join(re.escape(unit) for unit in sorted(_UNITS, key=len, reverse=True))
    # "10 min. then ring": the abbreviation's dot, no sentence's end, goes with it.
    + r")(?![\w/])(?:\.(?=\s+[a-z]))?"
)
_AMPERSAND_RE = re.compile(r"\s*&\s*")
# "Main St · Open daily · 555-0100": a separator, said as a pause (a comma would run a
# postcode into the phone number after it).
_SEPARATOR_DOT_RE = re.compile(r"\s+[·•]\s+")
_AT_RE = re.compile(r"\s*@\s*")
_PLUS_BETWEEN_RE = re.compile(r"(?<=\d)\s*\+\s*(?=\d)")
_PLUS_AFTER_RE = re.compile(r"(?<=\d)\+(?!\w)")
_ABOUT_RE = re.compile(r"[~≈]\s?(?=\d)")
_ALREADY_ABOUT = ("about", "approximately", "around", "roughly", "circa", "some")
# "-$5": a minus sign before an amount (not a hyphen after a word or number).
_MINUS_MONEY_RE = re.compile(r"(?<![\w.,])[-−](?=[$€£¥]\s?\d)")
# "+£2" on a menu: an amount added to the price.
_PLUS_MONEY_RE = re.compile(r"(?<![\w.,+])\+(?=[$€£¥]\s?\d)")
# Euro amounts with a decimal comma ("€5,50", "€1.234,56", "5,50 €") become "€1,234.56"
# before the money rule reads them; a comma followed by three digits stays a thousands mark.
_EURO_DECIMAL_RE = re.compile(
    r"€\s?(\d{1,3}(?:\.\d{3})+|\d+),(\d{2})(?!\d|,\d)|(?<![\w.,])(\d{1,3}(?:\.\d{3})+|\d+),(\d{2})\s?€"
)

# A euro amount with dots every three digits and no decimal comma is in thousands ("€1.950",
# "1.500 €": prices in thousands end in a 0, three decimals of a fuel price or a share
# rarely do: "€1.699", "€1.125" stay), unless it is a price per unit ("€1.650/l", "a litre")
# or has a scale ("€1.250 million").
_NOT_THOUSANDS = (
    r"\s?(?:/|per\b|an?\s(?i:litre|liter|kilo|kg|kwh|unit)\b"
    r"|thousand\b|million\b|billion\b|bn\b|mn\b|[kmb]\b)"
)
_EURO_THOUSANDS_RE = re.compile(
    rf"(€\s?)([1-9]\d{{0,2}}(?:\.\d{{3}})*\.\d\d0)(?!\d|[.,]\d|{_NOT_THOUSANDS})"
    rf"|(?<![\w.,])([1-9]\d{{0,2}}(?:\.\d{{3}})*\.\d\d0)(\s?€)(?!{_NOT_THOUSANDS})"
)
# "€35pp", "£20 p.p.": per person (after an amount only: "a 12pp booklet" has pages).
_PER_PERSON_RE = re.compile(r"([$€£]\s?\d[\d,.]*)\s?(?:pp|p\.p\.)(?!\w)")
# "inc. VAT", "incl GST", "ex VAT", "excl. tax": a voice would say "inc" or "ex". Not "Inc."
# (a company) nor "ex" before "tax" ("our ex tax adviser").
_TAX_RE = re.compile(
    r"\b(?:(inc|incl|Incl|INCL)|(ex|excl|Excl|EXCL))\b\.?\s*(?=(?:VAT|GST|HST)\b)"
    r"|\b(?:(incl|Incl)|(excl|Excl))\b\.?\s*(?=tax\b)"
)

# --- tidying --------------------------------------------------------------------------
_SPACE_BEFORE_PUNCT_RE = re.compile(r"\s+([,.;:!?)\]])")
_SPACE_AFTER_OPEN_RE = re.compile(r"([(\[])\s+")
_EMPTY_BRACKETS_RE = re.compile(r"\(\s*\)|\[\s*\]")
_WEAK_BEFORE_STOP_RE = re.compile(r"[,;:]+(?=[.!?])")
_DOUBLE_STOP_RE = re.compile(r"\.(?<!\.\.)\.(?!\.)")
_DOUBLE_COMMA_RE = re.compile(r",{2,}")
_LEADING_JUNK_RE = re.compile(r"^(?:[\s,;:!?)\]]|[.-]+(?=\s))+")
_TRAILING_WEAK_RE = re.compile(r"[\s,;:–—-]+$")
_TERMINAL_RE = re.compile(r"[.!?…。！？][\"'”’)\]」』）]*$")
_WORD_END_RE = re.compile(r"[.!?…。！？][\"'”’)\]」』）]*$")
_ALNUM_RE = re.compile(r"[^\W_]")


def make_speakable(text: str, *, max_words: int = 60) -> str:
    """Rewrite `text` as plain sentences that a TTS voice reads well.

    Markdown, emoji, control characters and bare URLs are removed or spoken, notation is
    written out (see the module docstring), whitespace is collapsed, and the result ends
    with sentence punctuation. At most `max_words` words are kept: the text is cut after
    the last full sentence that fits, if that keeps at least half the allowance, else at
    the word limit. A number, amount, date or time said in several words is kept or
    dropped whole, never cut (a cut phone number or price is a wrong one). The result is
    stable: cleaning it again changes nothing. Only input with nothing speakable in it
    (emoji, bare markup) gives an empty string.
    """
    if max_words < 1:
        raise ValueError("max_words must be at least 1")
    spoken = _speak(text, max_words, keep_dropped=False)
    if not spoken:
        # Something meaningful may have lived only in a dropped part, e.g. "(https://x.org)".
        spoken = _speak(text, max_words, keep_dropped=True)
    return spoken


def speech_problems(text: str, *, max_words: int = 60, read: Sequence[str] = ()) -> list[str]:
    """Say what in `text` would sound wrong when read aloud; an empty list means none.

    `read` is what the answer was drawn from (the retrieved passages), when known: a word of
    source talk that those passages use themselves is theirs, read out ("leave your
    documents at the front desk" at a tax office, "according to the Good Schools Guide"),
    not the answerer talking about its sources."""
    if not text.strip():
        return ["empty answer"]
    problems = [f"markdown syntax left: {name}" for name, pattern in _MARKDOWN_CHECKS if pattern.search(text)]
    problems.extend(f"bare URL: {match.group(0).rstrip('.,;:!?')}" for match in _URL_RE.finditer(text))
    marks = dict.fromkeys(match.group(0) for match in _NOTE_MARK_RE.finditer(text))
    problems.extend(f"footnote or editor's mark: {mark}" for mark in marks)
    emoji = "".join(match.group(0) for match in _EMOJI_RE.finditer(text))
    if emoji:
        problems.append(f"emoji: {emoji}")
    symbols = dict.fromkeys(match.group(0) for match in _RAW_SYMBOL_RE.finditer(text))
    problems.extend(f"symbol read aloud: {symbol}" for symbol in symbols)
    word_count = len(text.split())
    if word_count > max_words:
        problems.append(f"too long: {word_count} words, the cap is {max_words}")
    mentions = dict.fromkeys(match.group(0).lower() for match in _SOURCE_TALK_RE.finditer(text))
    if read:
        passages = " ".join(read)
        mentions = {
            mention: None
            for mention in mentions
            if not re.search(rf"\b{re.escape(mention)}\b", passages, re.IGNORECASE)
        }
    problems.extend(f"talks about its sources: {mention!r}" for mention in mentions)
    return problems


# Symbols a voice reads by name ("open brace", "greater than or equal to"), and an amount
# whose currency sign was left unread ("|", "<" and ">" are the markdown and tag checks').
_RAW_SYMBOL_RE = re.compile(r"[≥≤≠{}^\\]|[$€£¥₹₩₱](?=\s?\d)")

_MARKDOWN_CHECKS = (
    ("heading '#'", re.compile(r"(?m)^\s{0,3}#{1,6}\s")),
    ("emphasis '*'", re.compile(r"\*")),
    ("emphasis '_'", re.compile(r"(?<!\w)__?(?=[^\s_])[^_\n]+(?<=[^\s_])__?(?!\w)")),
    ("backtick", re.compile(r"`")),
    ("link", re.compile(r"!?\[[^\]]*\]\([^)]*\)")),
    ("list marker", re.compile(r"(?m)^\s*(?:[-+•]|\d{1,3}[.)])\s")),
    ("blockquote '>'", re.compile(r"(?m)^\s*>")),
    ("table '|'", re.compile(r"\|")),
    ("horizontal rule", re.compile(r"(?m)^\s*(?:[-*_=]\s*){3,}$")),
    ("HTML tag", _TAG_RE),
)
_SOURCE_TALK_RE = re.compile(
    r"\b(?:documents?|the context|the provided text|knowledge base|according to the"
    r"|search(?:es|ed|ing)?|chunks?|sources?)\b",
    re.IGNORECASE,
)


def _bind(spoken: str) -> str:
    """One spoken unit: the cap keeps or drops it whole (see _JOIN)."""
    return spoken.replace(" ", _JOIN)


def _speak(text: str, max_words: int, *, keep_dropped: bool) -> str:
    if "<" in text:
        text = _CDATA_RE.sub(r"\1", _HIDDEN_MARKUP_RE.sub(" ", text))
    text = html.unescape(_LINE_BREAK_RE.sub("\n", text))
    text = _SPACE_LIKE_RE.sub(" ", _CONTROL_RE.sub("", unicodedata.normalize("NFC", text)))
    text = text.replace("℃", "°C").replace("℉", "°F")
    sentences = [
        _end_sentence(spoken)
        for block in _blocks(text)
        if (spoken := _without_blobs(_inline(block, keep_dropped=keep_dropped)))
    ]
    return _cap_words(" ".join(sentences), max_words).replace(_JOIN, " ")


def _without_blobs(text: str) -> str:
    if len(text) <= _LONG_TOKEN_CHARS or not _LONG_TOKEN_RE.search(text):
        return text
    return _SPACE_BEFORE_MARK_RE.sub(r"\1", " ".join(_LONG_TOKEN_RE.sub(" ", text).split())).rstrip(" ,;:")


def _blocks(text: str) -> list[str]:
    """Split markdown into blocks that each become one or more spoken sentences.

    Paragraph lines are joined; headings, list items, table rows and paragraphs each end
    a sentence of their own.
    """
    blocks: list[str] = []
    paragraph: list[str] = []

    def flush() -> None:
        if paragraph:
            blocks.append(" ".join(paragraph))
            paragraph.clear()

    ascii_only = text.isascii()
    in_fence = False
    for raw_line in text.split("\n"):
        if _FENCE_RE.match(raw_line):
            flush()
            in_fence = not in_fence
            continue
        bulleted = False
        line = raw_line.strip()
        if not ascii_only and _MAYBE_EMOJI_RE.search(line):
            bulleted = _STARTS_WITH_EMOJI_RE.match(line) is not None
            line = _EMOJI_RE.sub(" ", line).strip()
        if in_fence:
            if line:
                paragraph.append(line)
            continue
        while line.startswith(">"):
            line = line[1:].lstrip()
        if not line or _RULE_RE.match(line):
            flush()
            continue
        if heading := _HEADING_RE.match(line):
            flush()
            blocks.append(heading.group(1) or "")
            continue
        if bold_line := _BOLD_LINE_RE.match(line):
            # A line that is all bold is a heading in disguise.
            flush()
            blocks.append(bold_line.group(2))
            continue
        if "|" in line:
            flush()
            if not _TABLE_SEPARATOR_RE.match(line):
                cells = (cell.strip() for cell in line.strip().strip("|").split("|"))
                blocks.append(", ".join(cell for cell in cells if cell))
            continue
        if item := _LIST_ITEM_RE.match(line):
            flush()
            line = item.group(1)
        elif bulleted:
            flush()
        paragraph.append(line)
    flush()
    return blocks


def _inline(text: str, *, keep_dropped: bool) -> str:
    """Apply the inline rules to one block, in an order where earlier rules protect later ones.

    Each group of rules runs only when its trigger characters occur: most answers are
    plain prose, and this runs on the live-call path.
    """
    if "[" in text or "<" in text or "`" in text:
        text = _markup(text, keep_dropped=keep_dropped)
    # Addresses go before emphasis and symbols: their "_", "." and "@" are not markup.
    if "://" in text or "www." in text.lower():
        text = _PAREN_URL_RE.sub(lambda m: f" ({_url_domain(m.group(1))})" if keep_dropped else "", text)
        text = _URL_RE.sub(_speak_url, text)
    if "@" in text:
        text = _AT_RE.sub(" at ", _EMAIL_RE.sub(_speak_email, text))
    if "\\" in text:
        text = _MD_ESCAPE_RE.sub(r"\1", text)
    if "*" in text or "_" in text or "~" in text:
        text = _emphasis(text)
    if "." in text or "vs" in text:
        text = _ABBREVIATION_RE.sub(_speak_abbreviation, text)
    if _SHORTHAND_HINT_RE.search(text):
        text = _SHORTHAND_RE.sub(_speak_shorthand, text)
    if "VAT" in text or "GST" in text or "HST" in text or "tax" in text:
        text = _TAX_RE.sub(_speak_tax, text)
    if text[:1].isdigit() or ". " in text:
        text = _CLAUSE_NUMBER_RE.sub("", text)
    if "Q:" in text or "A:" in text:
        text = _QA_LABEL_RE.sub("", text)
    text = _days_in_full(text)
    if _MONTH_HINT_RE.search(text):
        text = _months_in_full(text)
    if "day/" in text:
        text = _DAYS_SLASH_RE.sub(" and ", text)
    if _DIGIT_RE.search(text):
        text = _numbers(text)
    if "°" in text:
        text = _DEGREES_RE.sub(_bind(" degrees"), text)
    if "%" in text:
        text = _PERCENT_RE.sub(_bind(" percent"), text)
    if "#" in text:
        text = _HASHTAG_RE.sub("", text)
    if "&" in text:
        text = _AMPERSAND_RE.sub(" and ", text)
    if "·" in text or "•" in text:
        text = _SEPARATOR_DOT_RE.sub("; ", text)
    if "≥" in text or "≤" in text or "≠" in text:
        text = _COMPARISON_RE.sub(lambda m: _COMPARISONS[m[1]], text)
    if ">" in text or "<" in text:
        if len(_MENU_PATH_RE.findall(text)) >= 2:  # a path of three steps or more: "A > B > C"
            text = _MENU_PATH_RE.sub(", then ", text)
        text = _THAN_RE.sub(lambda m: " more than " if m[1] == ">" else " less than ", text)
    if "/" in text:
        text = _NOT_AVAILABLE_RE.sub("not available", text)
        text = _WITH_RE.sub(lambda m: {"o": "without", "in": "within"}.get(m[1], "with "), text)
    return _tidy(text)


def _markup(text: str, *, keep_dropped: bool) -> str:
    text = _IMAGE_RE.sub(lambda m: m.group(1) if keep_dropped else " ", text)
    text = _LINK_RE.sub(r"\1", text)
    text = _REF_LINK_RE.sub(r"\1", text)
    text = _AUTOLINK_RE.sub(r"\1", text)
    text = _NOTE_MARK_RE.sub("", text)
    text = _INLINE_CODE_RE.sub(r"\2", text).replace("`", "")
    text = _TAG_RE.sub("", _BLOCK_TAG_RE.sub(" ", _BR_RE.sub(" ", text)))
    return _UNCLOSED_TAG_RE.sub(" ", text) if "=" in text else text


def _emphasis(text: str) -> str:
    # Twice, for bold that wraps bold ("**a __b__ c**").
    text = _STRONG_RE.sub(r"\2", _STRONG_RE.sub(r"\2", text))
    text = _STRIKE_RE.sub("", text)  # struck-out words are retracted: not said at all
    text = _EM_UNDERSCORE_RE.sub(r"\1", _EM_STAR_RE.sub(r"\1", text))
    text = _KEY_STAR_RE.sub(r"\1 star", text)
    return _STRAY_STAR_RE.sub("", _TIMES_STAR_RE.sub(" times ", text))


def _numbers(text: str) -> str:
    """The rules that need a digit; dates go before phones and ranges, phones before ranges."""
    text = _TWENTY_FOUR_SEVEN_RE.sub("twenty four seven", text)
    if "h" in text:
        text = _H_CLOCK_RE.sub(lambda m: _clock_words(int(m[1] or m[3]), m[2] or m[4]), text)
    if "x" in text:
        text = _DIMENSIONS_RE.sub(lambda m: (m[1] or m[2]) + " by ", text)
    if "min" in text or "Min." in text:
        text = _MINIMUM_RE.sub(lambda m: "Minimum" if m[0][0] == "M" else "minimum", text)
    if "max" in text or "Max." in text:
        text = _MAXIMUM_RE.sub(lambda m: "Maximum" if m[0][0] == "M" else "maximum", text)
    if "Y" in text:
        text = _SCHOOL_YEARS_RE.sub(lambda m: f"Years {m[1]} to {m[2]}" if m[2] else f"Year {m[1]}", text)
    if _SERVICE_HINT_RE.search(text):
        text = _SERVICE_NUMBER_RE.sub(lambda m: m[1] + _bind(_spell_digits(m[2])), text)
        for _ in range(3):
            text = _SERVICE_NEXT_RE.sub(lambda m: m[1] + _bind(_spell_digits(m[2])), text)
    if "-" in text:
        text = _ISO_DATE_RE.sub(_speak_iso_date, text)
    if "." in text and _DOT_TIME_HINT_RE.search(text):
        text = _DOT_CLOCK_RE.sub(_dot_clock, text)
        text = _DOT_CLOCKS_RE.sub(_dot_clocks, text)
        text = _DOT_AFTER_RE.sub(_dot_after, text)
    if _CODE_POSTCODE_HINT_RE.search(text):
        text = _CODE_POSTCODE_RE.sub(
            lambda m: _bind(f"{_spell_code(m[1] or m[3])}, {_spell_code(m[2] or m[4])}"), text
        )
    if _AU_POSTCODE_HINT_RE.search(text):
        text = _AU_POSTCODE_RE.sub(lambda m: f"{m[1]}{_AU_STATES[m[2]]} " + _bind(_spell_digits(m[3])), text)
    if _ZIP_HINT_RE.search(text):
        text = _ZIP_RE.sub(
            lambda m: _state_named(m[1]) + _bind(", ".join(_spell_digits(g) for g in m[2].split("-"))), text
        )
    if "/" in text:
        text = _slash_dates(text)
        text = _DAY_MONTH_RE.sub(lambda m: _bind(f"{int(m[1])} {month_name[int(m[2])]}"), text)
    if _FOUR_DIGITS_RE.search(text):
        text = _HHMM_RANGE_RE.sub(_speak_hhmm_range, text)
        text = _HHMM_AFTER_RE.sub(_speak_hhmm_after, text)
    if " to " in text:
        text = _SHORT_CODE_RE.sub(lambda m: m[1] + _bind(_spell_digits(m[2])), text)
    if "0" in text and "-" in text:
        text = _TRUNK_HYPHEN_PHONE_RE.sub(
            lambda m: _bind(", ".join(_spell_digits(group) for group in (m[1], *m[2].split()))), text
        )
    if _MAYBE_PHONE_RE.search(text):
        if "(0)" in text:
            text = _TRUNK_ZERO_RE.sub(r"\1 ", text)
        text = _PHONE_RE.sub(_speak_phone, text)
        if " x" in text:
            text = _EXTENSION_X_RE.sub(_speak_extension_x, text)
        if _JOIN in text:
            text = _PHONE_LIST_RE.sub(_speak_phone_list, text)
    if "-" in text or "–" in text:
        text = _ORDINAL_RANGE_RE.sub(r"\1 to ", text)
        text = _RANGE_RE.sub(_speak_range, text)
    if ":" in text:
        if text.count(":") > 1:
            text = _CLOCK_PAIR_RE.sub(_speak_clock_pair, text)
        text = _sub_keeping_stop(_CLOCK_RE, _speak_clock, text)
    text = _sub_keeping_stop(_HOUR_AMPM_RE, _speak_hour_ampm, text)
    if "Rs" in text or "INR" in text:
        text = _RUPEES_WRITTEN_RE.sub("₹", text)
    if "₹" in text:
        text = _INDIAN_GROUPS_RE.sub(lambda m: f"{int(m[0].replace(',', '')):,}", text)
    if "R" in text:
        text = _RAND_RE.sub(_speak_rand, text)
    if any(symbol in text for symbol in _SYMBOLS):
        if "€" in text:
            text = _EURO_DECIMAL_RE.sub(_euro_decimal, text)
            text = _EURO_THOUSANDS_RE.sub(
                lambda m: "".join(g or "" for g in m.groups()).replace(".", ","), text
            )
        if "p" in text:
            text = _sub_keeping_stop(_PER_PERSON_RE, lambda m: m[1] + " per person", text)
        if "$" in text:
            text = _REAIS_RE.sub(
                lambda m: _bind(_money_words(_NAMED_CURRENCIES["R"], m[1].replace(".", ","), m[2], None)),
                text,
            )
            text = _PREFIXED_DOLLAR_RE.sub(_speak_prefixed_dollars, text)
            text = _CENTS_ONLY_RE.sub(lambda m: _bind(_money_words(_CURRENCIES["$"], "0", m[1], None)), text)
        if "-" in text or "−" in text:
            text = _MINUS_MONEY_RE.sub(_bind("minus "), text)
        if "+" in text:
            text = _PLUS_MONEY_RE.sub(_bind("plus "), text)
        text = _MONEY_BEFORE_RE.sub(
            lambda m: _speak_money(
                _NAMED_CURRENCIES[m[1].upper()] if m[1] else _CURRENCIES[m[2]], _grouped(m[3]), m[4], m[5]
            ),
            text,
        )
        text = _MONEY_AFTER_RE.sub(lambda m: _speak_money(_CURRENCIES[m[4]], m[1], m[2], m[3]), text)
    if _MAYBE_CODE_RE.search(text):
        text = _CODE_BEFORE_RE.sub(lambda m: _speak_money(_CODES[m[1]], _grouped(m[2]), m[3], m[4]), text)
        text = _CODE_AFTER_RE.sub(lambda m: _speak_money(_CODES[m[4]], m[1], m[2], m[3]), text)
    if "p" in text:
        text = _PER_SHORTHAND_RE.sub(_speak_per_shorthand, text)
    if "/" in text:
        text = _PER_RE.sub(lambda m: _bind(" per " + _PER_WORDS.get(m[1], m[1])), text)
        text = _PER_UNIT_RE.sub(_speak_per_unit, text)
    if "°" in text:
        text = _TEMPERATURE_RE.sub(_speak_temperature, text)
    text = _UNIT_RE.sub(_speak_unit, text)
    text = _ORDINAL_RE.sub(lambda m: str(num2words(int(m[1]), lang="en", to="ordinal")), text)
    if "#" in text:
        text = _HASH_NUMBER_RE.sub(lambda m: _sentence_case("number ", m), text)
    if _REFERENCE_HINT_RE.search(text):
        text = _REFERENCE_RE.sub(lambda m: m[1] + _bind(_spell_digits(m[2])), text)
    if "+" in text:
        text = _PLUS_AFTER_RE.sub(_bind(" plus"), _PLUS_BETWEEN_RE.sub(_bind(" plus "), text))
    if "~" in text or "≈" in text:
        text = _ABOUT_RE.sub(_speak_about, text)
    if " - " in text or " – " in text:
        text = _DAY_RANGE_DASH_RE.sub(" to ", text)
    return text


def _tidy(text: str) -> str:
    text = " ".join(text.split())
    if "(" in text or "[" in text:
        text = _SPACE_AFTER_OPEN_RE.sub(r"\1", _EMPTY_BRACKETS_RE.sub("", text))
    text = _SPACE_BEFORE_PUNCT_RE.sub(r"\1", text)
    text = _WEAK_BEFORE_STOP_RE.sub("", text)
    if ".." in text:
        text = _DOUBLE_STOP_RE.sub(".", text)
    if ",," in text:
        text = _DOUBLE_COMMA_RE.sub(",", text)
    text = _LEADING_JUNK_RE.sub("", text, count=1).strip()
    # Nothing left to say if no letter or digit survived.
    return text if _ALNUM_RE.search(text) else ""


def _end_sentence(text: str) -> str:
    if _TERMINAL_RE.search(text):
        return text
    return _TRAILING_WEAK_RE.sub("", text) + "."


def _cap_words(text: str, max_words: int) -> str:
    """At most `max_words` spoken words. A bound unit (_JOIN) counts as the words it is
    said in, and is kept whole or dropped whole."""
    words = text.split(" ")
    if len(words) + text.count(_JOIN) <= max_words:
        return text
    kept: list[str] = []
    said: list[int] = []  # words said up to and including kept[i]
    for word in words:
        total = (said[-1] if said else 0) + 1 + word.count(_JOIN)
        if total > max_words:
            break
        kept.append(word)
        said.append(total)
    if not kept:
        # One unit longer than the whole allowance: say it rather than nothing.
        return _end_sentence(words[0])
    for index in range(len(kept) - 1, -1, -1):
        if said[index] * 2 < max_words:
            break
        if _ends_sentence(kept[index]):
            return " ".join(kept[: index + 1])
    return _end_sentence(" ".join(kept))


def _ends_sentence(word: str) -> bool:
    if not _WORD_END_RE.search(word):
        return False
    bare = word.rstrip("\"'”’)]").rstrip(".!?…").lower()
    # "U.S." and "J." rarely end a sentence mid-answer; "Dr." never does.
    return bare not in NON_TERMINAL_ABBREVIATIONS and not (len(bare) == 1 or "." in bare)


def _speak_abbreviation(match: re.Match[str]) -> str:
    group = match.lastindex or 0
    spoken = _ABBREVIATIONS[group]
    if group == 5 and _NOUN_AHEAD_RE.match(match.string, match.end()):
        spoken = "approximate"  # "Approx. time: 20 minutes"
    if group == 3 and _stop_swallowed(match):
        return spoken + "."
    return _sentence_case(spoken, match)


def _sentence_case(spoken: str, match: re.Match[str]) -> str:
    before = match.string[: match.start()].rstrip()
    return spoken.capitalize() if not before or before[-1] in ".!?" else spoken


def _stop_swallowed(match: re.Match[str]) -> bool:
    """Whether the period a match ends with also ended the sentence."""
    rest = match.string[match.end() :]
    return not rest.strip() or _SENTENCE_GOES_ON_RE.match(rest) is not None


def _sub_keeping_stop(pattern: re.Pattern[str], speak: Callable[[re.Match[str]], str], text: str) -> str:
    """Substitute, keeping a sentence-ending period that the abbreviation swallowed."""

    def replace(match: re.Match[str]) -> str:
        spoken = speak(match)
        if match.group(0).endswith(".") and spoken != match.group(0) and _stop_swallowed(match):
            return spoken + "."
        return spoken

    return pattern.sub(replace, text)


def _url_domain(url: str) -> str:
    host = re.sub(r"^(?:(?:https?|ftp)://)?", "", url, flags=re.IGNORECASE)
    host = re.split(r"[/?#]", host, maxsplit=1)[0].rsplit("@", 1)[-1].split(":", 1)[0].lower()
    return host.removeprefix("www.")


def _speak_url(match: re.Match[str]) -> str:
    url = match.group(0)
    core = url.rstrip(".,;:!?")
    return _url_domain(core) + url[len(core) :]


def _speak_email(match: re.Match[str]) -> str:
    local = match.group(1).replace(".", " dot ").replace("_", " underscore ").replace("+", " plus ")
    domain = match.group(2).lower().replace(".", " dot ")
    return f"{local} at {domain}"


def _days_in_full(text: str) -> str:
    """The short day names of opening hours written in full ("Mon-Thu 9-8; Sun closed")."""
    if "-" in text or "–" in text:
        text = _sub_keeping_stop(_DAY_RANGE_RE, _speak_day_range, text)
    if _SHORT_DAY_HINT_RE.search(text):
        # A time or another day follows: the dot is the abbreviation's, never a sentence's.
        text = _DAY_ALONE_RE.sub(_speak_day_alone, text)
        text = _DAY_CLOSED_RE.sub(_speak_day_closed, text)
        text = _sub_keeping_stop(_DAY_AFTER_DAY_RE, lambda m: m[1] + _DAY_NAMES[m[2].lower()], text)
        text = _sub_keeping_stop(_PLAIN_DAY_RE, lambda m: _DAY_NAMES[m[1].lower().rstrip("s")], text)
    return text


def days_in_full(cell: str) -> str | None:
    """A table cell of nothing but days, with their full names ("Sun" -> "Sunday", "Tue–Thu"
    -> "Tuesday to Thursday", "Sat & Sun" -> "Saturday and Sunday"); None for any other cell."""
    match = _DAY_CELL_RE.fullmatch(cell.strip())
    if match is None:
        return None
    first, join, last = match.groups()
    if last is None:
        return _day_name(first)
    word = "to" if join.strip().lower() in ("-", "–", "—", "to", "through", "thru") else "and"
    return f"{_day_name(first)} {word} {_day_name(last)}"


def _day_name(day: str) -> str:
    # A short name ("Sun", "Thurs"; "Weds" and "Tues" lose their s) or a full one.
    return _DAY_NAMES.get(day.lower().rstrip("s"), day.capitalize())


def implied_date_words(text: str) -> list[str]:
    """The days of the week ``text``'s hours cover without writing them in full, in week
    order, then "weekend" and "weekday" where it covers those without the word: short names
    and the days inside a range ("Mon to Thu 9-8; Sun 1-5" -> Monday, Tuesday, Wednesday,
    Thursday, Sunday, weekend), the days of "weekends" and "weekdays" ("Open weekdays 9-5" ->
    Monday to Friday); then the months a range of months covers, and short month names
    beside a day or a year, in full ("Open Apr–Oct" -> April to October); and the holidays
    of "Xmas" and "BH" (Christmas, bank holiday). Search indexes
    them, since a caller asks "are you open on a Wednesday?", "at the weekend?" or "in
    August?" in words the hours do not use."""
    full = _days_in_full(text)
    named = {day.capitalize() for day in _FULL_DAY_WORD_RE.findall(full)}
    for first, last in _FULL_DAY_RANGE_RE.findall(full):
        start, end = _WEEK.index(first.capitalize()), _WEEK.index(last.capitalize())
        named.update(_WEEK[(start + i) % 7] for i in range((end - start) % 7 + 1))
    said = {word.lower() for word in _WEEK_PART_RE.findall(text)}
    if "weekend" in said:
        named.update(_WEEK[5:])
    if "weekday" in said:
        named.update(_WEEK[:5])
    written = {day.capitalize() for day in _FULL_DAY_WORD_RE.findall(text)}
    words = [day for day in _WEEK if day in named and day not in written]
    if "weekend" not in said and not named.isdisjoint(_WEEK[5:]):
        words.append("weekend")
    if "weekday" not in said and named.issuperset(_WEEK[:5]):
        words.append("weekday")
    return words + _implied_months(text) + _implied_holidays(text)


def _implied_holidays(text: str) -> list[str]:
    # "Closed Xmas & BH": the holidays shorthand names, in the words a caller says.
    if _SHORTHAND_HINT_RE.search(text) is None:
        return []
    keys = {match[1].lower() for match in _SHORTHAND_RE.finditer(text)}
    words = ["Christmas"] if "xmas" in keys else []
    if not keys.isdisjoint(("bh", "bhs", "bank hol", "bank hols")):
        words += ["bank", "holiday"]
    return words


def _implied_months(text: str) -> list[str]:
    # "Open Apr–Oct", "closed 24 Dec - 2 Jan", "Sept to Mar": the months a range covers, and
    # short names beside a day or a year ("1 Mar", "Mar 2026"), in full, unless written so.
    if _MONTH_HINT_RE.search(text) is None:
        return []
    named: set[int] = set()
    for first, last in _MONTH_RANGE_RE.findall(text):
        start, end = _MONTH_NUMBERS[first[:3].lower()], _MONTH_NUMBERS[last[:3].lower()]
        named.update((start + i) % 12 for i in range((end - start) % 12 + 1))
    named.update(
        _MONTH_NUMBERS[next(g for g in m.groups() if g)[:3].lower()] for m in _MONTH_DATED_RE.finditer(text)
    )
    written = {_MONTH_NUMBERS[m[:3].lower()] for m in _FULL_MONTH_RE.findall(text)}
    return [month_name[i + 1] for i in sorted(named - written)]


def _speak_day_closed(match: re.Match[str]) -> str:
    # "Closed Sat. and Sun.": the dot is the abbreviation's when another day follows.
    dot = "" if _DAY_NEXT_RE.match(match.string, match.end()) else match[3]
    return match[1] + _DAY_NAMES[match[2].lower()] + dot


def _speak_day_alone(match: re.Match[str]) -> str:
    day, dot = match.groups()
    text, start, end = match.string, match.start(), match.end()
    if (
        day in _AMBIGUOUS_DAYS
        and not _LIST_BEFORE_RE.search(text, max(0, start - 12), start)
        and not _DAY_NEXT_RE.match(text, end)
    ):
        return match.group(0)
    # "Sat.9-1": the dot parted the day from the time; a space does now.
    gap = " " if dot and end < len(text) and text[end].isalnum() else ""
    return _DAY_NAMES[day.lower()] + gap


def _speak_day_range(match: re.Match[str]) -> str:
    return f"{_DAY_NAMES[match.group(1).lower()]} to {_DAY_NAMES[match.group(2).lower()]}"


_MARKS_AFTER = frozenset(".?!:;,")


def _speak_shorthand(match: re.Match[str]) -> str:
    word, dot = match.groups()
    key = word.lower()
    rest = match.string[match.end() :]
    if key in ("incl", "excl"):
        ahead = _WORD_AHEAD_RE.match(rest) is not None
        spoken = (("includ" if key == "incl" else "exclud") + "ing") if ahead else key + "usive"
        # "incl.?" or "incl.:": the mark that follows ends the phrase, not the dot.
        stop = "" if ahead or rest[:1] in _MARKS_AFTER else dot
        return (spoken.capitalize() if word[0].isupper() else spoken) + stop
    spoken = _SHORTHAND[key]
    if key in ("bh", "bhs") and (
        _DAY_AHEAD_RE.match(rest)
        or _ONE_BEFORE_RE.search(match.string, max(0, match.start() - 12), match.start())
    ):
        spoken = "bank holiday"  # "BH Mon", "the May BH", "every BH": one bank holiday
    elif word[0].isupper() and word[1:2].islower():
        spoken = spoken[0].upper() + spoken[1:]  # "Appts only", "Bank Hols"
    if dot and key.startswith("appt") and not _stop_swallowed(match):
        dot = ""
    return spoken + dot


def _months_in_full(text: str) -> str:
    """Short month names of a range or beside a day or a year in full ("Apr–Oct" -> "April
    to October", "24 Dec" -> "24 December"), as a voice would say them."""
    text = _sub_keeping_stop(_MONTH_RANGE_RE, _speak_month_range, text)
    return _sub_keeping_stop(
        _MONTH_DATED_RE, lambda m: _month_in_full(next(g for g in m.groups() if g)), text
    )


def _speak_month_range(match: re.Match[str]) -> str:
    # The text between the months keeps its day or year; its dash is said "to".
    between = _DASH_RE.sub(" to ", match.string[match.end(1) : match.start(2)], count=1)
    return _month_in_full(match[1]) + between + _month_in_full(match[2])


def _month_in_full(name: str) -> str:
    return month_name[_MONTH_NUMBERS[name[:3].lower()] + 1]


def _speak_iso_date(match: re.Match[str]) -> str:
    year, month, day, hour, minute = match.groups()
    if not (1 <= int(month) <= 12 and 1 <= int(day) <= 31):
        return match.group(0)
    spoken = f"{month_name[int(month)]} {int(day)}, {year}"
    if hour is not None and int(hour) <= 23:
        spoken += " at " + _clock_words(int(hour), minute)
    return _bind(spoken)


def _slash_dates(text: str) -> str:
    """Slash dates said with the month's name where their order is known: from a side over 12,
    in the date itself or in another date of the same text ("01/04/2025 - 31/03/2026")."""
    dates = [(int(m[1]), int(m[2])) for m in _SLASH_DATE_RE.finditer(text)]
    day_first = any(first > 12 for first, _ in dates)
    month_first = any(second > 12 for _, second in dates)
    if day_first == month_first:  # neither known, or the text mixes both
        return _SLASH_DATE_RE.sub(lambda m: _speak_slash_date(m, day_first=None), text)
    return _SLASH_DATE_RE.sub(lambda m: _speak_slash_date(m, day_first=day_first), text)


def _speak_slash_date(match: re.Match[str], *, day_first: bool | None) -> str:
    first, second, year = int(match[1]), int(match[2]), match[3]
    if (12 < first <= 31 and 1 <= second <= 12) or (day_first and 1 <= first <= 31 and 1 <= second <= 12):
        return _bind(f"{first} {month_name[second]} {year}")
    if (12 < second <= 31 and 1 <= first <= 12) or (
        day_first is False and 1 <= first <= 12 and 1 <= second <= 31
    ):
        return _bind(f"{month_name[first]} {second}, {year}")
    return match.group(0)


def _speak_phone_list(match: re.Match[str]) -> str:
    # Each number's groups are parted by commas, so the list's own commas say its word:
    # "A, B or C" -> "A, or B or C"; "A, B" -> "A, or B".
    return _PHONE_LIST_COMMA_RE.sub(f", {match[1] or 'or'} ", match[0])


def has_phone_number(text: str) -> bool:
    """Whether ``text`` holds a number a voice reads digit by digit, as one to dial."""
    return _MAYBE_PHONE_RE.search(text) is not None and any(
        _speak_phone(match) != match.group(0) for match in _PHONE_RE.finditer(text)
    )


def _speak_phone(match: re.Match[str]) -> str:
    number = match.group(0)
    groups = _PHONE_GROUP_RE.findall(number)
    digits = sum(len(group) for group in groups)
    prefixed = number.startswith(("+", "("))
    shaped = (
        prefixed
        or _NANP_RE.fullmatch(number) is not None
        or _LOCAL_PHONE_RE.fullmatch(number) is not None
        or _leading_zero(match)
        or _PHONE_CONTEXT_RE.search(match.string, max(0, match.start() - 60), match.start()) is not None
    )
    if digits < 7 or not shaped or _DOTTED_DATE_RE.fullmatch(number):
        return number
    if not prefixed and _GROUPED_AMOUNT_RE.fullmatch(number):
        return number
    spoken = [_spell_digits(group) for group in groups]
    if number.startswith("+"):
        spoken[0] = "plus " + spoken[0]
    return _bind(", ".join(spoken))


def _speak_per_shorthand(match: re.Match[str]) -> str:
    if _MONEY_NAMED_BEFORE_RE.search(match.string, max(0, match.start() - 8), match.start()) is None:
        return match.group(0)
    return _bind(" per " + _PER_SHORTHAND[match[1].lower()])


def _speak_per_unit(match: re.Match[str]) -> str:
    if _AMOUNT_BEFORE_RE.search(match.string, max(0, match.start() - 8), match.start()) is None:
        return match.group(0)
    spaced = match.start() > 0 and match.string[match.start() - 1].isspace()
    return _bind(("per " if spaced else " per ") + _PER_WORDS.get(match[1], match[1]))


def _speak_extension_x(match: re.Match[str]) -> str:
    # A number the phone rule read digit by digit ends in a digit's name bound to the one
    # before it (_bind); "bunk beds for one x2" is a count.
    before = match.string[max(0, match.start() - 7) : match.start()]
    spelled = _JOIN in before and before.rsplit(_JOIN, 1)[-1] in _DIGIT_WORDS
    return " extension " if spelled else match.group(0)


def _state_named(before_zip: str) -> str:
    """ ", OH " -> ", Ohio "; "ZIP: " as it is."""
    if not before_zip.startswith(", "):
        return before_zip
    return f", {_STATE_NAMES[before_zip[2:-1]]} "


def _spell_code(code: str) -> str:
    """ "X285" -> "X two eight five": letters as they are, digits by name."""
    return " ".join(_DIGIT_WORDS[int(c)] if c.isdigit() else c for c in code)


def _spell_digits(digits: str) -> str:
    return " ".join(_DIGIT_WORDS[int(digit)] for digit in digits)


def _leading_zero(match: re.Match[str]) -> bool:
    number = match.group(0)
    return (
        _LEADING_ZERO_RE.fullmatch(number) is not None
        and _CLOCKS_RE.fullmatch(number) is None
        and _SPACED_DATE_RE.fullmatch(number) is None
        and _AFTER_DIGITS_RE.search(match.string, max(0, match.start() - 2), match.start()) is None
    )


def _speak_range(match: re.Match[str]) -> str:
    text = match.string
    start = text.rfind(" ", 0, match.start()) + 1
    end = text.find(" ", match.end())
    if len(_HYPHEN_RE.findall(text, start, len(text) if end < 0 else end)) >= 2:
        return match.group(0)
    if match.group(1).isdigit() and _CODE_PAIR_RE.fullmatch(text, start, len(text) if end < 0 else end):
        return match.group(0)
    return match.group(1) + _bind(" to ")


def _speak_about(match: re.Match[str]) -> str:
    # "about ~5" is said once.
    before = match.string[: match.start()].rstrip().lower()
    return "" if before.endswith(_ALREADY_ABOUT) else _bind("about ")


def _euro_decimal(match: re.Match[str]) -> str:
    whole, cents = (match[1], match[2]) if match[1] is not None else (match[3], match[4])
    return f"€{whole.replace('.', ',')}.{cents}"


def _clock_words(hour: int, minute: str) -> str:
    period = "AM" if hour < 12 else "PM"
    hour = hour % 12 or 12
    return f"{hour} {period}" if minute == "00" else f"{hour}:{minute} {period}"


def _speak_tax(match: re.Match[str]) -> str:
    spoken = "including " if match[1] or match[3] else "excluding "
    return spoken.capitalize() if match[0][0].isupper() else spoken


def _dot_clock(match: re.Match[str]) -> str:
    # "12.50 pm" after a price is per month ("GBP 45.50 pm", "£ 25.00 pm").
    if not 1 <= int(match[1]) <= 12 or _NOT_CLOCKS_BEFORE_RE.search(
        match.string, max(0, match.start() - 5), match.start()
    ):
        return match.group(0)
    return f"{match[1]}:{match[2]}"


def _dot_clocks(match: re.Match[str]) -> str:
    start, dash, end = match.groups()
    if "." not in start and "." not in end:
        return match.group(0)
    hours = [side.split(".")[0] for side in (start, end)]
    padded = "." in start and "." in end and any(len(hour) == 2 and hour.startswith("0") for hour in hours)
    # "7.30-8.45": both sides a quarter of an hour, one not whole, the end later; a price
    # range is rarely written so ("4.00-6.00" stays).
    quarters = (
        "." in start
        and "." in end
        and not (start.endswith(".00") and end.endswith(".00"))
        and float(start) < float(end)
    )
    text = match.string
    if (
        not (padded or quarters or _in_hours(match))
        or _NOT_CLOCKS_BEFORE_RE.search(text, max(0, match.start() - 5), match.start())
        or _NOT_CLOCKS_AFTER_RE.match(text, match.end())
    ):
        return match.group(0)
    return f"{start.replace('.', ':')}{dash}{end.replace('.', ':')}"


def _dot_after(match: re.Match[str]) -> str:
    # "until 8.30" is a time, and so is "at 8.35" after an hours word ("gates open at 8.35";
    # not "tickets at 4.50 on Sundays").
    if match[2][-2:] in ("00", "15", "30", "45"):
        # "until", "by", "before" and "after" a quarter of an hour: no price is said so.
        if not (match[1].startswith(("unt", "till", "by", "before", "after")) or _in_hours(match)):
            return match.group(0)
    elif not _HOURS_WORD_RE.search(match.string, max(0, match.start() - 24), match.start()):
        return match.group(0)
    if _NOT_CLOCKS_AFTER_RE.match(match.string, match.end()):
        return match.group(0)
    return match[1] + match[2].replace(".", ":")


def _speak_hhmm_range(match: re.Match[str]) -> str:
    start_hour, start_minute, end_hour, end_minute = match.groups()
    if not (start_hour.startswith("0") or end_hour.startswith("0") or _in_hours(match)):
        return match.group(0)
    return _bind(
        f"{_clock_words(int(start_hour), start_minute)} to {_clock_words(int(end_hour), end_minute)}"
    )


def _speak_hhmm_after(match: re.Match[str]) -> str:
    if not _in_hours(match):
        return match.group(0)
    return match[1] + _bind(_clock_words(int(match[2]), match[3]))


def _in_hours(match: re.Match[str]) -> bool:
    # A day or an hours word right beside the match, in its clause ("Sat 1000-1400",
    # "closes at 1700 on Fridays"); not anywhere in the text ("Built 1300-1400, the church is
    # open daily", "Open 08.00-22.00 daily. Mains 14.00-19.00", "From 2010-2015 we grew;
    # lunch 1200-1400").
    text = match.string
    before = text[max(0, match.start() - 24) : match.start()]
    after = text[match.end() : match.end() + 16]
    before = before[max(before.rfind(". "), before.rfind("\n"), before.rfind(";")) + 1 :]
    after = re.split(r"\. |[\n;,]", after, maxsplit=1)[0]
    return _HOURS_WORD_RE.search(before) is not None or _HOURS_WORD_RE.search(after) is not None


def _twenty_four_hour(hour_text: str) -> bool:
    return int(hour_text) > 12 or hour_text.startswith("0")


def _speak_clock_pair(match: re.Match[str]) -> str:
    hour1, minute1, to, hour2, minute2 = match.groups()
    if int(hour1) > 23 or int(hour2) > 23:
        return match.group(0)
    if not (_twenty_four_hour(hour1) or _twenty_four_hour(hour2)):
        return match.group(0)
    return _bind(_clock_words(int(hour1), minute1)) + to + _bind(_clock_words(int(hour2), minute2))


def _speak_clock(match: re.Match[str]) -> str:
    hour_text, minute, period = match.groups()
    hour = int(hour_text)
    if period:
        if not 1 <= hour <= 12:
            return match.group(0)
        if hour == 12 and minute == "00":
            return _NOON[period.upper()]
        spoken = str(hour) if minute == "00" else f"{hour}:{minute}"
        return _bind(f"{spoken} {period.upper()}M")
    if hour > 23 or not _twenty_four_hour(hour_text):
        return match.group(0)
    return _bind(_clock_words(hour, minute))


def _speak_hour_ampm(match: re.Match[str]) -> str:
    hour = int(match.group(1))
    if not 1 <= hour <= 12:
        return match.group(0)
    if hour == 12:
        return _NOON[match.group(2).upper()]
    return _bind(f"{hour} {match.group(2).upper()}M")


def _speak_money(
    names: tuple[str, str, str, str], whole: str, fraction: str | None, scale: str | None
) -> str:
    return _bind(_money_words(names, whole, fraction, scale))


def _grouped(whole: str) -> str:
    """Thousands grouped by spaces, grouped by commas: "23 800" -> "23,800"."""
    return _GROUP_SPACE_RE.sub(",", whole)


def _speak_prefixed_dollars(match: re.Match[str]) -> str:
    names = _NAMED_CURRENCIES.get(match[1])
    if names is None:  # letters we cannot name: as written, not as plain dollars
        return match.group(0)
    return _bind(_money_words(names, match[2], match[3], match[4]))


def _speak_rand(match: re.Match[str]) -> str:
    whole, _, cents, per = match.groups()
    digits = whole.replace(" ", "").replace("\u00a0", "")
    if not (cents or per or digits != whole):
        return match.group(0)
    grouped = f"{int(digits):,}"
    return _bind(_money_words(("rand", "rand", "cent", "cents"), grouped, cents, None))


def _money_words(
    names: tuple[str, str, str, str], whole: str, fraction: str | None, scale: str | None
) -> str:
    one, many, minor_one, minor_many = names
    if scale:
        amount = f"{whole}.{fraction}" if fraction else whole
        return f"{amount} {_SCALES[scale.lower()]} {many}"
    units = int(whole.replace(",", ""))
    if fraction and (len(fraction) > 2 or not minor_many):
        return f"{whole}.{fraction} {many}"
    minor = int(fraction.ljust(2, "0")) if fraction else 0
    minor_words = f"{minor} {minor_one if minor == 1 else minor_many}"
    if units == 0 and minor:
        return minor_words
    major_words = f"{whole} {one if units == 1 else many}"
    return f"{major_words} {minor_words}" if minor else major_words


def _speak_temperature(match: re.Match[str]) -> str:
    sign, number, scale = match.groups()
    degrees = "degree" if number == "1" else "degrees"
    spoken = f"{number} {degrees} {'Celsius' if scale == 'C' else 'Fahrenheit'}"
    return _bind(f"minus {spoken}" if sign else spoken)


def _speak_unit(match: re.Match[str]) -> str:
    number, unit = match.groups()
    one, many = _UNITS[unit]
    # "3-4 yr olds", "a 2 yr old": an age said as a noun keeps the unit singular.
    singular = number == "1" or (unit == "yr" and _OLD_AFTER_RE.match(match.string, match.end()) is not None)
    return _bind(f"{number} {one if singular else many}")
