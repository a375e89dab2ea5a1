"""The web console: the landing page and docs portal on the client port, the operator
dashboard on admin_listen, and the chat page for signed-in people. Server-rendered; its
few scripts and styles ship in the wheel."""
