"""The current text of lotline's SQL functions and triggers, one file each, by backend.

PostgreSQL runs the claim path in SQL functions (``lotline_claim_next_lot``, ``lotline_finish_claim``
and the 0007 function it wraps) and keeps ``ready_lot_counts`` with statement triggers on
``data_status`` (``lotline_count_ready_lots``); SQLite keeps the counts with row triggers. Their
definitions were spread over the migrations that changed them; these files are where a reader, and
the next migration that changes one, finds the current text. Migrations stay as they are (history):
a migration that redefines a function copies its new text here too, and
``tests/contract/test_sql_files.py`` proves that a migrated database has exactly the functions and
triggers these files make — none missing, none more, none different.
"""

from __future__ import annotations

from importlib import resources

_DOLLAR_QUOTE = "$$"


def statements(backend: str) -> list[str]:
    """The statements of every file of ``backend`` ("postgresql" or "sqlite"), in file-name order."""
    folder = resources.files(__name__).joinpath(backend)
    names = sorted(entry.name for entry in folder.iterdir() if entry.name.endswith(".sql"))
    found: list[str] = []
    for name in names:
        found.extend(split(folder.joinpath(name).read_text(encoding="utf-8")))
    return found


def split(text: str) -> list[str]:
    """``text``'s statements: each ends with ``;`` at the end of a line outside a ``$$`` body."""
    found: list[str] = []
    current: list[str] = []
    in_body = False
    for line in text.splitlines():
        current.append(line)
        in_body ^= line.count(_DOLLAR_QUOTE) % 2 == 1
        if not in_body and line.rstrip().endswith(";"):
            statement = "\n".join(current).strip().removesuffix(";").strip()
            if statement:
                found.append(statement)
            current = []
    if "\n".join(current).strip():
        raise ValueError(f"SQL text ends without ';': {' '.join(current)[:80]!r}")
    return found
