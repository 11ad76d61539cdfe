"""`python -m dreamwell.server` is the `dreamwell` command."""

from dreamwell.server.cli.main import run

run()
