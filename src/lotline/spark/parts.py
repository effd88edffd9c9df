"""Child work (``Pipeline.job(partition_by=…)``): a lot's first input split into parts, each a child
run writing every output, so that a retry runs only the parts that failed."""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from lotline.domain.checks import Verdict, merge, raise_failures
from lotline.domain.coordination import LotClaim
from lotline.domain.errors import Conflict, InvalidInput, LotlineError
from lotline.domain.manifests import Manifest, ManifestDraft, ManifestObject, ManifestState
from lotline.domain.model import FieldSpec
from lotline.domain.storage_names import storage_segments
from lotline.services import Lineage
from lotline.services import facets as ol
from lotline.spark.failures import failure_of, reason
from lotline.spark.pipeline import JobSpec, Lot
from lotline.spark.written import Written, verdicts_of

#: Parts of a lot whose first input is split into groups of objects: ``part=00000``, ``part=00001``…
GROUP_KEY = "part"


def split(
    job: str, partition_by: tuple[str, ...] | int, objects: Sequence[ManifestObject]
) -> dict[str, tuple[dict[str, str], list[ManifestObject]]]:
    """Part name (``day=2023-01-02``, or ``part=00003``) -> (its partition values, its objects), in
    name order. Objects are grouped by their partition values, or in uri order ``partition_by`` at a
    time; an object without one of the named partition values is an error naming it."""
    parts: dict[str, tuple[dict[str, str], list[ManifestObject]]] = {}
    if isinstance(partition_by, int):
        ordered = sorted(objects, key=lambda o: o.uri)
        for index in range(0, len(ordered), partition_by):
            values = {GROUP_KEY: f"{index // partition_by:05d}"}
            parts[f"{GROUP_KEY}={values[GROUP_KEY]}"] = (values, ordered[index : index + partition_by])
        return parts
    for found in objects:
        missing = [key for key in partition_by if key not in found.partition_values]
        if missing:
            raise InvalidInput(
                f"job {job}: object {found.uri} has no partition value {missing[0]!r} "
                f"(it is partitioned by {', '.join(partition_by)})."
            )
        values = {key: found.partition_values[key] for key in partition_by}
        name = "/".join(f"{key}={value}" for key, value in values.items())
        storage_segments("Part", name)  # a value that would escape its folder is refused here
        parts.setdefault(name, (values, []))[1].append(found)
    return dict(sorted(parts.items()))


class PartsFailed(LotlineError):
    """Some parts of a lot failed: the lot fails; the parts that succeeded are kept for the retry."""


#: Writes every output of a lot, or of one part: the inputs' objects, each output's attempt folder, the
#: transform's context (``LotRunner._write`` for one job and claim).
WriteAttempt = Callable[[Mapping[str, Sequence[ManifestObject]], Mapping[str, str], Lot], dict[str, Written]]


def write_parts(
    lineage: Lineage,
    job: JobSpec,
    claim: LotClaim,
    objects: dict[str, list[ManifestObject]],
    facets: dict[str, Any],
    lot: Lot,
    *,
    bases: Mapping[str, str],
    write: WriteAttempt,
) -> dict[str, Written]:
    """Child work: each part of the first input not kept from an earlier attempt is a child run
    writing every output under ``<its attempt>/<part>/`` (``parallel_parts`` at a time); each
    output's draft lists every part's objects once all are complete, else the lot fails naming
    the failed parts."""
    if job.partition_by is None:
        raise InvalidInput(f"job {job.name} is not partitioned.")
    first = job.inputs[0].name
    parts = split(job.name, job.partition_by, objects[first])
    kept = lineage.children.kept(claim)
    todo = [name for name in parts if name not in kept]
    fields: dict[str, tuple[FieldSpec, ...]] = {spec.name: () for spec in job.outputs}
    #: By output, the verdicts of the parts run now (list.append is atomic).
    verdicts: dict[str, list[Verdict]] = {spec.name: [] for spec in job.outputs}

    def run_part(name: str) -> dict[str, Manifest]:
        values, part_objects = parts[name]
        child = lineage.children.start(claim, name)
        locations = {output: posixpath.join(base, name) for output, base in bases.items()}
        context = replace(lot, part=name, part_values=values, child_run_id=child)
        try:
            written = write({**objects, first: part_objects}, locations, context)
            done_verdicts = verdicts_of(written)
            raise_failures(done_verdicts, several=job.several)  # the part fails; a retry runs it again
            for output, verdict in done_verdicts.items():
                verdicts[output].append(verdict)
        except Exception as error:
            drafts = {
                spec.name: ManifestDraft(
                    locations[spec.name],
                    lineage.storage.describe_written(locations[spec.name], format=spec.format),
                    part=name,
                )
                for spec in job.outputs
            }
            lineage.children.finish(claim, child, name, drafts, failure_of(error))
            raise
        drafts = {}
        for output, done_output in written.items():
            fields[output] = done_output.fields
            described = tuple(
                replace(o, partition_values={**values, **o.partition_values})
                for o in done_output.draft.objects
            )
            drafts[output] = replace(done_output.draft, objects=described, part=name)
        done = lineage.children.finish(claim, child, name, drafts)
        if any(m.state not in (ManifestState.COMPLETE, ManifestState.EMPTY) for m in done.values()):
            raise Conflict(f"part {name} could not be recorded as done (the lot's claim was lost).")
        return done

    finished: dict[str, dict[str, Manifest]] = dict(kept)
    failed: dict[str, BaseException] = {}
    with ThreadPoolExecutor(max_workers=job.parallel_parts, thread_name_prefix=f"{job.name} part") as pool:
        futures = {name: pool.submit(run_part, name) for name in todo}
        for name, future in futures.items():
            try:
                finished[name] = future.result()
            except Exception as error:
                failed[name] = error
    facets["lotline_parts"] = ol.custom(parts=list(parts), kept=sorted(kept), ran=todo, failed=sorted(failed))
    if failed:
        first_failed = min(failed)
        raise PartsFailed(
            f"{len(failed)} of {len(parts)} parts failed (a retry runs only those); "
            f"part {first_failed}: {reason(failed[first_failed])}"
        )
    found = {}
    for output, base in bases.items():
        listed = tuple(o for name in parts for o in finished[name][output].objects)
        counts = [finished[name][output].row_count for name in parts]
        rows = None if any(c is None for c in counts) else sum(c for c in counts if c is not None)
        verdict = merge(verdicts[output])
        found[output] = Written(ManifestDraft(base, listed, rows), fields[output], verdict)
    return found
