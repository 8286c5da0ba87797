"""`python -m crux` runs the `crux` command."""

from crux.cli import main

main()
