"""How soon a phone shows each page of both editions, measured as Lighthouse's mobile profile measures.

Usage: python scripts/measure_pages.py [--label after] [--site _build] [--pages book/intro ...] [--runs 3]

Serves ``--site`` (a folder holding ``html/`` and ``html-zh/``, as ``make book`` and ``make book-zh``
leave them) on 127.0.0.1 through a server that compresses text with gzip, as static hosts do, and
opens every page of the table of contents in headless Chromium as a phone on a slow network:

* 390x844 CSS px at device scale 3, mobile, touch;
* the CPU slowed 4 times (CDP ``Emulation.setCPUThrottlingRate``);
* 1.6 Mbps down, 750 kbps up, 150 ms round trip (CDP ``Network.emulateNetworkConditions``);
* the cache off, no request outside the book.

Per page, the median of ``--runs`` loads of:

* ``fcp_ms``: first contentful paint (the first text or image on the screen);
* ``lcp_ms``: largest contentful paint (PerformanceObserver, read once the page is idle);
* ``tbt_ms``: total blocking time as Lighthouse counts it, from a trace of the page's main thread:
  the part over 50 ms of every top-level task after the first paint (a task that began before it
  counts from the paint), style, layout and paint included;
* ``tbt_observer_ms``: the same sum over the Long Tasks API's entries, which leave out a frame's
  rendering work (kept to compare: it read about a fifth of the trace's figure on the chapters);
* ``blocking_kb``: the compressed bytes of the files the first paint waits for (stylesheets and
  scripts in the head without ``defer``/``async``), and ``html_kb``, the page's own compressed size.

Lighthouse's "good" thresholds, which the issue asks for: first paint at most 1.8 s, largest paint
at most 2.5 s, blocking at most 200 ms. Results go to ``_build/page-speed.json`` under ``--label``
(other labels stay, so a ``before`` and an ``after`` are compared side by side) and a table to
``_build/page-speed.md``. ``make bench`` runs it when the book is built. The numbers depend on the
machine and its load: measure with nothing else running.
"""

from __future__ import annotations

import argparse
import functools
import gzip
import http.server
import json
import statistics
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "browser"))  # test_browser, browser_reading

OUT = ROOT / "_build" / "page-speed.json"
TABLE = ROOT / "_build" / "page-speed.md"
PHONE = {"width": 390, "height": 844}
CPU_SLOWDOWN = 4
#: Lighthouse's mobile profile (its "slow 4G"): bytes per second and milliseconds.
NETWORK = {
    "offline": False,
    "latency": 150,
    "downloadThroughput": 1.6 * 1024 * 1024 / 8,
    "uploadThroughput": 750 * 1024 / 8,
}
#: Lighthouse's "good" thresholds.
GOOD = {"fcp_ms": 1800, "lcp_ms": 2500, "tbt_ms": 200}
#: What a static host compresses (text); images, fonts and the model are sent as they are.
COMPRESSED = (".html", ".css", ".js", ".json", ".svg", ".txt", ".xml", ".map")

#: Installed before the page's scripts: paints, largest paint and long tasks.
OBSERVER = r"""
(() => {
  const perf = window.__mhaSpeed = {lcp: 0, longtasks: []};
  new PerformanceObserver(l => { for (const e of l.getEntries()) perf.lcp = e.startTime; })
    .observe({type: "largest-contentful-paint", buffered: true});
  new PerformanceObserver(l => { for (const e of l.getEntries()) perf.longtasks.push([e.startTime, e.duration]); })
    .observe({type: "longtask", buffered: true});
})();
"""
FACTS = r"""() => {
  const perf = window.__mhaSpeed;
  const fcp = (performance.getEntriesByName("first-contentful-paint")[0] || {}).startTime || null;
  const tbt = perf.longtasks.filter(([s]) => fcp !== null && s >= fcp)
    .reduce((sum, [, d]) => sum + Math.max(0, d - 50), 0);
  const blocking = [...document.head.querySelectorAll('link[rel="stylesheet"], script[src]')]
    .filter(e => e.tagName === "LINK" ? !e.media || e.media === "all" : !(e.defer || e.async || e.type === "module"))
    .map(e => new URL(e.href || e.src, location.href).pathname);
  return {fcp, lcp: perf.lcp || fcp, tbt: Math.round(tbt), blocking};
}"""


