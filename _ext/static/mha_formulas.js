/* A box that scrolls is a Tab stop, and only such a box (_ext/mha_math.py adds this file to every
 * page of both editions): formulas, and the theme's code blocks, outputs and tables. It typesets
 * nothing: KaTeX wrote every formula into the page when the book was built.
 *
 * A formula wider than its column scrolls inside its own box (mha_book.css, "math"): the display
 * formula (.katex-display) or the inline one (span.math). A box that scrolls must be reachable by
 * keyboard to be scrolled (WCAG 2.1.1, axe: scrollable-region-focusable), and a formula that fits
 * must not be a Tab stop (a chapter has hundreds). Re-checked when a box changes size: a window
 * turned, a folded answer opened, the fonts arrived.
 */
(function () {
  "use strict";

  var SELECTOR = "div.math > .katex-display, span.math";
  var THEME_BOXES = "pre, .cell_output > .output, .jp-RenderedHTMLCommon, .pst-scrollable-table-container";

  // KaTeX's sub- and superscripts reach 2 px past their formula (its fix for Safari): not a scroll.
  // All boxes are measured
  // first and changed after, so that the page is laid out once, not once a formula.
  function markAll(boxes) {
    var wide = [], over = [], widths = [];
    for (var i = 0; i < boxes.length; i++) {
      // a box in a fold that is closed has no width yet: left as it starts until it is laid out
      widths.push([boxes[i].clientWidth, boxes[i].scrollWidth]);
      over.push(widths[i][1] - widths[i][0]);
      wide.push(boxes[i].clientWidth === 0 ? null : over[i] > 3);
    }
    for (var j = 0; j < boxes.length; j++) {
      var box = boxes[j];
      if (wide[j] === null) continue;
      // A formula as wide as its column, give or take KaTeX's 1-3 px overhang, would scroll by those
      // pixels: a Tab stop for nothing (browsers make every scroller one) and a hairline of shadow.
      // Its type is made that much smaller instead (by 3 % at most), so that it fits; the observer
      // calls again after the change, and a pixel still over takes another step.
      if (over[j] > 0 && over[j] <= 3) {
        var size = parseFloat(box.style.fontSize) || 100;
        var fitted = Math.floor(10 * size * (widths[j][0] - 1) / widths[j][1]) / 10;
        if (fitted >= 97) box.style.fontSize = fitted + "%";
      }
      if (wide[j]) {
        if (box.getAttribute("tabindex") !== "0") box.setAttribute("tabindex", "0");
      } else if (box.getAttribute("tabindex") === "0") {
        box.removeAttribute("tabindex");
      }
    }
  }

  // The theme's own boxes (code blocks, cell outputs, tables) follow its rule: a Tab stop when they
  // scroll either way, out of the Tab order when not (its scan at load is left with nothing to scan).
  function markThemeBoxes(boxes) {
    var stops = [];
    for (var i = 0; i < boxes.length; i++) {
      var box = boxes[i];
      stops.push(box.scrollWidth > box.clientWidth || box.scrollHeight > box.clientHeight ? 0 : -1);
    }
    for (var j = 0; j < boxes.length; j++) if (boxes[j].tabIndex !== stops[j]) boxes[j].tabIndex = stops[j];
  }

  function mark(boxes) {
    var formulas = [], others = [];
    for (var i = 0; i < boxes.length; i++) (boxes[i].matches(SELECTOR) ? formulas : others).push(boxes[i]);
    markAll(formulas);
    markThemeBoxes(others);
  }

  function setUp() {
    var boxes = Array.prototype.slice.call(document.querySelectorAll(SELECTOR + ", " + THEME_BOXES));
    if (!window.ResizeObserver) {
      mark(boxes);
      return;
    }
    // Each box is measured when the browser lays it out (the observer's first call) and again when its
    // size changes (fonts arrived, a fold opened, the window turned): never the whole page at once,
    // which would lay out the sections not drawn yet (mha_book.css, content-visibility).
    var observer = new ResizeObserver(function (entries) {
      mark(entries.map(function (entry) { return entry.target; }));
    });
    for (var k = 0; k < boxes.length; k++) observer.observe(boxes[k]);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setUp);
  else setUp();
})();
