"""Prompts as versioned files: loaded once, checked at start-up, rendered cheaply."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from string import Template
from typing import Any

_VARIANT = re.compile(r"^[a-z0-9_-]{1,50}$")

# file name -> (allowed variables, required variables)
FILES: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "grounding.system": (frozenset({"max_words"}), frozenset({"max_words"})),
    "grounding.user": (frozenset({"question", "knowledge"}), frozenset({"question", "knowledge"})),
    "tool.description": (frozenset({"knowledge_summary"}), frozenset({"knowledge_summary"})),
    "tool.query_parameter": (frozenset(), frozenset()),
    "agent.instructions": (frozenset({"knowledge_summary"}), frozenset({"knowledge_summary"})),
    "reply.not_found": (frozenset(), frozenset()),
    "reply.unavailable": (frozenset(), frozenset()),
}
_MODEL_KEYS = {"version", "model", "temperature", "max_tokens"}


class PromptError(Exception):
    """A prompt file is malformed; the message names the file and what is wrong."""


@dataclass(frozen=True, slots=True)
class ModelSettings:
    model: str | None
    temperature: float
    max_tokens: int


@dataclass(frozen=True, slots=True)
class KnowledgeItem:
    title: str
    section: str | None
    page: int | None
    text: str


def _escape_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _escape_attr(text: str) -> str:
    return _escape_text(text).replace('"', "&quot;").replace("\n", " ")


def render_knowledge(items: Sequence[KnowledgeItem]) -> str:
    """The knowledge as one delimited data block. Text and attributes are escaped so a
    chunk cannot close or forge the delimiters (a prompt-injection defence)."""
    parts = ["<knowledge>"]
    for n, item in enumerate(items, 1):
        attrs = f'n="{n}" title="{_escape_attr(item.title)}"'
        if item.section:
            attrs += f' section="{_escape_attr(item.section)}"'
        if item.page is not None:
            attrs += f' page="{item.page}"'
        parts.append(f"<source {attrs}>\n{_escape_text(item.text)}\n</source>")
    parts.append("</knowledge>")
    return "\n".join(parts)


@dataclass(frozen=True, slots=True)
class _File:
    path: Path
    version: str
    meta: dict[str, Any]
    template: Template


def _parse(path: Path) -> _File:
    name = path.name.removesuffix(".md")
    raw = path.read_text(encoding="utf-8")
    if not raw.startswith("+++\n"):
        raise PromptError(f"{path}: missing TOML front matter between '+++' lines")
    end = raw.find("\n+++\n", 3)
    if end < 0:
        raise PromptError(f"{path}: front matter is not closed by a '+++' line")
    try:
        meta = tomllib.loads(raw[4:end])
    except tomllib.TOMLDecodeError as exc:
        raise PromptError(f"{path}: bad front matter: {exc}") from exc
    version = meta.get("version")
    if not isinstance(version, str) or not version:
        raise PromptError(f'{path}: front matter needs version = "..."')
    unknown_keys = set(meta) - (_MODEL_KEYS if name == "grounding.system" else {"version"})
    if unknown_keys:
        raise PromptError(f"{path}: unknown front matter key(s): {', '.join(sorted(unknown_keys))}")
    template = Template(raw[end + 5 :].strip())
    if not template.is_valid():
        raise PromptError(f"{path}: invalid '$' placeholder (write $$ for a dollar sign)")
    allowed, required = FILES[name]
    used = set(template.get_identifiers())
    if used - allowed:
        raise PromptError(f"{path}: unknown variable ${sorted(used - allowed)[0]}")
    if required - used:
        raise PromptError(f"{path}: missing required variable ${sorted(required - used)[0]}")
    return _File(path, version, meta, template)


class PromptSet:
    """One variant's prompts, resolved against the default files."""

    def __init__(self, variant: str, files: dict[str, _File]) -> None:
        self.variant = variant
        self._files = files
        self.version = f"{variant}:" + ",".join(f"{n}={files[n].version}" for n in FILES)
        system = files["grounding.system"].meta
        self.model = ModelSettings(
            model=system.get("model"),
            temperature=float(system.get("temperature", 0.0)),
            max_tokens=int(system.get("max_tokens", 0)),
        )
        self.not_found_reply = files["reply.not_found"].template.template
        self.unavailable_reply = files["reply.unavailable"].template.template
        self.query_parameter_description = files["tool.query_parameter"].template.template
        self._system = files["grounding.system"].template
        self._user = files["grounding.user"].template
        self._system_cache: dict[int, str] = {}

    def system_message(self, *, max_words: int) -> str:
        cached = self._system_cache.get(max_words)
        if cached is None:
            cached = self._system_cache[max_words] = self._system.substitute(max_words=max_words)
        return cached

    def user_message(self, *, question: str, items: Sequence[KnowledgeItem]) -> str:
        return self._user.substitute(question=question, knowledge=render_knowledge(items))

    def messages(
        self, *, question: str, items: Sequence[KnowledgeItem], max_words: int
    ) -> list[dict[str, str]]:
        return [
            {"role": "system", "content": self.system_message(max_words=max_words)},
            {"role": "user", "content": self.user_message(question=question, items=items)},
        ]

    def tool_description(self, *, knowledge_summary: str) -> str:
        return self._files["tool.description"].template.substitute(knowledge_summary=knowledge_summary)

    def agent_instructions(self, *, knowledge_summary: str) -> str:
        return self._files["agent.instructions"].template.substitute(knowledge_summary=knowledge_summary)


class PromptLibrary:
    def __init__(self, sets: dict[str, PromptSet]) -> None:
        self._sets = sets

    @classmethod
    def load(cls, directory: Path) -> PromptLibrary:
        """Read and check the default prompts and every variant under ``directory``."""
        default_dir = directory / "default"
        defaults: dict[str, _File] = {}
        for name in FILES:
            path = default_dir / f"{name}.md"
            if not path.is_file():
                raise PromptError(f"{path}: missing prompt file")
            defaults[name] = _parse(path)
        sets = {"default": PromptSet("default", defaults)}
        variants_dir = directory / "variants"
        if variants_dir.is_dir():
            for vdir in sorted(p for p in variants_dir.iterdir() if p.is_dir()):
                if not _VARIANT.match(vdir.name):
                    raise PromptError(f"{vdir}: variant names are 1-50 of a-z, 0-9, '_' and '-'")
                files = dict(defaults)
                for path in sorted(vdir.glob("*.md")):
                    name = path.name.removesuffix(".md")
                    if name not in FILES:
                        raise PromptError(f"{path}: unknown prompt file (expected one of {', '.join(FILES)})")
                    files[name] = _parse(path)
                sets[vdir.name] = PromptSet(vdir.name, files)
        return cls(sets)

    @property
    def variants(self) -> list[str]:
        return list(self._sets)

    def get(self, variant: str | None = None) -> PromptSet:
        name = variant or "default"
        try:
            return self._sets[name]
        except KeyError:
            raise KeyError(f"unknown prompt variant '{name}'; known: {', '.join(self._sets)}") from None
