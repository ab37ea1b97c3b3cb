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
 * Formulas. MathJax is told to keep formulas out of the Tab order (_config.yml: inTabOrder
 * false), so that a keyboard reader reaches links and explorer controls; but a display formula
 * wider than the column scrolls inside its box (the theme's CSS), and a box that scrolls must be
 * reachable by keyboard to be scrolled (WCAG 2.1.1): such a formula, and only such, is a Tab
 * stop, re-checked when the window changes size, as the theme does for code cells.
 */
(function () {
  "use strict";

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
    var link = target.querySelector("a.current, a");
    if (link) link.focus();
  }

  function markScrollingFormulas() {
    var formulas = document.querySelectorAll("div.math mjx-container");
    for (var i = 0; i < formulas.length; i++) {
      var formula = formulas[i];
      if (formula.scrollWidth > formula.clientWidth + 1) formula.setAttribute("tabindex", "0");
      else if (formula.getAttribute("tabindex") === "0") formula.removeAttribute("tabindex");
    }
  }

  // A formula's box changes with the window, its content when MathJax's web fonts arrive.
  function observeFormulas() {
    markScrollingFormulas();
    if (!window.ResizeObserver) return;
    var pending = false;
    var observer = new ResizeObserver(function () {
      if (pending) return;
      pending = true;
      window.requestAnimationFrame(function () {
        pending = false;
        markScrollingFormulas();
      });
    });
    var formulas = document.querySelectorAll("div.math mjx-container");
    for (var i = 0; i < formulas.length; i++) {
      observer.observe(formulas[i]);
      if (formulas[i].firstElementChild) observer.observe(formulas[i].firstElementChild);
    }
  }

  function watchFormulas() {
    var mathjax = window.MathJax;
    if (!mathjax) return;
    if (mathjax.version && mathjax.startup) {
      mathjax.startup.promise.then(observeFormulas);  // MathJax already running
    } else {
      // window.MathJax is still the configuration (this script runs before MathJax's own): MathJax
      // calls pageReady once, to typeset the page; watch the formulas when it has.
      mathjax.startup = mathjax.startup || {};
      mathjax.startup.pageReady = function () {
        return window.MathJax.startup.defaultPageReady().then(observeFormulas);
      };
    }
  }

  // Before MathJax starts (both scripts are deferred, this one first), not at DOMContentLoaded.
  watchFormulas();

  function setUp() {
    bindToggles(".primary-toggle");
    bindToggles(".secondary-toggle");
    var skip = document.querySelector("#pst-skip-link a.mha-skip-contents");
    if (skip) skip.addEventListener("click", skipToContents);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setUp);
  else setUp();
})();
