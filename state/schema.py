"""The one canonical DDL of state.sqlite and its digest.

Every table of the SQLite state plan is here, not only the channel tables: one database is
shared by every part of Pi Workflows. The text is hashed byte for byte (schema_meta holds the
digest), so any edit to it is a schema change that existing databases refuse.
"""

from __future__ import annotations

import hashlib

SCHEMA_NAME = "pi-workflows-state"
SCHEMA_VERSION = 1
APPLICATION_ID = 0x50495746  # "PIWF"

DDL = """
CREATE TABLE schema_meta (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  schema_name TEXT NOT NULL CHECK (schema_name = 'pi-workflows-state'),
  schema_version INTEGER NOT NULL CHECK (schema_version = 1),
  schema_digest BLOB NOT NULL CHECK (length(schema_digest) = 32),
  app_version TEXT NOT NULL CHECK (app_version <> ''),
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
) STRICT;

CREATE TABLE projects (
  project_id TEXT PRIMARY KEY,
  canonical_path TEXT NOT NULL UNIQUE CHECK (substr(canonical_path, 1, 1) = '/'),
  created_at INTEGER NOT NULL
) STRICT;

CREATE TABLE blobs (
  blob_hash BLOB PRIMARY KEY CHECK (length(blob_hash) = 32),
  media_type TEXT NOT NULL CHECK (media_type <> ''),
  byte_length INTEGER NOT NULL CHECK (byte_length >= 0 AND byte_length = length(content)),
  content BLOB NOT NULL,
  created_at INTEGER NOT NULL
) STRICT;

CREATE TABLE resources (
  resource_id TEXT PRIMARY KEY,
  resource_type TEXT NOT NULL
    CHECK (resource_type IN ('run', 'decision', 'controller', 'effect', 'channel', 'session')),
  revision INTEGER NOT NULL CHECK (revision >= 0),
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
) STRICT;

CREATE TRIGGER resources_type_is_fixed
BEFORE UPDATE OF resource_type ON resources
WHEN NEW.resource_type IS NOT OLD.resource_type
BEGIN
  SELECT RAISE(ABORT, 'resource type cannot change');
END;

CREATE TRIGGER resources_revision_steps_by_one
BEFORE UPDATE OF revision ON resources
WHEN NEW.revision IS NOT OLD.revision + 1
BEGIN
  SELECT RAISE(ABORT, 'resource revision must increase by exactly one');
END;

CREATE TABLE leases (
  resource_id TEXT PRIMARY KEY REFERENCES resources (resource_id),
  generation INTEGER NOT NULL CHECK (generation >= 0),
  owner_type TEXT CHECK (owner_type IN ('session', 'host', 'controller', 'channel')),
  owner_id TEXT,
  token_hash BLOB CHECK (length(token_hash) = 32),
  acquired_at INTEGER,
  heartbeat_at INTEGER,
  expires_at INTEGER,
  CHECK (
    (owner_type IS NULL AND owner_id IS NULL AND token_hash IS NULL
      AND acquired_at IS NULL AND heartbeat_at IS NULL AND expires_at IS NULL)
    OR (owner_type IS NOT NULL AND owner_id IS NOT NULL AND token_hash IS NOT NULL
      AND acquired_at IS NOT NULL AND heartbeat_at IS NOT NULL AND expires_at IS NOT NULL)
  )
) STRICT;

CREATE INDEX leases_expires_at ON leases (expires_at);
CREATE INDEX leases_owner ON leases (owner_type, owner_id);

CREATE TRIGGER leases_generation_never_decreases
BEFORE UPDATE OF generation ON leases
WHEN NEW.generation < OLD.generation
BEGIN
  SELECT RAISE(ABORT, 'lease generation cannot decrease');
END;

CREATE TABLE events (
  event_seq INTEGER PRIMARY KEY AUTOINCREMENT,
  event_id TEXT NOT NULL UNIQUE,
  resource_id TEXT NOT NULL REFERENCES resources (resource_id),
  resource_revision INTEGER NOT NULL CHECK (resource_revision > 0),
  event_type TEXT NOT NULL CHECK (event_type GLOB '[a-z]*.[a-z]*'),
  actor_type TEXT NOT NULL
    CHECK (actor_type IN ('session', 'host', 'controller', 'channel', 'human', 'policy', 'control',
      'system')),
  actor_id TEXT,
  lease_generation INTEGER CHECK (lease_generation >= 0),
  payload_hash BLOB REFERENCES blobs (blob_hash),
  recorded_at INTEGER NOT NULL,
  UNIQUE (resource_id, resource_revision)
) STRICT;

CREATE TRIGGER events_are_immutable
BEFORE UPDATE ON events
BEGIN
  SELECT RAISE(ABORT, 'events are immutable');
END;

CREATE TRIGGER events_are_never_deleted
BEFORE DELETE ON events
BEGIN
  SELECT RAISE(ABORT, 'events are immutable');
END;

CREATE TABLE workflow_definitions (
  definition_digest BLOB PRIMARY KEY CHECK (length(definition_digest) = 32),
  workflow_name TEXT NOT NULL CHECK (workflow_name <> ''),
  definition_hash BLOB NOT NULL REFERENCES blobs (blob_hash),
  created_at INTEGER NOT NULL
) STRICT;

CREATE TABLE runs (
  run_id TEXT PRIMARY KEY,
  resource_id TEXT NOT NULL UNIQUE REFERENCES resources (resource_id),
  project_id TEXT REFERENCES projects (project_id),
  parent_run_id TEXT REFERENCES runs (run_id),
  definition_digest BLOB NOT NULL REFERENCES workflow_definitions (definition_digest),
  workflow_ref TEXT NOT NULL,
  workflow_source_hash BLOB NOT NULL REFERENCES blobs (blob_hash),
  launch_options_hash BLOB NOT NULL REFERENCES blobs (blob_hash),
  source_type TEXT NOT NULL CHECK (source_type IN ('builtin', 'file')),
  source_ref TEXT NOT NULL,
  source_revision TEXT NOT NULL,
  title TEXT,
  status TEXT NOT NULL
    CHECK (status IN ('queued', 'running', 'waiting', 'completed', 'failed', 'timed_out',
      'cancelled')),
  paused INTEGER NOT NULL CHECK (paused IN (0, 1)),
  status_detail TEXT,
  input_hash BLOB NOT NULL REFERENCES blobs (blob_hash),
  output_hash BLOB REFERENCES blobs (blob_hash),
  error_hash BLOB REFERENCES blobs (blob_hash),
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  finished_at INTEGER,
  CHECK ((status IN ('completed', 'failed', 'timed_out', 'cancelled')) = (finished_at IS NOT NULL))
) STRICT;

CREATE INDEX runs_project_created ON runs (project_id, created_at);
CREATE INDEX runs_status_updated ON runs (status, updated_at);
CREATE INDEX runs_parent ON runs (parent_run_id);

CREATE TABLE run_bindings (
  run_id TEXT PRIMARY KEY REFERENCES runs (run_id),
  origin_session_id TEXT NOT NULL CHECK (origin_session_id <> ''),
  execution_mode TEXT NOT NULL CHECK (execution_mode IN ('interactive', 'headless')),
  created_at INTEGER NOT NULL
) STRICT;

CREATE TABLE run_queue (
  run_id TEXT PRIMARY KEY REFERENCES runs (run_id),
  status TEXT NOT NULL
    CHECK (status IN ('queued', 'starting', 'running', 'parked', 'done', 'failed', 'cancelled')),
  available_at INTEGER NOT NULL,
  affinity_runner_id TEXT,
  origin_session_id TEXT,
  consecutive_errors INTEGER NOT NULL CHECK (consecutive_errors >= 0),
  error_code TEXT,
  error_hash BLOB REFERENCES blobs (blob_hash),
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  started_at INTEGER,
  finished_at INTEGER
) STRICT;

CREATE INDEX run_queue_claimable ON run_queue (status, available_at);
CREATE UNIQUE INDEX run_queue_one_active_per_session ON run_queue (origin_session_id)
  WHERE status IN ('queued', 'starting', 'running') AND origin_session_id IS NOT NULL;

CREATE TABLE node_attempts (
  attempt_id TEXT PRIMARY KEY,
  run_id TEXT NOT NULL REFERENCES runs (run_id),
  node_id TEXT NOT NULL CHECK (node_id <> ''),
  attempt_number INTEGER NOT NULL CHECK (attempt_number > 0),
  node_type TEXT NOT NULL,
  status TEXT NOT NULL
    CHECK (status IN ('pending', 'running', 'waiting', 'completed', 'failed', 'timed_out',
      'cancelled')),
  input_hash BLOB REFERENCES blobs (blob_hash),
  contract_hash BLOB REFERENCES blobs (blob_hash),
  presentation_hash BLOB REFERENCES blobs (blob_hash),
  output_hash BLOB REFERENCES blobs (blob_hash),
  result_hash BLOB REFERENCES blobs (blob_hash),
  error_hash BLOB REFERENCES blobs (blob_hash),
  started_at INTEGER,
  deadline_at INTEGER,
  finished_at INTEGER,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  UNIQUE (run_id, node_id, attempt_number)
) STRICT;

CREATE UNIQUE INDEX node_attempts_one_active_per_run ON node_attempts (run_id)
  WHERE status IN ('pending', 'running', 'waiting');

CREATE TABLE workflow_updates (
  update_id TEXT PRIMARY KEY,
  attempt_id TEXT NOT NULL REFERENCES node_attempts (attempt_id),
  update_seq INTEGER NOT NULL CHECK (update_seq > 0),
  update_type TEXT NOT NULL,
  update_key TEXT NOT NULL,
  data_hash BLOB NOT NULL REFERENCES blobs (blob_hash),
  recorded_at INTEGER NOT NULL,
  UNIQUE (attempt_id, update_seq)
) STRICT;

CREATE TABLE session_segments (
  segment_id TEXT PRIMARY KEY,
  run_id TEXT NOT NULL REFERENCES runs (run_id),
  attempt_id TEXT REFERENCES node_attempts (attempt_id),
  capture_key TEXT NOT NULL,
  session_id TEXT NOT NULL,
  resource_id TEXT NOT NULL UNIQUE REFERENCES resources (resource_id),
  binding_hash BLOB NOT NULL REFERENCES blobs (blob_hash),
  status TEXT NOT NULL CHECK (status IN ('recording', 'complete', 'failed')),
  entry_count INTEGER NOT NULL CHECK (entry_count >= 0),
  event_count INTEGER NOT NULL CHECK (event_count >= 0),
  failure_hash BLOB REFERENCES blobs (blob_hash),
  created_at INTEGER NOT NULL,
  finished_at INTEGER
) STRICT;

CREATE TABLE session_entries (
  segment_id TEXT NOT NULL REFERENCES session_segments (segment_id),
  entry_seq INTEGER NOT NULL CHECK (entry_seq > 0),
  entry_id TEXT NOT NULL,
  entry_hash BLOB NOT NULL REFERENCES blobs (blob_hash),
  recorded_at INTEGER NOT NULL,
  PRIMARY KEY (segment_id, entry_seq),
  UNIQUE (segment_id, entry_id)
) STRICT;

CREATE TABLE session_events (
  segment_id TEXT NOT NULL REFERENCES session_segments (segment_id),
  event_seq INTEGER NOT NULL CHECK (event_seq > 0),
  event_type TEXT NOT NULL,
  node_id TEXT,
  attempt_id TEXT,
  turn_id TEXT,
  message_id TEXT,
  tool_call_id TEXT,
  payload_hash BLOB NOT NULL REFERENCES blobs (blob_hash),
  recorded_at INTEGER NOT NULL,
  PRIMARY KEY (segment_id, event_seq)
) STRICT;

CREATE TABLE human_decisions (
  decision_id TEXT PRIMARY KEY CHECK (decision_id GLOB 'decision-*'),
  resource_id TEXT NOT NULL UNIQUE REFERENCES resources (resource_id),
  run_id TEXT NOT NULL REFERENCES runs (run_id),
  attempt_id TEXT NOT NULL REFERENCES node_attempts (attempt_id),
  audience TEXT NOT NULL CHECK (audience <> ''),
  title TEXT NOT NULL,
  subject_hash BLOB NOT NULL REFERENCES blobs (blob_hash),
  presentation_hash BLOB NOT NULL REFERENCES blobs (blob_hash),
  choices_hash BLOB NOT NULL REFERENCES blobs (blob_hash),
  request_digest BLOB NOT NULL UNIQUE CHECK (length(request_digest) = 32),
  presentation_revision INTEGER NOT NULL CHECK (presentation_revision > 0),
  deadline_at INTEGER,
  default_response_hash BLOB REFERENCES blobs (blob_hash),
  request_hash BLOB NOT NULL REFERENCES blobs (blob_hash),
  created_at INTEGER NOT NULL,
  CHECK (default_response_hash IS NULL OR deadline_at IS NOT NULL)
) STRICT;

CREATE INDEX human_decisions_run ON human_decisions (run_id);
CREATE INDEX human_decisions_deadline ON human_decisions (deadline_at);

CREATE TRIGGER human_decisions_are_immutable
BEFORE UPDATE ON human_decisions
BEGIN
  SELECT RAISE(ABORT, 'human decision requests are immutable');
END;

CREATE TABLE human_decision_resolutions (
  decision_id TEXT PRIMARY KEY REFERENCES human_decisions (decision_id),
  outcome TEXT NOT NULL CHECK (outcome IN ('accepted', 'cancelled')),
  provenance TEXT NOT NULL
    CHECK (provenance IN ('human', 'timeout_policy', 'explicit_cancel', 'expired_no_default')),
  response_hash BLOB REFERENCES blobs (blob_hash),
  reason TEXT,
  channel TEXT,
  actor_id TEXT,
  external_event_id TEXT,
  idempotency_key TEXT,
  resolution_digest BLOB NOT NULL UNIQUE CHECK (length(resolution_digest) = 32),
  resolved_at INTEGER NOT NULL,
  CHECK (
    (outcome = 'accepted' AND provenance IN ('human', 'timeout_policy')
      AND response_hash IS NOT NULL AND reason IS NULL)
    OR (outcome = 'cancelled' AND provenance IN ('explicit_cancel', 'expired_no_default')
      AND response_hash IS NULL AND reason IS NOT NULL AND reason <> '')
  ),
  CHECK (
    (provenance = 'human' AND channel IS NOT NULL AND actor_id IS NOT NULL
      AND external_event_id IS NOT NULL AND idempotency_key IS NOT NULL)
    OR (provenance <> 'human' AND channel IS NULL AND external_event_id IS NULL
      AND idempotency_key IS NULL)
  )
) STRICT;

CREATE TRIGGER human_decision_resolutions_are_immutable
BEFORE UPDATE ON human_decision_resolutions
BEGIN
  SELECT RAISE(ABORT, 'human decision resolutions are immutable');
END;

CREATE TABLE human_decision_submissions (
  submission_id TEXT PRIMARY KEY,
  decision_id TEXT NOT NULL REFERENCES human_decisions (decision_id),
  request_digest BLOB NOT NULL CHECK (length(request_digest) = 32),
  channel TEXT NOT NULL CHECK (channel <> ''),
  actor_id TEXT NOT NULL CHECK (actor_id <> ''),
  external_event_id TEXT NOT NULL CHECK (external_event_id <> ''),
  idempotency_key TEXT NOT NULL CHECK (idempotency_key <> ''),
  response_hash BLOB NOT NULL REFERENCES blobs (blob_hash),
  result TEXT NOT NULL
    CHECK (result IN ('won', 'adopted', 'already_resolved', 'stale', 'rejected')),
  winner_digest BLOB CHECK (length(winner_digest) = 32),
  submitted_at INTEGER NOT NULL,
  UNIQUE (channel, idempotency_key)
) STRICT;

CREATE INDEX human_decision_submissions_decision ON human_decision_submissions (decision_id);

CREATE TABLE continuations (
  continuation_id TEXT PRIMARY KEY,
  parent_run_id TEXT NOT NULL REFERENCES runs (run_id),
  trigger_type TEXT NOT NULL
    CHECK (trigger_type IN ('decision', 'checkpoint', 'controller', 'manual')),
  trigger_id TEXT NOT NULL,
  child_run_id TEXT NOT NULL UNIQUE REFERENCES runs (run_id),
  input_hash BLOB NOT NULL REFERENCES blobs (blob_hash),
  created_at INTEGER NOT NULL,
  UNIQUE (trigger_type, trigger_id)
) STRICT;

CREATE TABLE controller_resources (
  controller_resource_id TEXT PRIMARY KEY,
  resource_id TEXT NOT NULL UNIQUE REFERENCES resources (resource_id),
  project_id TEXT NOT NULL REFERENCES projects (project_id),
  controller_name TEXT NOT NULL,
  resource_key TEXT NOT NULL,
  resource_uid TEXT NOT NULL UNIQUE,
  spec_generation INTEGER NOT NULL CHECK (spec_generation > 0),
  spec_hash BLOB NOT NULL REFERENCES blobs (blob_hash),
  status_hash BLOB REFERENCES blobs (blob_hash),
  deletion_requested_at INTEGER,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  UNIQUE (project_id, controller_name, resource_key)
) STRICT;

CREATE TABLE controller_finalizers (
  controller_resource_id TEXT NOT NULL REFERENCES controller_resources (controller_resource_id),
  finalizer TEXT NOT NULL CHECK (finalizer <> ''),
  PRIMARY KEY (controller_resource_id, finalizer)
) STRICT;

CREATE TABLE controller_queue (
  controller_resource_id TEXT PRIMARY KEY
    REFERENCES controller_resources (controller_resource_id),
  available_at INTEGER NOT NULL,
  queue_version INTEGER NOT NULL CHECK (queue_version >= 0),
  consecutive_errors INTEGER NOT NULL CHECK (consecutive_errors >= 0),
  last_error_hash BLOB REFERENCES blobs (blob_hash),
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
) STRICT;

CREATE INDEX controller_queue_available ON controller_queue (available_at);

CREATE TABLE controller_workflows (
  request_id TEXT PRIMARY KEY,
  controller_resource_id TEXT NOT NULL REFERENCES controller_resources (controller_resource_id),
  request_key TEXT NOT NULL,
  workflow_name TEXT NOT NULL,
  input_fingerprint BLOB NOT NULL CHECK (length(input_fingerprint) = 32),
  reserved_run_id TEXT NOT NULL,
  run_id TEXT REFERENCES runs (run_id),
  status TEXT NOT NULL
    CHECK (status IN ('pending', 'running', 'waiting', 'succeeded', 'failed', 'interrupted')),
  attempt_count INTEGER NOT NULL CHECK (attempt_count >= 0),
  error_hash BLOB REFERENCES blobs (blob_hash),
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  UNIQUE (controller_resource_id, request_key)
) STRICT;

CREATE TABLE effects (
  effect_id TEXT PRIMARY KEY,
  resource_id TEXT NOT NULL UNIQUE REFERENCES resources (resource_id),
  source_resource_id TEXT NOT NULL REFERENCES resources (resource_id),
  source_revision INTEGER NOT NULL CHECK (source_revision >= 0),
  effect_type TEXT NOT NULL CHECK (effect_type GLOB '[a-z]*.[a-z]*'),
  idempotency_key TEXT NOT NULL CHECK (idempotency_key <> ''),
  payload_hash BLOB NOT NULL REFERENCES blobs (blob_hash),
  owner_scope TEXT NOT NULL CHECK (owner_scope IN ('run', 'controller', 'channel', 'system')),
  status TEXT NOT NULL
    CHECK (status IN ('pending', 'applying', 'applied', 'rejected', 'ambiguous', 'cancelled')),
  attempt_count INTEGER NOT NULL CHECK (attempt_count >= 0),
  next_attempt_at INTEGER,
  result_hash BLOB REFERENCES blobs (blob_hash),
  external_ref TEXT,
  error_hash BLOB REFERENCES blobs (blob_hash),
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  settled_at INTEGER,
  UNIQUE (source_resource_id, effect_type, idempotency_key),
  CHECK ((status IN ('applied', 'rejected', 'ambiguous', 'cancelled')) = (settled_at IS NOT NULL))
) STRICT;

CREATE INDEX effects_unsettled ON effects (effect_type, next_attempt_at)
  WHERE status IN ('pending', 'applying');

CREATE TABLE effect_attempts (
  effect_id TEXT NOT NULL REFERENCES effects (effect_id),
  attempt_number INTEGER NOT NULL CHECK (attempt_number > 0),
  owner_id TEXT NOT NULL,
  lease_generation INTEGER NOT NULL CHECK (lease_generation > 0),
  started_at INTEGER NOT NULL,
  finished_at INTEGER,
  outcome TEXT CHECK (outcome IN ('applied', 'rejected', 'ambiguous', 'interrupted')),
  result_hash BLOB REFERENCES blobs (blob_hash),
  error_hash BLOB REFERENCES blobs (blob_hash),
  PRIMARY KEY (effect_id, attempt_number),
  CHECK ((outcome IS NULL) = (finished_at IS NULL))
) STRICT;

CREATE TABLE notifications (
  notification_id TEXT PRIMARY KEY,
  effect_id TEXT NOT NULL UNIQUE REFERENCES effects (effect_id),
  run_id TEXT NOT NULL REFERENCES runs (run_id),
  attempt_id TEXT NOT NULL REFERENCES node_attempts (attempt_id),
  notification_index INTEGER NOT NULL CHECK (notification_index >= 0),
  target_session_id TEXT NOT NULL,
  notification_type TEXT NOT NULL CHECK (notification_type IN ('progress', 'final')),
  content_hash BLOB NOT NULL REFERENCES blobs (blob_hash),
  created_at INTEGER NOT NULL,
  UNIQUE (run_id, attempt_id, notification_index)
) STRICT;

CREATE TABLE turn_intents (
  turn_intent_id TEXT PRIMARY KEY,
  effect_id TEXT NOT NULL UNIQUE REFERENCES effects (effect_id),
  run_id TEXT NOT NULL REFERENCES runs (run_id),
  target_session_id TEXT NOT NULL,
  resolution_type TEXT NOT NULL,
  facts_hash BLOB NOT NULL REFERENCES blobs (blob_hash),
  eligible_at INTEGER NOT NULL,
  created_at INTEGER NOT NULL
) STRICT;

CREATE TABLE channels (
  channel_id TEXT PRIMARY KEY,
  resource_id TEXT NOT NULL UNIQUE REFERENCES resources (resource_id),
  adapter_type TEXT NOT NULL CHECK (adapter_type IN ('pi', 'telegram')),
  profile_key TEXT NOT NULL CHECK (profile_key <> ''),
  created_at INTEGER NOT NULL,
  UNIQUE (adapter_type, profile_key)
) STRICT;

CREATE TABLE channel_cursors (
  channel_id TEXT NOT NULL REFERENCES channels (channel_id),
  cursor_key TEXT NOT NULL CHECK (cursor_key <> ''),
  cursor_value TEXT NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (channel_id, cursor_key)
) STRICT;

CREATE TABLE channel_inbox (
  channel_id TEXT NOT NULL REFERENCES channels (channel_id),
  external_event_id TEXT NOT NULL CHECK (external_event_id <> ''),
  event_type TEXT NOT NULL CHECK (event_type IN ('callback', 'reply', 'answer', 'other')),
  payload_hash BLOB NOT NULL REFERENCES blobs (blob_hash),
  received_at INTEGER NOT NULL,
  processed_at INTEGER,
  result_hash BLOB REFERENCES blobs (blob_hash),
  PRIMARY KEY (channel_id, external_event_id),
  CHECK ((processed_at IS NULL) = (result_hash IS NULL))
) STRICT;

CREATE INDEX channel_inbox_unprocessed ON channel_inbox (channel_id, received_at)
  WHERE processed_at IS NULL;

CREATE TABLE channel_messages (
  message_id TEXT PRIMARY KEY,
  channel_id TEXT NOT NULL REFERENCES channels (channel_id),
  decision_id TEXT REFERENCES human_decisions (decision_id),
  purpose TEXT NOT NULL CHECK (purpose IN ('delivery', 'settlement', 'prompt')),
  content_hash BLOB NOT NULL REFERENCES blobs (blob_hash),
  external_conversation_ref TEXT,
  external_message_ref TEXT,
  status TEXT NOT NULL CHECK (status IN ('pending', 'confirmed', 'failed', 'ambiguous')),
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
) STRICT;

CREATE INDEX channel_messages_decision ON channel_messages (decision_id, channel_id);
CREATE INDEX channel_messages_reference
  ON channel_messages (channel_id, external_conversation_ref, external_message_ref);

CREATE TABLE channel_message_parts (
  message_id TEXT NOT NULL REFERENCES channel_messages (message_id),
  recipient_index INTEGER NOT NULL CHECK (recipient_index >= 0),
  part_index INTEGER NOT NULL CHECK (part_index >= 0),
  content_hash BLOB NOT NULL REFERENCES blobs (blob_hash),
  external_conversation_ref TEXT,
  external_message_ref TEXT,
  PRIMARY KEY (message_id, recipient_index, part_index),
  CHECK ((external_conversation_ref IS NULL) = (external_message_ref IS NULL))
) STRICT;

CREATE INDEX channel_message_parts_reference
  ON channel_message_parts (external_conversation_ref, external_message_ref);
"""

DDL_DIGEST: bytes = hashlib.sha256(DDL.encode("utf-8")).digest()


def ddl_statements(ddl: str = DDL) -> list[str]:
    """Split DDL into statements as SQLite stores them in `sqlite_schema.sql`."""
    import apsw  # local: keeps this module importable without touching the extension at load

    statements: list[str] = []
    buffer = ""
    for line in ddl.splitlines(keepends=True):
        buffer += line
        if buffer.strip() and apsw.complete(buffer):
            statements.append(buffer.strip().removesuffix(";"))
            buffer = ""
    return statements


def expected_objects() -> dict[str, tuple[str, str, str]]:
    """name -> (type, table name, sql) of every schema object the DDL creates."""
    objects: dict[str, tuple[str, str, str]] = {}
    for sql in ddl_statements():
        words = sql.split()
        kind = words[2].lower() if words[1] == "UNIQUE" else words[1].lower()
        name = words[3] if words[1] == "UNIQUE" else words[2]
        on_index = words.index("ON") if "ON" in words else -1
        table = name if kind == "table" else words[on_index + 1]
        objects[name] = (kind, table, sql)
    return objects
