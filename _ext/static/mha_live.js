// Chapter 11: the course's encoder on the reader's own sentence, in the browser (issue 37).
//
// The page holds <div id="mha-live">. Nothing heavy loads until the reader asks: then this script
// fetches, from the book itself (_static/live/, written by _ext/mha_live.py), ONNX Runtime Web's
// WASM build (npm's onnxruntime-web), the encoder exported from mha.bert (scripts/export_onnx.py:
// the same weights, stored in fp16, computed in fp32) and its WordPiece vocabulary; tokenizes the
// sentence as the Python tokenizer does (BERT's normalizer and pre-tokenizer, WordPiece), runs the
// model and draws six heads of a layer as the chapter's explorer does (rows queries, columns keys,
// one scale, dark = 0, yellow = 1; on a phone two to a row). The download shows its size before the
// click and its progress in MB with a cancel after; a failed one says which file stopped where and
// offers to try again; what it fetched stays in the browser's Cache Storage for the next visit. ONNX
// Runtime builds and runs the session in a worker (its proxy), so the page never freezes. The
// explorer above, computed when the book was built, stays either way. (A page opened from disk does
// not run this module at all: the paragraph in the page, which this script replaces, says how to
// serve the book.) window.mhaLive holds the last result (tokens, ids, weights), the timings and
// which files came from the cache, for the browser test.

import { tokenize } from "./mha_wordpiece.js";

const ZH = (document.documentElement.lang || "").startsWith("zh");
const T = ZH
  ? {
      start: mb => `在浏览器中运行模型（下载约 ${mb} MB）`,
      loading: "正在载入模型与运行时",
      progress: (got, total) => `正在下载：${got} / ${total} MB`,
      cached: "从浏览器缓存载入（不再下载）",
      building: "正在准备模型（在后台线程中）",
      cancel: "取消",
      cancelled: "已取消下载。已下载的文件留在浏览器缓存中，再次点按会接着用。",
      retry: mb => `重试（下载约 ${mb} MB）`,
      lost: (name, got, total) => `${name} 下载中断（已下载 ${got} / ${total} MB）：网络连接断了或服务器没有回应。请检查网络后重试。`,
      sentence: "你的句子",
      show: "显示注意力",
      layer: "层",
      heads: "头",
      ready: "模型已就绪：输入一句话，按回车。",
      ran: (n, ms) => `${n} 个词元，用时 ${ms} 毫秒。`,
      empty: "句子是空的：请输入至少一个词。",
      long: (n, max) => `这句话有 ${n} 个词元（含 [CLS] 与 [SEP]），超过图能标注的 ${max} 个：请缩短。`,
      unknown: (u, m) => `其中 ${u} 个（共 ${m} 个）是 [UNK]：这个模型只在英文文本上训练过，词表里几乎没有汉字，所以这些注意力图说明不了这句话。请试一句英文。`,
      failed: "模型未能运行",
      head: (l, h) => `第 ${l} 层第 ${h} 个头`,
      caption: "行是查询，列是键；所有头用同一色标，深色 = 0，黄色 = 1。",
      alt: (l, h, rows) => `第 ${l} 层第 ${h} 个头在你的句子上：每个查询词元权重最大的键 ${rows}`,
    }
  : {
      start: mb => `Run the model in your browser (downloads about ${mb} MB)`,
      loading: "Loading the model and its runtime",
      progress: (got, total) => `Downloading: ${got} of ${total} MB`,
      cached: "Loading from the browser's cache (no download)",
      building: "Preparing the model (in a background thread)",
      cancel: "Cancel",
      cancelled: "Download cancelled. The files already downloaded stay in the browser's cache for the next try.",
      retry: mb => `Try again (downloads about ${mb} MB)`,
      lost: (name, got, total) => `The download of ${name} stopped at ${got} of ${total} MB: the connection dropped or the server did not answer. Check the connection and try again.`,
      sentence: "Your sentence",
      show: "Show attention",
      layer: "layer",
      heads: "heads",
      ready: "The model is ready: type a sentence and press Enter.",
      ran: (n, ms) => `${n} tokens, ${ms} ms.`,
      empty: "The sentence is empty: type at least one word.",
      long: (n, max) => `This sentence has ${n} tokens with [CLS] and [SEP], more than the ${max} the figure can label: shorten it.`,
      unknown: (u, m) => `${u} of its ${m} tokens are [UNK]: the model was trained on English text and its vocabulary knows no other words, so these maps say little about this sentence. Try one in English.`,
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

// The smallest label a map writes, in CSS px (a token's name; the title is larger).
const MIN_LABEL_PX = 9;

// A map ``width`` CSS px wide (the desktop's: 150 px of cells and the labels; on a phone half the
// column, two maps to a row). Labels are never smaller than MIN_LABEL_PX: where a row is thinner
// than that (a long sentence on a phone), every second or third token is named.
function drawHead(canvas, weights, tokens, title, width) {
  const n = tokens.length, top = 18, scale = window.devicePixelRatio || 1;
  const g = canvas.getContext("2d");
  const short = t => (t.length > 8 ? t.slice(0, 7) + "…" : t);
  const desktopCell = Math.max(4, Math.floor(150 / n));
  const font = width ? MIN_LABEL_PX : Math.max(MIN_LABEL_PX, Math.min(11, desktopCell + 1));
  g.font = `${font}px system-ui, sans-serif`;
  const label = Math.ceil(Math.max(...tokens.map(t => g.measureText(short(t)).width))) + 5;
  const cell = width ? Math.max(1, (width - label - 4) / n) : desktopCell;
  // a row as tall as the label but for its glyphs' 1.5 px of air is named; a thinner one every step-th
  const side = n * cell, step = Math.max(1, Math.ceil((font - 1.5) / cell));
  canvas.width = Math.round((label + side + 4) * scale);
  canvas.height = Math.round((top + side + label) * scale);
  canvas.style.width = `${label + side + 4}px`;
  g.scale(scale, scale);
  g.fillStyle = getComputedStyle(canvas).color;
  g.font = "600 12px system-ui, sans-serif";
  g.fillText(title, label, 13);
  for (let q = 0; q < n; q++) {
    for (let k = 0; k < n; k++) {
      g.fillStyle = colour(weights[q * n + k]);
      g.fillRect(label + k * cell, top + q * cell, Math.ceil(cell), Math.ceil(cell));
    }
  }
  g.fillStyle = getComputedStyle(canvas).color;
  g.font = `${font}px system-ui, sans-serif`;
  g.textBaseline = "middle";
  g.textAlign = "right";
  tokens.forEach((t, q) => { if (q % step === 0) g.fillText(short(t), label - 3, top + (q + 0.5) * cell); });
  tokens.forEach((t, k) => {
    if (k % step !== 0) return;
    g.save();
    g.translate(label + (k + 0.5) * cell, top + side + 3);
    g.rotate(-Math.PI / 2);
    g.fillText(short(t), 0, 0);
    g.restore();
  });
  return { font, step, width: label + side + 4 };
}

// ----------------------------------------------------------------------------------------------
// The explorer
// ----------------------------------------------------------------------------------------------

const root = document.getElementById("mha-live");
const here = new URL(".", import.meta.url);  // .../_static/
const live = new URL("live/", here);
const state = { layer: 1, firstHead: 1 };
window.mhaLive = { last: null, timings: {}, fromCache: {} };

function element(tag, attributes = {}, text = "") {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attributes)) e.setAttribute(k, v);
  if (text) e.textContent = text;
  return e;
}

