"""Prompt files: loaded and checked once at start-up, rendered cheaply on the live-call path.

Every text said to a model or to a caller lives in a file under `prompts/` so prompt
engineers can tune it without touching code. A file is TOML front matter between `+++`
lines followed by a `string.Template` body. `prompts/default/` holds every file; each
folder under `prompts/variants/` overrides some of them for A/B comparison, and the rest
falls back to the default files. See `prompts/README.md` for the rules the files follow.

All checking happens in `PromptLibrary.load`, so a broken prompt stops the service from
starting instead of failing in the middle of a call.
"""

from __future__ import annotations

import hashlib
import html
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from string import Template
from typing import Any

__all__ = [
    "ConversationTurn",
    "KnowledgeItem",
    "ModelSettings",
    "PromptError",
    "PromptLibrary",
    "PromptSet",
    "render_knowledge",
]

DEFAULT_VARIANT = "default"
_VARIANT_NAME = re.compile(r"[a-z0-9_-]{1,50}")
# Versions are joined into one string with ":", "=" and ",", so they may not contain them.
_VERSION = re.compile(r"[A-Za-z0-9._-]{1,40}")
_FENCE = re.compile(r"^\+\+\+[ \t]*$", re.MULTILINE)
_SPACES = re.compile(r"\s+")
# Same bounds as the service's own answer token cap (QuerySettings.llm_max_tokens).
_MAX_TOKENS_RANGE = (16, 4000)
_TEMPERATURE_RANGE = (0.0, 2.0)


# Far above any real prompt (the shipped ones are under 4 KB); each is rendered on every call.
MAX_PROMPT_BYTES = 256 * 1024


class PromptError(ValueError):
    """A prompt file is missing or broken, or the prompts do not fit the settings; the message
    names the file or setting and what is wrong."""


@dataclass(frozen=True, slots=True)
class ModelSettings:
    """How the answering model is called; `model=None` means the service's default model."""

    model: str | None
    temperature: float
    max_tokens: int


@dataclass(frozen=True, slots=True)
class KnowledgeItem:
    """One retrieved chunk as the answering model sees it."""

    title: str
    section: str | None
    page: int | None
    text: str
    # How the source is said aloud (app/answering/attribution.py), for an agent whose
    # answers name their source; None leaves the attribute out.
    spoken_title: str | None = None


@dataclass(frozen=True, slots=True)
class ConversationTurn:
    """One earlier turn of the call, as the rewriting model sees it."""

    role: str
    content: str


@dataclass(frozen=True, slots=True)
class _FileSpec:
    name: str
    required: frozenset[str]
    allowed: frozenset[str]
    drives_model: bool = False

    @property
    def filename(self) -> str:
        return f"{self.name}.md"


def _spec(name: str, *required: str, drives_model: bool = False) -> _FileSpec:
    # Every variable a file may use is currently also required; the two sets stay separate
    # so an optional variable can be added without changing the checks.
    names = frozenset(required)
    return _FileSpec(name, names, names, drives_model)


# The order here is the order of the combined version string: keep it stable.
_FILES: tuple[_FileSpec, ...] = (
    _spec("grounding.system", "max_words", drives_model=True),
    _spec("grounding.user", "question", "knowledge"),
    _spec("tool.description", "knowledge_summary"),
    _spec("tool.query_parameter"),
    _spec("agent.instructions", "knowledge_summary"),
    _spec("reply.not_found"),
    _spec("reply.unavailable"),
    _spec("reply.transfer"),
    _spec("rewrite.system", drives_model=True),
    _spec("rewrite.user", "conversation", "question"),
    _spec("tool.history_parameter"),
    _spec("grounding.attribution"),
    _spec("reply.attribution", "title", "answer"),
    _spec("reply.holding"),
)
_SPECS = {spec.filename: spec for spec in _FILES}
_BASE_KEYS = ("version",)
_MODEL_KEYS = ("version", "model", "temperature", "max_tokens")


@dataclass(frozen=True, slots=True)
class _PromptFile:
    path: Path
    version: str
    template: Template
    settings: ModelSettings | None
    text: str  # as read: what the library's fingerprint is made of


def _escape_text(value: str) -> str:
    # &, < and > only: enough that data can neither close nor forge a tag, while quotes
    # and apostrophes in ordinary prose stay readable for the model.
    return html.escape(value, quote=False)


def _escape_attribute(value: str) -> str:
    # Attributes are one line; quotes are escaped so a value cannot end the attribute.
    return html.escape(_SPACES.sub(" ", value).strip(), quote=True)


def render_conversation(turns: Sequence[ConversationTurn]) -> str:
    """Earlier turns as one delimited data block, escaped like the knowledge block, so a
    turn cannot close the block and pass for instructions."""
    parts = ["<conversation>"]
    parts += [
        f'<turn role="{_escape_attribute(t.role)}">{_escape_text(t.content.strip())}</turn>' for t in turns
    ]
    parts.append("</conversation>")
    return "\n".join(parts)


