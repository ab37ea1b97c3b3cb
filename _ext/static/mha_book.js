/* The book's own script, on every page of both editions (_ext/mha_book.py). Issue 28.
 *
 * The navigation buttons. pydata-sphinx-theme 0.17 puts a second ".primary-toggle" (and a second
 * ".secondary-toggle") in the article header, the one a reader sees, but binds only the first,
 * which sphinx-book-theme hides (pydata-sphinx-theme issue 2451): below 992 px the table of
 * contents could not be opened at all, and on a desktop the button did not collapse the sidebar.
 * Each visible button here passes its click (tap, Enter, Space) to the bound one, so both themes'
 * own handlers run: on a desktop the sidebar collapses (sphinx-book-theme), on a narrow screen
 * the sidebar opens as a dialog (pydata-sphinx-theme). aria-expanded tells a screen reader which.
 *
 * The second skip link ("Skip to the table of contents", added to every page by the build)
 * moves focus into the chapter list, or opens it where it is a dialog (a phone).
 *
 * Formulas are typeset when the book is built (KaTeX, _ext/mha_math.py); mha_formulas.js makes
 * a formula that scrolls inside its box a Tab stop.
 *
 * On a phone (issue 35):
 * - inline code wraps only at a name's seams, never "batc/h_siz/e": the build marks each (an empty span.mha-seam
 *   whose zero-width space is the break: mha_book.py, add_code_seams; this script did it once,
 *   and moved the lines it re-wrapped);
 * - a table wider than its column, which scrolls inside its box, says so ("Scroll sideways →"
 *   above its right corner, its right edge faded until it is scrolled to the end), re-checked
 *   when the box changes size;
 * - a figure shown at full size does not offer to be enlarged (.mha-full-size: mha_book.css's
 *   "Tap to enlarge" line stays, empty).
 *
 * An explorer's frames are files (_ext/mha_speed.py): when an explorer comes within a screen of
 * the view, its other frames are fetched into the browser's cache, so a control answers at once
 * without the page having carried them all.
 */
