"""Seeing inside llmgw: tracing (OpenTelemetry), structured and access logs, profiling,
and the history the dashboard reads from Prometheus. Shared by every role."""
