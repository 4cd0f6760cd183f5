"""`python -m farm.cli`: the `farm` command, for a checkout with no console script installed."""

from farm.cli import main

main()
