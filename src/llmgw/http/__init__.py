"""HTTP for every listener: the HTTP/1.1 server (`http1_server`, `http1`,
`http1_exchange`), the protocol types an application sees (`rsgi`) and the error
envelope it answers with (`responses`). Shared by the client port, the admin API and
the metrics port; it knows nothing of routing, auth or the control plane."""
