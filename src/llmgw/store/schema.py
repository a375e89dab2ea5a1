"""The store's tables at the newest schema version, as SQLAlchemy Core tables.

Queries are written against these. The migrations under `migrations/versions` are the
history that builds them and never import this module (a migration describes the
schema as it was then); a test checks that upgrading to the newest migration yields
exactly these tables.

Times are UNIX seconds (floats), money is integer millionths of a budget unit, token
counts are integers. Identifiers of organisations, teams, projects and users are the
names operators give them (`team:research` in a catalog's owner refers to one), unique
in their table; a key is identified by its short public prefix. `gpu_quota` (added by
migration 0006) is the devices the models an org, team or project owns may hold.
"""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()

# SQLite only auto-increments an INTEGER PRIMARY KEY; PostgreSQL wants a 64-bit one.
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Seconds = sa.Float(precision=53)


def _scope_columns() -> list[sa.Column[object]]:
    """What every level of the tenancy tree (and a person) may set for itself."""
    return [
        sa.Column("rpm", sa.Integer, nullable=True),
        sa.Column("tpm", sa.Integer, nullable=True),
        sa.Column("budget_micros", sa.BigInteger, nullable=True),
        sa.Column("budget_period", sa.Text, nullable=True),
        sa.Column("allowed_models", sa.Text, nullable=True),
        sa.Column("band", sa.Text, nullable=True),
        sa.Column("created_at", Seconds, nullable=False),
        sa.Column("updated_at", Seconds, nullable=False, index=True),
    ]


orgs = sa.Table(
    "orgs",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    *_scope_columns(),
    sa.Column("max_key_ttl_s", Seconds, nullable=True),
    sa.Column("gpu_quota", sa.Integer, nullable=True),
)

teams = sa.Table(
    "teams",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("org_id", sa.Text, sa.ForeignKey("orgs.id"), nullable=False, index=True),
    *_scope_columns(),
    sa.Column("max_key_ttl_s", Seconds, nullable=True),
    sa.Column("gpu_quota", sa.Integer, nullable=True),
    sa.Column("idp_group", sa.Text, nullable=True),
    sa.Index("ix_teams_idp_group", "idp_group", unique=True),
)

projects = sa.Table(
    "projects",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("team_id", sa.Text, sa.ForeignKey("teams.id"), nullable=False, index=True),
    *_scope_columns(),
    sa.Column("max_key_ttl_s", Seconds, nullable=True),
    sa.Column("gpu_quota", sa.Integer, nullable=True),
    # Added by migration 0016: how long its answers are cached; NULL is off.
    sa.Column("cache_ttl_s", Seconds, nullable=True),
)

users = sa.Table(
    "users",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("email", sa.Text, nullable=True),
    sa.Column("disabled", sa.Boolean, nullable=False, server_default=sa.false()),
    *_scope_columns(),
    # Migration 0010: who the identity provider says this is (OIDC `sub`, SCIM
    # `externalId`), whether an operator has approved a signup, and the SCIM ETag.
    sa.Column("name", sa.Text, nullable=True),
    sa.Column("subject", sa.Text, nullable=True),
    sa.Column("external_id", sa.Text, nullable=True),
    sa.Column("status", sa.Text, nullable=False, server_default="active"),
    sa.Column("signup_reason", sa.Text, nullable=True),
    sa.Column("version", sa.Integer, nullable=False, server_default="1"),
    # Migration 0011: the provider's user name (SCIM `userName`), which may change while
    # `id` stays; NULL reads as the id.
    sa.Column("user_name", sa.Text, nullable=True),
    sa.Index("ix_users_subject", "subject", unique=True),
    sa.Index("ix_users_external_id", "external_id", unique=True),
    sa.Index("ix_users_email", "email"),
    sa.Index("ix_users_user_name", "user_name", unique=True),
    # SCIM's `userName eq` is case-insensitive, and a provider asks it before every
    # create: without this each asking reads every person.
    sa.Index("ix_users_login", sa.func.lower(sa.func.coalesce(sa.column("user_name"), sa.column("id")))),
)