class _GzipHandler(http.server.SimpleHTTPRequestHandler):
    """Serves files; text goes gzip-compressed when the browser accepts it."""

    def log_message(self, *args):
        pass

    def do_GET(self):
        path = Path(self.translate_path(self.path))
        accepts = "gzip" in self.headers.get("Accept-Encoding", "")
        if not (accepts and path.is_file() and path.suffix in COMPRESSED):
            return super().do_GET()
        body = gzip.compress(path.read_bytes(), 6)
        self.send_response(200)
        self.send_header("Content-Type", self.guess_type(str(path)))
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@contextmanager
def serve_gzip(directory: Path):
    handler = functools.partial(_GzipHandler, directory=str(directory))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def gzipped_kb(path: Path) -> float:
    return round(len(gzip.compress(path.read_bytes(), 6)) / 1000, 1) if path.is_file() else 0.0


#: What the trace records: top-level tasks and the first paint (Lighthouse's categories, fewer).
TRACE_CATEGORIES = "toplevel,loading,devtools.timeline,disabled-by-default-devtools.timeline"
LONG_TASK_US = 50_000


def blocking_from_trace(events: list[dict]) -> dict:
    """Total blocking time (ms) after the first contentful paint, from a Chromium trace's events.

    The renderer thread that painted first is the page's main thread; its top-level tasks are its
    ``RunTask`` events. Each task's part after the paint counts for what it runs over 50 ms."""
    paints = [e for e in events if e.get("name") == "firstContentfulPaint"]
    if not paints:
        return {"tbt": 0, "tasks": []}
    paint = min(paints, key=lambda e: e["ts"])
    thread, start = (paint["pid"], paint["tid"]), paint["ts"]
    tasks = []
    for e in events:
        if e.get("name") != "RunTask" or e.get("ph") != "X" or (e["pid"], e["tid"]) != thread:
            continue
        end = e["ts"] + e.get("dur", 0)
        if end > start:
            tasks.append((max(e["ts"], start), end))
    blocking = sum(max(0, end - begin - LONG_TASK_US) for begin, end in tasks)
    long_tasks = [round((end - begin) / 1000) for begin, end in tasks if end - begin > LONG_TASK_US]
    return {"tbt": round(blocking / 1000), "tasks": long_tasks}


def load_once(browser, url: str, host: str) -> dict:
    context = browser.new_context(
        viewport=PHONE, device_scale_factor=3, is_mobile=True, has_touch=True, service_workers="block"
    )
    context.route("**/*", lambda r: r.continue_() if urlparse(r.request.url).netloc in (host, "") else r.abort())
    context.add_init_script(OBSERVER)
    page = context.new_page()
    try:
        cdp = context.new_cdp_session(page)
        cdp.send("Network.enable")
        cdp.send("Network.setCacheDisabled", {"cacheDisabled": True})
        cdp.send("Network.emulateNetworkConditions", NETWORK)
        cdp.send("Emulation.setCPUThrottlingRate", {"rate": CPU_SLOWDOWN})
        events, complete = [], threading.Event()
        cdp.on("Tracing.dataCollected", lambda message: events.extend(message["value"]))
        cdp.on("Tracing.tracingComplete", lambda _: complete.set())
        cdp.send("Tracing.start", {"categories": TRACE_CATEGORIES, "transferMode": "ReportEvents"})
        page.goto(url, wait_until="load", timeout=120_000)
        page.wait_for_load_state("networkidle", timeout=120_000)
        page.wait_for_timeout(1000)
        facts = page.evaluate(FACTS)
        cdp.send("Tracing.end")
        while not complete.is_set():
            page.wait_for_timeout(50)
        traced = blocking_from_trace(events)
        return {**facts, "tbt_observer": facts["tbt"], "tbt": traced["tbt"], "long_tasks": traced["tasks"]}
    finally:
        context.close()


