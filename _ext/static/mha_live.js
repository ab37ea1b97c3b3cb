// Chapter 11: the course's encoder on the reader's own sentence, in the browser (issue 37).
//
// The page holds <div id="mha-live">. Nothing heavy loads until the reader asks: then this script
// fetches, from the book itself (_static/live/, written by _ext/mha_live.py), ONNX Runtime Web's
// WASM build (npm's onnxruntime-web), the encoder exported from mha.bert (scripts/export_onnx.py:
// the same weights, stored in fp16, computed in fp32) and its WordPiece vocabulary; tokenizes the
// sentence as the Python tokenizer does (BERT's normalizer and pre-tokenizer, WordPiece), runs the
// model and draws six heads of a layer as the chapter's explorer does (rows queries, columns keys,
// one scale, dark = 0, yellow = 1). From file://, or on any failure, it says how to serve the book;
// the explorer above, computed when the book was built, stays either way. (A page opened from disk
// does not run this module at all: the paragraph in the page, which this script replaces, says it.)
// window.mhaLive.last holds the last result (tokens, ids, weights) for the browser test.

import { tokenize } from "./mha_wordpiece.js";

const ZH = (document.documentElement.lang || "").startsWith("zh");
const T = ZH
  ? {
      start: mb => `在浏览器中运行模型（下载约 ${mb} MB）`,
      loading: "正在载入模型与运行时",
      sentence: "你的句子",
      show: "显示注意力",
      layer: "层",
      heads: "头",
      ready: "模型已就绪：输入一句话，按回车。",
      ran: (n, ms) => `${n} 个词元，用时 ${ms} 毫秒。`,
      empty: "句子是空的：请输入至少一个词。",
      long: (n, max) => `这句话有 ${n} 个词元（含 [CLS] 与 [SEP]），超过图能标注的 ${max} 个：请缩短。`,
      unknown: (u, m) => `其中 ${u} 个（共 ${m} 个）是 [UNK]：这个模型只在英文文本上训练过，词表里几乎没有汉字，所以这些注意力图说明不了这句话。请试一句英文。`,
      serve: "要在浏览器中运行模型，请通过本地服务器打开本书：在书的文件夹中运行 python -m http.server，再打开 http://localhost:8000/。",
      failed: "模型未能运行",
      head: (l, h) => `第 ${l} 层第 ${h} 个头`,
      caption: "行是查询，列是键；所有头用同一色标，深色 = 0，黄色 = 1。",
      alt: (l, h, rows) => `第 ${l} 层第 ${h} 个头在你的句子上：每个查询词元权重最大的键 ${rows}`,
    }
  : {
      start: mb => `Run the model in your browser (downloads about ${mb} MB)`,
      loading: "Loading the model and its runtime",
      sentence: "Your sentence",
      show: "Show attention",
      layer: "layer",
      heads: "heads",
      ready: "The model is ready: type a sentence and press Enter.",
      ran: (n, ms) => `${n} tokens, ${ms} ms.`,
      empty: "The sentence is empty: type at least one word.",
      long: (n, max) => `This sentence has ${n} tokens with [CLS] and [SEP], more than the ${max} the figure can label: shorten it.`,
      unknown: (u, m) => `${u} of its ${m} tokens are [UNK]: the model was trained on English text and its vocabulary knows no other words, so these maps say little about this sentence. Try one in English.`,
      serve: "To run the model in your browser, open the book from a local server: run python -m http.server in the book's folder, then open http://localhost:8000/.",
      failed: "The model could not run",
      head: (l, h) => `L${l}H${h}`,
      caption: "Rows are queries, columns keys; every head on the same scale, dark = 0, yellow = 1.",
      alt: (l, h, rows) => `Head L${l}H${h} on your sentence: the strongest key of each query ${rows}`,
    };

// ----------------------------------------------------------------------------------------------
// Drawing: six heads of a layer, each a square of n x n cells, the tokens written on its sides.
// ----------------------------------------------------------------------------------------------

const VIRIDIS = [[68, 1, 84], [72, 40, 120], [62, 74, 137], [49, 104, 142], [38, 130, 142], [31, 158, 137],
  [53, 183, 121], [109, 205, 89], [180, 222, 44], [253, 231, 37]];

