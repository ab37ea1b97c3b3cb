// The tokenizer of chapter 11's in-browser model (issue 37), as the Python one (mha.bert.load_tokenizer,
// the model's tokenizer.json) cuts a sentence: the same ids, checked on every sentence of the course's
// chapters and on Unicode's corner cases by tests/book/test_wordpiece_js.py (with Node.js), and in the
// browser by tests/browser/test_browser_live.py. Imported by mha_live.js; no DOM, so Node can run it too.
//
// The tokenizer: tokenizer.json's BertNormalizer (clean text, Chinese characters apart, accents
// stripped, lower case), BertPreTokenizer (whitespace, then each punctuation mark alone) and WordPiece
// (longest piece first, "##" continues a word, [UNK] for a word that cannot be pieced or is > 100 chars).

function isChinese(cp) {
  return (cp >= 0x4e00 && cp <= 0x9fff) || (cp >= 0x3400 && cp <= 0x4dbf) || (cp >= 0x20000 && cp <= 0x2a6df) ||
    (cp >= 0x2a700 && cp <= 0x2b73f) || (cp >= 0x2b740 && cp <= 0x2b81f) || (cp >= 0x2b820 && cp <= 0x2ceaf) ||
    (cp >= 0xf900 && cp <= 0xfaff) || (cp >= 0x2f800 && cp <= 0x2fa1f);
}

function isPunctuation(ch) {
  const cp = ch.codePointAt(0);
  return (cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) || (cp >= 123 && cp <= 126) ||
    /\p{P}/u.test(ch);
}

export function normalize(text) {
  let out = "";
  for (const ch of text) {
    const cp = ch.codePointAt(0);
    if (cp === 0 || cp === 0xfffd) continue;
    if (ch === "\t" || ch === "\n" || ch === "\r" || /\s/u.test(ch)) { out += " "; continue; }
    if (/\p{C}/u.test(ch)) continue;
    out += isChinese(cp) ? ` ${ch} ` : ch;
  }
  // lower case one character at a time, as Rust's char::to_lowercase: a word's last "Σ" is "σ", not "ς"
  return Array.from(out.normalize("NFD").replace(/\p{Mn}/gu, ""), c => c.toLowerCase()).join("");
}

export function preTokenize(text) {
  const words = [];
  for (const chunk of normalize(text).split(" ")) {
    let word = "";
    for (const ch of chunk) {
      if (isPunctuation(ch)) { if (word) words.push(word); words.push(ch); word = ""; } else word += ch;
    }
    if (word) words.push(word);
  }
  return words;
}

export function wordPiece(word, vocab) {
  const chars = Array.from(word);
  if (chars.length > 100) return ["[UNK]"];
  const pieces = [];
  for (let start = 0; start < chars.length;) {
    let end = chars.length, found = null;
    while (start < end) {
      const piece = (start > 0 ? "##" : "") + chars.slice(start, end).join("");
      if (vocab.has(piece)) { found = piece; break; }
      end -= 1;
    }
    if (found === null) return ["[UNK]"];
    pieces.push(found);
    start = end;
  }
  return pieces;
}

// tokenizer.json's special tokens, matched in the raw text before anything else ("normalized": false):
// a reader who types [CLS] gets the [CLS] token, as in Python.
const SPECIAL = /(\[PAD\]|\[UNK\]|\[CLS\]|\[SEP\]|\[MASK\])/;

export function tokenize(text, vocab) {
  const pieces = text.split(SPECIAL).flatMap((part, i) =>
    i % 2 ? [part] : preTokenize(part).flatMap(word => wordPiece(word, vocab)));
  const tokens = ["[CLS]", ...pieces, "[SEP]"];
  return { tokens, ids: tokens.map(t => vocab.get(t)) };
}
