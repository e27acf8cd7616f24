"""Digest variants A and B and their byte form."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from channels.decisions.digests import (
    digest_canonical,
    digest_from_bytes,
    digest_plain,
    digest_plain_hex,
    digest_to_bytes,
    is_digest,
    text_sha256_hex,
)
from channels.decisions.errors import InvalidDigest
from state.canonical import canonical_json


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=12,
)


def test_variant_a_hashes_a_quoted_string_followed_by_lf() -> None:
    assert digest_canonical("abc") == "sha256:" + _sha('"abc"\n')


def test_variant_b_hashes_canonical_json_without_lf() -> None:
    assert digest_plain({"b": 1, "a": 2}) == "sha256:" + _sha('{"a":2,"b":1}')
    assert digest_plain_hex({"b": 1, "a": 2}) == _sha('{"a":2,"b":1}')


def test_subject_vector_matches_the_reference() -> None:
    expected = "sha256:b12302086d7e05d2ff28e733e9d1a1ca447af9d245739026b79a5b82a80e4d13"
    assert digest_canonical({"plan": "a"}) == expected


def test_array_index_keys_hash_first_in_numeric_order() -> None:
    value = {"b": 0, "10": 0, "2": 0, "a": 0, "B": 0}
    assert digest_canonical(value) == "sha256:" + _sha('{"2":0,"10":0,"B":0,"a":0,"b":0}\n')


def test_digest_text_converts_to_32_bytes_and_back() -> None:
    digest = digest_canonical({"plan": "a"})
    raw = digest_to_bytes(digest)
    assert len(raw) == 32
    assert raw.hex() == digest.removeprefix("sha256:")
    assert digest_from_bytes(raw) == digest


@pytest.mark.parametrize(
    "bad",
    [
        "b12302086d7e05d2ff28e733e9d1a1ca447af9d245739026b79a5b82a80e4d13",
        "sha256:B12302086D7E05D2FF28E733E9D1A1CA447AF9D245739026B79A5B82A80E4D13",
        "sha256:b123",
        "md5:b12302086d7e05d2ff28e733e9d1a1ca447af9d245739026b79a5b82a80e4d13",
    ],
)
def test_malformed_digest_text_is_rejected(bad: str) -> None:
    assert not is_digest(bad)
    with pytest.raises(InvalidDigest, match="must be sha256: followed by 64 lowercase hex"):
        digest_to_bytes(bad)


def test_digest_bytes_of_the_wrong_length_are_rejected() -> None:
    with pytest.raises(InvalidDigest, match="Digest bytes must be 32 long, not 31"):
        digest_from_bytes(b"\0" * 31)


def test_text_hash_encodes_a_lone_surrogate_as_replacement_character_like_node() -> None:
    assert text_sha256_hex("a\ud800b") == _sha("a\ufffdb")
    assert text_sha256_hex("\ud83d\ude42") == _sha("🙂")


@given(json_values)
def test_canonical_digest_is_sha256_of_canonical_json_and_lf(value: Any) -> None:
    assert digest_canonical(value) == "sha256:" + _sha(canonical_json(value) + "\n")


@given(st.dictionaries(st.text(max_size=6), json_values, max_size=6), st.randoms())
def test_canonical_digest_ignores_key_insertion_order(value: dict[str, Any], rnd: Any) -> None:
    keys = list(value)
    rnd.shuffle(keys)
    reordered = {key: value[key] for key in keys}
    assert digest_canonical(reordered) == digest_canonical(value)
    assert digest_plain(reordered) == digest_plain(value)


@given(json_values)
def test_digest_bytes_round_trip_for_any_value(value: Any) -> None:
    digest = digest_canonical(value)
    assert digest_from_bytes(digest_to_bytes(digest)) == digest
