"""One job whose first attempt at a lot takes ten minutes: time for a test to kill its worker."""

from __future__ import annotations

import time

from pyspark.sql import DataFrame

from lotline.spark.pipeline import Lot, Pipeline

p = Pipeline("slow")
events = p.dataset("events", format="text", interval="PT30M")
copies = p.dataset("copies", format="text", interval="PT30M")


@p.job(inputs=[events], output=copies)
def copy(events: DataFrame, lot: Lot) -> DataFrame:
    if lot.attempt == 1:
        time.sleep(600)
    return events
