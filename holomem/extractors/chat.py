"""The chat adapter: facts from a conversation, asked of any OpenAI-compatible
chat-completions endpoint (docs/contract.md §4g, "Extractors").

Owns: :class:`ChatExtractor` — where it sends (base URL, model, key: arguments, else
the environment variables :data:`ENV_BASE_URL`, :data:`ENV_MODEL`, :data:`ENV_API_KEY`),
what it asks (:data:`PROMPT`, in our words), how it reads the answer (msgspec Structs:
:class:`Completion` for the endpoint's envelope, :class:`Answer` for the facts, both
checked against the call's turns), and its bounds (a timeout per request, bounded
retries with backoff, a cap on the bytes read, on the turns sent and on the facts
taken). Imports the errors and :mod:`.base`; the transport is the standard library's
``urllib`` (nothing to install).

The rules, written down once here:

- **One request per call**, ``POST {base_url}/chat/completions`` with ``model``, the
  prompt, the turns as JSON (``id``, ``speaker``, ``text``), ``temperature`` 0 and,
  unless ``json_mode=False``, ``response_format: {"type": "json_object"}``; the key, if
  any, as ``Authorization: Bearer``. Redirects are not followed (the key would go with
  them).
- **Retries**: a refused or dropped connection, a timeout, HTTP 429 and HTTP 5xx are
  tried again, at most ``retries`` times, after ``backoff``, then twice that, … seconds;
  then ``unavailable``. Any other HTTP status is ``invalid_request`` at once (a wrong
  key, model or URL does not get better by asking again).
- **The answer** must be the endpoint's JSON envelope with a first choice whose
  ``message.content`` is one JSON object ``{"facts": [{"text", "sources", "subject"?,
  "entities"?}]}`` — a ```` ```json ```` fence around it is taken off, nothing else is
  forgiven: not JSON, another shape, an unknown key, a fact citing a turn the call does
  not have, more than ``max_facts`` facts, a text longer than ``max_fact_chars``, a body
  over ``max_response_bytes`` — each is a clear error (``invalid_request``, or ``limit``
  for the sizes), raised before ``remember_conversation`` writes anything.
- **What it gives**: each fact's ``text``, ``subject`` and ``entities`` as the model
  wrote them, its ``sources``, ``event_time`` the latest time among its source turns,
  and ``metadata`` ``{"extractor": "chat", "model": ...}``.

A model is not deterministic: a retried ``remember_conversation`` stores again only
what the model answers the same way (the turns themselves never twice).
"""

from __future__ import annotations

import http.client
import json
import os
import time as _time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec

from holomem.errors import InvalidError, LimitError, UnavailableError
from holomem.extractors.base import Fact, Turn

#: The environment variables read when an argument is not given.
ENV_BASE_URL = "HOLOMEM_LLM_BASE_URL"
ENV_MODEL = "HOLOMEM_LLM_MODEL"
ENV_API_KEY = "HOLOMEM_LLM_API_KEY"

#: Defaults of the bounds (each an argument).
TIMEOUT_S = 60.0
RETRIES = 2
BACKOFF_S = 0.5
MAX_RESPONSE_BYTES = 1 << 20
MAX_REQUEST_CHARS = 200_000
MAX_FACTS = 64
MAX_FACT_CHARS = 1_000
#: Sources one fact may cite, and entities it may name.
MAX_SOURCES = 32
MAX_ENTITIES = 16
#: What HTTP statuses are worth a second try.
RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
#: Bytes of an error body quoted in an error message.
_QUOTED = 300

