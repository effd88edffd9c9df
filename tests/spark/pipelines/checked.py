"""Checks that gate publication (``test_checks.py``): ``clean`` drops rows without a delay into
``flights__quarantine``, warns on an origin, bounds the row count, wants flights unique and asks a
function; ``strict`` fails its lot when a delay is not below 100."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame

from lotline.spark.pipeline import Lot, Pipeline, check, expect, row_count, unique

p = Pipeline("checked")
raw = p.dataset(
    "raw_flights", format="csv", interval="PT1H", schema="flight string, dep_delay int, origin string"
)
flights = p.dataset("flights", format="parquet", interval="PT1H")
strict_flights = p.dataset("strict_flights", format="parquet", interval="PT1H")


def few_late(df: DataFrame, lot: Lot) -> tuple[bool, dict[str, Any]]:
    late = df.where("dep_delay > 60").count()
    return late == 0, {"late": late, "lot": lot.id}


@p.job(
    inputs=[raw],
    output=flights,
    checks=[
        expect("dep_delay IS NOT NULL", on_fail="drop"),
        expect("origin <> 'XXX'", on_fail="warn"),
        row_count(min=1, max=1000),
        unique("flight"),
        check(few_late, on_fail="warn"),
    ],
)
def clean(raw_flights: DataFrame) -> DataFrame:
    return raw_flights


@p.job(inputs=[raw], output=strict_flights, checks=[expect("dep_delay < 100")])
def strict(raw_flights: DataFrame) -> DataFrame:
    return raw_flights
