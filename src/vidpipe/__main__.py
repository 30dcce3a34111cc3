"""``python -m vidpipe`` runs the command line."""

from vidpipe.cli import run

run()
