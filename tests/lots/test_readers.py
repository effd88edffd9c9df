"""Reading a dataset from outside lotline (docs/lots.md "Reading a dataset from outside lotline"):
the READY lots of a range, exactly the objects their current manifests list, through the service,
``lotline.read_arrow``, ``lotline files`` and DuckDB, on SQLite and PostgreSQL (``lineage``).

The dataset's folder holds what a direct reader would double-count: lot 001 corrected and
re-published twice (``attempt=1``, ``2`` and ``3`` side by side), a failed attempt's objects left by
a crash, a reopened lot and a held one."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import lotline
from lotline.cli.main import app
from lotline.domain.errors import InvalidInput, NotFound
from lotline.domain.manifests import ManifestDraft, ManifestState
from lotline.services import Lineage
from lotline.services.lots import OutputWritten
from lotline.storage.objects import Storage
from support.lots import LotWorld

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

NS = "shop"
DATASET = "orders"


def hour(n: int) -> str:
    return f"20230101PT1H{n:03d}"


def _publish(world: LotWorld, lot: str, rows: list[tuple[int, str]], *, fail: bool = False) -> None:
    """One attempt of ``lot``: its rows written as Parquet to the attempt's fresh folder, then
    published (or failed: its objects are removed)."""
    claim = world.claim("load", lot)
    assert claim is not None
    storage = world.lineage.storage
    location = storage.attempt_uri(NS, DATASET, lot, claim.attempt)
    if rows:
        table = pa.table({"id": [r[0] for r in rows], "item": [r[1] for r in rows]})
        path = Path(storage.local_path(location))
        path.mkdir(parents=True)
        pq.write_table(table, path / "part-00000.parquet")
    draft = ManifestDraft(location, storage.describe_written(location, format="parquet"), len(rows))
    if fail:
        world.lots.fail(claim, outputs={claim.dataset: OutputWritten(draft)}, error="ValueError: bad row")
    else:
        world.lots.complete(claim, outputs={claim.dataset: OutputWritten(draft)})


#: The current rows of each READY lot at the end of ``orders``.
CURRENT = {
    hour(0): [(1, "apple"), (2, "pear")],
    hour(1): [(30, "fig v3")],  # corrected and re-published twice
    hour(2): [],  # empty: present, no rows
    hour(5): [(5, "plum")],
}


@pytest.fixture
def orders(lineage: Lineage) -> LotWorld:
    """``orders``, hour lots of 2023-01-01: 000 READY; 001 READY at its third version; 002 READY
    empty; 003 failed (and a crashed attempt's objects left unlisted); 004 held; 005 READY; 006
    reopened; plus a lot of 2023-01-02 (outside the day)."""
    world = LotWorld(lineage, NS)
    world.job("load", output=DATASET)
    _publish(world, hour(0), CURRENT[hour(0)])
    _publish(world, hour(1), [(10, "fig"), (11, "kiwi")])
    for rows in ([(20, "fig v2")], CURRENT[hour(1)]):
        lineage.lots.invalidate(NS, DATASET, hour(1))
        _publish(world, hour(1), rows)
    _publish(world, hour(2), [])
    _publish(world, hour(3), [(3, "lost")], fail=True)
    crashed = Path(lineage.storage.local_path(lineage.storage.attempt_uri(NS, DATASET, hour(3), 2)))
    crashed.mkdir(parents=True)
    pq.write_table(pa.table({"id": [33], "item": ["crashed"]}), crashed / "part-00000.parquet")
    _publish(world, hour(4), [(4, "held")])
    lineage.lots.hold_lot(NS, DATASET, hour(4))
    _publish(world, hour(5), CURRENT[hour(5)])
    _publish(world, hour(6), [(6, "reopened")])
    lineage.lots.invalidate(NS, DATASET, hour(6))
    _publish(world, "20230102PT1H000", [(7, "next day")])
    return world


def _current_uris(lineage: Lineage, lots: list[str]) -> list[str]:
    """What the manifests say is current, lot by lot (``ManifestService.current``)."""
    uris = []
    for lot in lots:
        manifest = lineage.manifests.current(NS, DATASET, lot)
        assert manifest is not None
        uris += [o.uri for o in manifest.objects]
    return uris


def _rows(table: pa.Table) -> list[tuple[object, ...]]:
    return sorted(zip(*(table.column(c).to_pylist() for c in table.column_names), strict=True))


def test_published_is_the_current_manifests_of_the_ready_lots(orders: LotWorld, lineage: Lineage) -> None:
    found = lineage.reading.published(NS, DATASET, "2023-01-01", "2023-01-02")
    assert [m.lot for m in found.manifests] == list(CURRENT)
    assert [m.version_number for m in found.manifests] == [
        lineage.manifests.current(NS, DATASET, lot).version_number  # type: ignore[union-attr]
        for lot in CURRENT
    ]
    assert found.manifests[1].attempt == 3
    assert found.manifests[2].state is ManifestState.EMPTY
    assert [o.uri for _, o in found.objects()] == _current_uris(lineage, list(CURRENT))
    assert found.rows == 4
    # The folder holds more: every attempt of lot 001, the crashed attempt of 003, 004, 006.
    folder = Path(lineage.storage.local_path(lineage.storage.dataset_uri(NS, DATASET)))
    on_disk = {str(p) for p in folder.rglob("*.parquet")}
    listed = {lineage.storage.local_path(o.uri) for _, o in found.objects()}
    assert listed < on_disk
    assert len(on_disk - listed) == 6


def test_a_range_takes_the_lots_whose_windows_meet_it(orders: LotWorld, lineage: Lineage) -> None:
    def lots(start: str | None, end: str | None) -> list[str]:
        return [m.lot for m in lineage.reading.published(NS, DATASET, start, end).manifests]

    assert lots("2023-01-01T00:30:00Z", "2023-01-01T02:00:00Z") == [hour(0), hour(1)]
    assert lots("2023-01-01T05:00:00Z", None) == [hour(5), "20230102PT1H000"]
    assert lots(None, "2023-01-01T01:00:00Z") == [hour(0)]
    assert lots(None, None) == [*CURRENT, "20230102PT1H000"]
    assert lots("2023-01-03", "2023-01-04") == []


@pytest.mark.parametrize(
    ("start", "end", "message"),
    [
        ("2023-01-02", "2023-01-01", "from '2023-01-02' must be before to '2023-01-01'."),
        ("yesterday", None, "from 'yesterday' is not an RFC 3339 instant"),
        (None, "2023-13-01", "to '2023-13-01' is not a valid date or time"),
        (datetime(2023, 1, 1), None, "from 2023-01-01T00:00:00 has no time zone"),
    ],
)
def test_a_bad_range_is_one_clear_error(
    orders: LotWorld, lineage: Lineage, start: str | datetime | None, end: str | None, message: str
) -> None:
    with pytest.raises(InvalidInput) as raised:
        lineage.reading.published(NS, DATASET, start, end)
    assert raised.value.message.startswith(message)


def test_named_lots_are_read_without_a_range(orders: LotWorld, lineage: Lineage) -> None:
    orders.job("snapshot", output="prices")
    storage = lineage.storage
    for lot in ("2023-01-01", "eu"):
        claim = orders.claim("snapshot", lot)
        assert claim is not None
        location = storage.attempt_uri(NS, "prices", lot, claim.attempt)
        storage.write_bytes(f"{location}/part-0.txt", b"1\n")
        draft = ManifestDraft(location, storage.describe_written(location, format="text"), 1)
        lineage.lots.complete(claim, outputs={claim.dataset: OutputWritten(draft)})
    assert [m.lot for m in lineage.reading.published(NS, "prices").manifests] == ["2023-01-01", "eu"]
    assert lineage.reading.published(NS, "prices", "2023-01-01", "2023-01-02").manifests == ()


def test_read_arrow_refuses_what_is_not_parquet(orders: LotWorld, lineage: Lineage) -> None:
    """A text lot beside the Parquet ones: one format per read (``lotline files`` still lists all)."""
    storage = lineage.storage
    claim = orders.claim("load", "20230103PT1H000")
    assert claim is not None
    location = storage.attempt_uri(NS, DATASET, "20230103PT1H000", claim.attempt)
    storage.write_bytes(f"{location}/part-0.txt", b"8 text\n")
    lineage.lots.complete(
        claim,
        outputs={
            claim.dataset: OutputWritten(
                ManifestDraft(location, storage.describe_written(location, format="text"), 1)
            )
        },
    )
    with pytest.raises(InvalidInput, match=r"its lots' objects are of several formats \(parquet, text\)"):
        lotline.read_arrow(DATASET, namespace=NS, lineage=lineage)
    with pytest.raises(InvalidInput, match="read_arrow reads Parquet, its objects are text"):
        lotline.read_arrow(DATASET, namespace=NS, from_="2023-01-03", lineage=lineage)
    assert len(lotline.read_arrow(DATASET, namespace=NS, to="2023-01-03", lineage=lineage)) == 5


def test_an_unknown_dataset_is_not_found(orders: LotWorld, lineage: Lineage) -> None:
    with pytest.raises(NotFound, match="shop:order"):
        lineage.reading.published(NS, "order")


def test_read_arrow_returns_exactly_the_current_rows(orders: LotWorld, lineage: Lineage) -> None:
    table = lotline.read_arrow(DATASET, namespace=NS, from_="2023-01-01", to="2023-01-02", lineage=lineage)
    assert _rows(table) == sorted(row for rows in CURRENT.values() for row in rows)
    with_lots = lotline.read_arrow(DATASET, namespace=NS, to="2023-01-02", lot_column="lot", lineage=lineage)
    assert _rows(with_lots) == sorted((*row, lot) for lot, rows in CURRENT.items() for row in rows)
    counts = with_lots.group_by("lot").aggregate([("id", "count")]).to_pylist()
    assert {c["lot"]: c["id_count"] for c in counts} == {hour(0): 2, hour(1): 1, hour(5): 1}


def test_read_arrow_of_empty_lots_has_the_columns_and_no_rows(orders: LotWorld, lineage: Lineage) -> None:
    empty = lotline.read_arrow(
        DATASET, namespace=NS, from_="2023-01-01T02:00:00Z", to="2023-01-01T03:00:00Z", lineage=lineage
    )
    assert (empty.num_rows, empty.column_names) == (0, ["id", "item"])
    with pytest.raises(InvalidInput, match="lot_column 'item' is a column of the dataset already"):
        lotline.read_arrow(DATASET, namespace=NS, lot_column="item", lineage=lineage)


def test_spark_reads_the_same_rows_and_empty_lots_as_none(
    orders: LotWorld, lineage: Lineage, spark: SparkSession
) -> None:
    """``lotline.read`` on the suite's Spark session (the demo's pipeline:
    tests/spark/test_demo_readers.py)."""
    day = {"namespace": NS, "from_": "2023-01-01", "to": "2023-01-02", "lineage": lineage}
    read = lotline.read(spark, DATASET, lot_column="lot", **day)
    assert sorted(tuple(r) for r in read.collect()) == sorted(
        (*row, lot) for lot, rows in CURRENT.items() for row in rows
    )
    empty = lotline.read(
        spark, DATASET, namespace=NS, from_="2023-01-01T02:00:00Z", to="2023-01-01T03:00:00Z", lineage=lineage
    )
    assert (empty.count(), empty.columns) == (0, ["id", "item"])
    with pytest.raises(InvalidInput, match="lot_column 'item' is a column of the dataset already"):
        lotline.read(spark, DATASET, lot_column="item", **day)
    orders.job("load_none", output="nothing")
    with pytest.raises(InvalidInput, match="nothing: no READY lot has data, so its columns are unknown"):
        lotline.read(spark, "nothing", namespace=NS, lineage=lineage)
    none = lotline.read(spark, "nothing", namespace=NS, schema="id long", lot_column="lot", lineage=lineage)
    assert (none.count(), none.columns) == (0, ["id", "lot"])


@pytest.fixture
def cli(lineage: Lineage, backend_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> CliRunner:
    """``lotline`` in this process, configured for the test's database and warehouse."""
    monkeypatch.setenv("LOTLINE_DB_URL", backend_url)
    monkeypatch.setenv("LOTLINE_WAREHOUSE", lineage.storage.local_path(lineage.storage.root))
    monkeypatch.chdir(tmp_path)
    return CliRunner()