// ----------------------------------------------------------------------------------------------
// Loading: the runtime's WASM, the model and the vocabulary, each read from the browser's Cache
// Storage when a visit before this one downloaded it (keyed by the build's version: a new model is
// downloaded anew), else downloaded with its progress in MB, and kept there. Cancel stops it; a
// failed download says which file stopped where, and the button offers to try again.
// ----------------------------------------------------------------------------------------------

const CACHE = "mha-live";

async function openCache(version) {
  try {
    if (!("caches" in window)) return null;  // not a secure context (an address other than localhost over http)
    const cache = await caches.open(CACHE);
    for (const request of await cache.keys()) {  // the files of another build
      if (new URL(request.url).searchParams.get("v") !== version) await cache.delete(request);
    }
    return cache;
  } catch (error) {
    return null;  // storage refused (a private window): download as before
  }
}

async function download(name, version, cache, signal, onBytes) {
  const url = new URL(name, live);
  url.searchParams.set("v", version);
  const hit = cache ? await cache.match(url) : undefined;
  let response = hit;
  try {
    response = response || (await fetch(url, { signal }));
  } catch (error) {
    error.file = name;  // the connection failed before the file began
    throw error;
  }
  if (!response.ok) throw new Error(`${name}: HTTP ${response.status}`);
  const reader = response.body.getReader(), chunks = [];
  let received = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      received += value.length;
      onBytes(value.length);
    }
  } catch (error) {
    error.file = name;
    throw error;
  }
  const bytes = new Uint8Array(received);
  let at = 0;
  for (const c of chunks) { bytes.set(c, at); at += c.length; }
  window.mhaLive.fromCache[name] = Boolean(hit);
  if (!hit && cache) await cache.put(url, new Response(bytes)).catch(() => {});  // full storage: no cache
  return bytes;
}