def render_knowledge(items: Sequence[KnowledgeItem]) -> str:
    """The retrieved chunks as one delimited data block for the user message.

    Titles, sections and chunk text are escaped, so a chunk that contains
    `</source></knowledge>` followed by instructions stays inside its own source element:
    the block always has exactly one closing `</knowledge>` tag. This is one layer of the
    prompt-injection defence; the system prompt tells the model to treat the block as data.
    """
    parts = ["<knowledge>"]
    for n, item in enumerate(items, start=1):
        attributes = f'n="{n}" title="{_escape_attribute(item.title)}"'
        if item.spoken_title:
            attributes += f' spoken_title="{_escape_attribute(item.spoken_title)}"'
        if item.section:
            attributes += f' section="{_escape_attribute(item.section)}"'
        if item.page is not None:
            attributes += f' page="{item.page:d}"'
        parts.append(f"<source {attributes}>\n{_escape_text(item.text.strip())}\n</source>")
    parts.append("</knowledge>")
    return "\n".join(parts)


@dataclass(frozen=True, slots=True)
class PromptSet:
    """The prompts of one variant, ready to render.

    `version` combines the version of every file the set uses, so it can key answer
    caches and label query logs: it changes whenever any of those files' versions change.
    """

    variant: str
    version: str
    model: ModelSettings
    not_found_reply: str
    unavailable_reply: str
    transfer_reply: str
    holding_reply: str
    query_parameter_description: str
    history_parameter_description: str
    rewrite_model: ModelSettings
    _system: Template = field(repr=False)
    _user: Template = field(repr=False)
    _tool_description: Template = field(repr=False)
    _agent_instructions: Template = field(repr=False)
    _rewrite_system: str = field(repr=False)
    _rewrite_user: Template = field(repr=False)
    _attribution_instruction: str = field(repr=False)
    _attribution_phrase: Template = field(repr=False)

    def system_message(self, *, max_words: int, attribution: bool = False) -> str:
        """The answering model's system prompt; with ``attribution``, followed by the
        instruction to name the source aloud."""
        system = self._system.substitute(max_words=str(max_words))
        return f"{system}\n\n{self._attribution_instruction}" if attribution else system

    def user_message(self, *, question: str, items: Sequence[KnowledgeItem]) -> str:
        """The caller's question and the knowledge block.

        The question is escaped like chunk text, so a question cannot forge a knowledge
        block either. `substitute` inserts values once and never re-reads them, so a `$`
        inside a question or a chunk stays literal.
        """
        return self._user.substitute(
            question=_escape_text(question.strip()), knowledge=render_knowledge(items)
        )

    def messages(
        self, *, question: str, items: Sequence[KnowledgeItem], max_words: int, attribution: bool = False
    ) -> list[dict[str, str]]:
        """Chat messages for the answering model: one system and one user message."""
        return [
            {"role": "system", "content": self.system_message(max_words=max_words, attribution=attribution)},
            {"role": "user", "content": self.user_message(question=question, items=items)},
        ]

    def rewrite_messages(self, *, question: str, turns: Sequence[ConversationTurn]) -> list[dict[str, str]]:
        """Chat messages asking the model to restate a follow-up question as a standalone
        one: one system and one user message holding the earlier turns and the question."""
        user = self._rewrite_user.substitute(
            conversation=render_conversation(turns), question=_escape_text(question.strip())
        )
        return [{"role": "system", "content": self._rewrite_system}, {"role": "user", "content": user}]

    def attributed(self, *, title: str, answer: str) -> str:
        """``answer`` led by the phrase that names its source (``reply.attribution.md``)."""
        return self._attribution_phrase.substitute(title=title, answer=answer)

    def tool_description(self, *, knowledge_summary: str) -> str:
        """The `query_knowledge` function's description for the voice model."""
        return self._tool_description.substitute(knowledge_summary=knowledge_summary)

    def agent_instructions(self, *, knowledge_summary: str) -> str:
        """Text to append to the voice model's own system prompt."""
        return self._agent_instructions.substitute(knowledge_summary=knowledge_summary)


