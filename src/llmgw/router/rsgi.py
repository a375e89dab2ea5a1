"""The RSGI types the gateway's applications use, from granian, in one place (granian
exports them from its compiled module without re-exporting them for type checkers)."""

from granian._granian import RSGIHTTPProtocol as HTTPProtocol
from granian._granian import RSGIHTTPStreamTransport as StreamTransport
from granian._granian import RSGIProtocolClosed as ProtocolClosed
from granian.rsgi import Scope

__all__ = ["HTTPProtocol", "ProtocolClosed", "Scope", "StreamTransport"]
