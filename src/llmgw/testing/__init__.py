"""Helpers for tests and benchmarks: start a sim engine (`sim`) or a gateway (`server`)
as a subprocess, or stand in for the control plane on the agent socket (`agent`).
Nothing under src imports this package at run time (an import-linter contract in
pyproject.toml says so); it stays in the wheel for the benchmarks and the tests."""