class PromptLibrary:
    """Every prompt variant, loaded and validated once."""

    def __init__(self, sets: Mapping[str, PromptSet], fingerprint: str = "") -> None:
        self._sets = dict(sets)
        # Of the text of every file read: an edit without a version bump is still a change.
        self.fingerprint = fingerprint

    @classmethod
    def load(cls, directory: Path) -> PromptLibrary:
        """Read `default/` and every folder under `variants/`; raise PromptError on any fault."""
        directory = Path(directory)
        default_dir = directory / DEFAULT_VARIANT
        if not default_dir.is_dir():
            raise PromptError(f"{default_dir}: prompt folder not found")
        defaults = _read_folder(default_dir)
        for spec in _FILES:
            if spec.filename not in defaults:
                raise PromptError(
                    f"{default_dir / spec.filename}: missing file (every prompt file must exist in default/)"
                )
        sets = {DEFAULT_VARIANT: _build(DEFAULT_VARIANT, defaults, {})}
        read = {DEFAULT_VARIANT: defaults}
        variants_dir = directory / "variants"
        if variants_dir.is_dir():
            for entry in sorted(variants_dir.iterdir()):
                if entry.name.startswith(".") or not entry.is_dir():
                    continue
                if not _VARIANT_NAME.fullmatch(entry.name) or entry.name == DEFAULT_VARIANT:
                    raise PromptError(
                        f"{entry}: invalid variant name {entry.name!r} "
                        "(use 1 to 50 of a-z, 0-9, '_' and '-'; 'default' is reserved)"
                    )
                read[entry.name] = _read_folder(entry)
                sets[entry.name] = _build(entry.name, defaults, read[entry.name])
        digest = hashlib.sha256()
        for variant, files in read.items():
            for name, file in sorted(files.items()):
                digest.update(f"{variant}/{name}\0{file.text}\0".encode())
        return cls(sets, digest.hexdigest()[:16])

    @property
    def variants(self) -> list[str]:
        """Variant names, "default" first, then the others alphabetically."""
        return [DEFAULT_VARIANT, *sorted(name for name in self._sets if name != DEFAULT_VARIANT)]

    def get_or_default(self, variant: str | None, fallback: str = DEFAULT_VARIANT) -> PromptSet:
        """The prompts of a variant, or those of ``fallback`` (the service's configured
        default) when the name is unknown, or the "default" ones.

        An agent's stored variant may have been removed from disk since it was set, and a
        live call must still be answered (the agent's settings warn of it).
        """
        return self._sets.get(variant or fallback) or self._sets.get(fallback) or self._sets[DEFAULT_VARIANT]

    def get(self, variant: str | None = None) -> PromptSet:
        """The prompts of a variant; None means "default". Unknown names raise KeyError."""
        name = variant or DEFAULT_VARIANT
        try:
            return self._sets[name]
        except KeyError:
            known = ", ".join(self.variants)
            raise KeyError(f"unknown prompt variant {name!r} (known: {known})") from None


def _build(
    variant: str, defaults: Mapping[str, _PromptFile], overrides: Mapping[str, _PromptFile]
) -> PromptSet:
    for filename, override in overrides.items():
        # A variant file labelled like the default file would make the two indistinguishable
        # in the combined version (and in cache keys and query logs), e.g. after a copy.
        if override.version == defaults[filename].version:
            raise PromptError(
                f"{override.path}: version {override.version!r} is the same as in "
                f"{defaults[filename].path}; give the variant file its own version (e.g. "
                f'"{variant}-1")'
            )
    files = {**defaults, **overrides}
    entries = ",".join(f"{spec.name}={files[spec.filename].version}" for spec in _FILES)
    system = files["grounding.system.md"]
    rewrite = files["rewrite.system.md"]
    # Both parsed with drives_model=True.
    assert system.settings is not None
    assert rewrite.settings is not None
    return PromptSet(
        variant=variant,
        version=f"{variant}:{entries}",
        model=system.settings,
        not_found_reply=files["reply.not_found.md"].template.substitute(),
        unavailable_reply=files["reply.unavailable.md"].template.substitute(),
        transfer_reply=files["reply.transfer.md"].template.substitute(),
        holding_reply=files["reply.holding.md"].template.substitute(),
        query_parameter_description=files["tool.query_parameter.md"].template.substitute(),
        history_parameter_description=files["tool.history_parameter.md"].template.substitute(),
        rewrite_model=rewrite.settings,
        _system=system.template,
        _user=files["grounding.user.md"].template,
        _tool_description=files["tool.description.md"].template,
        _agent_instructions=files["agent.instructions.md"].template,
        _rewrite_system=rewrite.template.substitute(),
        _rewrite_user=files["rewrite.user.md"].template,
        _attribution_instruction=files["grounding.attribution.md"].template.substitute(),
        _attribution_phrase=files["reply.attribution.md"].template,
    )


def _read_folder(folder: Path) -> dict[str, _PromptFile]:
    files: dict[str, _PromptFile] = {}
    for path in sorted(folder.glob("*.md")):
        if path.name.startswith("."):
            continue
        spec = _SPECS.get(path.name)
        if spec is None:
            # A misspelt override would otherwise be ignored without a word.
            known = ", ".join(sorted(_SPECS))
            raise PromptError(f"{path}: unknown prompt file (known: {known})")
        files[path.name] = _parse_file(path, spec)
    return files


