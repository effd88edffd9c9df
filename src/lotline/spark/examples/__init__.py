"""Example pipelines and their sample data: what ``lotline demo`` and ``bench/overhead`` run."""
