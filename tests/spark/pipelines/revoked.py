"""One job whose transform runs the test's hooks first: a test can take the claim away mid-lot."""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame

from lotline.spark.pipeline import Lot, Pipeline

#: Called with the lot before the transform returns (the test appends to it).
ON_TRANSFORM: list[Callable[[Lot], None]] = []

p = Pipeline("revoked")
events = p.dataset("events", format="text", interval="PT30M")
copies = p.dataset("copies", format="text", interval="PT30M")


@p.job(inputs=[events], output=copies)
def copy(events: DataFrame, lot: Lot) -> DataFrame:
    for hook in ON_TRANSFORM:
        hook(lot)
    return events
