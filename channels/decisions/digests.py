"""The two digest variants of the decision contract, and their byte form.

Variant A (`digest_canonical`) hashes canonical JSON plus a trailing LF; it identifies the
subject, the presentation, the request and each Telegram part. Variant B (`digest_plain`)
hashes canonical JSON with no LF; it derives the decision id and the answer digests. The
reference sorts B keys with `localeCompare`, but every key hashed under B is a fixed camelCase
name or a single text-input name, so the canonical code-unit order gives the same bytes.
"""

from __future__ import annotations

import hashlib
import re

from channels.decisions.errors import InvalidDigest
from state.canonical import JsonValue, canonical_json

__all__ = [
    "digest_canonical", "digest_from_bytes", "digest_plain", "digest_plain_hex",
    "digest_to_bytes", "is_digest", "text_sha256_hex",
]


_PREFIX = "sha256:"
_DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}")


def _utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # Node hashes a lone surrogate as U+FFFD and a split surrogate pair as its character.
        units = text.encode("utf-16-le", "surrogatepass")
        return units.decode("utf-16-le", "replace").encode("utf-8")


def _hex(text: str) -> str:
    return hashlib.sha256(_utf8(text)).hexdigest()


def digest_canonical(value: JsonValue) -> str:
    """Variant A: `sha256:` + hex SHA-256 of the canonical JSON followed by LF."""
    return _PREFIX + _hex(canonical_json(value) + "\n")


def digest_plain_hex(value: JsonValue) -> str:
    """Variant B as bare hex: SHA-256 of the canonical JSON, no LF."""
    return _hex(canonical_json(value))


def digest_plain(value: JsonValue) -> str:
    """Variant B: `sha256:` + hex SHA-256 of the canonical JSON, no LF."""
    return _PREFIX + digest_plain_hex(value)


def text_sha256_hex(text: str) -> str:
    """Hex SHA-256 of the UTF-8 bytes of `text` (ids and callback tokens)."""
    return _hex(text)


def is_digest(value: object) -> bool:
    """Whether `value` is a well-formed `sha256:<64 lowercase hex>` string."""
    return isinstance(value, str) and _DIGEST_RE.fullmatch(value) is not None


def digest_to_bytes(digest: str) -> bytes:
    """The 32 raw bytes of a `sha256:<hex>` digest (the database form)."""
    if not is_digest(digest):
        raise InvalidDigest(
            f"Digest {digest!r} must be sha256: followed by 64 lowercase hex digits"
        )
    return bytes.fromhex(digest[len(_PREFIX) :])


def digest_from_bytes(raw: bytes) -> str:
    """The `sha256:<hex>` text form of 32 raw digest bytes."""
    if len(raw) != 32:
        raise InvalidDigest(f"Digest bytes must be 32 long, not {len(raw)}")
    return _PREFIX + raw.hex()
