"""Screenshots of the inspector for the docs: docs/images/ui-*.png.

Builds a small store (an agent's memory of a user: a move, a job, a conversation, a
working context), starts ``holomem ui`` on it, and photographs each page with Debian's
Chromium through Playwright:

    python tools/ui_screenshots.py [--out docs/images]

Nothing is fetched from any host; the store lives in a temporary directory.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from holomem import Memory, Store
from holomem.log import fs

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def build(path: Path) -> None:
    with Store.open(str(path)) as store:
        m = Memory(store)
        ann = ["users", "ann"]
        m.call("remember", {"facts": [
            {"text": "Ann lives in Paris", "id": "ann-city-1", "subject": "ann/city",
             "namespace": ann, "validFrom": "2019-03-01", "metadata": {"source": "chat"}},
            {"text": "Ann works as a translator", "id": "ann-job-1",
             "subject": "ann/employer", "namespace": ann, "validFrom": "2018-01-01",
             "metadata": {"source": "profile"}},
            {"text": "Ann prefers green tea in the afternoon", "id": "ann-tea",
             "subject": "ann/drink", "namespace": ann, "metadata": {"source": "chat"}},
        ]})
        m.call("remember", {"text": "Ann moved to Rome", "id": "ann-city-2",
                            "subject": "ann/city", "namespace": ann,
                            "validFrom": "2023-06-15", "supersedes": ["ann-city-1"],
                            "metadata": {"source": "chat"}})
        m.call("remember", {"text": "Ann now lives in Lisbon", "id": "ann-city-3",
                            "subject": "ann/city", "namespace": ann,
                            "validFrom": "2025-09-01", "supersedes": ["ann-city-2"],
                            "metadata": {"source": "email"}})
        m.call("remember", {"text": "Ann works at the Lisbon observatory", "id": "ann-job-2",
                            "subject": "ann/employer", "namespace": ann,
                            "validFrom": "2025-10-01", "supersedes": ["ann-job-1"],
                            "metadata": {"source": "email"}})
        m.call("relate", {"fromId": "ann-job-2", "toId": "ann-city-3",
                          "relation": "because-of", "namespace": ann})
        m.call("relate", {"fromId": "ann-tea", "toId": "ann-city-3",
                          "relation": "mentioned-with", "namespace": ann})
        m.call("remember", {"facts": [
            {"text": f"Project note {n}: the {w} sync runs nightly", "subject": f"ops/{w}",
             "namespace": ["ops"], "metadata": {"priority": n}}
            for n, w in enumerate(("billing", "search", "backup", "mail", "reports"))]})
        m.call("rememberConversation", {
            "session": "chat-2025-10-02", "time": 1_759_400_000_000, "namespace": ann,
            "messages": [{"speaker": "ann", "text": "I started at the observatory!"},
                         {"speaker": "assistant", "text": "Congratulations, Ann. How is "
                          "Lisbon treating you?"},
                         {"speaker": "ann", "text": "Sunny, and the tea is good."}]})
        m.call("saveWorkingContext", {"session": "trip-planner", "namespace": ann,
                                      "state": {"step": 2, "todo": ["book train", "hotel"]}})


def start(store: Path) -> tuple[subprocess.Popen[bytes], str, Path]:
    log = store.parent / "ui.log"
    out = fs.create(str(log))
    try:
        proc = subprocess.Popen([sys.executable, "-m", "holomem", "ui", str(store),
                                 "--port", "0"], stdout=subprocess.DEVNULL, stderr=out)
    finally:
        fs.close(out)
    for _ in range(600):
        said = fs.read_file(str(log)).decode(errors="replace")
        found = re.search(r"listening on (http://127\.0\.0\.1:\d+)/", said)
        if found:
            return proc, found.group(1), log
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"holomem ui did not start: {fs.read_file(str(log)).decode(errors='replace')}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "images"))
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    out = Path(args.out)
    fs.make_dirs(str(out))
    scratch = Path(fs.make_temp_dir("holomem-shots-"))
    store = scratch / "store"
    build(store)
    proc, url, _ = start(store)
    shots = [("ui-facts.png", "/?namespace=users/ann"),
             ("ui-search.png", "/?q=where+does+Ann+live"),
             ("ui-fact.png", "/fact?id=ann-city-3&q=where+does+Ann+live"),
             ("ui-as-of.png", "/fact?id=ann-city-2&asOf=2024-01-01"),
             ("ui-forget.png", "/forget?ids=ann-city-2&chain=1"),
             ("ui-conversations.png", "/conversations?namespace=users/ann")]
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=shutil.which("chromium"),
                                        args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 860})
            for name, path in shots:
                page.goto(url + path)
                page.screenshot(path=str(out / name), full_page=True)
            page.goto(url + "/store")
            page.click("#run-check")
            page.screenshot(path=str(out / "ui-store.png"), full_page=True)
            browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        fs.remove_tree(str(scratch))
    for name in sorted(fs.listdir(str(out))):
        if name.startswith("ui-"):
            print(out / name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
