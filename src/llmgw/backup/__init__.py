"""Backups of a server: the store, the runtime catalog and the cluster CA in one archive,
encrypted with age, copied away and pruned; and restoring one."""
