"""`python -m agentgrad`: the command line (see `agentgrad.cli.app`)."""

from agentgrad.cli.app import main

if __name__ == "__main__":
    main()
