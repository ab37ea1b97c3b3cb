"""What the math costs a reader, per page of both editions: before and after typesetting moved to the build.

Usage: python scripts/measure_math.py [--label after] [--site _build] [--pages book/03_worked_example ...]

Serves ``--site`` (a folder holding ``html/`` and ``html-zh/``, as ``make book`` and ``make book-zh``
leave them) on 127.0.0.1, opens every page of the table of contents in headless Chromium (outside
requests refused) and measures, per page:

* ``blocking_ms``: main-thread blocking from math: the part over 50 ms of each long task
  (PerformanceObserver 'longtask') from the moment the math script arrived until the math was
  typeset. A page with no math script has none by construction (0);
* ``page_blocking_ms``: the same over the whole load, whatever its cause (for context);
* ``cls``: cumulative layout shift (PerformanceObserver 'layout-shift', without user input), 1280x900,
  and ``text_cls``, its part that moved the text (the shifts' sources inside the article: the theme's
  sidebar also moves while a page loads, whatever its math);
* ``phone_typeset_ms`` and ``phone_cls``: on a slowed phone, 390x844 with the CPU slowed 4 times
  (CDP Emulation.setCPUThrottlingRate): when the math was final (MathJax: its startup promise
  resolved; KaTeX written at build time: the page's first paint with KaTeX's stylesheet and the fonts
  it used loaded), and the layout shift there;
* ``html_bytes`` and ``math_bytes``: the page's HTML and the math assets it loaded (MathJax's script
  and fonts, or KaTeX's CSS and fonts), as the files on disk.

Results go to ``_build/math-timings.json`` under ``--label`` (another label's results stay, so a
``before`` measured on the MathJax build and an ``after`` can be compared), and a table is printed:
one row per page, both labels side by side when both were measured.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # conftest, which test_browser imports
sys.path.insert(0, str(ROOT / "tests" / "browser"))  # test_browser, browser_reading

OUT = ROOT / "_build" / "math-timings.json"
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}
CPU_SLOWDOWN = 4
#: A request for one of these is a math asset (the script that typesets, its fonts, KaTeX's CSS).
MATH_ASSET = ("/_static/mathjax/", "/_static/katex/", "/_static/katex-math.css")
#: A script that typesets math in the reader's browser (MathJax, KaTeX's own JavaScript).
MATH_SCRIPT = r"mathjax|katex[^/]*\.js|tex-(chtml|svg|mml)"

#: Installed before any of the page's scripts run: the long tasks and layout shifts of the whole load.
PERF_OBSERVER = r"""
(() => {
  const perf = window.__mhaPerf = {longtasks: [], shifts: [], typesetAt: null};
  try {
    new PerformanceObserver(list => {
      for (const e of list.getEntries()) perf.longtasks.push({start: e.startTime, duration: e.duration});
    }).observe({type: "longtask", buffered: true});
    // each shift, and the part of it that moved the text (the sources inside the article: math moves
    // the text, where the theme's sidebars and header move for reasons of their own)
    const inText = node => { const e = node && (node.nodeType === 1 ? node : node.parentElement);
                             return !!e && !!e.closest("article, main"); };
    new PerformanceObserver(list => {
      for (const e of list.getEntries()) {
        if (e.hadRecentInput) continue;
        const moved = (e.sources || []).filter(s => inText(s.node)).map(s => [s.previousRect, s.currentRect]);
        const overlap = (a, b) => Math.max(0, Math.min(a.right, b.right) - Math.max(a.left, b.left))
          * Math.max(0, Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top));
        perf.shifts.push({at: e.startTime, value: e.value, text: moved.map(([a, b]) => ({
          area: a.width * a.height + b.width * b.height - overlap(a, b),
          distance: Math.max(Math.abs(a.x - b.x), Math.abs(a.y - b.y))}))});
      }
    }).observe({type: "layout-shift", buffered: true});
  } catch (error) { perf.error = String(error); }
  // MathJax (where a page loads it): the moment its startup promise resolves, the page is typeset.
  const watch = () => {
    const mj = window.MathJax;
    if (mj && mj.startup && mj.startup.promise) {
      mj.startup.promise.then(() => { perf.typesetAt = performance.now(); });
    } else if (document.readyState !== "complete" || document.querySelector('script[src*="mathjax"]')) {
      setTimeout(watch, 10);
    }
  };
  watch();
})();
"""

#: After the load (and MathJax's typesetting, where a page has MathJax): what the observers saw.
PERF_FACTS = r"""(mathScript) => {
  const perf = window.__mhaPerf || {longtasks: [], shifts: []};
  const pattern = new RegExp(mathScript);
  const resources = performance.getEntriesByType("resource");
  const scripts = Array.from(document.scripts).map(s => s.src).filter(src => pattern.test(src));
  const mathJs = resources.filter(r => pattern.test(r.name) && r.initiatorType === "script");
  const katex = resources.filter(r => /\/_static\/katex/.test(r.name));
  const paint = performance.getEntriesByType("paint").find(p => p.name === "first-contentful-paint");
  const fcp = paint ? paint.startTime : null;
  let typesetAt, mathFrom = null;
  if (scripts.length || window.MathJax && window.MathJax.startup) {
    mathFrom = mathJs.length ? Math.min(...mathJs.map(r => r.responseEnd)) : 0;
    typesetAt = perf.typesetAt;
  } else {
    const assetsEnd = katex.length ? Math.max(...katex.map(r => r.responseEnd)) : 0;
    typesetAt = document.querySelector(".katex") ? Math.max(fcp || 0, assetsEnd) : null;
  }
  const over = t => Math.max(0, t.duration - 50);
  const mathTasks = mathFrom === null ? [] :
    perf.longtasks.filter(t => t.start + t.duration > mathFrom && (typesetAt === null || t.start < typesetAt));
  return {
    mathScripts: scripts,
    typesetAt: typesetAt === null ? null : Math.round(typesetAt),
    fcp: fcp === null ? null : Math.round(fcp),
    blocking: Math.round(mathTasks.reduce((s, t) => s + over(t), 0)),
    pageBlocking: Math.round(perf.longtasks.reduce((s, t) => s + over(t), 0)),
    longestTask: Math.round(Math.max(0, ...perf.longtasks.map(t => t.duration))),
    cls: Math.round(perf.shifts.reduce((s, e) => s + e.value, 0) * 10000) / 10000,
    // Chromium's layout-shift score restricted to the sources in the text: the area they swept (as a
    // fraction of the window) times the farthest one moved (as a fraction of the window's larger side)
    textCls: Math.round(perf.shifts.reduce((s, e) => {
      const view = innerWidth * innerHeight, side = Math.max(innerWidth, innerHeight);
      const area = Math.min(1, e.text.reduce((a, m) => a + m.area, 0) / view);
      return s + Math.min(e.value, area * Math.max(0, ...e.text.map(m => m.distance)) / side);
    }, 0) * 10000) / 10000,
    formulas: document.querySelectorAll(".katex, mjx-container").length,
    observerError: perf.error || null,
  };
}"""

#: Waits for MathJax (where the page loads it) to finish typesetting (PERF_OBSERVER notes when).
WAIT_FOR_MATHJAX = r"""() => window.MathJax.startup.promise.then(() => new Promise(r => setTimeout(r, 50)))"""


def _settle(page, seconds: float = 0.5) -> None:
    page.wait_for_load_state("networkidle")
    page.evaluate(f"() => new Promise(r => setTimeout(r, {int(seconds * 1000)}))")


def open_and_measure(context, url: str, phone: bool) -> tuple[dict, list[str]]:
    """Loads ``url`` in a fresh page of ``context``; returns the facts and the paths it loaded."""
    page = context.new_page()
    loaded: list[str] = []
    host = urlparse(url).netloc
    page.on("requestfinished", lambda req: urlparse(req.url).netloc == host and loaded.append(urlparse(req.url).path))
    try:
        if phone:
            cdp = context.new_cdp_session(page)
            cdp.send("Emulation.setCPUThrottlingRate", {"rate": CPU_SLOWDOWN})
        page.goto(url, wait_until="load")
        if page.evaluate("() => !!document.querySelector('script[src*=\"mathjax\"]')"):
            page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=60_000)
            page.evaluate(WAIT_FOR_MATHJAX)
        page.evaluate("() => document.fonts.ready.then(() => true)")
        _settle(page)
        return page.evaluate(PERF_FACTS, MATH_SCRIPT), loaded
    finally:
        page.close()


def measure(browser, base: str, site: Path, folder: str, page_name: str) -> dict:
    url = f"{base}/{folder}/{page_name}.html"
    refuse_outside = _refuser(urlparse(base).netloc)
    desktop = browser.new_context(viewport=DESKTOP, service_workers="block")
    phone = browser.new_context(viewport=PHONE, service_workers="block", is_mobile=True, has_touch=True)
    for context in (desktop, phone):
        context.route("**/*", refuse_outside)
        context.add_init_script(PERF_OBSERVER)
    try:
        facts, loaded = open_and_measure(desktop, url, phone=False)
        phone_facts, _ = open_and_measure(phone, url, phone=True)
    finally:
        desktop.close()
        phone.close()
    files = {site / path.lstrip("/") for path in loaded}
    math_files = {f for f in files if any(part in "/" + f.relative_to(site).as_posix() for part in MATH_ASSET)}
    return {
        "formulas": facts["formulas"],
        "math_scripts": [urlparse(s).path for s in facts["mathScripts"]],
        "blocking_ms": facts["blocking"],
        "page_blocking_ms": facts["pageBlocking"],
        "longest_task_ms": facts["longestTask"],
        "cls": facts["cls"],
        "text_cls": facts["textCls"],
        "typeset_ms": facts["typesetAt"],
        "phone_typeset_ms": phone_facts["typesetAt"],
        "phone_blocking_ms": phone_facts["blocking"],
        "phone_cls": phone_facts["cls"],
        "phone_text_cls": phone_facts["textCls"],
        "html_bytes": (site / folder / f"{page_name}.html").stat().st_size,
        "math_bytes": sum(f.stat().st_size for f in math_files if f.is_file()),
    }


def _refuser(host: str):
    def route(request_route):
        target = urlparse(request_route.request.url)
        if target.scheme == "data" or target.netloc == host:
            request_route.continue_()
        else:
            request_route.abort("blockedbyclient")

    return route


def table(results: dict) -> str:
    """One row per page: each label's blocking, layout shift, phone typeset time and bytes."""
    labels = [label for label in ("before", "after") if label in results] or sorted(results)
    labels += [label for label in sorted(results) if label not in labels]
    pages = sorted({page for label in labels for page in results[label]})
    head = f"{'page':44}" + "".join(
        f" | {label[:6]:>6} block ms  CLS   phone ms  phone CLS  HTML kB  math kB" for label in labels
    )
    rows = [head, "-" * len(head)]
    for page in pages:
        row = f"{page[:44]:44}"
        for label in labels:
            m = results[label].get(page)
            if m is None:
                row += " | " + " " * 62
                continue
            phone = "-" if m["phone_typeset_ms"] is None else f"{m['phone_typeset_ms']:,}"
            row += (
                f" | {m['blocking_ms']:>15,} {m['cls']:5.3f} {phone:>9} {m['phone_cls']:9.3f} "
                f"{m['html_bytes'] / 1000:8.0f} {m['math_bytes'] / 1000:8.0f}"
            )
        rows.append(row)
    for label in labels:
        values = list(results[label].values())
        typeset = [m["phone_typeset_ms"] for m in values if m["phone_typeset_ms"] is not None]
        rows.append(
            f"{label}: {len(values)} pages; blocking from math max {max(m['blocking_ms'] for m in values):,} ms, "
            f"layout shift max {max(m['cls'] for m in values):.3f} (phone {max(m['phone_cls'] for m in values):.3f}), "
            f"phone typeset median {statistics.median(typeset) if typeset else 0:,.0f} ms "
            f"(max {max(typeset, default=0):,} ms), math bytes per page max "
            f"{max(m['math_bytes'] for m in values) / 1000:,.0f} kB"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    from test_browser import CHROMIUM_ARGS, EDITIONS, chromium_path, serve, toc_pages

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--label", default="after", help="the name these results are kept under (before, after)")
    parser.add_argument("--site", type=Path, default=ROOT / "_build", help="the folder with html/ and html-zh/")
    parser.add_argument("--pages", nargs="*", help="pages (as in _toc.yml, no suffix); default: every page")
    parser.add_argument("--editions", nargs="*", default=list(EDITIONS), choices=list(EDITIONS))
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--table-only", action="store_true", help="print the table of what --out holds")
    args = parser.parse_args(argv)

    results = json.loads(args.out.read_text(encoding="utf-8")) if args.out.is_file() else {}
    if not args.table_only:
        executable = chromium_path()
        if executable is None:
            print("Chromium not found (apt-get install chromium, or CHROMIUM=/path/to/chromium)", file=sys.stderr)
            return 2
        from playwright.sync_api import sync_playwright

        measured, started = results.setdefault(args.label, {}), time.perf_counter()
        with serve(args.site) as base, sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_ARGS)
            try:
                for edition in args.editions:
                    for page_name in args.pages or toc_pages():
                        if not (args.site / EDITIONS[edition] / f"{page_name}.html").is_file():
                            continue
                        measured[f"{edition}/{page_name}"] = measure(
                            browser, base, args.site, EDITIONS[edition], page_name
                        )
                        print(f"{edition}/{page_name}: {measured[f'{edition}/{page_name}']}", flush=True)
            finally:
                browser.close()
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1, sort_keys=True), encoding="utf-8")
        print(f"{len(measured)} pages in {time.perf_counter() - started:.0f} s: {args.out}")
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
