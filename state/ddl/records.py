"""DDL: The shared records: schema identity, projects, blobs, resources, leases and events.

A fragment of the one canonical DDL (`state.ddl.DDL`); its bytes are part of the schema digest.
"""

from __future__ import annotations

__all__ = ["RECORDS"]


RECORDS = """
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

"""
