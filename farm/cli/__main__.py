"""`python -m farm.cli`: the farm command, as the tests and benches start it."""

from farm.cli import main

main()