team_memberships = sa.Table(
    "team_memberships",
    metadata,
    sa.Column("user_id", sa.Text, sa.ForeignKey("users.id"), primary_key=True),
    sa.Column("team_id", sa.Text, sa.ForeignKey("teams.id"), primary_key=True, index=True),
    sa.Column("role", sa.Text, nullable=False, server_default="member"),
    # manual (an operator), oidc (the groups claim at sign-in) or scim (a group push):
    # a sync removes only the memberships its own source made.
    sa.Column("source", sa.Text, nullable=False, server_default="manual"),
    sa.Column("created_at", Seconds, nullable=False),
)

org_memberships = sa.Table(
    "org_memberships",
    metadata,
    sa.Column("user_id", sa.Text, sa.ForeignKey("users.id"), primary_key=True),
    sa.Column("org_id", sa.Text, sa.ForeignKey("orgs.id"), primary_key=True, index=True),
    sa.Column("role", sa.Text, nullable=False, server_default="member"),
    sa.Column("created_at", Seconds, nullable=False),
)

# The identity provider's groups (SCIM Groups, or the OIDC `groups` claim's names); a
# team that names one in `teams.idp_group` gets its members.
idp_groups = sa.Table(
    "idp_groups",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("display_name", sa.Text, nullable=False, unique=True),
    sa.Column("external_id", sa.Text, nullable=True, unique=True),
    sa.Column("version", sa.Integer, nullable=False, server_default="1"),
    sa.Column("created_at", Seconds, nullable=False),
    sa.Column("updated_at", Seconds, nullable=False),
)

idp_group_members = sa.Table(
    "idp_group_members",
    metadata,
    sa.Column("group_id", sa.Text, sa.ForeignKey("idp_groups.id"), primary_key=True),
    sa.Column("user_id", sa.Text, sa.ForeignKey("users.id"), primary_key=True, index=True),
)

# A browser's session: the cookie holds a random token, the store its hash, so a copy
# of the store signs nobody in; deleting the rows ends the sessions everywhere.
browser_sessions = sa.Table(
    "browser_sessions",
    metadata,
    sa.Column("id_hash", sa.Text, primary_key=True),
    sa.Column("user_id", sa.Text, sa.ForeignKey("users.id"), nullable=False, index=True),
    sa.Column("csrf_token", sa.Text, nullable=False),
    sa.Column("created_at", Seconds, nullable=False),
    sa.Column("last_seen_at", Seconds, nullable=False),
    sa.Column("expires_at", Seconds, nullable=False, index=True),
)

memberships = sa.Table(
    "memberships",
    metadata,
    sa.Column("user_id", sa.Text, sa.ForeignKey("users.id"), primary_key=True),
    sa.Column("project_id", sa.Text, sa.ForeignKey("projects.id"), primary_key=True, index=True),
    sa.Column("role", sa.Text, nullable=False, server_default="member"),
    sa.Column("created_at", Seconds, nullable=False),
)

api_keys = sa.Table(
    "api_keys",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("hash", sa.Text, nullable=False, unique=True),
    sa.Column("name", sa.Text, nullable=False, server_default=""),
    sa.Column("project_id", sa.Text, sa.ForeignKey("projects.id"), nullable=True, index=True),
    sa.Column("user_id", sa.Text, sa.ForeignKey("users.id"), nullable=True, index=True),
    sa.Column("band", sa.Text, nullable=True),
    sa.Column("rpm", sa.Integer, nullable=True),
    sa.Column("tpm", sa.Integer, nullable=True),
    sa.Column("created_at", Seconds, nullable=False),
    sa.Column("expires_at", Seconds, nullable=True),
    sa.Column("revoked_at", Seconds, nullable=True),
    sa.Column("updated_at", Seconds, nullable=False, index=True),
)

