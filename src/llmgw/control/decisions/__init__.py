"""The control plane's decisions, pure: the world on one pass (`cluster`, `nodes`,
`replicas`), how many replicas each model wants (`desired`, `demand`, `backoff`), what
is free where (`capacity`, `quotas`), where a replica goes (`placement`, `preemption`),
the plan that adds it up (`plan`), and what the plan tells agents and the router
(`orders`, `publish`, `adoption`). No I/O, no asyncio and no clock of their own: the
runtime (`llmgw.control.runtime`) feeds them and carries out what they return."""