PROMPT = """\
You will be shown part of a conversation. Write down the lasting facts it states \
about the people taking part or the people they talk about: where someone lives or \
comes from, what they do for a living and where, what they like or dislike, what \
they have decided or plan to do, names and relationships. Leave out greetings, \
questions, jokes, guesses, hypotheticals and anything only wondered about.

The user message is a JSON array of turns, each {"id": ..., "speaker": ..., \
"text": ...}; "I" in a turn is its speaker.

Answer with exactly one JSON object and nothing around it:
{"facts": [{"text": "...", "sources": ["<turn id>"], "subject": "...", \
"entities": ["..."]}]}

- "text": one short sentence that stands on its own, naming the person (never "I" or \
"you").
- "sources": the ids of the turns that state the fact, at least one, copied from the \
input.
- "subject" (optional): the slot the fact fills, lower case, "person/attribute", for \
example "alice/city", "alice/job", "bob/preference/coffee" — a later fact of the same \
slot replaces an earlier one.
- "entities" (optional): the names of the people, places and things the fact is about.

No other keys. At most {max_facts} facts. When the conversation states none, answer \
{"facts": []}."""


# -- the shapes read: the endpoint's envelope, then the facts -------------------------
class ChatMessage(msgspec.Struct, frozen=True):
    content: str | None = None


class Choice(msgspec.Struct, frozen=True):
    message: ChatMessage


class Completion(msgspec.Struct, frozen=True):
    """The part of a chat-completions response read (other keys are the endpoint's)."""

    choices: list[Choice]


