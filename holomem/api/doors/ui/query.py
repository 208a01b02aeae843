"""Every query parameter and form field an inspector page takes, checked before any
store is read: a bad one is a 400 page that names it, never a 500.

Owns: :class:`BadInput`, the moment a page answers at (:class:`Moment`: ``asOf`` and
``knownAt``), the bounds of a page (:data:`MAX_PAGE`, the longest text a field takes),
the facts page's filter (:class:`Listing`) and its mapping to a forget scope, and the
sort orders a page of facts takes. Imports the memory API's checks (times,
namespaces) and errors.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from holomem.api.doors import jsontext
from holomem.api.engine import validate
from holomem.errors import HolomemError

#: The most facts one page shows (a list page or a search).
MAX_PAGE = 200
#: Facts per page when the page names no ``limit``.
DEFAULT_PAGE = 50
#: The longest value one parameter may hold (a filter's JSON, a query, an id).
MAX_FIELD = 8192
#: The statuses a fact can have (docs/contract.md §4), for the status filter.
STATUSES = ("current", "superseded", "expired", "not-yet-valid")
#: The columns a page of facts sorts by: its name in a URL -> the record's field.
SORTS = {"status": "status", "subject": "subject", "namespace": "namespace",
         "speaker": "speaker", "ingested": "ingestTime", "valid": "validFrom",
         "event": "eventTime", "score": "score"}


#: Milliseconds as a person types them: ASCII digits, perhaps after a minus (``str.isdigit``
#: also takes "²", which ``int`` does not).
_MILLISECONDS = re.compile(r"-?[0-9]+")


class BadInput(Exception):
    """A parameter a page cannot take; the message names it (a 400 page)."""


def text(params: Mapping[str, str], name: str, default: str = "") -> str:
    """Parameter ``name``, stripped, at most :data:`MAX_FIELD` characters."""
    value = params.get(name, default)
    if len(value) > MAX_FIELD:
        raise BadInput(f"{name} is over {MAX_FIELD} characters")
    return value.strip()


def time_ms(value: str, name: str) -> int | None:
    """A time a person types: milliseconds since the epoch, or ISO 8601 (a date, a date
    and time; no offset means UTC). Empty: None."""
    if not value:
        return None
    if _MILLISECONDS.fullmatch(value):
        try:
            given: int | str = int(value)
        except ValueError:  # more digits than int() reads (4,300): no time anyway
            raise BadInput(f"{name}: {value[:20]}... is not a time") from None
    else:
        given = value
    try:
        return validate.to_ms(given, name)
    except HolomemError as exc:
        raise BadInput(f"{name}: {exc.message} (give e.g. 2025-01-31, 2025-01-31T09:30 "
                       "(UTC) or milliseconds since 1970)") from exc


class Moment(NamedTuple):
    """The moment a page answers at: every status at ``as_of`` (None: now), knowing only
    what was ingested by ``known_at`` (None: everything)."""

    as_of: int | None
    known_at: int | None

    def request(self) -> dict[str, int]:
        """The contract's fields for it (those given)."""
        out = {}
        if self.as_of is not None:
            out["asOf"] = self.as_of
        if self.known_at is not None:
            out["knownAt"] = self.known_at
        return out


def moment(params: Mapping[str, str]) -> Moment:
    return Moment(time_ms(text(params, "asOf"), "as of"),
                  time_ms(text(params, "knownAt"), "known at"))


def namespace(value: str, name: str = "namespace") -> list[str] | None:
    """``a/b`` (or a JSON array, for parts holding a ``/``) as a namespace; empty: None."""
    if not value:
        return None
    if value.startswith("["):
        try:
            parts = jsontext.loads(value)
        except ValueError as exc:
            raise BadInput(f"{name}: not a JSON array of strings") from exc
    else:
        parts = value.strip("/").split("/")
    try:
        return list(validate.namespace(parts, name))
    except HolomemError as exc:
        raise BadInput(exc.message) from exc


def json_object(value: str, name: str) -> dict[str, Any] | None:
    if not value:
        return None
    try:
        parsed = jsontext.loads(value)
    except ValueError as exc:
        raise BadInput(f"{name}: not JSON ({exc})") from exc
    if not isinstance(parsed, dict):
        raise BadInput(f"{name} must be a JSON object, e.g. {{\"source\": \"chat\"}}")
    return parsed


def page_size(params: Mapping[str, str]) -> int:
    raw = text(params, "limit")
    if not raw:
        return DEFAULT_PAGE
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 4 and 1 <= int(raw) <= MAX_PAGE):
        raise BadInput(f"limit must be a whole number from 1 to {MAX_PAGE}")
    return int(raw)