# Usage records, a row per batch of records alike (migration 0008): what they share in
# columns, and each record's own values in a JSON array (store.usage.RECORD_FIELDS), so a
# batch of a few hundred records is one row to write, not a few hundred. The view
# `usage_records` (made by the migration, not here) shows them a record to a row.
usage_batches = sa.Table(
    "usage_batches",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("key_id", sa.Text, nullable=True),
    sa.Column("user_id", sa.Text, nullable=True),
    sa.Column("project_id", sa.Text, nullable=True),
    sa.Column("team_id", sa.Text, nullable=True),
    sa.Column("org_id", sa.Text, nullable=True),
    sa.Column("model", sa.Text, nullable=False),
    sa.Column("status", sa.Integer, nullable=False),
    sa.Column("stream", sa.Boolean, nullable=False),
    sa.Column("first_ts", Seconds, nullable=False),
    sa.Column("last_ts", Seconds, nullable=False, index=True),
    sa.Column("record_count", sa.Integer, nullable=False),
    sa.Column("records", sa.Text, nullable=False),
)

# Five-minute sums (added by migration 0002). The empty string stands for "none" in the
# identity columns, since a primary key cannot hold NULL.
usage_sums = sa.Table(
    "usage_sums",
    metadata,
    sa.Column("bucket", sa.BigInteger, primary_key=True),
    sa.Column("org_id", sa.Text, primary_key=True),
    sa.Column("team_id", sa.Text, primary_key=True),
    sa.Column("project_id", sa.Text, primary_key=True),
    sa.Column("user_id", sa.Text, primary_key=True),
    sa.Column("key_id", sa.Text, primary_key=True),
    sa.Column("model", sa.Text, primary_key=True),
    sa.Column("requests", sa.BigInteger, nullable=False),
    sa.Column("errors", sa.BigInteger, nullable=False),
    sa.Column("prompt_tokens", sa.BigInteger, nullable=False),
    sa.Column("completion_tokens", sa.BigInteger, nullable=False),
    sa.Column("cost_micros", sa.BigInteger, nullable=False),
)

# Budgets' ledger: spend per scope ("project:x") and period start, added to in the same
# transaction as the usage records it comes from.
spend = sa.Table(
    "spend",
    metadata,
    sa.Column("scope", sa.Text, primary_key=True),
    sa.Column("period", sa.Text, primary_key=True),
    sa.Column("period_start", sa.BigInteger, primary_key=True),
    sa.Column("cost_micros", sa.BigInteger, nullable=False),
)

# Rate-limit counts: each gateway writes its own absolute count per scope and window, so
# a push that is retried never counts twice; readers sum over gateways.
limit_counters = sa.Table(
    "limit_counters",
    metadata,
    sa.Column("scope", sa.Text, primary_key=True),
    sa.Column("window_start", sa.BigInteger, primary_key=True, index=True),
    sa.Column("gateway", sa.Text, primary_key=True),
    sa.Column("requests", sa.BigInteger, nullable=False),
    sa.Column("tokens", sa.BigInteger, nullable=False),
)

