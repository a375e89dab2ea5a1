"""llmgw: one program that serves open models on an organisation's own machines.

A gateway (OpenAI API, keys, limits, admission, routing), a control plane (placement
and replica counts), node agents (engine processes) and an operator's command line.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
