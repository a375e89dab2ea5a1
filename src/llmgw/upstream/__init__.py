"""The gateway's HTTP/1.1 client for engine replicas: pooled, streaming, cheap."""

from llmgw.upstream.connection import Connection
from llmgw.upstream.pool import OriginPool, UpstreamClient

__all__ = ["Connection", "OriginPool", "UpstreamClient"]
