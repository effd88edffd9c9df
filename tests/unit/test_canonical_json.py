"""``canonical_json`` writes exactly what its definition (``json.dumps``, sorted keys) writes, so
that event keys stay what earlier versions journaled, whichever encoder wrote the text."""

from __future__ import annotations

import json
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from lotline.domain.openlineage import canonical_json


def reference(payload: object) -> str:
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


#: Floats near every power of ten, where encoders switch between fixed and exponent notation.
tricky_floats = st.builds(
    lambda mantissa, exponent: mantissa * 10.0**exponent,
    st.floats(-10, 10, allow_nan=False),
    st.integers(-20, 25),
)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)  # past orjson's 64 bits
    | st.floats()  # NaN and infinities too: json.loads reads them
    | tricky_floats
    | st.text()  # any code point, unpaired surrogates included
)
documents = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=12,
)


@settings(max_examples=500, deadline=None)
@given(st.dictionaries(st.text(), documents, max_size=5))
def test_canonical_json_is_json_dumps_with_sorted_keys(payload: dict[str, object]) -> None:
    assert canonical_json(payload) == reference(payload)


def test_the_values_where_the_encoders_differ_are_written_as_json_writes_them() -> None:
    for value in (1e-05, 2.5e-07, 9.99e-10, math.nan, math.inf, -math.inf, 2**64, -(2**63) - 1, "\ud800"):
        assert canonical_json({"v": value}) == reference({"v": value}), value
    mixed = {"b": [1, 0.5, "é\n\x01"], "a": None}
    assert canonical_json(mixed) == reference(mixed)
