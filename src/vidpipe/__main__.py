"""``python -m vidpipe`` runs the command line."""

import sys

from vidpipe.cli import main

sys.exit(main())