class AnswerFact(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    text: str
    sources: list[str]
    subject: str | None = None
    entities: list[str] | None = None


class Answer(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What the model must answer (see :data:`PROMPT`)."""

    facts: list[AnswerFact]


_COMPLETION = msgspec.json.Decoder(Completion)
_ANSWER = msgspec.json.Decoder(Answer)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Redirects come back as their HTTP status (see the module doc)."""

    def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str,
                         headers: Any, newurl: str) -> None:
        return None


class ChatExtractor:
    """Facts from a conversation, asked of an OpenAI-compatible chat-completions
    endpoint (the module doc has the rules): an extractor for
    ``Memory.remember_conversation(..., extractor=ChatExtractor())``.

    ``base_url`` (``http(s)://host[:port]/v1``-like; ``…/chat/completions`` is taken
    as it is), ``model`` and ``api_key``: the arguments, else the environment's
    :data:`ENV_BASE_URL`, :data:`ENV_MODEL`, :data:`ENV_API_KEY` (read here, once;
    a key is optional, a local server may need none). ``timeout`` seconds per request
    (connect and each read); ``retries`` (0 to 10) after a transport failure or an
    HTTP 429/5xx, waiting ``backoff`` * 2^n seconds (``sleep`` waits: injectable);
    ``max_response_bytes``, ``max_request_chars`` (the turns sent, as JSON),
    ``max_facts`` and ``max_fact_chars`` bound the rest. Errors: ``invalid_request``
    for a missing or bad setting, here; at a call, ``invalid_request`` and ``limit``
    for a bad answer, ``unavailable`` when the endpoint cannot be reached.
    """

    name = "chat"

    def __init__(self, base_url: str | None = None, model: str | None = None,
                 api_key: str | None = None, *, timeout: float = TIMEOUT_S,
                 retries: int = RETRIES, backoff: float = BACKOFF_S,
                 max_response_bytes: int = MAX_RESPONSE_BYTES,
                 max_request_chars: int = MAX_REQUEST_CHARS, max_facts: int = MAX_FACTS,
                 max_fact_chars: int = MAX_FACT_CHARS, json_mode: bool = True,
                 environ: Mapping[str, str] | None = None,
                 sleep: Callable[[float], None] = _time.sleep) -> None:
        env = os.environ if environ is None else environ
        base = base_url if base_url is not None else env.get(ENV_BASE_URL)
        model = model if model is not None else env.get(ENV_MODEL)
        key = api_key if api_key is not None else env.get(ENV_API_KEY)
        if not isinstance(base, str) or not base:
            raise InvalidError(f"ChatExtractor needs a base URL: pass base_url or set "
                               f"{ENV_BASE_URL}")
        if not base.startswith(("http://", "https://")):
            raise InvalidError("the base URL must start with http:// or https://")
        if not isinstance(model, str) or not model:
            raise InvalidError(f"ChatExtractor needs a model: pass model or set {ENV_MODEL}")
        if key is not None and (not isinstance(key, str) or any(c in key for c in "\r\n")):
            raise InvalidError("the API key must be a string on one line")
        for label, number, low, high in (("timeout", timeout, 0.001, 3600.0),
                                         ("backoff", backoff, 0.0, 60.0)):
            if type(number) not in (int, float) or not low <= number <= high:
                raise InvalidError(f"{label} must be a number of seconds from {low} to "
                                   f"{high}")
        for label, count, low, high in (
                ("retries", retries, 0, 10),
                ("max_response_bytes", max_response_bytes, 1, 64 << 20),
                ("max_request_chars", max_request_chars, 1, 10_000_000),
                ("max_facts", max_facts, 1, 10_000),
                ("max_fact_chars", max_fact_chars, 1, 65_536)):
            if type(count) is not int or not low <= count <= high:
                raise InvalidError(f"{label} must be an integer from {low} to {high}")
        base = base.rstrip("/")
        self.url = base if base.endswith("/chat/completions") else base + "/chat/completions"
        self.model = model
        self._key = key or None
        self.timeout = float(timeout)
        self.retries = retries
        self.backoff = float(backoff)
        self.max_response_bytes = max_response_bytes
        self.max_request_chars = max_request_chars
        self.max_facts = max_facts
        self.max_fact_chars = max_fact_chars
        self.json_mode = json_mode
        self._sleep = sleep
        self._opener = urllib.request.build_opener(_NoRedirect())

    def __repr__(self) -> str:  # (never the key)
        return f"ChatExtractor(url={self.url!r}, model={self.model!r})"

    def __call__(self, turns: Sequence[Turn]) -> list[Fact]:
        """The facts the endpoint finds in ``turns``, checked (see the module doc)."""
        turns = list(turns)
        if not turns:
            return []
        shown = [{"id": t.id, "speaker": t.speaker, "text": t.text} for t in turns]
        listing = json.dumps(shown, ensure_ascii=False)
        if len(listing) > self.max_request_chars:
            raise LimitError(f"the turns come to {len(listing)} characters as JSON; the "
                             f"chat extractor sends at most {self.max_request_chars} "
                             "(max_request_chars): send fewer messages per call")
        body = {"model": self.model, "temperature": 0, "messages": [
            {"role": "system", "content": PROMPT.replace("{max_facts}", str(self.max_facts))},
            {"role": "user", "content": listing}]}
        if self.json_mode:
            body["response_format"] = {"type": "json_object"}
        raw = self._post(json.dumps(body, ensure_ascii=False).encode("utf-8", "replace"))
        return self.read_answer(raw, turns)

    # -- the answer ------------------------------------------------------------------
    def read_answer(self, raw: bytes, turns: Sequence[Turn]) -> list[Fact]:
        """The facts of an endpoint's response body ``raw``, checked against ``turns``.
        Errors: ``invalid_request``, ``limit`` (see the module doc)."""
        where = f"the chat endpoint's answer ({self.url})"
        try:
            completion = _COMPLETION.decode(raw)
        except msgspec.DecodeError as exc:
            raise InvalidError(f"{where} is not a chat completion: {exc}") from None
        if not completion.choices:
            raise InvalidError(f"{where} has no choices")
        content = completion.choices[0].message.content
        if content is None or not content.strip():
            raise InvalidError(f"{where} has no message content")
        text = _unfenced(content)
        try:
            answer = _ANSWER.decode(text.encode("utf-8", "surrogatepass"))
        except msgspec.ValidationError as exc:
            raise InvalidError(f"{where} is not {{\"facts\": [...]}} as asked: {exc}") \
                from None
        except msgspec.DecodeError as exc:
            raise InvalidError(f"{where}: the message content is not JSON: {exc}") from None
        if len(answer.facts) > self.max_facts:
            raise LimitError(f"{where} holds {len(answer.facts)} facts; at most "
                             f"{self.max_facts} are taken (max_facts)")
        times = {t.id: t.time for t in turns}
        out: list[Fact] = []
        for i, f in enumerate(answer.facts):
            label = f"{where}: fact {i}"
            fact_text = f.text.strip()
            if not fact_text:
                raise InvalidError(f"{label} has an empty text")
            if len(fact_text) > self.max_fact_chars:
                raise LimitError(f"{label} has a text of {len(fact_text)} characters; "
                                 f"the limit is {self.max_fact_chars} (max_fact_chars)")
            if not f.sources or len(f.sources) > MAX_SOURCES:
                raise InvalidError(f"{label} must cite 1 to {MAX_SOURCES} source turns")
            for s in f.sources:
                if s not in times:
                    raise InvalidError(f"{label} cites {s!r}, which is not a turn of this "
                                       "call")
            if f.entities is not None and len(f.entities) > MAX_ENTITIES:
                raise LimitError(f"{label} names more than {MAX_ENTITIES} entities")
            fact: Fact = {"text": fact_text, "sources": list(dict.fromkeys(f.sources)),
                          "metadata": {"extractor": self.name, "model": self.model}}
            if f.subject is not None:
                fact["subject"] = f.subject
            if f.entities:
                fact["entities"] = list(f.entities)
            known = [t for t in (times[s] for s in f.sources) if type(t) is int]
            if known:
                fact["event_time"] = max(known)
            out.append(fact)
        return out

    # -- the transport ---------------------------------------------------------------
    def _post(self, body: bytes) -> bytes:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._key is not None:
            headers["Authorization"] = f"Bearer {self._key}"
        last = "no attempt"
        for attempt in range(self.retries + 1):
            if attempt:
                self._sleep(self.backoff * 2 ** (attempt - 1))
            request = urllib.request.Request(self.url, data=body, headers=headers,
                                             method="POST")
            try:
                with self._opener.open(request, timeout=self.timeout) as response:
                    return self._read(response)
            except urllib.error.HTTPError as exc:
                quoted = _quoted(exc)
                if exc.code not in RETRY_STATUSES:
                    raise InvalidError(f"the chat endpoint ({self.url}) refused the "
                                       f"request: HTTP {exc.code}{quoted}") from None
                last = f"HTTP {exc.code}{quoted}"
            except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
                reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
                last = f"{type(reason).__name__}: {reason}"
        raise UnavailableError(f"the chat endpoint ({self.url}) failed {self.retries + 1} "
                               f"time(s); the last: {last}")

    def _read(self, response: Any) -> bytes:
        length = response.headers.get("Content-Length")
        if length is not None and length.isdigit() and int(length) > self.max_response_bytes:
            raise LimitError(f"the chat endpoint's answer is {length} bytes; the limit is "
                             f"{self.max_response_bytes} (max_response_bytes)")
        raw: bytes = response.read(self.max_response_bytes + 1)
        if len(raw) > self.max_response_bytes:
            raise LimitError(f"the chat endpoint's answer is over "
                             f"{self.max_response_bytes} bytes (max_response_bytes)")
        return raw


def _unfenced(content: str) -> str:
    """The content without a Markdown code fence around it (```json ... ```)."""
    text = content.strip()
    if text.startswith("```") and text.endswith("```") and len(text) >= 6:
        inner = text[3:-3]
        first, _, rest = inner.partition("\n")
        return rest if first.strip().isalpha() or not first.strip() else inner
    return text


def _quoted(error: urllib.error.HTTPError) -> str:
    """The start of an error response's body, for the message (never the request)."""
    try:
        raw = error.read(_QUOTED)
    except (OSError, http.client.HTTPException):
        raw = b""
    finally:
        error.close()
    text = raw.decode("utf-8", "replace").strip()
    return f": {text}" if text else ""
