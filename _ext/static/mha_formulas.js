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

  function mark(box) {
    // KaTeX's sub- and superscripts reach 2 px past their formula (its fix for Safari): not a scroll
    if (box.scrollWidth > box.clientWidth + 3) {
      box.setAttribute("tabindex", "0");
    } else if (box.getAttribute("tabindex") === "0") {
      box.removeAttribute("tabindex");
    }
  }

  function setUp() {
    var boxes = document.querySelectorAll(SELECTOR);
    var markAll = function () {
      for (var i = 0; i < boxes.length; i++) mark(boxes[i]);
    };
    markAll();
    if (document.fonts && document.fonts.ready) document.fonts.ready.then(markAll);
    if (!window.ResizeObserver) return;
    var observer = new ResizeObserver(function (entries) {
      for (var j = 0; j < entries.length; j++) mark(entries[j].target);
    });
    for (var k = 0; k < boxes.length; k++) observer.observe(boxes[k]);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setUp);
  else setUp();
})();
