"""Tenants, sessions, journals and artifacts: the scope a journal lives in (docs/design.md section 4)."""

from __future__ import annotations

import difflib
import errno
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.files.storage import default_storage

from journal_app.artifact_storage import (
    ArtifactBytesError,
    artifact_bytes_put,
    artifact_dirs_sync,
)
from journal_app.artifacts import make_preview, media_type_of
from journal_app.hashing import canonical_body, chunk_hash
from journal_app.models import (
    Artifact,
    Journal,
    Session,
    Tenant,
)
from journal_app.services.errors import ArtifactStoreFull, ArtifactWriteError, JournalError
from journal_app.tokens import count_tokens, source_label

BATCH = 500
_SCOPE_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def _check_scope_part(name: str, value: str) -> str:
    if not _SCOPE_PART.match(value):
        raise JournalError(
            f"{name} {value!r} is not valid: use 1-100 letters, digits, '.', '_' or '-'"
        )
    return value


def tenant_ensure(*, slug: str, name: str = "") -> Tenant:
    """Return the tenant ``slug``, creating it (name defaults to the slug)."""
    _check_scope_part("tenant", slug)
    tenant, _ = Tenant.objects.get_or_create(slug=slug, defaults={"name": name or slug})
    return tenant


#: the tenant a command writes to when none is named: created on first use (README quick start)
DEFAULT_TENANT = "default"
#: known tenants listed in a refusal, at most
_TENANTS_LISTED = 20


def tenant_for_command(slug: str, *, create: bool = False) -> str:
    """Check the tenant a writing command (``import_journal``, ``follow``) names, before it
    writes anything (README "Your own transcripts").

    An existing tenant passes; a new one only when it is :data:`DEFAULT_TENANT` or
    ``create`` is set (``--create-tenant``), so a mistyped ``--tenant`` never journals into a
    tenant nobody looks at. Nothing is written here: the write that follows creates a new
    tenant with :func:`tenant_ensure`, inside its own transaction.

    Args:
        slug: the tenant slug given on the command line.
        create: whether a tenant that does not exist yet may be created.

    Returns:
        ``slug``, checked.

    Raises:
        JournalError: ``slug`` is not a valid scope part, or names no tenant and may not be
            created; the message names the slug, the close matches (``difflib``), the known
            tenants and how to create it.
    """
    _check_scope_part("tenant", slug)
    if create or slug == DEFAULT_TENANT or Tenant.objects.filter(slug=slug).exists():
        return slug
    known = list(Tenant.objects.order_by("slug").values_list("slug", flat=True))
    close = difflib.get_close_matches(slug, known, n=3, cutoff=0.6)
    listed = ", ".join(known[:_TENANTS_LISTED]) or "none yet"
    if len(known) > _TENANTS_LISTED:
        listed += f" and {len(known) - _TENANTS_LISTED} more"
    raise JournalError(
        f"no tenant {slug!r}"
        + (f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ";")
        + f" known tenants: {listed}. Nothing written. To create tenant {slug!r}, run the "
        f"command again with --create-tenant (or first: manage.py create_tenant {slug})"
    )


def session_ensure(
    *,
    tenant: Tenant,
    key: str,
    title: str = "",
    source_format: str = "",
    source_name: str = "",
    meta: dict[str, Any] | None = None,
) -> Session:
    """Return the session ``key`` of ``tenant``, creating it with the given descriptors."""
    _check_scope_part("session", key)
    session, created = Session.objects.get_or_create(
        tenant=tenant,
        key=key,
        defaults={
            "title": title[:300],
            "source_format": source_format,
            "source_name": source_name[:500],
            "meta": canonical_body(meta or {}).decode("utf-8"),
        },
    )
    return session


