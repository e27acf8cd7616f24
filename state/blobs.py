"""Content-addressed blobs: canonical JSON and UTF-8 text, deduplicated by SHA-256."""

from __future__ import annotations

import json
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import apsw

from state.canonical import JsonValue, canonical_bytes, sha256
from state.errors import BlobMismatch

__all__ = ["forget", "get_bytes", "get_json", "get_text", "put_bytes", "put_json",
           "put_text", "remembering"]


_JSON = "application/json"
# UTF-8 text (the plan's `text/plain`; stored in every text row, so no charset parameter:
# text blobs are UTF-8 by definition). Earlier versions wrote the long form; a row in it is
# the same text, adopted as it is.
_TEXT = "text/plain"
_EARLIER_TEXT = "text/plain; charset=utf-8"


# The blobs read or stored in a connection's current transaction (a `Database` write or
# snapshot: `remembering`): hash -> (the media type a put asked for, None after a read; the
# bytes). Inside one transaction nothing else changes a row, so a press's repeated reads and
# puts of the same request, choices and texts (a dozen of each) need no statement; a rollback
# to a savepoint undoes inserts, so it forgets them (`forget`). Never kept past the
# transaction: a later put still compares the stored bytes (a tampered row is refused).
# Small blobs only.
_KNOWN: weakref.WeakKeyDictionary[apsw.Connection, dict[bytes, tuple[str | None, bytes]]] = \
    weakref.WeakKeyDictionary()
_KNOWN_BYTES = 16_384


@contextmanager
def remembering(conn: apsw.Connection) -> Iterator[None]:
    """The blobs of the transaction `conn` runs in this block are remembered until it ends."""
    _KNOWN[conn] = {}
    try:
        yield
    finally:
        _KNOWN.pop(conn, None)


def forget(conn: apsw.Connection) -> None:
    """A rollback to a savepoint on `conn`: what the transaction stored may be gone."""
    known = _KNOWN.get(conn)
    if known is not None:
        known.clear()


def _remember(conn: apsw.Connection, blob_hash: bytes, media_type: str | None,
              content: bytes) -> None:
    known = _KNOWN.get(conn)
    if known is not None and len(content) <= _KNOWN_BYTES:
        known[blob_hash] = (media_type, content)


def _known(conn: apsw.Connection, blob_hash: bytes) -> tuple[str | None, bytes] | None:
    known = _KNOWN.get(conn)
    return None if known is None else known.get(blob_hash)


def put_bytes(conn: apsw.Connection, content: bytes, media_type: str, now: int) -> bytes:
    """Insert `content` (or adopt the identical existing row); return its 32-byte hash."""
    blob_hash = sha256(content)
    if _known(conn, blob_hash) == (media_type, content):
        return blob_hash  # stored (or adopted) in this transaction already
    conn.execute(
        "INSERT INTO blobs (blob_hash, media_type, byte_length, content, created_at)"
        " VALUES (?, ?, ?, ?, ?) ON CONFLICT (blob_hash) DO NOTHING",
        (blob_hash, media_type, len(content), content, now),
    )
    if conn.changes() == 0:  # adopted: the existing row must be byte-identical
        row = conn.execute(
            "SELECT media_type, byte_length, content FROM blobs WHERE blob_hash = ?", (blob_hash,)
        ).fetchone()
        if row != (media_type, len(content), content) and not (
                media_type == _TEXT and row == (_EARLIER_TEXT, len(content), content)):
            raise BlobMismatch(
                f"blob {blob_hash.hex()} exists with a different media type or bytes"
            )
    _remember(conn, blob_hash, media_type, content)
    return blob_hash


def put_json(conn: apsw.Connection, value: JsonValue, now: int) -> bytes:
    """Store `value` as canonical JSON."""
    return put_bytes(conn, canonical_bytes(value), _JSON, now)


def put_text(conn: apsw.Connection, text: str, now: int) -> bytes:
    """Store plain text as UTF-8."""
    return put_bytes(conn, text.encode("utf-8", "surrogatepass"), _TEXT, now)


def get_bytes(conn: apsw.Connection, blob_hash: bytes) -> bytes:
    """Return the stored bytes; KeyError when absent."""
    if (known := _known(conn, blob_hash)) is not None:
        return known[1]
    content = conn.execute("SELECT content FROM blobs WHERE blob_hash = ?", (blob_hash,)).get
    if content is None:
        raise KeyError(blob_hash.hex())
    found = bytes(content)
    _remember(conn, blob_hash, None, found)
    return found


def get_json(conn: apsw.Connection, blob_hash: bytes) -> Any:
    """Return the decoded JSON value of a stored blob."""
    return json.loads(get_bytes(conn, blob_hash))


def get_text(conn: apsw.Connection, blob_hash: bytes) -> str:
    """Return the decoded text of a stored blob."""
    return get_bytes(conn, blob_hash).decode("utf-8", "surrogatepass")
