"""DDL: Effects and their attempts, notifications, turn intents, and the channel tables.

A fragment of the one canonical DDL (`state.ddl.DDL`); its bytes are part of the schema digest.
"""

from __future__ import annotations

__all__ = ["CHANNELS"]


CHANNELS = """
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
