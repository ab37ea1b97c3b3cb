/* The search page's results, in both editions (loaded on search.html only, by _ext/mha_search.py). Issue 35.
 *
 * Sphinx's searchtools.js lists one hit per matching object, title and page, scored coarsely: the
 * query "attention" gave six hits on the glossary (one per term: attention, attention map,
 * self-attention, ...) before any chapter, and each page's summary was the text of its HTML with
 * the raw TeX of its formulas ("\(t\)") and the page's furniture (its table of contents, the "Run
 * this chapter yourself" box). Here:
 * - one hit per page (the best one Sphinx found on it: a section's title, a glossary term, the
 *   page), chapters first (a page whose file name starts with its number, "book/03_..."), then
 *   the other pages (introduction, notation, glossary, ...), each group in Sphinx's order;
 * - the summary is plain text: each formula reads as its MathML's text (KaTeX and MathJax write
 *   MathML beside what they draw) or, where the page holds raw TeX, as that TeX made plain
 *   ("\sqrt{d_k}" reads "√(d_k)"), with no backslash left; the page's furniture is left out and
 *   white space is collapsed.
 */
(function () {
  "use strict";

  if (typeof Search === "undefined" || !Search._performSearch) return;

  var CHAPTER = /(^|\/)\d+_[^/]*$/;

  function isChapter(result) {
    return CHAPTER.test(result[0]);
  }

  // Sphinx returns the hits in reverse: the page pops them, so the last one is shown first.
  var performSearch = Search._performSearch;
  Search._performSearch = function () {
    var results = performSearch.apply(Search, arguments);
    var shown = results.slice().reverse(), seen = {}, chapters = [], others = [];
    for (var i = 0; i < shown.length; i++) {
      var docname = shown[i][0];
      if (Object.prototype.hasOwnProperty.call(seen, docname)) continue;
      seen[docname] = true;
      (isChapter(shown[i]) ? chapters : others).push(shown[i]);
    }
    return chapters.concat(others).reverse();
  };

  var SYMBOLS = {
    alpha: "α", beta: "β", gamma: "γ", delta: "δ", epsilon: "ε", varepsilon: "ε", theta: "θ", lambda: "λ",
    mu: "μ", pi: "π", rho: "ρ", sigma: "σ", tau: "τ", phi: "φ", varphi: "φ", omega: "ω", Delta: "Δ",
    Sigma: "Σ", Omega: "Ω", sum: "Σ", prod: "∏", top: "⊤", times: "×", cdot: "·", cdots: "⋯", ldots: "…",
    dots: "…", le: "≤", leq: "≤", ge: "≥", geq: "≥", ne: "≠", neq: "≠", approx: "≈", to: "→",
    rightarrow: "→", leftarrow: "←", in: "∈", infty: "∞", sqrt: "√", pm: "±", odot: "⊙", otimes: "⊗",
    lfloor: "⌊", rfloor: "⌋", lceil: "⌈", rceil: "⌉", mid: "|", vert: "|", lVert: "‖", rVert: "‖",
  };
  var SPACES = /\\(?:,|;|:|!| |quad|qquad)(?![A-Za-z])/g;
  var SIZES = /\\(?:left|right|big|Big|bigg|Bigg|displaystyle|limits)(?![A-Za-z])\s*/g;
  var STYLED = /\\(?:mathrm|mathbf|mathit|mathsf|mathtt|mathcal|mathbb|boldsymbol|operatorname|text|textrm|textbf|textit)\s*\{([^{}]*)\}/g;

  // Raw TeX as plain text: "\(\sqrt{d_k}\)" reads "√(d_k)", "\frac{QK^\top}{\sqrt{d_k}}" "(QK^⊤)/(√(d_k))".
  function texToText(tex) {
    var text = tex.replace(/^\s*(\\\(|\\\[|\$\$?)/, "").replace(/(\\\)|\\\]|\$\$?)\s*$/, "");
    text = text.replace(/\\begin\{[a-z*]+\}|\\end\{[a-z*]+\}/g, " ").replace(/\\\\|&/g, " ");
    text = text.replace(SPACES, " ").replace(SIZES, "");
    for (var pass = 0; pass < 4; pass++) {
      text = text
        .replace(STYLED, "$1")
        .replace(/\\frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}/g, "($1)/($2)")
        .replace(/\\sqrt\s*\{([^{}]*)\}/g, "√($1)");
    }
    text = text.replace(/\\([A-Za-z]+)/g, function (whole, name) {
      return Object.prototype.hasOwnProperty.call(SYMBOLS, name) ? SYMBOLS[name] : name;
    });
    text = text.replace(/\\(.)/g, "$1").replace(/[{}]/g, "").replace(/\\/g, "").replace(/\^([⊤′])/g, "$1");
    return text.replace(/\s+/g, " ").trim();
  }

  // MathML as plain text: d_model, √(d_k), (a)/(b), QK⊤; the TeX annotation KaTeX keeps there left out.
  function mathmlText(node) {
    if (node.nodeType === 3) return node.data;
    if (node.nodeType !== 1) return "";
    var name = node.localName, kids = Array.prototype.slice.call(node.children);
    var parts = kids.map(mathmlText);
    if (name === "annotation" || name === "annotation-xml") return "";
    if (name === "semantics") return parts.length ? parts[0] : "";
    if (name === "msub" && parts.length === 2) return parts[0] + "_" + parts[1];
    if (name === "msup" && parts.length === 2) return parts[0] + (/^[⊤′″*]$/.test(parts[1]) ? "" : "^") + parts[1];
    if (name === "msubsup" && parts.length === 3) return parts[0] + "_" + parts[1] + "^" + parts[2];
    if (name === "mfrac" && parts.length === 2) return "(" + parts[0] + ")/(" + parts[1] + ")";
    if (name === "msqrt") return "√(" + parts.join("") + ")";
    if (!kids.length) return node.textContent;
    return parts.join("");
  }

  // A formula's plain text: its MathML's, else its TeX made plain.
  function formulaText(element) {
    var mathml = element.localName === "math" ? element : element.querySelector("math");
    var text = mathml ? mathmlText(mathml) : texToText(element.textContent);
    return text.replace(/\s+/g, " ").trim();
  }

  var FURNITURE = [
    ".headerlink", "script", "style", "nav", ".bd-toc", ".bd-sidebar-secondary", ".prev-next-area",
    "details.mha-run", "p.mha-other-edition", ".mha-explorer-note", ".katex-html", "mjx-assistive-mml",
  ];
  var FORMULAS = ".math, .katex, .katex-display, mjx-container, math";

  var htmlToText = Search.htmlToText;
  Search.htmlToText = function (htmlString, anchor) {
    var page = new DOMParser().parseFromString(htmlString, "text/html");
    var main = page.querySelector('[role="main"]');
    if (!main) return htmlToText(htmlString, anchor);
    var root = null;
    if (anchor) {
      try {
        root = main.querySelector(anchor);
      } catch (error) {
        root = null;  // an anchor that is no CSS selector: the whole article
      }
    }
    root = root || main.querySelector("article") || main;
    // MathML first: KaTeX's drawing (.katex-html) is dropped with the furniture below.
    root.querySelectorAll(FORMULAS).forEach(function (formula) {
      if (formula.isConnected && !(formula.parentElement && formula.parentElement.closest(FORMULAS))) {
        formula.replaceWith(page.createTextNode(" " + formulaText(formula) + " "));
      }
    });
    root.querySelectorAll(FURNITURE.join(", ")).forEach(function (element) { element.remove(); });
    // TeX written outside a math element (none in the book) is made plain as well.
    var text = root.textContent.replace(/\\\((.*?)\\\)|\\\[(.*?)\\\]/g, function (whole) { return texToText(whole); });
    return text.replace(/\s+/g, " ").trim();
  };

  Search.mhaTexToText = texToText;  // for the browser test
})();
