"""`python -m tracegrad dump ...`: the command line (see `tracegrad.cli`)."""

from tracegrad.cli import main

raise SystemExit(main())