function colour(w) {
  const x = Math.min(1, Math.max(0, w)) * (VIRIDIS.length - 1), i = Math.min(VIRIDIS.length - 2, Math.floor(x));
  const f = x - i, [a, b] = [VIRIDIS[i], VIRIDIS[i + 1]];
  return `rgb(${a.map((v, k) => Math.round(v + f * (b[k] - v))).join(",")})`;
}

function drawHead(canvas, weights, tokens, title) {
  const n = tokens.length, cell = Math.max(4, Math.floor(150 / n)), label = 64, top = 18;
  const side = n * cell, scale = window.devicePixelRatio || 1;
  canvas.width = (label + side + 4) * scale;
  canvas.height = (top + side + label) * scale;
  canvas.style.width = `${label + side + 4}px`;
  const g = canvas.getContext("2d");
  g.scale(scale, scale);
  g.fillStyle = getComputedStyle(canvas).color;
  g.font = "600 12px system-ui, sans-serif";
  g.fillText(title, label, 13);
  for (let q = 0; q < n; q++) {
    for (let k = 0; k < n; k++) {
      g.fillStyle = colour(weights[q * n + k]);
      g.fillRect(label + k * cell, top + q * cell, cell, cell);
    }
  }
  g.fillStyle = getComputedStyle(canvas).color;
  g.font = `${Math.min(11, cell + 1)}px system-ui, sans-serif`;
  g.textBaseline = "middle";
  g.textAlign = "right";
  tokens.forEach((t, q) => g.fillText(t.slice(0, 10), label - 3, top + (q + 0.5) * cell));
  tokens.forEach((t, k) => {
    g.save();
    g.translate(label + (k + 0.5) * cell, top + side + 3);
    g.rotate(-Math.PI / 2);
    g.fillText(t.slice(0, 10), 0, 0);
    g.restore();
  });
}

// ----------------------------------------------------------------------------------------------
// The explorer
// ----------------------------------------------------------------------------------------------

const root = document.getElementById("mha-live");
const here = new URL(".", import.meta.url);  // .../_static/
const live = new URL("live/", here);
const state = { layer: 1, firstHead: 1 };
window.mhaLive = { last: null, timings: {} };

function element(tag, attributes = {}, text = "") {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attributes)) e.setAttribute(k, v);
  if (text) e.textContent = text;
  return e;
}

async function fetchWithProgress(url, onBytes) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`${url.pathname || url}: HTTP ${response.status}`);
  const reader = response.body.getReader(), chunks = [];
  let received = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    received += value.length;
    onBytes(value.length);
  }
  const bytes = new Uint8Array(received);
  let at = 0;
  for (const c of chunks) { bytes.set(c, at); at += c.length; }
  return bytes;
}

function build() {
  if (location.protocol === "file:") return;  // the page's own line says how to serve the book
  root.replaceChildren();
  const note = element("p", { class: "mha-live-note", role: "status" });
  const start = element("button", { type: "button", class: "mha-live-start" }, T.start(root.dataset.downloadMb));
  const progress = element("progress", { max: "1", value: "0", hidden: "", "aria-label": T.loading });
  root.append(start, progress, note);
  start.addEventListener("click", () => load(start, progress, note));
}

async function load(start, progress, note) {
  const clicked = performance.now();
  start.disabled = true;
  progress.hidden = false;
  note.textContent = T.loading;
  try {
    const sizes = await (await fetch(new URL("sizes.json", live))).json();
    const total = Object.values(sizes).reduce((a, b) => a + b, 0);
    let got = 0;
    const tick = n => { got += n; progress.value = got / total; };
    const [ort, wasm, model, vocabText] = await Promise.all([
      import(new URL("ort.wasm.bundle.min.mjs", live).href),
      fetchWithProgress(new URL("ort-wasm-simd-threaded.wasm", live), tick),
      fetchWithProgress(new URL("model.onnx", live), tick),
      fetchWithProgress(new URL("vocab.txt", live), tick).then(b => new TextDecoder().decode(b)),
    ]);
    ort.env.wasm.numThreads = 1;
    ort.env.wasm.wasmBinary = wasm.buffer;
    const session = await ort.InferenceSession.create(model, { executionProviders: ["wasm"] });
    const vocab = new Map(vocabText.split("\n").filter(Boolean).map((t, i) => [t, i]));
    progress.hidden = true;
    start.hidden = true;
    controls(ort, session, vocab, note, clicked);
  } catch (error) {
    progress.hidden = true;
    note.textContent = `${T.failed}: ${error.message || error}. ${T.serve}`;
    window.mhaLive.error = String(error);
  }
}