def journal_ensure(*, session: Session, lane: str = "main", branch: str = "main") -> Journal:
    """Return the journal of scope (session, lane, branch), creating it empty."""
    _check_scope_part("lane", lane)
    _check_scope_part("branch", branch)
    journal, _ = Journal.objects.get_or_create(
        session=session,
        lane=lane,
        branch=branch,
        defaults={"chunk_bytes": settings.JOURNAL_CHUNK_BYTES},
    )
    return journal


def _store_location() -> str:
    """The artifact store as a person finds it: the folder, or the storage's class."""
    location = getattr(default_storage, "location", None)
    return str(location) if location else type(default_storage).__name__


def _store_error(name: str, exc: OSError) -> ArtifactWriteError:
    """A failed write of the artifact store: 507 when it is full, else 503; both name it."""
    reason = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return ArtifactStoreFull(
            f"the artifact store ({_store_location()}) is full: {name} could not be "
            f"written ({reason}); nothing written, free space there and try again"
        )
    return ArtifactWriteError(
        f"the artifact store ({_store_location()}) could not write {name} ({reason}); "
        "nothing written"
    )


def artifact_store(
    *, tenant: Tenant, content: str, source_tool: str = "", media_type: str | None = None
) -> tuple[Artifact, bool]:
    """Store ``content`` once per tenant, content-addressed (docs/design.md section 4).

    Returns:
        ``(artifact, created)``. Content whose sha256 already exists for the tenant returns
        the existing artifact and ``created=False`` (no A -> B -> C reload loop, seed 001).

    One item of :func:`artifacts_store` (the same rules).

    Raises:
        ArtifactWriteError: the bytes could not be stored with their hash.
    """
    return artifacts_store(
        tenant=tenant, items=[ArtifactItem(content, source_tool, media_type=media_type)]
    )[0]


@dataclass(frozen=True)
class ArtifactItem:
    """One content to store as an artifact: its text, the tool that produced it, and its
    token count when the caller has it already (the append counted the entry: the same
    text, so it is not counted twice)."""

    content: str
    source_tool: str = ""
    token_count: int | None = None
    media_type: str | None = None


def artifacts_store(
    *, tenant: Tenant, items: Sequence[ArtifactItem]
) -> list[tuple[Artifact, bool]]:
    """Store each item's content once per tenant, content-addressed (docs/design.md section 4):
    one query finds the contents already stored, new ones are inserted in one statement.

    The bytes are written atomically and hash-checked (:mod:`journal_app.artifact_storage`):
    a file already at the content-addressed name counts only when its hash matches, else
    it is replaced, for a new artifact and an existing one alike.

    Returns:
        ``[(artifact, created)]`` in the order of ``items``; the same content twice gives
        the same artifact (created once).

    Raises:
        ArtifactStoreFull: the store has no space left (507, naming the store); the
            temporary file is removed and the caller's transaction rolls back.
        ArtifactWriteError: the bytes could not be stored with their hash, or another
            write error of the store (503).
    """
    blobs = [item.content.encode("utf-8") for item in items]
    digests = [chunk_hash(data) for data in blobs]
    known = {
        a.content_hash: a
        for a in Artifact.objects.filter(tenant=tenant, content_hash__in=set(digests))
    }
    out: list[tuple[Artifact, bool]] = []
    new: dict[str, Artifact] = {}
    written: list[str] = []
    for item, data, digest in zip(items, blobs, digests, strict=True):
        existing = known.get(digest) or new.get(digest)
        name = (
            existing.storage_name if existing is not None else f"artifacts/{tenant.slug}/{digest}"
        )
        if digest not in new:  # the same bytes twice in one batch: written once
            try:
                done = artifact_bytes_put(name=name, data=data, digest=digest, sync_dir=False)
            except ArtifactBytesError as exc:
                raise ArtifactWriteError(f"{exc}; nothing written") from exc
            except OSError as exc:
                raise _store_error(name, exc) from exc
            if done != "kept":
                written.append(name)
        if existing is not None:
            out.append((existing, False))
            continue
        mtype = item.media_type or media_type_of(item.content)
        artifact = Artifact(
            tenant=tenant,
            content_hash=digest,
            media_type=mtype,
            byte_size=len(data),
            token_count=(
                item.token_count
                if item.token_count is not None
                else count_tokens(item.content, settings.TOKEN_ENCODING)
            ),
            token_source=source_label(settings.TOKEN_ENCODING),
            preview=make_preview(item.content, mtype),
            source_tool=item.source_tool[:200],
            storage_name=name,
        )
        new[digest] = artifact
        out.append((artifact, True))
    artifact_dirs_sync(written)  # the renames durable before any row names them
    if new:
        Artifact.objects.bulk_create(list(new.values()))
    return out


