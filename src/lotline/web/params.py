"""Query-string values of the pages, read as text and checked here, so that a bad value is an
error page naming it (400) rather than a JSON validation error."""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

from starlette.datastructures import QueryParams

from lotline.domain.errors import InvalidInput
from lotline.domain.gaps import parse_time

E = TypeVar("E", bound=StrEnum)

#: Rows per page of every list.
PAGE_SIZE = 50


def text(params: QueryParams, name: str) -> str | None:
    value = params.get(name, "").strip()
    return value or None


_NO_ZONE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]+)?)?")


def utc_time(params: QueryParams, name: str) -> str | None:
    """A time typed into a page's form: one without a zone (``2023-01-01T04:10``) is UTC, as every
    time the pages show is."""
    raw = text(params, name)
    return raw + "Z" if raw is not None and _NO_ZONE.fullmatch(raw) else raw


def integer(params: QueryParams, name: str, default: int, lowest: int, highest: int) -> int:
    raw = text(params, name)
    if raw is None:
        return default
    if not raw.lstrip("-").isdigit() or not lowest <= int(raw) <= highest:
        raise InvalidInput(f"{name} must be a whole number from {lowest} to {highest}, got {raw[:40]!r}.")
    return int(raw)


def choices(params: QueryParams, name: str, kind: type[E]) -> list[E]:
    """Every value of a repeated (or comma-separated) parameter, each one of ``kind``'s values."""
    found: list[E] = []
    allowed = {member.value.lower(): member for member in kind}
    for raw in params.getlist(name):
        for part in filter(None, (p.strip() for p in raw.split(","))):
            member = allowed.get(part.lower())
            if member is None:
                shown = ", ".join(m.value for m in kind)
                raise InvalidInput(f"{name} must be among {shown}; got {part[:40]!r}.")
            found.append(member)
    return list(dict.fromkeys(found))


def instant(params: QueryParams, name: str) -> datetime.datetime | None:
    """A time filter (the events page's after/before): as the pages show times, or RFC 3339."""
    raw = utc_time(params, name)
    return None if raw is None else parse_time(name, raw)


@dataclass(frozen=True)
class Pager:
    """One page of a list: where it starts, how long it is and how many there are in all."""

    offset: int
    limit: int
    total: int = 0

    @classmethod
    def of(cls, params: QueryParams, name: str = "offset") -> Pager:
        return cls(integer(params, name, 0, 0, 10**9), PAGE_SIZE)

    def counted(self, total: int) -> Pager:
        return Pager(self.offset, self.limit, total)

    @property
    def previous(self) -> int | None:
        return None if self.offset == 0 else max(0, self.offset - self.limit)

    @property
    def next(self) -> int | None:
        return self.offset + self.limit if self.offset + self.limit < self.total else None

    @property
    def last_shown(self) -> int:
        return min(self.total, self.offset + self.limit)
