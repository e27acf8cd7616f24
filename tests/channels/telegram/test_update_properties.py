"""Property tests: the update parser is total, and everything it keeps can be stored and sent.

Arbitrary JSON (lone surrogates included), wrong types, huge numbers and deep nesting, both
as Python values and through the response reader (`adapters.telegram.body`).
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.telegram.body import MAX_DEPTH, load_body
from channels.telegram.updates import MAX_ID, next_offset, to_event
from state.canonical import canonical_json

# Every code point, lone surrogates included (valid JSON escapes, not valid Unicode).
TEXT = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()),
               max_size=80)
NUMBERS = st.one_of(st.integers(), st.integers(min_value=-2**70, max_value=2**70),
                    st.floats(allow_nan=False, allow_infinity=False), st.booleans())
SCALARS = st.one_of(st.none(), NUMBERS, TEXT)
JSON = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(TEXT, inner, max_size=4)), max_leaves=20)
ANY_ID = st.one_of(NUMBERS, TEXT, st.none(), st.integers(min_value=0, max_value=2**60))
MESSAGE = st.fixed_dictionaries({}, optional={
    "message_id": ANY_ID, "chat": st.one_of(JSON, st.fixed_dictionaries({"id": ANY_ID})),
    "date": ANY_ID, "text": st.one_of(TEXT, JSON), "message_thread_id": ANY_ID,
    "from": st.one_of(JSON, st.fixed_dictionaries({"id": ANY_ID, "is_bot": JSON})),
    "reply_to_message": st.one_of(JSON, st.fixed_dictionaries({}, optional={
        "message_id": ANY_ID, "text": TEXT, "from": JSON}))})
SHAPED = st.fixed_dictionaries({"update_id": ANY_ID}, optional={
        "callback_query": st.one_of(JSON, st.fixed_dictionaries({}, optional={
            "id": st.one_of(TEXT, JSON), "data": st.one_of(TEXT, JSON),
            "from": st.one_of(JSON, st.fixed_dictionaries({"id": ANY_ID})),
            "message": st.one_of(JSON, MESSAGE), "inline_message_id": JSON})),
        "message": st.one_of(JSON, MESSAGE), "edited_message": JSON, "my_chat_member": JSON})
# Any item: arbitrary JSON, or an update's shape with wrong types and extra keys of any name.
UPDATE = st.one_of(JSON, st.builds(lambda extra, shaped: {**extra, **shaped},
                                   st.dictionaries(TEXT, JSON, max_size=2), SHAPED))


def _storable(value: Any) -> None:
    """What the inbox stores must encode as strict UTF-8 canonical JSON with exact ints."""
    canonical_json(value).encode("utf-8")  # strict: a lone surrogate raises
    if isinstance(value, bool | None | str):
        return
    if isinstance(value, int):
        assert abs(value) <= MAX_ID
    elif isinstance(value, dict):
        for item in value.values():
            _storable(item)
    else:
        raise AssertionError(f"unexpected {type(value).__name__} in a payload")


@settings(max_examples=400, deadline=None)
@given(UPDATE)
def test_every_item_becomes_a_storable_event(update: Any) -> None:
    event = to_event(update)
    assert event.event_type in ("callback", "reply", "other")
    assert event.external_event_id and event.external_event_id.isascii()
    _storable(event.payload)
    if event.event_type == "other":
        assert set(event.payload) <= {"kind", "chatId", "migrateToChatId"}


@settings(max_examples=200, deadline=None)
@given(st.lists(UPDATE, max_size=6), st.one_of(st.none(), st.integers(0, 2**40)))
def test_the_offset_never_moves_back_never_goes_negative_and_stays_exact(
    updates: list[Any], current: int | None,
) -> None:
    offset = next_offset(updates, current)
    if current is not None:
        assert offset is not None and offset >= current
    assert offset is None or 0 < offset <= MAX_ID + 1 or offset == current


@settings(max_examples=100, deadline=None)
@given(st.lists(UPDATE, max_size=4), st.integers(0, 3), st.integers(MAX_DEPTH + 1, 3000))
def test_a_deeply_nested_value_anywhere_in_a_batch_still_reads_item_by_item(
    updates: list[Any], where: int, depth: int,
) -> None:
    items = [json.dumps(u, ensure_ascii=True) for u in updates]
    deep = "[" * depth + '"x"' + "]" * depth
    items.insert(min(where, len(items)), f'{{"update_id":7,"message":{{"x":{deep}}}}}')
    body = load_body(('{"ok":true,"result":[' + ",".join(items) + "]}").encode())
    assert len(body["result"]) == len(items)
    for item in body["result"]:
        _storable(to_event(item).payload)
