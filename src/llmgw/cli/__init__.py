"""The `llmgw` command: server, agent, sim engine and the operator's tools."""
