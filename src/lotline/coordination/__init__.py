"""Cooperative lot coordination (SPEC §4): claims, leases, invalidation, holds.

Functions here run on a caller's :class:`sqlalchemy.Connection` and touch only the data-status
table and the lot-job registry, through the named queries of ``store.queries.registry`` and
``store.queries.claims``. The services compose them with runs and versions in one transaction.
"""
