"""What node agents and the control plane exchange: the messages on the agent socket
(`messages`), a node's inventory (`inventory`) and the mutual TLS both ends speak
(`tls`). Both ends import it; it imports neither."""
