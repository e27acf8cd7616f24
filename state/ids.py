"""Compact identifiers: digests and times written in 6 bits a character instead of hex's 4.

An id is stored several times (its row, its unique index, every row and index that refers to
it), so each character saved is saved a dozen times per record. The alphabet is base64url's
64 characters in ASCII order, so that ids of equal length sort as their numbers do (a
time-first id keeps its unique index append-only).
"""

from __future__ import annotations

import hashlib

__all__ = ["ALPHABET", "digest_id", "number_id"]


ALPHABET = "-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz"


def number_id(value: int, width: int) -> str:
    """`value` in `width` characters of the sorted alphabet (ValueError when it does not
    fit, or is negative)."""
    if value < 0 or value >= 64**width:
        raise ValueError(f"{value} does not fit in {width} characters")
    out = []
    for _ in range(width):
        value, digit = divmod(value, 64)
        out.append(ALPHABET[digit])
    return "".join(reversed(out))


def digest_id(basis: str, width: int = 16) -> str:
    """The first 6 * `width` bits of SHA-256(`basis`) in `width` characters (16: 96 bits)."""
    bits = 6 * width
    value = int.from_bytes(hashlib.sha256(basis.encode()).digest(), "big") >> (256 - bits)
    return number_id(value, width)
