"""Named query functions: every SQL statement lotline runs has exactly one home in this package.

Each function takes an open :class:`sqlalchemy.Connection` (the caller owns the transaction) and
returns domain records or plain values, never ORM objects or raw rows.
"""
