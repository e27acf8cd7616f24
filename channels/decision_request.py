"""The human decision request contract: validation, digests and identity.

A request (`pi-workflows.human-decision-request.v1`) is built once from a node attempt's
choices and prompt and never changes. Its `requestDigest`, `subjectDigest`,
`presentationDigest` and `decisionId` are computed exactly as the TypeScript reference
computes them, so ids and digests match across implementations. Time is passed in as epoch
milliseconds; nothing here reads a clock.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, TypedDict

from channels.digests import digest_canonical, digest_plain, digest_plain_hex, is_digest
from channels.errors import (
    DecisionError,
    ExpiredRequest,
    IncompatibleRequest,
    InvalidRequest,
    InvalidResponse,
    StaleAnswer,
)
from channels.presentation import (
    Presentation,
    has_control_character,
    is_blank,
    normalize_presentation,
    utf16_len,
)
from state.canonical import CanonicalJsonError, JsonValue, canonical_json

SCHEMA = "pi-workflows.human-decision-request.v1"
CHANNEL_SCHEMA = "pi-workflows.human-decision-channel-request.v1"
DEFAULT_MIN_LENGTH = 1
DEFAULT_MAX_LENGTH = 4_000
INCOMPATIBLE_MESSAGE = (
    "Human decision state uses an incompatible alpha contract; "
    "reset the affected workflow run and decision state."
)

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,127}")
_CHANNEL_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,199}")
_MAX_DATE_MS = 8_640_000_000_000_000  # ECMAScript time value range
_MS_PER_DAY = 86_400_000
_ISO_RE = re.compile(
    r"(?P<year>[+-]\d{6}|\d{4})(?:-(?P<month>\d{2})(?:-(?P<day>\d{2})"
    r"(?:T(?P<hour>\d{2}):(?P<minute>\d{2})(?::(?P<second>\d{2})(?:\.(?P<fraction>\d+))?)?"
    r"(?P<zone>Z|[+-]\d{2}:\d{2}))?)?)?"
)
_REQUIRED_FIELDS = (
    "schema", "runId", "workflowName", "nodeId", "attemptId", "audience", "title", "choices",
    "subject", "presentation", "revision", "decisionId", "requestDigest", "subjectDigest",
    "presentationDigest", "createdAt",
)  # fmt: skip


class TextInput(TypedDict):
    """The free-text input a choice may ask for."""

    kind: Literal["text"]
    name: str
    prompt: str
    minLength: int
    maxLength: int


class Choice(TypedDict):
    """One choice: a unique label and an optional text input."""

    label: str
    input: NotRequired[TextInput]


class Response(TypedDict):
    """A validated answer: the choice id and, for an input choice, `{name: text}`."""

    choice: str
    input: NotRequired[dict[str, str]]


class Source(TypedDict):
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
class Submission:
    """A validated human answer ready for arbitration."""

    decision_id: str
    request_digest: str
    response: Response
    source: Source
    idempotency_key: str


# --- Small validators -----------------------------------------------------------------------


def _js_json(value: object) -> str:
    """How `JSON.stringify` shows a value inside an error message."""
    try:
        return canonical_json(value)
    except CanonicalJsonError:
        return repr(value)


def _require_string(value: object, label: str) -> str:
    if not isinstance(value, str) or is_blank(value):
        raise InvalidRequest(f"{label} must be a non-empty string")
    return value


def _require_name(value: object, label: str) -> str:
    text = _require_string(value, label)
    if _NAME_RE.fullmatch(text) is None:
        raise InvalidRequest(f"{label} is invalid")
    return text


def _require_presentable(value: str, label: str) -> None:
    if has_control_character(value):
        raise InvalidRequest(f"{label} contains a control character")


def _as_integer(value: object) -> int | None:
    """The value as an int when JavaScript's `Number.isInteger` would accept it."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _json_copy(value: Any) -> Any:
    """A deep copy of JSON data as dicts and lists, keeping key order."""
    if isinstance(value, Mapping):
        return {key: _json_copy(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_json_copy(item) for item in value]
    return value


def validate_audience(value: object) -> str:
    """An audience name matching `^[A-Za-z_][A-Za-z0-9_-]{0,127}$`."""
    return _require_name(value, "Human decision audience")


def validate_title(value: object) -> str:
    """A title that is non-empty after trimming and has no control character, kept untrimmed."""
    title = _require_string(value, "Human decision title")
    _require_presentable(title, "Human decision title")
    return title


# --- Choices ------------------------------------------------------------------------------


def text_input(
    name: str,
    prompt: str,
    min_length: int = DEFAULT_MIN_LENGTH,
    max_length: int = DEFAULT_MAX_LENGTH,
) -> TextInput:
    """A text input definition with the reference defaults (1 through 4000 code units)."""
    name = _require_name(name, "Human decision text input name")
    prompt = _require_string(prompt, "Human decision text input prompt")
    minimum, maximum = _as_integer(min_length), _as_integer(max_length)
    if minimum is None or minimum < 0:
        raise InvalidRequest("Human decision text input minLength must be a non-negative integer")
    if maximum is None or maximum < 1 or maximum < minimum:
        raise InvalidRequest(
            "Human decision text input maxLength must be a positive integer at least minLength"
        )
    return TextInput(kind="text", name=name, prompt=prompt, minLength=minimum, maxLength=maximum)


def validate_choices(value: object) -> dict[str, Choice]:
    """A copy of a valid, non-empty, ordered choice map (extra choice keys are kept)."""
    if not isinstance(value, Mapping):
        raise InvalidRequest("Human decision choices must be an object")
    if len(value) == 0:
        raise InvalidRequest("Human decision choices must not be empty")
    labels: set[str] = set()
    for key, definition in value.items():
        if not isinstance(key, str) or _NAME_RE.fullmatch(key) is None:
            raise InvalidRequest(f"Human decision choice {_js_json(key)} is invalid")
        label = _validate_choice(definition, f"Human decision choice {key}")
        if label in labels:
            raise InvalidRequest(f"Human decision choice label {_js_json(label)} is duplicated")
        labels.add(label)
    choices: dict[str, Choice] = _json_copy(value)
    return choices


def _validate_choice(value: object, label: str) -> str:
    if not isinstance(value, Mapping):
        raise InvalidRequest(f"{label} must be an object")
    choice_label = _require_string(value.get("label"), f"{label} label")
    _require_presentable(choice_label, f"{label} label")
    if "input" in value:
        _validate_text_input(value["input"], f"{label} input")
    return choice_label


def _validate_text_input(value: object, label: str) -> None:
    if not isinstance(value, Mapping):
        raise InvalidRequest(f"{label} must be an object")
    if value.get("kind") != "text":
        raise InvalidRequest(f"{label} kind must be text")
    _require_name(value.get("name"), f"{label} name")
    prompt = _require_string(value.get("prompt"), f"{label} prompt")
    _require_presentable(prompt, f"{label} prompt")
    minimum = _as_integer(value.get("minLength"))
    maximum = _as_integer(value.get("maxLength"))
    if minimum is None or minimum < 0:
        raise InvalidRequest(f"{label} minLength must be a non-negative integer")
    if maximum is None or maximum < 1 or maximum < minimum:
        raise InvalidRequest(f"{label} maxLength is invalid")


# --- Responses ----------------------------------------------------------------------------


def validate_response(choices: Mapping[str, Choice], value: object) -> Response:
    """The normalized response for `choices`; input text is kept exactly as given."""
    if not isinstance(value, Mapping):
        raise InvalidResponse("Human decision response must be an object")
    selected = value.get("choice")
    if not isinstance(selected, str) or selected not in choices:
        shown = "undefined" if "choice" not in value else _js_json(selected)
        raise InvalidResponse(f"Human decision choice {shown} is not available")
    definition = choices[selected].get("input")
    if definition is None:
        if "input" in value:
            raise InvalidResponse(f"Human decision choice {selected} does not accept input")
        return Response(choice=selected)
    text = _validate_input(value.get("input"), selected, definition)
    return Response(choice=selected, input={definition["name"]: text})


def _validate_input(value: object, selected: str, definition: TextInput) -> str:
    label = f"Human decision choice {selected} input"
    if not isinstance(value, Mapping):
        raise InvalidResponse(f"{label} must be an object")
    name = definition["name"]
    if list(value) != [name]:
        raise InvalidResponse(f"{label} must contain only {name}")
    text = value[name]
    if not isinstance(text, str):
        raise InvalidResponse(f"{label} must be text")
    minimum, maximum = definition["minLength"], definition["maxLength"]
    if not minimum <= utf16_len(text) <= maximum:
        raise InvalidResponse(f"{label} length must be {minimum} through {maximum}")
    return text


# --- Time ---------------------------------------------------------------------------------


def _days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 in the proleptic Gregorian calendar."""
    year -= month <= 2
    era = year // 400
    year_of_era = year - era * 400
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146_097 + day_of_era - 719_468


def _civil_from_days(days: int) -> tuple[int, int, int]:
    days += 719_468
    era = days // 146_097
    day_of_era = days - era * 146_097
    year_of_era = (
        day_of_era - day_of_era // 1460 + day_of_era // 36_524 - day_of_era // 146_096
    ) // 365
    day_of_year = day_of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    shifted_month = (5 * day_of_year + 2) // 153
    day = day_of_year - (153 * shifted_month + 2) // 5 + 1
    month = shifted_month + (3 if shifted_month < 10 else -9)
    return year_of_era + era * 400 + (month <= 2), month, day


def iso_from_ms(ms: int) -> str:
    """JavaScript `new Date(ms).toISOString()`, e.g. `2026-08-19T00:00:00.000Z`."""
    if abs(ms) > _MAX_DATE_MS:
        raise ValueError(f"{ms} ms is outside the JavaScript date range")
    days, rest = divmod(ms, _MS_PER_DAY)
    year, month, day = _civil_from_days(days)
    seconds, millis = divmod(rest, 1000)
    clock = f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}.{millis:03d}Z"
    shown_year = (
        f"{year:04d}" if 0 <= year <= 9999 else f"{'+' if year > 0 else '-'}{abs(year):06d}"
    )
    return f"{shown_year}-{month:02d}-{day:02d}T{clock}"


def ms_from_iso(text: str) -> int:
    """Epoch milliseconds of an ISO 8601 timestamp; a time of day needs `Z` or an offset."""
    match = _ISO_RE.fullmatch(text)
    if match is None or match["year"] == "-000000":
        raise ValueError(f"{text!r} is not an ISO timestamp")
    year, month, day = int(match["year"]), int(match["month"] or 1), int(match["day"] or 1)
    hour, minute = int(match["hour"] or 0), int(match["minute"] or 0)
    second = int(match["second"] or 0)
    millis = int((match["fraction"] or "0")[:3].ljust(3, "0"))
    if not _valid_date(year, month, day) or not _valid_clock(hour, minute, second, millis):
        raise ValueError(f"{text!r} is not a valid date")
    offset = _zone_minutes(match["zone"])
    clock_ms = ((hour * 60 + minute - offset) * 60 + second) * 1000 + millis
    ms = _days_from_civil(year, month, day) * _MS_PER_DAY + clock_ms
    if abs(ms) > _MAX_DATE_MS:
        raise ValueError(f"{text!r} is outside the JavaScript date range")
    return ms


def _valid_date(year: int, month: int, day: int) -> bool:
    if not 1 <= month <= 12:
        return False
    following = (year + 1, 1) if month == 12 else (year, month + 1)
    length = _days_from_civil(*following, 1) - _days_from_civil(year, month, 1)
    return 1 <= day <= length


def _valid_clock(hour: int, minute: int, second: int, millis: int) -> bool:
    if hour == 24:
        return minute == second == millis == 0
    return hour < 24 and minute < 60 and second < 60


def _zone_minutes(zone: str | None) -> int:
    if zone is None or zone == "Z":
        return 0
    hours, minutes = int(zone[1:3]), int(zone[4:6])
    if hours > 23 or minutes > 59:
        raise ValueError(f"{zone!r} is not a UTC offset")
    sign = -1 if zone[0] == "-" else 1
    return sign * (hours * 60 + minutes)


# --- Deadline -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Deadline:
    """When a request expires and what it resolves to then; both None to wait indefinitely."""

    expires_at: str | None
    default_response: Response | None


def resolve_deadline(
    choices: Mapping[str, Choice],
    created_at_ms: int,
    on_timeout: OnTimeout | None,
    expires_at: str | None,
) -> Deadline:
    """The deadline from `on_timeout` or an explicit `expires_at` (never both)."""
    if on_timeout is not None and expires_at is not None:
        raise InvalidRequest("Human decision request cannot combine expiresAt with onTimeout")
    if on_timeout is not None:
        return _timeout_deadline(choices, created_at_ms, on_timeout)
    if expires_at is not None:
        return Deadline(_explicit_expiry(expires_at, created_at_ms), None)
    return Deadline(None, None)


def _timeout_deadline(
    choices: Mapping[str, Choice], created_at_ms: int, on_timeout: OnTimeout
) -> Deadline:
    after_ms = on_timeout.after_ms
    if not _is_number(after_ms) or not math.isfinite(after_ms) or after_ms <= 0:
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
        return Deadline(iso_from_ms(expires_ms), default)
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


# --- Building and reading requests --------------------------------------------------------


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
    valid_title = validate_title(title)
    created_at = _created_at(created_at_ms)
    deadline = resolve_deadline(valid_choices, created_at_ms, on_timeout, expires_at)
    ids = {
        "runId": _require_string(run_id, "Human decision runId"),
        "workflowName": _require_string(workflow_name, "Human decision workflowName"),
        "nodeId": _require_string(node_id, "Human decision nodeId"),
        "attemptId": _require_string(attempt_id, "Human decision attemptId"),
    }
    valid_audience = validate_audience(audience)
    basis: dict[str, Any] = {
        "schema": SCHEMA,
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
    created = _as_integer(created_at_ms)
    if created is None:
        raise InvalidRequest("Human decision createdAt must be an integer of epoch milliseconds")
    try:
        return iso_from_ms(created)
    except ValueError as exc:
        raise InvalidRequest("Human decision createdAt is out of range") from exc


def _deadline_fields(deadline: Deadline) -> dict[str, Any]:
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
    return _json_copy(subject)


def _validate_revision(revision: object) -> int:
    valid = _as_integer(revision)
    if valid is None or valid < 1:
        raise InvalidRequest("Human decision revision must be a positive integer")
    return valid


def request_digest_basis(document: Mapping[str, Any]) -> dict[str, Any]:
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


def decision_id_for(run_id: str, node_id: str, attempt_id: str, request_digest: str) -> str:
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
    decision_id = decision_id_for(
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


def load_request(document: Mapping[str, Any]) -> DecisionRequest:
    """Check a stored request document against its digests and return it as a record."""
    if document.get("schema") != SCHEMA or any(key not in document for key in _REQUIRED_FIELDS):
        raise IncompatibleRequest(INCOMPATIBLE_MESSAGE)
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
    if decision_id_for(*ids, digests["request"]) != document["decisionId"]:
        raise IncompatibleRequest("Human decision id does not match its durable request")
    return DecisionRequest(
        document=_json_copy(document),
        decision_id=document["decisionId"],
        request_digest=digests["request"],
        subject_digest=digests["subject"],
        presentation_digest=digests["presentation"],
        created_at_ms=created_at_ms,
        expires_at_ms=expires_at_ms,
    )


def _recomputed_digests(document: Mapping[str, Any]) -> dict[str, str]:
    """Subject, presentation and request digests as the reference recomputes them on read."""
    presentation: Presentation = normalize_presentation(document["presentation"])
    basis = {**request_digest_basis(document), "presentation": presentation}
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


# --- Answers ------------------------------------------------------------------------------


def validate_submission(
    request: DecisionRequest,
    *,
    decision_id: str,
    request_digest: str,
    response: object,
    source: object,
    idempotency_key: object,
    now_ms: int,
) -> Submission:
    """Check a human answer against its request at `now_ms` and normalize it."""
    if decision_id != request.decision_id or request_digest != request.request_digest:
        raise StaleAnswer("Human decision answer is stale or belongs to another request")
    if request.expires_at_ms is not None and request.expires_at_ms <= now_ms:
        raise ExpiredRequest("Human decision request has expired")
    valid_response = validate_response(request.choices, response)
    return Submission(
        decision_id=request.decision_id,
        request_digest=request.request_digest,
        response=valid_response,
        source=validate_source(source),
        idempotency_key=_require_answer_text(idempotency_key, "Human decision idempotency key"),
    )


def validate_source(value: object) -> Source:
    """A source with a channel id matching the channel pattern and non-empty actor and event."""
    if not isinstance(value, Mapping):
        raise InvalidResponse("Human decision source must be an object")
    channel = _require_answer_text(value.get("channel"), "Human decision channel")
    if _CHANNEL_RE.fullmatch(channel) is None:
        raise InvalidResponse("Human decision channel is invalid")
    return Source(
        channel=channel,
        actorId=_require_answer_text(value.get("actorId"), "Human decision actor"),
        eventId=_require_answer_text(value.get("eventId"), "Human decision event"),
    )


def _require_answer_text(value: object, label: str) -> str:
    if not isinstance(value, str) or is_blank(value):
        raise InvalidResponse(f"{label} must be a non-empty string")
    return value


def answer_digest(response: Response, source: Source) -> str:
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
