"""The gateway's request path: the OpenAI routes, choosing a replica, forwarding,
streaming back, retrying and falling back.

`GatewayApp` is the RSGI application; `EndpointRegistry` is where replicas are
published (statically in router-only mode, by the control plane otherwise).
"""

from llmgw.router.app import GatewayApp
from llmgw.router.endpoints import Endpoint, EndpointRegistry, EndpointSpec
from llmgw.router.picker import ROUTING_PROFILES

__all__ = ["ROUTING_PROFILES", "Endpoint", "EndpointRegistry", "EndpointSpec", "GatewayApp"]