def test_duckdb_reads_the_list_lotline_files_prints(
    orders: LotWorld, lineage: Lineage, cli: CliRunner
) -> None:
    """The recipe of docs/lots.md: ``lotline files --json``'s paths handed to ``read_parquet``."""
    result = cli.invoke(
        app, ["files", DATASET, "-n", NS, "--from", "2023-01-01", "--to", "2023-01-02", "--json"]
    )
    assert result.exit_code == 0, result.output
    listed = json.loads(result.stdout)
    assert [lot["lot"] for lot in listed["lots"]] == list(CURRENT)
    assert listed["lots"][2]["state"] == "empty" and listed["lots"][2]["objects"] == []
    assert listed["paths"] == [lineage.storage.local_path(u) for u in _current_uris(lineage, list(CURRENT))]
    assert listed["rowCount"] == 4
    rows = duckdb.sql(
        "SELECT id, item FROM read_parquet($paths)", params={"paths": listed["paths"]}
    ).fetchall()
    assert sorted(rows) == sorted(row for rows_ in CURRENT.values() for row in rows_)
    # With the lot of each row: the lots' paths as a table, joined on DuckDB's filename column.
    pairs = [(o["path"], lot["lot"]) for lot in listed["lots"] for o in lot["objects"]]
    db = duckdb.connect()
    db.register("lots", pa.table({"path": [p for p, _ in pairs], "lot": [lot for _, lot in pairs]}))
    rows = db.sql(
        "SELECT id, lot FROM read_parquet($paths, filename = true, hive_partitioning = false) f "
        "JOIN lots ON f.filename = lots.path",
        params={"paths": listed["paths"]},
    ).fetchall()
    assert sorted(rows) == sorted((row[0], lot) for lot, lots_ in CURRENT.items() for row in lots_)
    # Reading the folder instead counts superseded attempts (lot 001's first two), a crashed attempt,
    # a held, a reopened lot and the next day's: 11 rows, not 4.
    folder = lineage.storage.local_path(lineage.storage.dataset_uri(NS, DATASET))
    [(everything,)] = duckdb.sql(f"SELECT count(*) FROM read_parquet('{folder}/**/*.parquet')").fetchall()
    assert everything == 11


