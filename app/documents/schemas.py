from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    WithJsonSchema,
    model_validator,
)
from pydantic_core import PydanticCustomError

from app.documents.attributes import (
    ATTRIBUTES_DESCRIPTION,
    EFFECTIVE_FROM_DESCRIPTION,
    EXPIRES_AT_DESCRIPTION,
    TAGS_DESCRIPTION,
    Attributes,
    Availability,
    DocumentAttributesIn,
    Tags,
    Timestamp,
)
from app.documents.paths import MAX_PATH_CHARS, PATH_PATTERN, InvalidPath, normalise_path
from app.schemas import Description, Input, JsonInteger, LongTitle, Url

# Content is stored as bytes and cleaned by extraction, so NUL is accepted here (unlike
# the short text fields, see app.schemas.NoNul).
Content = Annotated[str, StringConstraints(min_length=1)]


def _valid_path(value: str) -> str:
    try:
        return normalise_path(value)
    except InvalidPath as exc:
        raise PydanticCustomError("invalid_path", str(exc)) from None


SourcePath = Annotated[
    str,
    AfterValidator(_valid_path),
    WithJsonSchema(
        {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_PATH_CHARS,
            "pattern": PATH_PATTERN,
            "description": "A relative path such as `guides/setup.md`: stored with forward "
            "slashes and without `.` segments; `..` and absolute paths are refused. Unique "
            "within a knowledge base.",
        }
    ),
]
SOURCE_PATH_FIELD = "Where the document's file lives in a synced folder (unique per knowledge base)."


class DocumentCreateText(Input, DocumentAttributesIn):
    title: LongTitle
    description: Description = ""
    content: Content
    content_type: Literal["text", "markdown", "html"] = "text"
    source_path: SourcePath | None = Field(None, description=SOURCE_PATH_FIELD)


class DocumentCreateUrl(Input, DocumentAttributesIn):
    url: Url
    title: LongTitle | None = None
    description: Description = ""
    sync_interval_s: Annotated[int, Field(ge=0, le=30 * 86_400), JsonInteger] | None = Field(
        None, description="0 = never re-sync"
    )


class DocumentUploadMeta(Input, DocumentAttributesIn):
    """The text fields of a multipart upload, beside its file."""

    title: LongTitle | None = Field(None, description="Default: the file's name without its extension.")
    description: Description = ""
    source_path: SourcePath | None = Field(None, description=SOURCE_PATH_FIELD)


class DocumentUploadForm(DocumentUploadMeta):
    """A multipart upload, as the OpenAPI schema describes it (the handler reads the form)."""

    # Form fields are text: app/documents/attributes.py's form_attributes reads these two.
    tags: Annotated[
        Tags,
        WithJsonSchema({"type": "string", "description": "Tags separated by commas (the field may repeat)."}),
    ] = Field(default_factory=list)
    attributes: Annotated[
        Attributes,
        WithJsonSchema(
            {"type": "string", "description": 'A JSON object of string values: {"locale": "en-GB"}.'}
        ),
    ] = Field(default_factory=dict)
    # A form field is never null.
    effective_from: Annotated[Timestamp | None, WithJsonSchema({"type": "string", "format": "date-time"})] = (
        None
    )
    expires_at: Annotated[Timestamp | None, WithJsonSchema({"type": "string", "format": "date-time"})] = None

    file: Annotated[
        bytes,
        WithJsonSchema(
            {
                "type": "string",
                "format": "binary",
                "contentMediaType": "application/octet-stream",
                "minLength": 1,
                "description": "A .txt, .md, .html, .pdf, .docx, .pptx, .xlsx or .csv file (and the "
                "macro-enabled .docm, .pptm, .xlsm, read for their text only, and Office templates and "
                "slide shows, .dotx, .potx, .ppsx, .xltx...); its type is told by its "
                "name's extension, else by the part's Content-Type, and checked against its bytes "
                "(an Office file is what its zip members say). See docs/FORMATS.md.",
            }
        ),
    ]


class BulkUploadForm(Input):
    """A bulk upload, as the OpenAPI schema describes it (the handler reads the form)."""

    file: Annotated[
        list[bytes],
        WithJsonSchema(
            {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "string",
                    "format": "binary",
                    "contentMediaType": "application/octet-stream",
                },
                "description": "One part per file, its file name being its relative path "
                '(`filename="guides/setup.md"`).',
            }
        ),
    ]


