"""Every closed set of values the DDL checks (`CHECK (column IN (...))`) has one name in the
code, a StrEnum, with exactly the DDL's values: a value added on one side only fails here, not
in a user's database. The code's narrower sets (the owners of a run, the ends of a run) are
Literals of those enums' members."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any, get_args

from channels import inbox, messages, store
from channels.decisions import records, resolution, runs
from channels.notifications.records import NotificationType
from state import effects, leases, resources
from state.ddl import DDL

CHECKED_SET = re.compile(r"CHECK \((\w+) IN \(([^)]*)\)\)")
TABLE = re.compile(r"CREATE TABLE (\w+) \((.*?)\n\)( STRICT)?;", re.S)

# (table, column) -> the code's name for the set.
CODE_SETS: dict[tuple[str, str], Any] = {
    ("resources", "resource_type"): resources.ResourceType,
    ("leases", "owner_type"): leases.OwnerType,
    ("events", "actor_type"): resources.ActorType,
    ("runs", "source_type"): runs.SourceType,
    ("runs", "status"): runs.RunStatus,
    ("run_bindings", "execution_mode"): runs.ExecutionMode,
    ("node_attempts", "status"): runs.AttemptStatus,
    ("human_decision_resolutions", "outcome"): records.Outcome,
    ("human_decision_resolutions", "provenance"): records.Provenance,
    ("human_decision_submissions", "result"): resolution.Result,
    ("effects", "owner_scope"): effects.OwnerScope,
    ("effects", "status"): effects.EffectStatus,
    ("effect_attempts", "outcome"): effects.AttemptOutcome,
    ("channels", "adapter_type"): store.AdapterType,
    ("channel_inbox", "event_type"): inbox.EventType,
    ("channel_messages", "purpose"): messages.Purpose,
    ("channel_messages", "status"): messages.MessageStatus,
    ("notifications", "notification_type"): NotificationType,
}
# Sets of tables this project never writes (the plan's controller and queue tables), and a flag.
NOT_WRITTEN = {("runs", "paused"), ("run_queue", "status"), ("session_segments", "status"),
               ("continuations", "trigger_type"), ("controller_workflows", "status")}


def ddl_sets() -> dict[tuple[str, str], set[str]]:
    found = {}
    for table in TABLE.finditer(DDL):
        for column, values in CHECKED_SET.findall(table.group(2)):
            found[(table.group(1), column)] = {v.strip().strip("'") for v in values.split(",")}
    return found


def values_of(code_set: Any) -> set[str]:
    if isinstance(code_set, type) and issubclass(code_set, StrEnum):
        return {member.value for member in code_set}
    return set(get_args(code_set))


def test_the_scanner_finds_the_ddls_closed_sets() -> None:
    sets = ddl_sets()
    assert sets[("effects", "status")] >= {"pending", "applied", "ambiguous"}
    assert len(sets) == len(CODE_SETS) + len(NOT_WRITTEN)


def test_each_closed_set_of_the_ddl_has_the_same_values_in_the_code() -> None:
    sets = ddl_sets()
    assert set(sets) == set(CODE_SETS) | NOT_WRITTEN
    mismatched = {key: (sorted(sets[key]), sorted(values_of(code))) for key, code in
                  CODE_SETS.items() if values_of(code) != sets[key]}
    assert mismatched == {}


def test_every_closed_set_is_a_string_enum() -> None:
    not_enums = sorted(key for key, code in CODE_SETS.items()
                       if not (isinstance(code, type) and issubclass(code, StrEnum)))
    assert not_enums == []


def test_the_narrower_sets_are_members_of_their_enums() -> None:
    narrower = {runs.RunOwner: leases.OwnerType, runs.TerminalStatus: runs.RunStatus}
    for subset, enum in narrower.items():
        members = get_args(subset)
        assert members and all(isinstance(m, enum) for m in members), (subset, enum)
    assert values_of(runs.RunOwner) == {"session", "host"}
    assert values_of(runs.TerminalStatus) == {"completed", "cancelled"}
    # finish_run writes a run's end into its node attempt as well.
    assert values_of(runs.TerminalStatus) <= values_of(runs.AttemptStatus)
