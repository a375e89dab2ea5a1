"""The sim's one fixed chat template: messages rendered to a prompt before tokenizing.

Real engines render chat messages through the model's template and count the tokens of
the result; the sim does the same with a template simple enough to reason about in
tests (`<|role|>` line, content line, then the assistant header), so a conversation's
usage is exactly `/tokenize` of the same messages, and two conversations sharing their
first messages share their first prompt tokens, which is what prefix caching feeds on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

TEMPLATE_SOURCE = "{% for m in messages %}<|{{ m.role }}|>\n{{ m.content }}\n{% endfor %}<|assistant|>\n"


class TemplateError(ValueError):
    """A message list the template cannot render; the text names the message and field."""


def message_text(content: object, where: str) -> str:
    """A message's content as text: a string, or the text parts of a content list."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for i, part in enumerate(content):
            if not isinstance(part, Mapping) or not isinstance(part.get("text", None), str):
                raise TemplateError(
                    f"{where}.content[{i}]: the sim reads text parts only ({{'type': 'text'}})"
                )
            parts.append(part["text"])
        return "".join(parts)
    raise TemplateError(f"{where}.content: must be a string or a list of text parts")


def render_chat(messages: Sequence[Any], add_generation_prompt: bool = True) -> str:
    """The prompt text for `messages` (each a mapping with `role` and `content`)."""
    if not messages:
        raise TemplateError("messages: must hold at least one message")
    out: list[str] = []
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, Mapping):
            raise TemplateError(f"{where}: must be an object with role and content")
        role = message.get("role")
        if not isinstance(role, str) or not role:
            raise TemplateError(f"{where}.role: is required (system, user, assistant or tool)")
        out.append(f"<|{role}|>\n{message_text(message.get('content'), where)}\n")
    if add_generation_prompt:
        out.append("<|assistant|>\n")
    return "".join(out)