def sort(params: Mapping[str, str], default: str = "") -> tuple[str, bool]:
    """The column a page is sorted by ("" : as the store gives it) and whether
    descending."""
    column = text(params, "sort", default)
    if column and column not in SORTS:
        raise BadInput(f"sort must be one of {', '.join(SORTS)}")
    order = text(params, "order", "asc")
    if order not in ("asc", "desc"):
        raise BadInput("order must be asc or desc")
    return column, order == "desc"


class Listing(NamedTuple):
    """The facts page's choice of facts: which ones, how many, sorted how."""

    namespace: list[str] | None
    subject: str
    status: str
    metadata: dict[str, Any] | None
    filter: dict[str, Any] | None
    query: str
    limit: int
    cursor: str
    sort: str
    descending: bool

    def list_request(self, moment: Moment) -> dict[str, Any]:
        """The ``list`` request of this page."""
        req: dict[str, Any] = {"limit": self.limit, **moment.request()}
        flt = self.combined()
        if self.status:
            flt["status"] = self.status
        if flt:
            req["filter"] = flt
        if self.namespace is not None:
            req["namespace"] = self.namespace
        if self.cursor:
            req["cursor"] = self.cursor
        return req

    def recall_request(self, moment: Moment) -> dict[str, Any]:
        """The ``recall`` request of this page's search box: every status unless one is
        asked for. Recall's ``history`` takes the facts of that status: ``current``, or
        ``historical`` (every status but current) for the others, which the page then
        narrows to the one asked for; so the ``k`` results are all of the statuses the
        page may show, and none is crowded out by facts it would drop."""
        history = {"": "all", "current": "current"}.get(self.status, "historical")
        req: dict[str, Any] = {"query": self.query, "k": self.limit, **moment.request(),
                               "history": history}
        flt = self.combined()
        if self.subject:
            req["subject"] = self.subject
            flt.pop("subject", None)
        if flt:
            req["filter"] = flt
        if self.namespace is not None:
            req["namespace"] = self.namespace
        return req

    def combined(self) -> dict[str, Any]:
        """The filter object: the filter box, with the subject and metadata fields. Both
        must hold, and neither replaces the other: the metadata field is the box's
        ``metadata`` clause when the box has none, else one more clause beside it
        (``$and``, with the box's own ``$and`` nested in it), which the contract checks
        as it checks the box. Errors: :class:`BadInput` (the subject or the status named
        both in its field and in the box)."""
        flt: dict[str, Any] = dict(self.filter or {})
        for name, field in (("subject", self.subject), ("status", self.status)):
            if field and name in flt:
                raise BadInput(f"filter: give the {name} in its own field or in the "
                               "filter box, not both")
        if self.subject:
            flt["subject"] = self.subject
        if self.metadata is not None:
            if "metadata" not in flt:
                flt["metadata"] = self.metadata
            else:
                clauses: list[Any] = [{"metadata": self.metadata}]
                if "$and" in flt:
                    clauses.append({"$and": flt["$and"]})
                flt["$and"] = clauses
        return flt

    def forget_scope(self) -> tuple[dict[str, Any], list[str] | None]:
        """The forget scope that removes exactly the facts this filter lists (whatever
        their status), and its ``within``. Errors: :class:`BadInput` (a filter no one
        forget scope says: forget takes a subject, a metadata match or a namespace)."""
        if self.status or self.filter or self.query:
            raise BadInput("forget takes a subject, a metadata match or a namespace: "
                           "clear the status, the filter box and the search first")
        if self.subject and self.metadata is not None:
            raise BadInput("forget takes one scope: a subject or a metadata match, not both")
        if self.subject:
            return {"subject": self.subject}, self.namespace
        if self.metadata is not None:
            if any(isinstance(v, dict) for v in self.metadata.values()):
                raise BadInput("forget matches metadata by plain values only (no $ "
                               "operators)")
            return {"metadata": self.metadata}, self.namespace
        if self.namespace is not None:
            return {"namespace": self.namespace}, None
        raise BadInput("choose a subject, a metadata match or a namespace to forget by")


def listing(params: Mapping[str, str]) -> Listing:
    status = text(params, "status")
    if status and status not in STATUSES:
        raise BadInput(f"status must be one of {', '.join(STATUSES)}")
    subject = text(params, "subject")
    if subject:
        try:
            validate.doc_id(subject, "subject")
        except HolomemError as exc:
            raise BadInput(exc.message) from exc
    query = text(params, "q")
    column, descending = sort(params)
    return Listing(namespace(text(params, "namespace")), subject, status,
                   json_object(text(params, "metadata"), "metadata"),
                   json_object(text(params, "filter"), "filter"), query,
                   page_size(params), text(params, "cursor"), column, descending)


def sort_key(column: str) -> Any:
    """A key that sorts records (dicts as the contract gives them) by ``column``, with
    missing values last."""
    field = SORTS[column]

    def key(record: Mapping[str, Any]) -> tuple[int, Any]:
        value = record.get(field)
        if isinstance(value, list):
            value = "/".join(value)
        return (1, "") if value is None else (0, value)

    return key
