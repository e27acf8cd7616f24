"""Canonical JSON: JavaScript key order and number form, compared with Node where available."""

from __future__ import annotations

import json
import math
import random
import shutil
import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from state.canonical import CanonicalJsonError, canonical_json, js_key_order, js_number

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=20,
)


def test_array_index_keys_come_first_in_numeric_order_then_code_units() -> None:
    assert canonical_json({"b": 1, "10": 2, "2": 3, "a": 4, "B": 5}) == \
        '{"2":3,"10":2,"B":5,"a":4,"b":1}'
    assert js_key_order(["01", "1", "4294967295", "4294967294", "-1"]) == \
        ["1", "4294967294", "-1", "01", "4294967295"]


def test_keys_sort_by_utf16_code_units_not_code_points() -> None:
    assert canonical_json({"\uffff": 1, "😀": 2}) == '{"😀":2,"\uffff":1}'


@pytest.mark.parametrize(
    ("value", "text"),
    [(1.0, "1"), (1e21, "1e+21"), (1e20, "100000000000000000000"), (1.5e-7, "1.5e-7"),
     (1e-6, "0.000001"), (-0.0, "0"), (0.1, "0.1"), (123.456, "123.456"),
     (2**60, "1152921504606847000"), (5e-324, "5e-324"), (-2.5, "-2.5"),
     (1.7976931348623157e308, "1.7976931348623157e+308")],
)
def test_numbers_use_the_javascript_form(value: float, text: str) -> None:
    assert js_number(value) == text


def test_strings_escape_like_json_stringify() -> None:
    assert canonical_json(["\u2028", "\x01\x7f", "é", "\ud800", '"\\\n']) == \
        '["\u2028","\\u0001\x7f","é","\\ud800","\\"\\\\\\n"]'


@pytest.mark.parametrize("bad", [math.nan, math.inf, {1: "x"}, object(), b"bytes"])
def test_values_json_cannot_represent_are_rejected(bad: object) -> None:
    with pytest.raises(CanonicalJsonError):
        canonical_json(bad)


@given(json_values)
def test_canonical_json_round_trips_and_is_order_independent(value: object) -> None:
    text = canonical_json(value)
    decoded = json.loads(text)
    assert canonical_json(decoded) == text
    if isinstance(value, dict):
        shuffled = dict(reversed(list(value.items())))
        assert canonical_json(shuffled) == text


def _random_value(rng: random.Random, depth: int = 0) -> object:
    kind = rng.randrange(7 if depth < 3 else 4)
    if kind == 0:
        return rng.choice([None, True, False])
    if kind == 1:
        return rng.choice([rng.uniform(-1e25, 1e25), rng.random() * 10 ** rng.randint(-12, 25),
                           float(rng.randint(-10**6, 10**6)), rng.randint(-2**53, 2**53)])
    if kind in (2, 3):
        alphabet = "aB1_é😀\uffff\u2028\x07\"\\ 09"
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6)))
    if kind == 4:
        return [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    keys = [str(rng.randint(0, 20)) if rng.random() < 0.3 else str(_random_value(rng, 3))
            for _ in range(rng.randint(0, 5))]
    return {k: _random_value(rng, depth + 1) for k in keys}


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_output_matches_node_json_stringify_over_sorted_keys() -> None:
    rng = random.Random(20261130)
    values = [_random_value(rng) for _ in range(400)]
    script = (
        "const sort=v=>Array.isArray(v)?v.map(sort):(v&&typeof v==='object')?"
        "Object.keys(v).sort().reduce((o,k)=>(o[k]=sort(v[k]),o),{}):v;"
        "let d='';process.stdin.on('data',c=>d+=c).on('end',()=>{"
        "for(const l of d.split('\\n')){if(l)console.log(JSON.stringify(sort(JSON.parse(l))));}})"
    )
    lines = "\n".join(json.dumps(v, ensure_ascii=True) for v in values) + "\n"
    node = subprocess.run(["node", "-e", script], input=lines.encode(), capture_output=True,
                          timeout=60, check=True)
    expected = node.stdout.decode("utf-8", "surrogatepass").split("\n")[:-1]
    assert [canonical_json(v) for v in values] == expected
