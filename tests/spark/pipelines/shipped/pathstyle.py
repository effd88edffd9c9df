"""Imported by ``pagenames``, not by the pipeline itself: shipped as well."""

PREFIX = "page:"