def test_files_prints_one_path_per_line_and_refuses_bad_input(
    orders: LotWorld, lineage: Lineage, cli: CliRunner
) -> None:
    result = cli.invoke(app, ["files", DATASET, "--to", "2023-01-01T02:00:00Z"])  # the only namespace
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        lineage.storage.local_path(u) for u in _current_uris(lineage, [hour(0), hour(1)])
    ]
    before = orders.table()
    for args, line in [
        (["files", "order"], "lotline: error: Dataset 'shop:order' not found."),
        (
            ["files", DATASET, "--from", "2023-01-02", "--to", "2023-01-01"],
            "lotline: error: from '2023-01-02' must be before to '2023-01-01'.",
        ),
    ]:
        refused = cli.invoke(app, args)
        assert (refused.exit_code, refused.stdout, refused.stderr.splitlines()) == (2, "", [line])
    assert orders.table() == before


def test_sync_table_adds_moves_and_drops_partitions(
    orders: LotWorld, lineage: Lineage, spark: SparkSession
) -> None:
    """``sync_table`` on the suite's session (its in-memory catalog; Hive's metastore and the runner:
    tests/spark/test_catalog_tables.py): one partition per READY lot with data, at its attempt."""
    from lotline.spark.tables import TableSync, sync_table

    table = f"readers_{lineage.store.engine.dialect.name}.orders"
    spark.sql(f"DROP TABLE IF EXISTS {table}")
    try:
        assert sync_table(spark, lineage, NS, DATASET, table) == TableSync(added=4)
        expected = [(*row, lot) for lot, rows in CURRENT.items() for row in rows] + [
            (7, "next day", "20230102PT1H000")
        ]
        assert sorted(tuple(r) for r in spark.table(table).collect()) == sorted(expected)
        assert sync_table(spark, lineage, NS, DATASET, table) == TableSync()
        lineage.lots.invalidate(NS, DATASET, hour(5))
        lineage.lots.invalidate(NS, DATASET, hour(0))
        _publish(orders, hour(0), [(1, "apple v2")])
        assert sync_table(spark, lineage, NS, DATASET, table) == TableSync(moved=1, dropped=1)
        rows = sorted(
            tuple(r)
            for r in spark.sql(f"SELECT id, item, lot FROM {table} WHERE lot < '20230101PT1H002'").collect()
        )
        assert rows == [(1, "apple v2", hour(0)), (30, "fig v3", hour(1))]
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {table}")


def test_sync_table_refuses_a_lot_that_no_one_folder_holds(
    orders: LotWorld, lineage: Lineage, spark: SparkSession, tmp_path: Path
) -> None:
    """A lot whose objects are not all in its attempt folder (files ingested in place, parts kept
    from earlier attempts) cannot be one partition: one clear error, no table."""
    from lotline.spark.tables import sync_table

    orders.job("land", output="landed")
    claim = orders.claim("land", hour(0))
    assert claim is not None
    landing = tmp_path / "landing"
    (landing / "2023").mkdir(parents=True)
    pq.write_table(pa.table({"id": [1]}), landing / "2023" / "0000.parquet")
    storage = Storage(str(landing))
    draft = ManifestDraft(storage.root, storage.describe_written(storage.root, format="parquet"), 1)
    lineage.lots.complete(claim, outputs={claim.dataset: OutputWritten(draft)})
    with pytest.raises(InvalidInput, match="is not in its attempt's folder"):
        sync_table(spark, lineage, NS, "landed", "readers_landed")
    assert not spark.catalog.tableExists("readers_landed")
