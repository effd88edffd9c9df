"""Validation of OpenLineage events against the spec's JSON schemas, vendored in ``schemas/`` at a
pinned release (see its README): the event against ``OpenLineage.json``, and each facet whose
``_schemaURL`` is one of the spec's against that facet's own schema, at the version it names."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

SCHEMAS = Path(__file__).parent / "schemas"
SPEC = "https://openlineage.io/spec/"
RUN_EVENT = f"{SPEC}2-0-2/OpenLineage.json#/$defs/RunEvent"


@cache
def _registry() -> Registry[Any]:
    documents = [SCHEMAS / "OpenLineage.json", *sorted((SCHEMAS / "facets").glob("*.json"))]
    resources = [Resource.from_contents(json.loads(p.read_text()), DRAFT202012) for p in documents]
    return Registry().with_resources((r.id(), r) for r in resources if r.id() is not None)


def _validator(url: str) -> Draft202012Validator:
    """A validator for the schema ``url`` names (a document, or a ``$defs`` entry of one)."""
    return Draft202012Validator({"$ref": url}, registry=_registry(), format_checker=FormatChecker())


def spec_facets(event: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(where, facet) for every facet of the event."""
    found = [(f"run.facets.{k}", f) for k, f in event.get("run", {}).get("facets", {}).items()]
    found += [(f"job.facets.{k}", f) for k, f in event.get("job", {}).get("facets", {}).items()]
    for side, extra in (("inputs", "inputFacets"), ("outputs", "outputFacets")):
        for dataset in event.get(side, []):
            for key in ("facets", extra):
                found += [(f"{side}.{dataset['name']}.{key}.{k}", f) for k, f in dataset.get(key, {}).items()]
    return found


def violations(event: dict[str, Any]) -> list[str]:
    """Every way the event breaks the spec (empty: it validates)."""
    problems = [f"event: {e.message}" for e in _validator(RUN_EVENT).iter_errors(event)]
    for where, facet in spec_facets(event):
        problems += facet_violations(where, facet)
    return problems


def facet_violations(where: str, facet: dict[str, Any]) -> list[str]:
    """How one facet breaks the schema its ``_schemaURL`` names (a custom facet: only that it has
    ``_producer`` and ``_schemaURL``, as the event's schema requires of every facet)."""
    url = facet.get("_schemaURL", "")
    if not url.startswith(f"{SPEC}facets/"):
        missing = [key for key in ("_producer", "_schemaURL") if not facet.get(key)]
        return [f"{where}: no {key}" for key in missing]
    document, _, fragment = url.partition("#")
    if document not in _registry():
        return [f"{where}: {url} is not a schema of the vendored spec"]
    # A URL naming the whole document means the facet's own definition in it.
    name = document.rsplit("/", 1)[1].removesuffix(".json")
    target = url if fragment else f"{document}#/$defs/{name}"
    return [f"{where}: {e.message}" for e in _validator(target).iter_errors(facet)]