class DocumentUpdate(Input):
    # The schema says the rule of _type_with_content: with a content_type, a content.
    model_config = ConfigDict(
        json_schema_extra={
            "if": {"properties": {"content_type": {"type": "string"}}, "required": ["content_type"]},
            "then": {"properties": {"content": {"type": "string"}}, "required": ["content"]},
        }
    )

    title: LongTitle | None = None
    description: Description | None = None
    content: Content | None = None
    content_type: Literal["text", "markdown", "html"] | None = Field(
        None, description="How to read the new content; only together with content."
    )
    source_path: SourcePath | None = Field(
        None, description="Move the document to this path (a 409 if another document holds it)."
    )
    # Left out: unchanged. An empty list or object clears; null clears a date.
    tags: Tags | None = Field(None, description=TAGS_DESCRIPTION)
    attributes: Attributes | None = Field(None, description=ATTRIBUTES_DESCRIPTION)
    effective_from: Timestamp | None = Field(None, description=EFFECTIVE_FROM_DESCRIPTION)
    expires_at: Timestamp | None = Field(None, description=EXPIRES_AT_DESCRIPTION)

    @model_validator(mode="after")
    def _type_with_content(self) -> Self:
        if self.content_type is not None and self.content is None:
            raise PydanticCustomError(
                "type_without_content", "content_type can only change together with content"
            )
        return self


class Progress(BaseModel):
    done: int
    total: int


class DocumentSummary(BaseModel):
    id: uuid.UUID
    title: str
    description: str
    source_kind: str
    source_path: str | None = Field(description=SOURCE_PATH_FIELD)
    status: str
    chunk_count: int = Field(
        description="Chunks that answer questions now. While a new version is `pending` or "
        "`processing`, and after it `failed`, the previous version's: it keeps answering."
    )
    # Why the document failed (or why its last try did): the KB view is where admins watch.
    error: str | None
    created_at: datetime
    updated_at: datetime | None
    indexed_at: datetime | None


class DocumentRead(DocumentSummary):
    kb_id: uuid.UUID
    source_url: str | None
    file_name: str | None
    content_hash: str | None
    progress: Progress
    pages_total: int | None
    pages_skipped: int
    attempts: int
    tags: list[str]
    attributes: dict[str, str]
    effective_from: datetime | None
    expires_at: datetime | None
    availability: Availability = Field(
        description="`active`, `expired` (at or after `expires_at`) or `not_yet_effective` (before "
        "`effective_from`), now: query_knowledge retrieves only active documents."
    )


class ExistingDocument(BaseModel):
    """The document a refused duplicate names (the ``existing_document`` of its 409)."""

    id: uuid.UUID
    title: str
    status: str


class ChunkRead(BaseModel):
    """One piece of a document as it was indexed, and as a caller's question can find it."""

    ordinal: int = Field(description="Position in the document, from 0.")
    text: str
    section: str | None = Field(description="The heading the chunk falls under, if any.")
    page: int | None = Field(description="The page it starts on, for paged formats (PDF).")
    token_count: int


BulkStatus = Literal["created", "updated", "unchanged", "failed"]


class BulkUploadItem(BaseModel):
    """What became of one file of a bulk upload."""

    index: int = Field(description="Position of the file among the request's `file` parts, from 0.")
    path: str | None = Field(description="The file's path as stored (normalised), or None.")
    status: BulkStatus = Field(
        description="created: a new document; updated: the document at this path got the new "
        "content (queued to be indexed again); unchanged: the document at this path already "
        "holds these bytes (nothing is indexed again); failed: see `error`."
    )
    document: DocumentRead | None = Field(description="The document, unless the file failed.")
    error: str | None = Field(description="Why the file failed: the error code of a single upload.")
    detail: str | None = Field(description="Why the file failed, in a sentence.")


class BulkCounts(BaseModel):
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    failed: int = 0


class BulkUploadResult(BaseModel):
    items: list[BulkUploadItem]
    counts: BulkCounts


class BulkDelete(Input):
    ids: list[uuid.UUID] = Field(default_factory=list, description="Documents to delete, by id.")
    paths: list[SourcePath] = Field(default_factory=list, description="Documents to delete, by source_path.")


class BulkDeleteItem(BaseModel):
    id: uuid.UUID | None = Field(description="The id asked for, or the id of the document at `path`.")
    path: str | None = Field(description="The path asked for (normalised), if asked by path.")
    status: Literal["deleted", "not_found"]


class BulkDeleteResult(BaseModel):
    items: list[BulkDeleteItem]
    deleted: int
    not_found: int
