"""DDL: Workflows: definitions, runs and their queue, attempts, sessions, human decisions,
continuations and controllers (every part of Pi Workflows shares this one database).

A fragment of the one canonical DDL (`state.ddl.DDL`); its bytes are part of the schema digest.
"""

from __future__ import annotations

__all__ = ["WORKFLOWS"]


WORKFLOWS = """
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

"""
