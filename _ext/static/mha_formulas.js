/* A formula that scrolls is a Tab stop, and only such a formula (issue 35; _ext/mha_math.py adds
 * this file to every page of both editions). It typesets nothing: KaTeX wrote every formula into the
 * page when the book was built.
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

  function setUp() {
    var boxes = Array.prototype.slice.call(document.querySelectorAll(SELECTOR));
    markAll(boxes);
    if (document.fonts && document.fonts.ready) document.fonts.ready.then(function () { markAll(boxes); });
    if (!window.ResizeObserver) return;
    var observer = new ResizeObserver(function (entries) {
      markAll(entries.map(function (entry) { return entry.target; }));
    });
    for (var k = 0; k < boxes.length; k++) observer.observe(boxes[k]);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setUp);
  else setUp();
})();
