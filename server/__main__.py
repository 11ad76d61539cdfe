"""`python -m dreamwell.server` is the `dreamwell` command."""

from dreamwell.server.cli import run

run()
