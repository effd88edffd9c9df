"""``python -m lotline`` is the ``lotline`` command."""

from lotline.cli.main import app

app(prog_name="lotline")
