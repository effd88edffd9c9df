"""What a dataset is and where its columns come from (issue 28, points 3 and 7): datasets of files
show their format, not the catalog's ``db_table``; a version's ``columnLineage`` is a table of
columns and their sources, not raw JSON; a run's transitions are listed in time order."""

from __future__ import annotations

import uuid

import requests
from playwright.sync_api import expect

from api.conftest import TOKEN
from lotline.services import facets
from web.conftest import Tab, UiServer
from web.world import send_event

COLS = "cols"
_SENT: set[str] = set()


def _column_lineage() -> dict[str, object]:
    def source(field: str, subtype: str) -> dict[str, object]:
        step = {"type": "DIRECT", "subtype": subtype, "description": "", "masking": False}
        return {"namespace": COLS, "name": "requests", "field": field, "transformations": [step]}

    return {
        "_producer": facets.PRODUCER,
        "_schemaURL": "https://openlineage.io/spec/facets/1-2-0/ColumnLineageDatasetFacet.json",
        "fields": {
            "path": {"inputFields": [source("url", "IDENTITY")]},
            "hits": {"inputFields": [source("url", "AGGREGATION")]},
        },
    }


def _send(ui_server: UiServer) -> str:
    """A run of ``count`` reading the parquet files ``requests`` and writing ``report``, sent as
    OpenLineage events (START at 10:00, COMPLETE at 10:05); answers the run id."""
    run_id = "01890000-0000-7000-8000-0000000000c1"
    if ui_server.url in _SENT:
        return run_id
    schema = {
        "_producer": facets.PRODUCER,
        "_schemaURL": "https://openlineage.io/spec/facets/1-1-1/SchemaDatasetFacet.json",
    }
    report = {
        "namespace": COLS,
        "name": "report",
        "facets": {
            "schema": {
                **schema,
                "fields": [{"name": "path", "type": "string"}, {"name": "hits", "type": "long"}],
            },
            "columnLineage": _column_lineage(),
        },
    }
    source = {"namespace": COLS, "name": "requests", "facets": facets.file_dataset("parquet")}
    for event_type, at in (("START", "10:00"), ("COMPLETE", "10:05")):
        send_event(
            ui_server.url,
            TOKEN,
            eventType=event_type,
            eventTime=f"2024-05-01T{at}:00Z",
            run={"runId": run_id},
            job={"namespace": COLS, "name": "count"},
            inputs=[source],
            outputs=[report],
        )
    _SENT.add(ui_server.url)
    return run_id


def test_datasets_of_files_their_columns_and_a_run_s_transitions(tab: Tab, ui_server: UiServer) -> None:
    run_id = _send(ui_server)
    page = tab.page
    page.goto(f"/?ns={COLS}")
    kinds = dict(
        zip(
            page.locator("#datasets tbody tr td:first-child").all_inner_texts(),
            page.locator("#datasets [data-kind]").all_inner_texts(),
            strict=True,
        )
    )
    assert kinds == {"report": "db_table", "requests": "parquet files"}

    page.goto(f"/datasets/{COLS}/requests")
    expect(page.locator("#dataset-kind")).to_contain_text("parquet files")
    page.goto(f"/datasets/{COLS}/report")
    page.locator("#columns-link").click()
    rows = page.locator("#columns tbody tr")
    expect(rows).to_have_count(2)
    expect(page.locator("#col-path [data-source]")).to_have_text("requests.url direct identity")
    expect(page.locator("#col-hits [data-source]")).to_have_text("requests.url direct aggregation")
    expect(page.locator("h1")).to_contain_text("v1")  # the version's own facet, not the dataset's
    page.locator("#col-path [data-source] a").click()  # a source opens its dataset's columns
    expect(page).to_have_url(f"{ui_server.url}/datasets/{COLS}/requests/columns#col-url")

    page.goto(f"/runs/{run_id}")
    expect(page.locator("#transitions .st")).to_have_text(["new", "running", "completed"])
    times = page.locator("#transitions td.muted").all_inner_texts()
    assert times == sorted(times) and times[-1] == "2024-05-01 10:05:00"


def test_an_unknown_version_is_a_404_page(ui_server: UiServer) -> None:
    _send(ui_server)
    missing = requests.get(
        f"{ui_server.url}/datasets/{COLS}/report/columns?version={uuid.uuid4()}", timeout=10
    )
    assert missing.status_code == 404 and "text/html" in missing.headers["content-type"]