function controls(ort, session, vocab, note, clicked) {
  const max = Number(root.dataset.maxTokens || 40);
  const form = element("form", { class: "mha-live-form" });
  const input = element("input", { type: "text", id: "mha-live-sentence", value: root.dataset.sentence || "" });
  const layer = element("select", { id: "mha-live-layer" });
  for (let l = 1; l <= 6; l++) layer.append(element("option", { value: String(l) }, String(l)));
  const heads = element("select", { id: "mha-live-heads" });
  heads.append(element("option", { value: "1" }, "1–6"), element("option", { value: "7" }, "7–12"));
  const row = (...children) => { const r = element("div", { class: "mha-live-row" }); r.append(...children); return r; };
  form.append(
    row(element("label", { for: "mha-live-sentence" }, T.sentence), input, element("button", { type: "submit" }, T.show)),
    row(element("label", { for: "mha-live-layer" }, T.layer), layer, element("label", { for: "mha-live-heads" }, T.heads), heads),
  );
  const grid = element("div", { class: "mha-live-grid" });
  root.insertBefore(form, note);
  root.append(grid, element("p", { class: "mha-live-caption" }, T.caption));
  const draw = () => {
    const last = window.mhaLive.last;
    if (!last) return;
    grid.replaceChildren();
    const n = last.tokens.length;
    for (let h = state.firstHead; h < state.firstHead + 6; h++) {
      const offset = ((state.layer - 1) * last.heads + (h - 1)) * n * n;
      const weights = last.weights.subarray(offset, offset + n * n);
      const strongest = last.tokens.map((t, q) => {
        let best = 0;
        for (let k = 1; k < n; k++) if (weights[q * n + k] > weights[q * n + best]) best = k;
        return `${t}→${last.tokens[best]}`;
      });
      const canvas = element("canvas", { role: "img", "aria-label": T.alt(state.layer, h, strongest.join(", ")) });
      grid.append(canvas);
      drawHead(canvas, weights, last.tokens, T.head(state.layer, h));
    }
  };
  const run = async () => {
    const started = performance.now();
    const { tokens, ids } = tokenize(input.value, vocab);
    // a refused sentence leaves no maps of the one before it on the screen
    const refuse = text => { note.textContent = text; grid.replaceChildren(); window.mhaLive.last = null;
                             window.mhaLive.refused = (window.mhaLive.refused || 0) + 1; };
    if (tokens.length === 2) return refuse(T.empty);
    if (tokens.length > max) return refuse(T.long(tokens.length, max));
    const feeds = { input_ids: new ort.Tensor("int64", BigInt64Array.from(ids.map(BigInt)), [1, ids.length]) };
    const output = (await session.run(feeds)).attentions;  // (L, 1, H, n, n)
    const [layers, , heads_] = output.dims;
    window.mhaLive.last = { tokens, ids, weights: output.data, layers, heads: heads_ };
    const ms = Math.round(performance.now() - started);
    // most word pieces unknown to the vocabulary (a sentence in Chinese): the maps mean little
    const unknown = tokens.filter(t => t === "[UNK]").length, pieces = tokens.length - 2;
    note.textContent = T.ran(tokens.length, ms) + (2 * unknown > pieces ? " " + T.unknown(unknown, pieces) : "");
    draw();
    window.mhaLive.runs = (window.mhaLive.runs || 0) + 1;
    window.mhaLive.timings.sentences = [...(window.mhaLive.timings.sentences || []), ms];
  };
  form.addEventListener("submit", event => { event.preventDefault(); run(); });
  layer.addEventListener("change", () => { state.layer = Number(layer.value); draw(); });
  heads.addEventListener("change", () => { state.firstHead = Number(heads.value); draw(); });
  note.textContent = T.ready;
  run().then(() => { window.mhaLive.timings.firstResult = Math.round(performance.now() - clicked); });
}

if (root) build();
