"""Checks per output of jobs with several outputs (``test_several_outputs.py``).

``sizes`` splits ``numbers`` into ``low`` and ``high`` (a tuple, in declared order): ``low`` drops a
row without a number into ``low__quarantine``; ``high`` warns on a number of 100 or more and drops
20 into ``high__quarantine`` (so ``sizes__quarantine`` has two outputs). ``pair`` writes ``first``
and ``second``; a ``fail`` check on ``second`` fails its lot. ``parted`` is child work with two
outputs; its part ``FAIL_PART`` (a test sets it) fails."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lotline.spark.pipeline import Lot, Pipeline, expect

p = Pipeline("multichecked")
numbers = p.dataset("numbers", format="text", interval="PT1H")
low = p.dataset("low", format="parquet", interval="PT1H")
high = p.dataset("high", format="parquet", interval="PT1H")
first = p.dataset("first", format="parquet", interval="PT1H")
second = p.dataset("second", format="parquet", interval="PT1H")
evens = p.dataset("evens", format="parquet", interval="PT1H")
odds = p.dataset("odds", format="parquet", interval="PT1H")

#: The part of ``parted`` that fails (``part=00001``), or None.
FAIL_PART: str | None = None


def _parsed(numbers: DataFrame) -> DataFrame:
    return numbers.select(F.expr("try_cast(value AS INT)").alias("n"))


@p.job(
    inputs=[numbers],
    outputs=[low, high],
    checks={
        low: [expect("n IS NOT NULL", on_fail="drop")],
        "high": [expect("n < 100", on_fail="warn"), expect("n <> 20", on_fail="drop")],
    },
)
def sizes(numbers: DataFrame) -> tuple[DataFrame, DataFrame]:
    parsed = _parsed(numbers)
    return parsed.where("n < 10 OR n IS NULL"), parsed.where("n >= 10")


@p.job(inputs=[numbers], outputs=[first, second], checks={second: [expect("n < 100")]})
def pair(numbers: DataFrame) -> dict[str, DataFrame]:
    parsed = _parsed(numbers).where("n IS NOT NULL")
    return {"first": parsed, "second": parsed}


@p.job(inputs=[numbers], outputs=[evens, odds], partition_by=1)
def parted(numbers: DataFrame, lot: Lot) -> tuple[DataFrame, DataFrame]:
    if lot.part == FAIL_PART:
        raise ValueError(f"part {lot.part} refused")
    parsed = _parsed(numbers).where("n IS NOT NULL")
    return parsed.where("n % 2 = 0"), parsed.where("n % 2 != 0")
