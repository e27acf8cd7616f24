"""Property tests: classifying a Bot API response never raises, whatever the bytes.

Arbitrary bytes, arbitrary JSON (lone surrogates as escapes and as raw invalid UTF-8), deep
nesting, absurd numbers and wrong types: each is a classified result, and only a body that is
a Bot API answer of the promised shape is `ok`.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.telegram.results import MAX_DESCRIPTION, CallOutcome, classify_response

METHODS = st.sampled_from(["getUpdates", "sendMessage", "answerCallbackQuery", "getMe",
                           "editMessageReplyMarkup", "deleteWebhook", "unknownMethod"])
STATUS = st.sampled_from([200, 201, 400, 401, 403, 404, 409, 429, 500, 502])
TEXT = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()),
               max_size=40)
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(min_value=-2**80, max_value=2**80),
                    st.floats(allow_nan=False, allow_infinity=False), TEXT)
JSON = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(TEXT, inner, max_size=4)), max_leaves=15)
BODY = st.one_of(JSON, st.fixed_dictionaries({"ok": st.one_of(st.booleans(), JSON)}, optional={
    "result": JSON, "error_code": JSON, "description": st.one_of(TEXT, JSON),
    "parameters": st.one_of(JSON, st.fixed_dictionaries({}, optional={
        "retry_after": JSON, "migrate_to_chat_id": JSON}))}))


def _encoded(body: Any, depth: int, raw_surrogates: bool) -> bytes:
    # Raw: lone surrogates as the invalid UTF-8 bytes a broken proxy might send.
    text = json.dumps(body, ensure_ascii=not raw_surrogates)
    if depth:
        text = "[" * depth + text + "]" * depth
    return text.encode("utf-8", "surrogatepass")


def _check(result: Any, method: str) -> None:
    assert result.method == method and isinstance(result.outcome, CallOutcome)
    if result.description is not None:
        result.description.encode("utf-8")  # printable and storable: no lone surrogate
        assert len(result.description) <= max(MAX_DESCRIPTION, 80)
    if result.error_code is not None:
        assert isinstance(result.error_code, int) and 0 <= result.error_code < 1000
    if result.migrate_to_chat_id is not None:
        assert not isinstance(result.migrate_to_chat_id, bool)
    if result.outcome is CallOutcome.OK and method == "getUpdates":
        assert isinstance(result.updates, list)


@settings(max_examples=300, deadline=None)
@given(METHODS, STATUS, st.binary(max_size=200))
def test_arbitrary_bytes_are_classified(method: str, status: int, payload: bytes) -> None:
    _check(classify_response(method, status, payload), method)


@settings(max_examples=400, deadline=None)
@given(METHODS, STATUS, BODY, st.sampled_from([0, 0, 2000, 3000]), st.booleans())
def test_arbitrary_json_is_classified(method: str, status: int, body: Any, depth: int,
                                      raw_surrogates: bool) -> None:
    result = classify_response(method, status, _encoded(body, depth, raw_surrogates))
    _check(result, method)
    if depth or not (isinstance(body, dict) and body.get("ok") is True):
        assert result.outcome is not CallOutcome.OK


@settings(max_examples=100, deadline=None)
@given(st.lists(JSON, max_size=5), st.integers(0, 5), st.integers(100, 3000))
def test_a_batch_with_a_deep_item_stays_a_batch_of_the_same_length(
    items: list[Any], where: int, depth: int,
) -> None:
    texts = [json.dumps(i, ensure_ascii=True) for i in items]
    texts.insert(min(where, len(texts)), "[" * depth + "]" * depth)
    payload = ('{"ok":true,"result":[' + ",".join(texts) + "]}").encode()
    result = classify_response("getUpdates", 200, payload)
    assert result.outcome is CallOutcome.OK and len(result.updates) == len(texts)