# Gateways sharing the store, by heartbeat: how many share a limit.
gateways = sa.Table(
    "gateways",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("host", sa.Text, nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("started_at", Seconds, nullable=False),
    sa.Column("last_seen", Seconds, nullable=False),
)

# The control planes' leader lease (added by migration 0003): one row per lease name,
# claimed and renewed by a single upsert (llmgw.store.lease). `term` grows by one
# whenever the holder changes, so orders stamped with it can be fenced.
control_lease = sa.Table(
    "control_lease",
    metadata,
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column("holder", sa.Text, nullable=False),
    sa.Column("term", sa.BigInteger, nullable=False),
    sa.Column("acquired_at", Seconds, nullable=False),
    sa.Column("expires_at", Seconds, nullable=False),
)

# Runtime catalog changes (added by migration 0003), laid over the configuration's
# `models:` by name (llmgw.store.catalog_store). `definition` is the model as the
# operator wrote it (YAML or JSON); NULL is a tombstone: the configuration's model of
# that name is removed.
catalog_models = sa.Table(
    "catalog_models",
    metadata,
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column("definition", sa.Text, nullable=True),
    sa.Column("updated_at", Seconds, nullable=False, index=True),
    sa.Column("updated_by", sa.Text, nullable=False, server_default=""),
)

# The replica set the leading control plane publishes (added by migration 0004), read by
# the other servers so their routers reach the replicas too (llmgw.control.tables.replica_table).
# One row per routable replica, all rewritten together by the leader and stamped with its
# lease term. An engine's API key is not kept: every server derives it from the
# cluster's secret and the replica id.
control_replicas = sa.Table(
    "control_replicas",
    metadata,
    sa.Column("replica_id", sa.Text, primary_key=True),
    sa.Column("model", sa.Text, nullable=False),
    sa.Column("url", sa.Text, nullable=False),
    sa.Column("engine", sa.Text, nullable=False),
    sa.Column("weight", sa.Float(precision=53), nullable=False),
    sa.Column("pool", sa.Text, nullable=False),
    sa.Column("labels", sa.Text, nullable=False),
    sa.Column("term", sa.BigInteger, nullable=False),
    sa.Column("updated_at", Seconds, nullable=False),
)

# What each server's router saw of each model (added by migration 0005): when it was last
# asked for and since when a request has waited for it (NULL: none waits), so the leader
# plans with the demand of every server, not only its own (llmgw.control.tables.demand_table).
# Times are the database's clock; `updated_at` shows the server alive.
control_demand = sa.Table(
    "control_demand",
    metadata,
    sa.Column("model", sa.Text, primary_key=True),
    sa.Column("holder", sa.Text, primary_key=True),
    sa.Column("last_asked", Seconds, nullable=True),
    sa.Column("waiting_since", Seconds, nullable=True),
    sa.Column("updated_at", Seconds, nullable=False),
)

# Secrets shared by every server of the store (added by migration 0005), one row per name,
# made once by the first server that needs it (llmgw.store.cluster_secret). The engine
# keys of the control plane's replicas are derived from the "engine" one.
cluster_secrets = sa.Table(
    "cluster_secrets",
    metadata,
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column("secret", sa.Text, nullable=False),
    sa.Column("created_at", Seconds, nullable=False),
)

# Guard policies attached to a part of the tenancy tree (added by migration 0009): the
# nearest level with any attachment adds its policies to guard.default for its callers
# (llmgw.guard.policy). Policies are named by the settings, so nothing here refers to a
# row of theirs; a scope that goes away leaves attachments that match no caller.
guard_attachments = sa.Table(
    "guard_attachments",
    metadata,
    sa.Column("scope_kind", sa.Text, primary_key=True),
    sa.Column("scope_id", sa.Text, primary_key=True),
    sa.Column("policy", sa.Text, primary_key=True),
    sa.Column("created_at", Seconds, nullable=False),
)

# A sign-in under way: the OIDC `state` (hashed), with the nonce and PKCE verifier it
# must come back to, kept in the store so any gateway can finish it and a replayed
# `state` finds nothing (the row is deleted when used).
oidc_logins = sa.Table(
    "oidc_logins",
    metadata,
    sa.Column("state_hash", sa.Text, primary_key=True),
    sa.Column("nonce", sa.Text, nullable=False),
    sa.Column("code_verifier", sa.Text, nullable=False),
    sa.Column("return_to", sa.Text, nullable=False, server_default="/"),
    sa.Column("expires_at", Seconds, nullable=False, index=True),
)

# Webhook deliveries (added by migration 0012): one row per event and webhook, written
# before anything is sent, so an event outlives a restart and a receiver that is down;
# the key makes an event emitted twice one delivery (llmgw.notify.outbox). `state` is
# pending (tried at `next_at`), delivered or failed (given up).
notify_deliveries = sa.Table(
    "notify_deliveries",
    metadata,
    sa.Column("event_id", sa.Text, primary_key=True),
    sa.Column("webhook", sa.Text, primary_key=True),
    sa.Column("event_type", sa.Text, nullable=False),
    sa.Column("body", sa.Text, nullable=False),
    sa.Column("state", sa.Text, nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("created_at", Seconds, nullable=False),
    sa.Column("next_at", Seconds, nullable=False),
    sa.Column("last_error", sa.Text, nullable=False),
    sa.Column("last_status", sa.Integer, nullable=True),
    sa.Column("delivered_at", Seconds, nullable=True),
    sa.Index("ix_notify_deliveries_due", "state", "next_at"),
    sa.Index("ix_notify_deliveries_created", "created_at"),
)

node_certificates = sa.Table(
    "node_certificates",
    metadata,
    sa.Column("serial", sa.Text, primary_key=True),
    sa.Column("node_id", sa.Text, nullable=False),
    sa.Column("not_after", Seconds, nullable=False),
    sa.Column("issued_at", Seconds, nullable=False),
    sa.Column("revoked_at", Seconds, nullable=True),
    sa.Index("ix_node_certificates_node", "node_id"),
)

# The Responses API's stored objects (llmgw.batch): each row belongs to `owner`
# (`project:ID`, `user:ID`, or `threads` for the pool of a gateway without auth) and
# goes at `expires_at`. A response keeps its own input items and the whole response
# object as JSON; a conversation's items are rows in the order they were added.
stored_responses = sa.Table(
    "stored_responses",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("owner", sa.Text, nullable=False),
    sa.Column("previous_id", sa.Text, nullable=True),
    sa.Column("conversation_id", sa.Text, nullable=True),
    sa.Column("input_items", sa.Text, nullable=False),
    sa.Column("body", sa.Text, nullable=False),
    sa.Column("created_at", Seconds, nullable=False),
    sa.Column("expires_at", Seconds, nullable=False, index=True),
)

conversations = sa.Table(
    "conversations",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("owner", sa.Text, nullable=False),
    sa.Column("metadata", sa.Text, nullable=False),
    sa.Column("created_at", Seconds, nullable=False),
    sa.Column("expires_at", Seconds, nullable=False, index=True),
)

conversation_items = sa.Table(
    "conversation_items",
    metadata,
    sa.Column("seq", BigId, primary_key=True, autoincrement=True),
    sa.Column("conversation_id", sa.Text, nullable=False, index=True),
    sa.Column("item_id", sa.Text, nullable=False),
    sa.Column("item", sa.Text, nullable=False),
    sa.Column("created_at", Seconds, nullable=False),
)

# Uploaded files of the Files API (added by migration 0015): the metadata only, the
# bytes live under the gateway's state directory (llmgw.batch.files_disk). `owner` is
# `project:ID` or `user:ID`, the caller's project or person; `expires_at` is when the
# sweep removes a file (batch output and error files), None for kept until deleted.
batch_files = sa.Table(
    "batch_files",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("owner", sa.Text, nullable=False),
    sa.Column("purpose", sa.Text, nullable=False),
    sa.Column("filename", sa.Text, nullable=False),
    sa.Column("bytes", sa.BigInteger, nullable=False),
    sa.Column("created_at", Seconds, nullable=False),
    sa.Column("expires_at", Seconds, nullable=True),
    sa.Index("ix_batch_files_owner", "owner", "created_at"),
    sa.Index("ix_batch_files_expires", "expires_at"),
)

# Batches (added by migration 0015): one row per batch, its state machine and counts.
# `body` is the rest of the batch object as JSON (metadata, errors, the file ids);
# `key_hash` names the key that created it, whose rights its requests run with;
# `runner` the gateway running it until `lease_until` (renewed while it runs), so on a
# shared store one gateway runs a batch at a time and another takes it over when that
# one stops renewing.
batch_jobs = sa.Table(
    "batch_jobs",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("owner", sa.Text, nullable=False),
    sa.Column("key_hash", sa.Text, nullable=False),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("body", sa.Text, nullable=False),
    sa.Column("created_at", Seconds, nullable=False),
    sa.Column("updated_at", Seconds, nullable=False),
    sa.Column("runner", sa.Text, nullable=True),
    sa.Column("lease_until", Seconds, nullable=True),
    sa.Index("ix_batch_jobs_owner", "owner", "created_at"),
    sa.Index("ix_batch_jobs_status", "status"),
)

# The audit log (added by migration 0017): who did what, when, through the operator
# dashboard (llmgw.web.dashboard): one row per action, newest read first.
audit_log = sa.Table(
    "audit_log",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("at", Seconds, nullable=False),
    sa.Column("actor", sa.Text, nullable=False),
    sa.Column("action", sa.Text, nullable=False),
    sa.Column("target", sa.Text, nullable=False),
    sa.Column("outcome", sa.Text, nullable=False),
    sa.Index("ix_audit_log_at", "at"),
)
