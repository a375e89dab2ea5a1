"""The rest of the OpenAI API: files, batches, the Responses API with stored
conversations, and the response cache.

Files and batches (`BatchService`): `/v1/files` and `/v1/batches` on the client port,
with auth on (files belong to the caller's project or person, kept in the store and the
state directory); batch lines run through the gateway's own request path in the lowest
admission band.
"""

from llmgw.batch.batch_service import BatchService, lowest_band

__all__ = ["BatchService", "lowest_band"]
