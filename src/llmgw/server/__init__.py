"""`llmgw server`: the gateway (and, later, the control plane) assembled into one process."""
