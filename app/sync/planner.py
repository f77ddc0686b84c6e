"""What a sync must do: the folder's files against the knowledge base's documents.

A file is matched to its document by its relative path (the document's ``source_path``)
and compared by content hash, the service's own (``app.documents.service.content_hash``),
so an unchanged file is never sent. Documents without a path were added some other way:
a sync never touches them.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from app.documents.paths import InvalidPath, normalise_path
from app.documents.service import file_content_hash
from app.ingestion.sniff import SUPPORTED_EXTENSIONS


@dataclass(frozen=True, slots=True)
class LocalFile:
    path: str  # relative, with forward slashes: the document's source_path
    location: Path
    size: int
    hash: str


@dataclass(frozen=True, slots=True)
class RemoteDocument:
    id: str
    path: str
    hash: str | None
    status: str


@dataclass(frozen=True, slots=True)
class Selection:
    """Which of a folder's files are synced: supported types, not hidden, and the globs.

    A glob without a slash is matched against the file's name (``*.draft.md``), one with a
    slash against its whole relative path (``docs/*``, where ``*`` also crosses folders).
    With includes, a file must match one; an exclude always wins.
    """

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def selects(self, path: str) -> bool:
        parts = PurePosixPath(path).parts
        if any(p.startswith(".") for p in parts):
            return False
        if PurePosixPath(path).suffix.lower() not in SUPPORTED_EXTENSIONS:
            return False
        if self.include and not any(_matches(path, g) for g in self.include):
            return False
        return not any(_matches(path, g) for g in self.exclude)


def _matches(path: str, glob: str) -> bool:
    target = path if "/" in glob else PurePosixPath(path).name
    return fnmatch.fnmatchcase(target, glob.strip("/"))


@dataclass
class Walk:
    files: list[LocalFile] = field(default_factory=list)
    # Files the folder holds but no document can be (a name the service refuses, a link out
    # of the folder, a file that cannot be read), and folders that could not be read.
    refused: list[tuple[str, str]] = field(default_factory=list)
    # Folders not read: their documents are not taken for deleted files.
    unread: list[str] = field(default_factory=list)
    # Paths of files the folder holds but that were refused (too large, a link to a hidden
    # file, unreadable): their documents are not taken for deleted files either.
    held: set[str] = field(default_factory=set)

    def refuse(self, relative: str, reason: str) -> None:
        self.refused.append((relative, reason))
        with contextlib.suppress(InvalidPath):  # else no document can have had this path
            self.held.add(normalise_path(relative))


def walk_folder(root: Path, selection: Selection, *, max_file_bytes: int | None = None) -> Walk:
    """The selected files under ``root``, by path. Hidden folders (``.git``) are not entered
    and symbolic links to folders are not followed, so a link cannot loop; a link to a file
    is followed only to a file inside ``root`` that the selection would take under its own
    name, so that a link cannot sync what lies outside (``/proc/self/environ``, the machine's
    secrets) nor a hidden or excluded file inside (``.git/config``, ``.env``). A file larger
    than ``max_file_bytes`` is refused unread."""
    walk = Walk()
    inside = os.path.realpath(root)

    def folder_unreadable(exc: OSError) -> None:
        folder = Path(exc.filename).relative_to(root).as_posix() if exc.filename else "."
        walk.unread.append("" if folder == "." else folder)
        walk.refused.append((f"{folder}/", f"the folder could not be read ({exc.strerror or exc})"))

    seen: dict[str, str] = {}
    for folder, dirs, names in os.walk(root, onerror=folder_unreadable):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            location = Path(folder, name)
            relative = location.relative_to(root).as_posix()
            if not selection.selects(relative):
                continue
            if not _utf8(relative):
                shown = str(os.fsencode(relative))[2:-1]  # its bytes, as b'' shows them
                walk.refused.append((shown, "the name is not valid UTF-8"))
                continue
            target: str | None = None
            if location.is_symlink():
                target = os.path.realpath(location)
                if os.path.commonpath([inside, target]) != inside:
                    walk.refuse(relative, "a link to a file outside the folder is not synced")
                    continue
                if not selection.selects(Path(target).relative_to(inside).as_posix()):
                    walk.refuse(relative, "a link to a hidden or excluded file is not synced")
                    continue
            if not location.is_file():
                continue
            try:
                path = normalise_path(relative)
            except InvalidPath as exc:
                walk.refused.append((relative, str(exc)))
                continue
            if path in seen:
                walk.refused.append((relative, f"another file, {seen[path]}, has the same path ({path})"))
                continue
            seen[path] = relative
            try:
                with location.open("rb") as stream:
                    opened = os.fstat(stream.fileno())
                    if target is not None and not os.path.samestat(opened, os.stat(target)):
                        # The link was pointed elsewhere between the check and the read.
                        walk.refuse(relative, "the link changed while the folder was read")
                        continue
                    size = opened.st_size
                    if max_file_bytes is not None and size > max_file_bytes:
                        walk.refuse(relative, too_large(size, max_file_bytes))
                        continue
                    digest = file_content_hash(stream)
            except OSError as exc:
                walk.refuse(relative, unreadable_file(exc))
                continue
            walk.files.append(LocalFile(path, location, size, digest))
    return walk


def _utf8(name: str) -> bool:
    """Whether a name os.walk gave is UTF-8: bytes that are not come as lone surrogates."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def too_large(size: int, limit: int) -> str:
    return (
        f"{size:,} bytes, over LIMITS__MAX_UPLOAD_BYTES here ({limit:,}): not sent "
        "(set it as the service has it, if that is larger)"
    )


@dataclass
class Plan:
    new: list[LocalFile] = field(default_factory=list)
    changed: list[LocalFile] = field(default_factory=list)
    unchanged: list[LocalFile] = field(default_factory=list)
    delete: list[RemoteDocument] = field(default_factory=list)
    # Changed because the document failed: the same bytes are sent again to retry it.
    retry: set[str] = field(default_factory=set)

    @property
    def uploads(self) -> list[LocalFile]:
        return [*self.new, *self.changed]

    @property
    def empty(self) -> bool:
        return not (self.new or self.changed or self.delete)


def make_plan(
    files: Sequence[LocalFile],
    documents: Iterable[RemoteDocument],
    *,
    selection: Selection,
    delete_missing: bool,
    unread: Sequence[str] = (),
    held: Iterable[str] = (),
) -> Plan:
    """New, changed and unchanged files; with ``delete_missing``, the documents whose path
    the selection would pick but the folder no longer holds (a document outside the
    selection, say under an excluded folder, or under a folder that could not be read
    (``unread``, "" for the whole folder), is left alone)."""
    by_path = {d.path: d for d in documents}
    plan = Plan()
    for file in files:
        doc = by_path.get(file.path)
        if doc is None:
            plan.new.append(file)
        elif doc.status == "failed":
            plan.changed.append(file)
            if doc.hash == file.hash:
                plan.retry.add(file.path)
        elif doc.hash != file.hash:
            plan.changed.append(file)
        else:
            plan.unchanged.append(file)
    if delete_missing:
        present = {f.path for f in files} | set(held)
        plan.delete = sorted(
            (
                d
                for d in by_path.values()
                if d.path not in present and selection.selects(d.path) and not _under(d.path, unread)
            ),
            key=lambda d: d.path,
        )
    return plan


def unreadable_file(exc: OSError) -> str:
    """Why a file counts as failed when reading it raised ``exc``."""
    return f"the file could not be read ({exc.strerror or exc})"


def _under(path: str, folders: Sequence[str]) -> bool:
    return any(folder == "" or path.startswith(f"{folder}/") for folder in folders)


def describe(plan: Plan) -> list[str]:
    """The plan as printed: a summary line, then one line per file to act on."""
    lines = [
        f"plan: {len(plan.new)} new, {len(plan.changed)} changed, {len(plan.unchanged)} unchanged, "
        f"{len(plan.delete)} to delete"
    ]
    lines += [f"  new       {f.path}" for f in plan.new]
    lines += [
        f"  changed   {f.path}" + ("  (failed before: retried)" if f.path in plan.retry else "")
        for f in plan.changed
    ]
    lines += [f"  delete    {d.path}" for d in plan.delete]
    return lines
