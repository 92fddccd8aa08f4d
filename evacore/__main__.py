"""`python -m evacore` runs the command line."""

from evacore.cli import app

app()
