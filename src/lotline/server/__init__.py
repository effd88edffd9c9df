"""The server's runtime, beside ``api/``: what runs while ``lotline serve`` runs, as opposed to
the use cases in ``services/``: the journal writer (group commit of accepted events), the
projector process that applies the journal, and the sampler of the server's load that tells the
projector when to stand aside."""
