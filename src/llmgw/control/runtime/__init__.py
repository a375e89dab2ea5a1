"""The control plane as it runs: the agent port (`hub`), the plane a server starts
(`plane`), the reconcile loop (`reconciler`), and the loops between a server and the
store (`background`, `catalog_watch`, `quota_watch`, `demand_sync`, `replica_sync`).
It feeds the pure decisions (`llmgw.control.decisions`) and writes through the tables
(`llmgw.control.tables`) and the store."""
