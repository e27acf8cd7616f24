"""Compact ids: they sort as their numbers do, keep their bits, and stay distinct."""

from __future__ import annotations

import hashlib
import random

import pytest

from state.ids import ALPHABET, digest_id, number_id
from state.resources import event_id_for


def test_the_alphabet_is_sorted_and_ids_of_one_width_sort_as_their_numbers() -> None:
    assert list(ALPHABET) == sorted(ALPHABET) and len(set(ALPHABET)) == 64
    numbers = [*random.Random(7).sample(range(64**7), 500), 0, 64**7 - 1]
    assert sorted(number_id(n, 7) for n in numbers) == [number_id(n, 7) for n in sorted(numbers)]
    with pytest.raises(ValueError):
        number_id(64**7, 7)


def test_a_digest_id_is_the_digest_s_leading_bits() -> None:
    value = int.from_bytes(hashlib.sha256(b"basis").digest(), "big") >> (256 - 96)
    assert digest_id("basis") == number_id(value, 16) and len(digest_id("basis", 11)) == 11


def test_event_ids_are_short_time_ordered_and_distinct_per_revision() -> None:
    now = 1_790_000_000_000
    ids = [event_id_for("effect:e1", revision, now + revision // 3) for revision in range(1, 300)]
    assert len(set(ids)) == len(ids) and all(len(i) == 18 for i in ids)
    times = [i[:7] for i in ids]
    assert times == sorted(times)  # the unique index grows at its end
    # After 2109 the time takes one character more: still distinct from every earlier id.
    assert len(event_id_for("effect:e1", 1, 64**7)) == 19