def measure(browser, base: str, site: Path, folder: str, page_name: str, runs: int) -> dict:
    url = f"{base}/{folder}/{page_name}.html"
    loads = [load_once(browser, url, urlparse(base).netloc) for _ in range(runs)]
    html = site / folder / f"{page_name}.html"
    blocking = sorted(set(loads[0]["blocking"]))
    return {
        "fcp_ms": round(statistics.median(m["fcp"] or 0 for m in loads)),
        "lcp_ms": round(statistics.median(m["lcp"] or 0 for m in loads)),
        "tbt_ms": round(statistics.median(m["tbt"] for m in loads)),
        "tbt_observer_ms": round(statistics.median(m["tbt_observer"] for m in loads)),
        "long_tasks_ms": max((m["long_tasks"] for m in loads), key=len),
        "runs": runs,
        "blocking_files": len(blocking),
        "blocking_kb": round(sum(gzipped_kb(site / p.lstrip("/")) for p in blocking), 1),
        "html_kb": gzipped_kb(html),
        "html_raw_kb": round(html.stat().st_size / 1000, 1),
    }


def table(results: dict) -> str:
    labels = [label for label in ("before", "after") if label in results]
    labels += [label for label in sorted(results) if label not in labels]
    pages = sorted({page for label in labels for page in results[label]})
    columns = "FCP ms | LCP ms | TBT ms | blocking files (kB gz) | HTML kB gz"
    head = "| page | " + " | ".join(f"{label}: {columns}" for label in labels)
    rows = [head + " |", "|" + " --- |" * (1 + 5 * len(labels))]
    for page in pages:
        cells = [page]
        for label in labels:
            m = results[label].get(page)
            cells += (
                ["-"] * 5
                if m is None
                else [
                    f"{m['fcp_ms']:,}",
                    f"{m['lcp_ms']:,}",
                    f"{m['tbt_ms']:,}",
                    f"{m['blocking_files']} ({m['blocking_kb']:.0f})",
                    f"{m['html_kb']:.0f}",
                ]
            )
        rows.append("| " + " | ".join(cells) + " |")
    for label in labels:
        values = list(results[label].values())
        worst = {k: max(m[k] for m in values) for k in GOOD}
        verdict = ", ".join(f"{k[:-3].upper()} max {worst[k]:,} ms (good <= {GOOD[k]:,})" for k in GOOD)
        rows.append(f"\n{label}: {len(values)} pages; {verdict}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    from test_browser import CHROMIUM_ARGS, EDITIONS, chromium_path, toc_pages

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--label", default="after", help="the name these results are kept under")
    parser.add_argument("--site", type=Path, default=ROOT / "_build", help="the folder with html/ and html-zh/")
    parser.add_argument("--pages", nargs="*", help="pages (as in _toc.yml, no suffix); default: every page")
    parser.add_argument("--editions", nargs="*", default=list(EDITIONS), choices=list(EDITIONS))
    parser.add_argument("--runs", type=int, default=3, help="loads per page (the median is kept)")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--table-only", action="store_true", help="print the table of what --out holds")
    args = parser.parse_args(argv)

    results = json.loads(args.out.read_text(encoding="utf-8")) if args.out.is_file() else {}
    if not args.table_only:
        if not all((args.site / folder / "index.html").is_file() for folder in EDITIONS.values()):
            print(f"measure_pages: the book is not built in {args.site}: run make book book-zh first")
            return 0
        executable = chromium_path()
        if executable is None:
            print("Chromium not found (apt-get install chromium, or CHROMIUM=/path/to/chromium)", file=sys.stderr)
            return 2
        from playwright.sync_api import sync_playwright

        measured, started = results.setdefault(args.label, {}), time.perf_counter()
        with serve_gzip(args.site) as base, sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_ARGS)
            try:
                for edition in args.editions:
                    for page_name in args.pages or toc_pages():
                        key = f"{edition}/{page_name}"
                        measured[key] = measure(browser, base, args.site, EDITIONS[edition], page_name, args.runs)
                        print(f"{key}: {measured[key]}", flush=True)
            finally:
                browser.close()
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1, sort_keys=True), encoding="utf-8")
        print(f"{len(measured)} pages in {time.perf_counter() - started:.0f} s: {args.out}")
    text = table(results)
    TABLE.write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
