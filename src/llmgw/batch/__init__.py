"""The rest of the OpenAI API: files, batches, the Responses API with stored
conversations, and the response cache."""
