"""The control plane's own rows in the store: every server's demand (`demand_table`)
and the replica set the leader publishes (`replica_table`). They speak the decisions'
types, which is why they live here and not in `llmgw.store`; the lease, the runtime
catalog and the cluster secret, which need no control types, are in `llmgw.store`."""
