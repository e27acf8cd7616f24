"""The human-decision request contract: building, identifying and re-verifying requests.

Follows reference-facts.md sections 0-2: decision ids, request digests, the channel request
document and submissions. Pure functions over values.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from channels.decisions.choices import Choice, Response, validate_choices, validate_response
from channels.decisions.dates import iso_from_ms, ms_from_iso
from channels.decisions.digests import digest_canonical, digest_plain, digest_plain_hex, is_digest
from channels.decisions.errors import (
    DecisionError,
    ExpiredRequest,
    IncompatibleRequest,
    InvalidRequest,
    InvalidResponse,
    StaleAnswer,
)
from channels.decisions.fields import (
    CHANNEL_RE,
    as_integer,
    is_number,
    json_copy,
    require_name,
    require_presentable,
    require_string,
)
from channels.decisions.presentation import Presentation, normalize_presentation
from channels.text import is_blank
from state.canonical import CanonicalJsonError, JsonValue, canonical_json

__all__ = [
    "CHANNEL_SCHEMA", "INCOMPATIBLE_MESSAGE", "DecisionRequest", "OnTimeout", "answer_digest",
    "build_request", "channel_request_document", "human_attempt_id", "load_request",
    "timeout_answer_digest", "validate_source", "validate_submission",
]


_SCHEMA = "pi-workflows.human-decision-request.v1"

CHANNEL_SCHEMA = "pi-workflows.human-decision-channel-request.v1"

INCOMPATIBLE_MESSAGE = (
    "Human decision state uses an incompatible alpha contract; "
    "reset the affected workflow run and decision state."
)

_REQUIRED_FIELDS = (
    "schema", "runId", "workflowName", "nodeId", "attemptId", "audience", "title", "choices",
    "subject", "presentation", "revision", "decisionId", "requestDigest", "subjectDigest",
    "presentationDigest", "createdAt",
)  # fmt: skip


class _Source(TypedDict):
    """Who answered, through which channel, in which event."""

    channel: str
    actorId: str
    eventId: str


@dataclass(frozen=True, slots=True)
class OnTimeout:
    """Resolve with `response` once `after_ms` have passed since creation."""

    after_ms: float
    response: Mapping[str, Any]

    @classmethod
    def from_json(cls, value: object) -> OnTimeout:
        """An `{afterMs, response}` object as an OnTimeout (values are checked when used)."""
        if not isinstance(value, Mapping) or "afterMs" not in value or "response" not in value:
            raise InvalidRequest(
                "Human decision onTimeout must be an object with afterMs and response"
            )
        return cls(after_ms=value["afterMs"], response=value["response"])


@dataclass(frozen=True, slots=True)
class DecisionRequest:
    """An immutable request document with its identity and deadlines in epoch milliseconds."""

    document: dict[str, Any]
    decision_id: str
    request_digest: str
    subject_digest: str
    presentation_digest: str
    created_at_ms: int
    expires_at_ms: int | None

    @property
    def choices(self) -> dict[str, Choice]:
        """The ordered choice map."""
        choices: dict[str, Choice] = self.document["choices"]
        return choices

    @property
    def default_response(self) -> Response | None:
        """The timeout default, when the request has one."""
        default: Response | None = self.document.get("defaultResponse")
        return default


@dataclass(frozen=True, slots=True)
class _Submission:
    """A validated human answer ready for arbitration."""

    decision_id: str
    request_digest: str
    response: Response
    source: _Source
    idempotency_key: str


def _validate_audience(value: object) -> str:
    """An audience name matching `^[A-Za-z_][A-Za-z0-9_-]{0,127}$`."""
    return require_name(value, "Human decision audience")


def _validate_title(value: object) -> str:
    """A title that is non-empty after trimming and has no control character, kept untrimmed."""
    title = require_string(value, "Human decision title")
    require_presentable(title, "Human decision title")
    return title


@dataclass(frozen=True, slots=True)
class _Deadline:
    """When a request expires and what it resolves to then; both None to wait indefinitely."""

    expires_at: str | None
    default_response: Response | None


def _resolve_deadline(
    choices: Mapping[str, Choice],
    created_at_ms: int,
    on_timeout: OnTimeout | None,
    expires_at: str | None,
) -> _Deadline:
    """The deadline from `on_timeout` or an explicit `expires_at` (never both)."""
    if on_timeout is not None and expires_at is not None:
        raise InvalidRequest("Human decision request cannot combine expiresAt with onTimeout")
    if on_timeout is not None:
        return _timeout_deadline(choices, created_at_ms, on_timeout)
    if expires_at is not None:
        return _Deadline(_explicit_expiry(expires_at, created_at_ms), None)
    return _Deadline(None, None)


def _timeout_deadline(
    choices: Mapping[str, Choice], created_at_ms: int, on_timeout: OnTimeout
) -> _Deadline:
    after_ms = on_timeout.after_ms
    if not is_number(after_ms) or not math.isfinite(after_ms) or after_ms <= 0:
        raise InvalidRequest("Human decision onTimeout afterMs must be a finite positive number")
    try:
        default = validate_response(choices, on_timeout.response)
    except InvalidResponse as exc:
        raise InvalidRequest(str(exc)) from exc
    if isinstance(after_ms, int):
        expires_ms = created_at_ms + after_ms
    else:  # the reference adds in doubles and `new Date` truncates toward zero
        expires_ms = math.trunc(created_at_ms + after_ms)
    try:
        return _Deadline(iso_from_ms(expires_ms), default)
    except ValueError as exc:
        raise InvalidRequest("Human decision onTimeout afterMs is out of range") from exc


def _explicit_expiry(expires_at: object, created_at_ms: int) -> str:
    try:
        parsed = ms_from_iso(expires_at) if isinstance(expires_at, str) else None
    except ValueError:
        parsed = None
    if parsed is None:
        raise InvalidRequest("Human decision expiry must be an ISO timestamp")
    if parsed <= created_at_ms:
        raise InvalidRequest("Human decision expiry must be after creation")
    return iso_from_ms(parsed)


def build_request(
    *,
    run_id: str,
    workflow_name: str,
    node_id: str,
    attempt_id: str,
    audience: str,
    choices: Mapping[str, Any],
    title: str,
    subject: JsonValue,
    presentation: Mapping[str, Any],
    created_at_ms: int,
    revision: int = 1,
    on_timeout: OnTimeout | None = None,
    expires_at: str | None = None,
) -> DecisionRequest:
    """Validate a new request and compute its document, digests and decision id."""
    valid_choices = validate_choices(choices)
    valid_title = _validate_title(title)
    created_at = _created_at(created_at_ms)
    deadline = _resolve_deadline(valid_choices, created_at_ms, on_timeout, expires_at)
    ids = {
        "runId": require_string(run_id, "Human decision runId"),
        "workflowName": require_string(workflow_name, "Human decision workflowName"),
        "nodeId": require_string(node_id, "Human decision nodeId"),
        "attemptId": require_string(attempt_id, "Human decision attemptId"),
    }
    valid_audience = _validate_audience(audience)
    basis: dict[str, Any] = {
        "schema": _SCHEMA,
        **ids,
        "audience": valid_audience,
        "title": valid_title,
        "choices": valid_choices,
        **_deadline_fields(deadline),
        "subject": _validate_subject(subject),
        "presentation": normalize_presentation(presentation),
        "revision": _validate_revision(revision),
    }
    return _identify(basis, created_at)


def _created_at(created_at_ms: int) -> str:
    created = as_integer(created_at_ms)
    if created is None:
        raise InvalidRequest("Human decision createdAt must be an integer of epoch milliseconds")
    try:
        return iso_from_ms(created)
    except ValueError as exc:
        raise InvalidRequest("Human decision createdAt is out of range") from exc


def _deadline_fields(deadline: _Deadline) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    if deadline.expires_at is not None:
        fields["expiresAt"] = deadline.expires_at
    if deadline.default_response is not None:
        fields["defaultResponse"] = deadline.default_response
    return fields


def _validate_subject(subject: JsonValue) -> JsonValue:
    try:
        canonical_json(subject)
    except (CanonicalJsonError, RecursionError) as exc:
        raise InvalidRequest("Human decision subject must be JSON-serializable") from exc
    return json_copy(subject)


def _validate_revision(revision: object) -> int:
    valid = as_integer(revision)
    if valid is None or valid < 1:
        raise InvalidRequest("Human decision revision must be a positive integer")
    return valid


def _request_digest_basis(document: Mapping[str, Any]) -> dict[str, Any]:
    """The fields hashed into `requestDigest` (no id, digests or createdAt)."""
    basis = {
        key: document[key]
        for key in ("schema", "runId", "workflowName", "nodeId", "attemptId", "audience")
    }
    basis["title"] = document["title"]
    basis["choices"] = document["choices"]
    for key in ("expiresAt", "defaultResponse"):
        if key in document:
            basis[key] = document[key]
    for key in ("subject", "presentation", "revision"):
        basis[key] = document[key]
    return basis


def _decision_id_for(run_id: str, node_id: str, attempt_id: str, request_digest: str) -> str:
    """`decision-` + the first 40 hex of the B-digest of the attempt and request digest."""
    identity = {
        "runId": run_id,
        "nodeId": node_id,
        "attemptId": attempt_id,
        "requestDigest": request_digest,
    }
    return "decision-" + digest_plain_hex(identity)[:40]


def _identify(basis: dict[str, Any], created_at: str) -> DecisionRequest:
    request_digest = digest_canonical(basis)
    subject_digest = digest_canonical(basis["subject"])
    presentation_digest = digest_canonical(basis["presentation"])
    decision_id = _decision_id_for(
        basis["runId"], basis["nodeId"], basis["attemptId"], request_digest
    )
    document = {
        **basis,
        "decisionId": decision_id,
        "requestDigest": request_digest,
        "subjectDigest": subject_digest,
        "presentationDigest": presentation_digest,
        "createdAt": created_at,
    }
    expires_at = basis.get("expiresAt")
    return DecisionRequest(
        document=document,
        decision_id=decision_id,
        request_digest=request_digest,
        subject_digest=subject_digest,
        presentation_digest=presentation_digest,
        created_at_ms=ms_from_iso(created_at),
        expires_at_ms=None if expires_at is None else ms_from_iso(expires_at),
    )


def load_request(document: Mapping[str, Any], stored: object = None) -> DecisionRequest:
    """Check a stored request document against its digests and return it as a record.
    `stored`: what the document was read from (its bytes), when the caller has them: a
    document whose bytes were checked already is not canonicalized and hashed again (a press
    reads its decision three times; the check is a function of the bytes alone)."""
    if document.get("schema") != _SCHEMA or any(key not in document for key in _REQUIRED_FIELDS):
        raise IncompatibleRequest(INCOMPATIBLE_MESSAGE)
    checked = None if stored is None else _CHECKED.get(stored)
    if checked is None:
        checked = _checked(document)
        if stored is not None:
            if len(_CHECKED) >= _CHECKED_MAX:
                _CHECKED.clear()
            _CHECKED[stored] = checked
    digests, created_at_ms, expires_at_ms = checked
    return DecisionRequest(
        document=json_copy(document),
        decision_id=document["decisionId"],
        request_digest=digests["request"],
        subject_digest=digests["subject"],
        presentation_digest=digests["presentation"],
        created_at_ms=created_at_ms,
        expires_at_ms=expires_at_ms,
    )


# Stored request bytes whose check passed -> (digests, created at, expires at), bounded.
_CHECKED: dict[object, tuple[dict[str, str], int, int | None]] = {}
_CHECKED_MAX = 256


def _checked(document: Mapping[str, Any]) -> tuple[dict[str, str], int, int | None]:
    """The document's digests recomputed and compared, and its times; IncompatibleRequest
    when they do not match."""
    try:
        digests = _recomputed_digests(document)
        created_at_ms = ms_from_iso(document["createdAt"])
        expires_at = document.get("expiresAt")
        expires_at_ms = None if expires_at is None else ms_from_iso(expires_at)
    except (DecisionError, CanonicalJsonError, ValueError, TypeError) as exc:
        raise IncompatibleRequest(INCOMPATIBLE_MESSAGE) from exc
    for name, computed in digests.items():
        if computed != document[f"{name}Digest"]:
            raise IncompatibleRequest(
                f"Human decision {name} digest does not match its durable request"
            )
    ids = (document["runId"], document["nodeId"], document["attemptId"])
    if _decision_id_for(*ids, digests["request"]) != document["decisionId"]:
        raise IncompatibleRequest("Human decision id does not match its durable request")
    return digests, created_at_ms, expires_at_ms


def _recomputed_digests(document: Mapping[str, Any]) -> dict[str, str]:
    """Subject, presentation and request digests as the reference recomputes them on read."""
    presentation: Presentation = normalize_presentation(document["presentation"])
    basis = {**_request_digest_basis(document), "presentation": presentation}
    return {
        "subject": digest_canonical(document["subject"]),
        "presentation": digest_canonical(presentation),
        "request": digest_canonical(basis),
    }


def channel_request_document(request: DecisionRequest) -> dict[str, Any]:
    """The channel view of a request: no subject or subject digest, plus `sourceSchema`."""
    doc = request.document
    channel: dict[str, Any] = {"schema": CHANNEL_SCHEMA, "sourceSchema": doc["schema"]}
    for key in (
        "decisionId", "requestDigest", "runId", "workflowName", "nodeId", "attemptId",
        "audience", "title", "presentation", "presentationDigest", "revision", "choices",
        "createdAt",
    ):  # fmt: skip
        channel[key] = doc[key]
    for key in ("expiresAt", "defaultResponse"):
        if key in doc:
            channel[key] = doc[key]
    return channel


def validate_submission(
    request: DecisionRequest,
    *,
    decision_id: str,
    request_digest: str,
    response: object,
    source: object,
    idempotency_key: object,
    now_ms: int,
) -> _Submission:
    """Check a human answer against its request at `now_ms` and normalize it."""
    if decision_id != request.decision_id or request_digest != request.request_digest:
        raise StaleAnswer("Human decision answer is stale or belongs to another request")
    if request.expires_at_ms is not None and request.expires_at_ms <= now_ms:
        raise ExpiredRequest("Human decision request has expired")
    valid_response = validate_response(request.choices, response)
    return _Submission(
        decision_id=request.decision_id,
        request_digest=request.request_digest,
        response=valid_response,
        source=validate_source(source),
        idempotency_key=_require_answer_text(idempotency_key, "Human decision idempotency key"),
    )


def validate_source(value: object) -> _Source:
    """A source with a channel id matching the channel pattern and non-empty actor and event."""
    if not isinstance(value, Mapping):
        raise InvalidResponse("Human decision source must be an object")
    channel = _require_answer_text(value.get("channel"), "Human decision channel")
    if CHANNEL_RE.fullmatch(channel) is None:
        raise InvalidResponse("Human decision channel is invalid")
    return _Source(
        channel=channel,
        actorId=_require_answer_text(value.get("actorId"), "Human decision actor"),
        eventId=_require_answer_text(value.get("eventId"), "Human decision event"),
    )


def _require_answer_text(value: object, label: str) -> str:
    if not isinstance(value, str) or is_blank(value):
        raise InvalidResponse(f"{label} must be a non-empty string")
    return value


def answer_digest(response: Response, source: _Source) -> str:
    """The human answer digest: B-digest of `{response, source}`."""
    return digest_plain({"response": response, "source": source})


def timeout_answer_digest(request_digest: str, response: Response) -> str:
    """The timeout answer digest: B-digest of `{provenance, requestDigest, response}`."""
    if not is_digest(request_digest):
        raise InvalidRequest("Human decision requestDigest must be a sha256 digest")
    return digest_plain(
        {"provenance": "timeout", "requestDigest": request_digest, "response": response}
    )


def human_attempt_id(decision_id: str, idempotency_key: str) -> str:
    """The answer attempt id: the first 40 hex of the B-digest of `{decisionId, idempotencyKey}`."""
    return digest_plain_hex({"decisionId": decision_id, "idempotencyKey": idempotency_key})[:40]