(function () {
  "use strict";

  var ZH = /^zh/i.test(document.documentElement.getAttribute("lang") || "");
  var SCROLL_CUE = ZH ? "左右滑动查看 →" : "Scroll sideways →";

  var WIDE = "(min-width: 992px)";

  function sidebarShown() {
    var sidebar = document.getElementById("pst-primary-sidebar");
    var dialog = document.getElementById("pst-primary-sidebar-modal");
    if (dialog && dialog.open) return true;
    if (!sidebar || !window.matchMedia(WIDE).matches) return false;
    return !sidebar.classList.contains("pst-sidebar-hidden");
  }

  function bindToggles(selector) {
    var buttons = document.querySelectorAll(selector);
    if (buttons.length < 2) return;
    var bound = buttons[0];
    for (var i = 1; i < buttons.length; i++) {
      (function (button) {
        if (selector === ".primary-toggle") {
          button.setAttribute("aria-controls", "pst-primary-sidebar");
          button.setAttribute("aria-expanded", String(sidebarShown()));
        }
        button.addEventListener("click", function (event) {
          event.preventDefault();
          event.stopPropagation();
          bound.click();
          if (selector === ".primary-toggle") button.setAttribute("aria-expanded", String(sidebarShown()));
        });
      })(buttons[i]);
    }
    var dialog = document.getElementById("pst-primary-sidebar-modal");
    if (selector === ".primary-toggle" && dialog) {
      dialog.addEventListener("close", function () {
        for (var j = 1; j < buttons.length; j++) buttons[j].setAttribute("aria-expanded", String(sidebarShown()));
      });
    }
  }

  function skipToContents(event) {
    var nav = document.querySelector("#pst-primary-sidebar nav.bd-docs-nav");
    if (!nav) return;
    event.preventDefault();
    if (!sidebarShown()) {
      var toggles = document.querySelectorAll(".primary-toggle");
      toggles[toggles.length - 1].click();
    }
    var target = document.querySelector("#pst-primary-sidebar-modal[open] nav.bd-docs-nav") || nav;
    // the current chapter's link (a selector list would return whichever comes first: the title)
    var link = target.querySelector("a.current") || target.querySelector("a");
    if (link) link.focus();
  }

  function scrollsSideways(element) {
    var overflow = window.getComputedStyle(element).overflowX;
    return overflow === "auto" || overflow === "scroll";
  }

  function showScrolling(box) {
    var wide = box.scrollWidth > box.clientWidth + 1;
    box.classList.toggle("mha-scrolls", wide);
    box.classList.toggle("mha-scrolled-end", box.scrollLeft + box.clientWidth >= box.scrollWidth - 1);
    box.mhaScrollCue.hidden = !wide;
  }

  // Each table's scrolling box goes into a positioned frame (same size and place) that holds the cue.
  function markScrollingTables() {
    var tables = document.querySelectorAll(".bd-article table");
    var observer = window.ResizeObserver
      ? new ResizeObserver(function (entries) {
          for (var e = 0; e < entries.length; e++) {
            var box = entries[e].target.mhaScrollBox || entries[e].target;
            showScrolling(box);
          }
        })
      : null;
    // All boxes are found first (style is read once), then framed: a page is not restyled per table.
    var boxes = [];
    for (var i = 0; i < tables.length; i++) {
      var box = tables[i].parentElement;
      while (box && !box.classList.contains("bd-article") && !scrollsSideways(box)) box = box.parentElement;
      boxes.push(!box || box.classList.contains("bd-article") || box.mhaScrollCue ? null : box);
    }
    for (var j = 0; j < tables.length; j++) {
      var scroller = boxes[j];
      if (!scroller || scroller.mhaScrollCue) continue;
      var frame = document.createElement("div");
      frame.className = "mha-scroll-frame";
      scroller.parentNode.insertBefore(frame, scroller);
      frame.appendChild(scroller);
      var cue = document.createElement("span");
      cue.className = "mha-scroll-cue";
      cue.textContent = SCROLL_CUE;
      cue.hidden = true;
      frame.appendChild(cue);
      scroller.mhaScrollCue = cue;
      tables[j].mhaScrollBox = scroller;
      scroller.addEventListener("scroll", function (event) { showScrolling(event.currentTarget); }, { passive: true });
      // measured when the browser lays the page out next (the observer's first call), not now
      if (observer) {
        observer.observe(scroller);
        observer.observe(tables[j]);
      } else {
        showScrolling(scroller);
      }
    }
  }

  // A figure (a link to its image) or an explorer's frame shown at its full width offers no tap.
  function markFullSizeFigures() {
    var images = document.querySelectorAll(".bd-article a.image-reference img, figure.mha-explorer img.mha-explorer-frame");
    function check(img) {
      var holder = img.closest("a.image-reference") || img.parentElement;  // a figure's img may sit in a <picture>
      var natural = img.naturalWidth || parseFloat(img.getAttribute("width") || img.style.width) || 0;
      var enlarged = img.style.maxWidth === "none";
      holder.classList.toggle("mha-full-size", !enlarged && natural > 0 && img.clientWidth >= natural - 1);
    }
    var observer = window.ResizeObserver
      ? new ResizeObserver(function (entries) {
          for (var e = 0; e < entries.length; e++) check(entries[e].target);
        })
      : null;
    for (var i = 0; i < images.length; i++) {
      (function (img) {
        img.addEventListener("load", function () { check(img); });
        if (observer) observer.observe(img);  // its first call checks it, at the next layout
        else check(img);
      })(images[i]);
    }
  }

  // On a narrow screen a tap on a figure shown smaller than it was drawn shows it at its full width
  // in place, scrolled sideways (its link opened the image at the screen's width, as small as before);
  // a second tap fits it again. At full width the link opens the image file, as before.
  function enlargeFiguresInPlace() {
    var links = document.querySelectorAll(".bd-article a.image-reference");
    for (var i = 0; i < links.length; i++) {
      links[i].addEventListener("click", function (event) {
        var link = event.currentTarget, img = link.querySelector("img");
        if (!img) return;
        var enlarged = link.classList.contains("mha-enlarged");
        if (!enlarged && !(img.naturalWidth > img.clientWidth + 1)) return;  // shown whole: open the file
        event.preventDefault();
        link.classList.toggle("mha-enlarged", !enlarged);
        img.style.maxWidth = enlarged ? "" : "none";
        if (!enlarged) link.scrollLeft = 0;
      });
    }
  }

  function prefetchFrames(root) {
    var data = document.getElementById(root.id + "-data");
    if (!data || root.getAttribute("data-fetched")) return;
    root.setAttribute("data-fetched", "1");
    var frames = JSON.parse(data.textContent).frames || [];
    for (var i = 0; i < frames.length; i++) {
      if (!/^data:/.test(frames[i])) new Image().src = frames[i];
    }
  }

  function fetchFramesNearTheScreen() {
    var explorers = document.querySelectorAll("figure.mha-explorer");
    if (!window.IntersectionObserver) {
      for (var i = 0; i < explorers.length; i++) prefetchFrames(explorers[i]);
      return;
    }
    var observer = new IntersectionObserver(function (entries) {
      for (var e = 0; e < entries.length; e++) {
        if (entries[e].isIntersecting) {
          prefetchFrames(entries[e].target);
          observer.unobserve(entries[e].target);
        }
      }
    }, { rootMargin: "100% 0px" });
    for (var j = 0; j < explorers.length; j++) observer.observe(explorers[j]);
  }

  // The link to the other edition keeps the reader's section (both editions share the sections' ids).
  function keepSection() {
    var link = document.querySelector("p.mha-other-edition a");
    if (!link) return;
    link.addEventListener("click", function () {
      link.href = link.href.split("#")[0] + window.location.hash;
    });
  }

  function setUp() {
    keepSection();
    fetchFramesNearTheScreen();
    markScrollingTables();
    markFullSizeFigures();
    enlargeFiguresInPlace();
    bindToggles(".primary-toggle");
    bindToggles(".secondary-toggle");
    var skip = document.querySelector("#pst-skip-link a.mha-skip-contents");
    if (skip) skip.addEventListener("click", skipToContents);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setUp);
  else setUp();
})();
