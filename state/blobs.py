"""Content-addressed blobs: canonical JSON and UTF-8 text, deduplicated by SHA-256."""

from __future__ import annotations

import json
from typing import Any

import apsw

from state.canonical import JsonValue, canonical_bytes, sha256
from state.errors import BlobMismatch

__all__ = ["JSON", "get_bytes", "get_json", "get_text", "put_bytes", "put_json", "put_text"]


JSON = "application/json"
# UTF-8 text (the plan's `text/plain`; stored in every text row, so no charset parameter:
# text blobs are UTF-8 by definition). Earlier versions wrote the long form; a row in it is
# the same text, adopted as it is.
_TEXT = "text/plain"
_EARLIER_TEXT = "text/plain; charset=utf-8"


def put_bytes(conn: apsw.Connection, content: bytes, media_type: str, now: int) -> bytes:
    """Insert `content` (or adopt the identical existing row); return its 32-byte hash."""
    blob_hash = sha256(content)
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
    return blob_hash


def put_json(conn: apsw.Connection, value: JsonValue, now: int) -> bytes:
    """Store `value` as canonical JSON."""
    return put_bytes(conn, canonical_bytes(value), JSON, now)


def put_text(conn: apsw.Connection, text: str, now: int) -> bytes:
    """Store plain text as UTF-8."""
    return put_bytes(conn, text.encode("utf-8", "surrogatepass"), _TEXT, now)


def get_bytes(conn: apsw.Connection, blob_hash: bytes) -> bytes:
    """Return the stored bytes; KeyError when absent."""
    content = conn.execute("SELECT content FROM blobs WHERE blob_hash = ?", (blob_hash,)).get
    if content is None:
        raise KeyError(blob_hash.hex())
    return bytes(content)


def get_json(conn: apsw.Connection, blob_hash: bytes) -> Any:
    """Return the decoded JSON value of a stored blob."""
    return json.loads(get_bytes(conn, blob_hash))


def get_text(conn: apsw.Connection, blob_hash: bytes) -> str:
    """Return the decoded text of a stored blob."""
    return get_bytes(conn, blob_hash).decode("utf-8", "surrogatepass")
