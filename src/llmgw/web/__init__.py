"""The web console: the landing page and docs portal on the client port, the operator
dashboard on admin_listen, and the chat page for signed-in people. Server-rendered
(Jinja2 templates in templates/); its few scripts and styles ship in the wheel
(static/), its words per language in messages/. docs/web.md describes the pages.

`WebApp` serves the public pages; the server mounts it at each of its `prefixes` on the
client port and sets its `models` to what `/v1/models` lists."""

from llmgw.web.app import PREFIXES, WebApp

__all__ = ["PREFIXES", "WebApp"]
