"""Tags: labels on datasets and dataset fields (Marquez ``/tags``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True)
class Tag:
    name: str
    description: str | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class DatasetTags:
    """The tags of one dataset and of its fields (field name -> tag names)."""

    tags: tuple[str, ...] = ()
    field_tags: dict[str, tuple[str, ...]] = field(default_factory=dict)
