"""The Marquez-compatible REST API and OpenLineage endpoint (``lotline serve``)."""