def _parse_file(path: Path, spec: _FileSpec) -> _PromptFile:
    try:
        if not path.is_file():
            raise PromptError(f"{path}: not a regular file")
        if path.stat().st_size > MAX_PROMPT_BYTES:
            raise PromptError(
                f"{path}: larger than {MAX_PROMPT_BYTES // 1024} KB; a prompt is read on every call"
            )
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PromptError(f"{path}: cannot read: {exc}") from exc
    text = text.removeprefix("\ufeff").replace("\r\n", "\n")
    opening = _FENCE.match(text)
    if opening is None:
        raise PromptError(f"{path}: no front matter: the file must start with a '+++' line")
    closing = _FENCE.search(text, opening.end())
    if closing is None:
        raise PromptError(f"{path}: front matter is not closed: add a '+++' line after it")
    # The front matter keeps its leading newline so TOML's line numbers are the file's.
    try:
        meta = tomllib.loads(text[opening.end() : closing.start()])
    except tomllib.TOMLDecodeError as exc:
        raise PromptError(f"{path}: front matter is not valid TOML: {exc}") from exc
    except RecursionError:
        raise PromptError(f"{path}: front matter is not valid TOML: nested too deep") from None
    version, settings = _check_front_matter(path, meta, spec)
    rest = text[closing.end() :]
    body = rest.strip()
    if not body:
        raise PromptError(f"{path}: the prompt text after the front matter is empty")
    offset = closing.end() + len(rest) - len(rest.lstrip())
    return _PromptFile(path, version, _check_template(path, text, body, offset, spec), settings, text)


def _check_front_matter(
    path: Path, meta: dict[str, Any], spec: _FileSpec
) -> tuple[str, ModelSettings | None]:
    allowed = _MODEL_KEYS if spec.drives_model else _BASE_KEYS
    for key in meta:
        if key not in allowed:
            raise PromptError(f"{path}: unknown front matter key {key!r} (allowed: {', '.join(allowed)})")
    if "version" not in meta:
        raise PromptError(f"{path}: front matter has no 'version' (add e.g. version = \"1\")")
    version = meta["version"]
    if not isinstance(version, str) or not _VERSION.fullmatch(version):
        raise PromptError(
            f"{path}: 'version' must be a quoted string of letters, digits, '.', '_' or '-' "
            f'(e.g. version = "3"), not {version!r}'
        )
    if not spec.drives_model:
        return version, None
    for key in ("temperature", "max_tokens"):
        if key not in meta:
            raise PromptError(f"{path}: front matter has no {key!r}")
    model = meta.get("model")
    if model is not None and (not isinstance(model, str) or not model.strip()):
        raise PromptError(
            f"{path}: 'model' must be a non-empty string; leave it out to use the service default"
        )
    temperature = meta["temperature"]
    low, high = _TEMPERATURE_RANGE
    if (
        isinstance(temperature, bool)
        or not isinstance(temperature, int | float)
        or not low <= temperature <= high
    ):
        raise PromptError(f"{path}: 'temperature' must be a number from {low} to {high}, not {temperature!r}")
    max_tokens = meta["max_tokens"]
    lowest, highest = _MAX_TOKENS_RANGE
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or not lowest <= max_tokens <= highest:
        raise PromptError(
            f"{path}: 'max_tokens' must be a whole number from {lowest} to {highest}, not {max_tokens!r}"
        )
    settings = ModelSettings(
        model=model.strip() if model is not None else None,
        temperature=float(temperature),
        max_tokens=max_tokens,
    )
    return version, settings


def _check_template(path: Path, text: str, body: str, offset: int, spec: _FileSpec) -> Template:
    template = Template(body)
    used: set[str] = set()
    for match in Template.pattern.finditer(body):
        where = _position(text, offset + match.start())
        if match.group("invalid") is not None:
            raise PromptError(
                f"{path}: invalid '$' at {where}: "
                "write $$ for a dollar sign, $name or ${name} for a variable"
            )
        name = match.group("named") or match.group("braced")
        if name is None:  # "$$"
            continue
        if name not in spec.allowed:
            if spec.allowed:
                allowed = "allowed: " + ", ".join(f"${n}" for n in sorted(spec.allowed))
            else:
                allowed = "this file takes no variables"
            raise PromptError(
                f"{path}: unknown variable ${name} at {where} ({allowed}; write $$ for a dollar sign)"
            )
        used.add(name)
    missing = sorted(spec.required - used)
    if missing:
        raise PromptError(f"{path}: required variable ${missing[0]} is not used")
    return template


def _position(text: str, index: int) -> str:
    line = text.count("\n", 0, index) + 1
    column = index - (text.rfind("\n", 0, index) + 1) + 1
    return f"line {line}, column {column}"
