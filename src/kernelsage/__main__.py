"""`python -m kernelsage` runs the command line."""

from kernelsage.cli import main

main()
