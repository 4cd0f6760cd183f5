"""`python -m farm.cli`: what the reliability harness and the chaos bench start workers with."""

from farm.cli import main

main()