function build() {
  if (location.protocol === "file:") return;  // the page's own line says how to serve the book
  root.replaceChildren();
  const note = element("p", { class: "mha-live-note", role: "status" });
  const start = element("button", { type: "button", class: "mha-live-start" }, T.start(root.dataset.downloadMb));
  const cancel = element("button", { type: "button", class: "mha-live-cancel", hidden: "" }, T.cancel);
  const progress = element("progress", { max: "1", value: "0", hidden: "", "aria-label": T.loading });
  root.append(start, cancel, progress, note);
  start.addEventListener("click", () => load(start, cancel, progress, note));
}

const MB = bytes => (bytes / 1e6).toFixed(1);

async function load(start, cancel, progress, note) {
  const clicked = performance.now();
  window.mhaLive.timings.clickedAt = clicked;
  const version = root.dataset.version || "0";
  const stop = new AbortController();
  const onCancel = () => stop.abort();
  start.disabled = true;
  start.hidden = true;
  cancel.hidden = false;
  cancel.addEventListener("click", onCancel);
  progress.hidden = false;
  note.textContent = T.loading;
  let got = 0, total = 0, shown = 0;
  try {
    const sizes = await (await fetch(new URL("sizes.json", live), { signal: stop.signal })).json();
    total = Object.values(sizes).reduce((a, b) => a + b, 0);
    const cache = await openCache(version);
    const tick = n => {
      got += n;
      progress.value = got / total;
      const now = performance.now();
      if (now - shown > 100 || got === total) { shown = now; note.textContent = T.progress(MB(got), MB(total)); }
    };
    const [ort, wasm, model, vocabText] = await Promise.all([
      import(new URL("ort.wasm.bundle.min.mjs", live).href),
      download("ort-wasm-simd-threaded.wasm", version, cache, stop.signal, tick),
      download("model.onnx", version, cache, stop.signal, tick),
      download("vocab.txt", version, cache, stop.signal, tick).then(b => new TextDecoder().decode(b)),
    ]);
    window.mhaLive.timings.downloadedAt = performance.now();
    cancel.hidden = true;
    note.textContent = Object.values(window.mhaLive.fromCache).every(Boolean) ? T.cached : T.building;
    ort.env.wasm.numThreads = 1;
    ort.env.wasm.wasmBinary = wasm.buffer;
    ort.env.wasm.proxy = true;  // the session is built and run in a worker: the page never freezes
    const session = await ort.InferenceSession.create(model, { executionProviders: ["wasm"] });
    const vocab = new Map(vocabText.split("\n").filter(Boolean).map((t, i) => [t, i]));
    progress.hidden = true;
    window.mhaLive.timings.loaded = Math.round(performance.now() - clicked);
    controls(ort, session, vocab, note, clicked);
  } catch (error) {
    progress.hidden = true;
    cancel.hidden = true;
    start.hidden = false;
    start.disabled = false;
    if (stop.signal.aborted) {
      note.textContent = T.cancelled;
      window.mhaLive.cancelled = (window.mhaLive.cancelled || 0) + 1;
    } else {
      note.textContent = error.file
        ? T.lost(error.file, MB(got), MB(total || 1))
        : `${T.failed}: ${error.message || error}.`;
      window.mhaLive.error = String(error);
    }
    start.textContent = T.retry(root.dataset.downloadMb);
  } finally {
    cancel.removeEventListener("click", onCancel);
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
    // two maps to a row where the column is narrower than two desktop maps (a phone)
    const gap = 8, narrow = grid.clientWidth < 2 * 230 + gap;
    const width = narrow ? Math.floor((grid.clientWidth - gap) / 2) : 0;
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
      window.mhaLive.drawn = drawHead(canvas, weights, last.tokens, T.head(state.layer, h), width);
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
    note.textContent = T.ran(tokens.length, ms) + (2 * unknown > pieces ? (ZH ? "" : " ") + T.unknown(unknown, pieces) : "");
    draw();
    window.mhaLive.runs = (window.mhaLive.runs || 0) + 1;
    window.mhaLive.timings.sentences = [...(window.mhaLive.timings.sentences || []), ms];
  };
  form.addEventListener("submit", event => { event.preventDefault(); run(); });
  layer.addEventListener("change", () => { state.layer = Number(layer.value); draw(); });
  heads.addEventListener("change", () => { state.firstHead = Number(heads.value); draw(); });
  note.textContent = T.ready;
  window.mhaLive.error = null;
  run().then(() => { window.mhaLive.timings.firstResult = Math.round(performance.now() - clicked); });
}

if (root) build();