def artifact_read(*, artifact: Artifact) -> tuple[str, bool]:
    """Read an artifact's content and recompute its hash: ``(text, hash_matches)``.

    Raises:
        OSError (``FileNotFoundError``): the stored bytes are gone from the storage.
    """
    with default_storage.open(artifact.storage_name, "rb") as fh:
        data = fh.read()
    return data.decode("utf-8", errors="replace"), chunk_hash(data) == artifact.content_hash


def artifact_check(artifact: Artifact) -> list[str]:
    """Recompute an artifact from its stored bytes: hash, byte size, media type, preview.

    Returns problems naming each field that does not match (empty when all match); a
    missing file is a problem too.
    """
    try:
        text, ok = artifact_read(artifact=artifact)
    except OSError as exc:
        return [f"artifact {artifact.reference}: stored bytes missing ({exc})"]
    if not ok:
        return [f"artifact {artifact.reference}: stored bytes do not match content_hash"]
    problems = []
    size = len(text.encode("utf-8"))
    if size != artifact.byte_size:
        problems.append(
            f"artifact {artifact.reference}: byte_size stored {artifact.byte_size}, recomputed {size}"
        )
    if media_type_of(text) != artifact.media_type:
        problems.append(f"artifact {artifact.reference}: media_type stored {artifact.media_type!r}")
    if make_preview(text, artifact.media_type) != artifact.preview:
        problems.append(f"artifact {artifact.reference}: preview differs from the content")
    return problems


def journals_for_scope(scope: str | None) -> list[Journal]:
    """Resolve ``tenant[/session[/lane[/branch]]]`` (or ``None`` for all) to journals.

    Raises:
        JournalError: the scope names nothing.
    """
    qs = Journal.objects.select_related("session__tenant").order_by(
        "session__tenant__slug", "session__key", "lane", "branch"
    )
    if scope:
        parts = scope.strip("/").split("/")
        if len(parts) > 4:
            raise JournalError(
                f"scope {scope!r} has more than 4 parts (tenant/session/lane/branch)"
            )
        names = ["session__tenant__slug", "session__key", "lane", "branch"]
        qs = qs.filter(**dict(zip(names, parts, strict=False)))
    journals = list(qs)
    if scope and not journals:
        hint = scope_suggestions(scope)
        raise JournalError(
            f"no journal matches scope {scope!r}"
            + (f"; did you mean {' or '.join(repr(h) for h in hint)}?" if hint else "")
            + " (`sessions` lists them)"
        )
    return journals


def scope_suggestions(scope: str, limit: int = 3) -> list[str]:
    """The known scopes closest to a mistyped one, at the same depth (``difflib``, ratio
    >= 0.6): ``"demmo"`` -> ``["demo"]``; ``"demo/refund"`` -> ``["demo/refunds"]``. One
    query over the journals' names; ``[]`` when nothing is close."""
    parts = scope.strip("/").split("/")
    depth = len(parts)
    names = ["session__tenant__slug", "session__key", "lane", "branch"][:depth]
    known = {"/".join(row) for row in Journal.objects.values_list(*names).distinct()}
    return difflib.get_close_matches(scope.strip("/"), sorted(known), n=limit, cutoff=0.6)
