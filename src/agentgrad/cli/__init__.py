"""The `agentgrad` command line: run from a TOML or YAML configuration, follow, inspect, promote, export, report.

Entry point: `agentgrad.cli.app.main` (the `agentgrad` console script, and ``python -m agentgrad``).
"""
