"""What the ``holomem`` command line writes: readable text, JSON and JSON Lines.

Owns: how a response of the JSON contract is shown to a person (a fact on one line, an
explanation, a forget report and its preview, namespaces), the two machine forms
(``--json``: one indented document; ``--jsonl``: one compact object per line), and an
export's JSON Lines (its progress lines are :class:`holomem.api.memory.progress.ProgressLines`').
Everything goes to ``sys.stdout`` / ``sys.stderr``; nothing here opens a store or a file.
Imports the memory API's rendering of times and its one-string form of a namespace.
The reference is docs/cli.md.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import msgspec

from holomem.api.engine import nspath
from holomem.api.memory.window.render import format_time

#: How many facts a forget preview shows before it says "and N more".
PREVIEW = 20


# -- the machine forms --------------------------------------------------------------------
def emit_json(document: Any) -> None:
    """One pretty JSON document (``--json``)."""
    print(json.dumps(document, indent=2, ensure_ascii=False))


def emit_jsonl(records: Iterable[Any]) -> None:
    """One compact JSON object per line (``--jsonl``), written as they come."""
    for record in records:
        print(json.dumps(record, ensure_ascii=False, separators=(",", ":")))


# -- facts and namespaces ---------------------------------------------------------------
def namespace_text(namespace: Sequence[str]) -> str:
    """A namespace as the command line takes it back: ``a/b`` (a "/" inside a part
    written ``\\/``, docs/contract.md §4a), ``(root)`` for the root."""
    return nspath.format(namespace) if namespace else "(root)"


def fact_line(fact: dict[str, Any]) -> str:
    """A FactRecord on one line: id, namespace, subject, status, times, text."""
    when = []
    if fact.get("validFrom") is not None or fact.get("validTo") is not None:
        when.append(f"valid {format_time(fact.get('validFrom'))} .. "
                    f"{format_time(fact.get('validTo'))}")
    if fact.get("eventTime") is not None:
        when.append(f"event {format_time(fact['eventTime'])}")
    when.append(f"ingested {format_time(fact['ingestTime'])}")
    where = f" {{{namespace_text(fact['namespace'])}}}" if fact.get("namespace") else ""
    subject = f" [{fact['subject']}]" if fact.get("subject") else ""
    return (f"{fact['id']}{where}{subject} ({fact['status']}; {', '.join(when)}): "
            f"{fact['text']}")


def print_facts(facts: Iterable[dict[str, Any]]) -> None:
    for fact in facts:
        print(fact_line(fact))


def print_namespaces(counts: Iterable[dict[str, Any]]) -> None:
    for entry in counts:
        print(f"{namespace_text(entry['namespace'])}  {entry['facts']}")


# -- responses ----------------------------------------------------------------------------
def print_response(op: str, response: dict[str, Any]) -> None:
    """The text form of a remember, recall, explain, get or history response."""
    if op == "remember":
        for r in response["remembered"]:
            sup = f", supersedes {', '.join(r['superseded'])}" if r["superseded"] else ""
            print(f"{'stored' if r['created'] else 'already stored'} {r['id']}{sup}")
    elif op == "recall":
        if not response["results"]:
            print("(nothing)")
        for i, r in enumerate(response["results"], start=1):
            print(f"{i}. {r['score']:.4f}  {fact_line(r['fact'])}")
            if "explanation" in r:
                print_explanation(r["explanation"], indent="     ")
    elif op == "explain":
        print_explanation(response["explanation"], indent="")
    elif op == "get":
        print(fact_line(response["fact"]))
    elif op == "history":
        print_facts(response["history"])


def print_explanation(e: dict[str, Any], indent: str) -> None:
    terms = ", ".join(f"{t['term']} ({t['score']:.3f})" for t in e["matchedTerms"]) or "none"
    print(f"{indent}{e['id']}: {e['reason']}; rank {e['rank']}, status {e['status']}")
    print(f"{indent}  bm25 {e['lexicalScore']:.4f}, matched {terms}; recency x"
          f"{e['recencyMultiplier']:.3f}, history x{e['historyMultiplier']:.3f}")
    if len(e["chain"]) > 1:
        chain = " -> ".join(f"{c['id']} ({c['status']})" for c in e["chain"])
        print(f"{indent}  chain: {chain}")


def forget_preview(report: dict[str, Any], facts: Sequence[dict[str, Any] | None],
                   purge: bool) -> str:
    """What a forget will do, from its dry-run report and the first removed facts (a
    fact the store no longer has is None)."""
    removed = report["removed"]
    lines = [f"would forget {len(removed)} fact{'s' if len(removed) != 1 else ''}:"]
    for fid, fact in zip(removed, facts, strict=False):
        lines.append(f"  {fact_line(fact) if fact else fid}")
    if len(removed) > len(facts):
        lines.append(f"  ... and {len(removed) - len(facts)} more")
    for link in report["relinked"]:
        lines.append(f"  then {link['successor']} supersedes {link['predecessor']}")
    if purge:
        lines.append("  then purge: compact the store so that no file keeps their text")
    return "\n".join(lines)


def forget_done(report: dict[str, Any]) -> str:
    """The text form of a ForgetReport."""
    removed = report["removed"]
    if report["dryRun"]:
        head = f"would forget {len(removed)} fact{'s' if len(removed) != 1 else ''}"
    else:
        head = f"forgot {len(removed)} fact{'s' if len(removed) != 1 else ''}"
    if report["purged"]:
        head += "; purged: no file of the store keeps their text"
    lines = [head, *(f"  {fid}" for fid in removed)]
    lines += [f"  {link['successor']} now supersedes {link['predecessor']}"
              for link in report["relinked"]]
    return "\n".join(lines)


# -- export ---------------------------------------------------------------------------------
def jsonl_chunks(records: Iterable[dict[str, Any]], progress: Callable[[int], None],
                 size: int = 1 << 20) -> Iterator[bytes]:
    """JSON Lines of ``records``, about ``size`` bytes at a time."""
    encoder = msgspec.json.Encoder()
    buf = bytearray()
    done = 0
    for record in records:
        encoder.encode_into(record, buf, len(buf))
        buf += b"\n"
        done += 1
        if len(buf) >= size:
            yield bytes(buf)
            buf.clear()
            progress(done)
    if buf:
        yield bytes(buf)
    progress(done)
