"""Benchmark the course's attention layers against PyTorch's, side by side, and store the results.

Usage (from the repository root; ``make bench`` runs the first):
    python -m benchmarks.bench_attention                 # CPU, fp32, T = 128..512 (+ memory up to 1024)
    MHA_DEVICE=cuda python -m benchmarks.bench_attention # fp32 and bf16, T = 128..2048
    python -m benchmarks.bench_attention --tiny          # seconds; what the test suite runs

Writes ``benchmarks/results/<device>.json`` and ``.md``, and appends the run's summary to
``<device>-history.jsonl`` (so the spread of a ratio over several runs can be read back).

* **Timings**: every implementation in the same process on the same inputs, in interleaved rounds
  (``benchmarks.timing.time_side_by_side``): median and interquartile range of the samples, and
  per-round ratios. The record names the CPU model, core count, torch, ISA, threads, the load
  before and after, and which SDPA backend each implementation ran.
* **Memory**: the bytes of activations the backward pass reads (parameters excluded), counted
  exactly with ``saved_tensors_hooks`` (``mha.chapters.perf.saved_activation_bytes``); on CUDA
  also the peak allocated memory.
* **Decoding** (``benchmarks.bench_decoding``) and **torch.compile** on the CPU
  (``benchmarks.bench_compile``).

Targets (``summary["targets"]``): on the CPU, mha's fast layer within 1.05 of the bare PyTorch
layer (fp32, forward+backward); on a GPU, within 1.1 of it with ``is_causal=True`` in bf16.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
from torch import nn

import mha
from benchmarks import bench_compile, bench_decoding
from benchmarks.timing import environment, load_average, sdpa_backend, synchronizer, time_side_by_side
from mha.chapters import perf_results as pr
from mha.chapters.perf import bare_attention_layer, gqa_repeat_kv_forward, saved_activation_bytes

RESULTS = Path(__file__).resolve().parent / "results"
#: The sequence length of the summary and the targets.
TARGET_LEN = 512
TARGETS = {"cpu": (pr.FUSED, pr.BARE, "float32", 1.05), "cuda": (pr.FUSED_CAUSAL, pr.BARE_CAUSAL, "bfloat16", 1.1)}


def progress(message):
    """One line per step on stderr, so a run of several minutes shows where it is."""
    print(message, file=sys.stderr, flush=True)


def implementations(d_model, num_heads, device, dtype):
    """``(name -> forward(x) returning the output, the modules)``; all layers of one kind share weights."""
    torch.manual_seed(0)
    ref = nn.MultiheadAttention(d_model, num_heads, batch_first=True).to(device, dtype)
    readable = mha.MultiHeadAttention.from_torch(ref)
    fused = mha.FusedMultiHeadAttention.from_multi_head(readable)
    looped = mha.LoopedMultiHeadAttention.from_multi_head(readable)
    gqa = mha.GroupedQueryAttention(d_model, num_heads, max(1, num_heads // 4)).to(device, dtype)
    mqa = mha.GroupedQueryAttention(d_model, num_heads, 1).to(device, dtype)
    masks = {}

    def causal_mask(x):  # built once per length, outside the timed region's first call
        seq_len = x.shape[1]
        if seq_len not in masks:
            masks[seq_len] = mha.causal_mask(seq_len, device=x.device)
        return masks[seq_len]

    fns = {
        pr.LOOPED: lambda x: looped(x)[0],
        pr.WEIGHTS: lambda x: readable(x)[0],
        pr.READABLE_SDPA: lambda x: readable(x, need_weights=False)[0],
        pr.FUSED: lambda x: fused(x, need_weights=False)[0],
        pr.TORCH_DEFAULT: lambda x: ref(x, x, x)[0],
        pr.TORCH_FAST: lambda x: ref(x, x, x, need_weights=False)[0],
        pr.BARE: lambda x: bare_attention_layer(ref, x),
        pr.FUSED_CAUSAL: lambda x: fused(x, need_weights=False, is_causal=True)[0],
        pr.FUSED_CAUSAL_MASK: lambda x: fused(x, need_weights=False, mask=causal_mask(x))[0],
        pr.BARE_CAUSAL: lambda x: bare_attention_layer(ref, x, is_causal=True),
        pr.GQA: lambda x: gqa(x, need_weights=False)[0],
        pr.GQA_REPEAT: lambda x: gqa_repeat_kv_forward(gqa, x),
        pr.MQA: lambda x: mqa(x, need_weights=False)[0],
        pr.MQA_REPEAT: lambda x: gqa_repeat_kv_forward(mqa, x),
    }
    assert list(fns) == list(pr.IMPLS)
    return fns, [ref, readable, fused, looped, gqa, mqa]


def bench_layers(batch_size, d_model, num_heads, seq_lens, memory_seq_lens, device, dtype, rounds, min_sample_s):
    """Timings (forward, forward+backward), saved bytes, SDPA backends of every implementation."""
    fns, modules = implementations(d_model, num_heads, device, dtype)
    params = [p for m in modules for p in m.parameters()]
    sync = synchronizer(device)
    rows = []
    for seq_len in seq_lens:
        gen = torch.Generator().manual_seed(seq_len)
        x_data = torch.randn(batch_size, seq_len, d_model, generator=gen).to(device, dtype)
        x_grad = x_data.clone().requires_grad_()
        with torch.no_grad():
            forward = time_side_by_side(
                {n: (lambda f=f, x=x_data: f(x)) for n, f in fns.items()}, rounds, sync, min_sample_s
            )
        both = time_side_by_side(
            {n: (lambda f=f, x=x_grad: f(x).sum().backward()) for n, f in fns.items()}, rounds, sync, min_sample_s
        )
        for name in fns:
            rows.append({"impl": name, "seq_len": seq_len, "forward": forward[name], "forward_backward": both[name]})
        fastest = min(both, key=lambda n: both[n]["median_ms"])
        progress(f"T={seq_len}: forward+backward fastest {fastest} {both[fastest]['median_ms']:.1f} ms")
    x_data = torch.randn(batch_size, seq_lens[-1], d_model, generator=torch.Generator().manual_seed(0))
    x_data = x_data.to(device, dtype)
    with torch.no_grad():
        backends = {name: sdpa_backend(lambda f=f: f(x_data)) for name, f in fns.items()}
    memory = []
    for seq_len in memory_seq_lens:
        gen = torch.Generator().manual_seed(seq_len)
        x_data = torch.randn(batch_size, seq_len, d_model, generator=gen).to(device, dtype)
        for name, forward in fns.items():
            entry = {
                "impl": name,
                "seq_len": seq_len,
                "saved_activation_bytes": saved_activation_bytes(forward, x_data.clone().requires_grad_(), params),
            }
            if device.type == "cuda":
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                base = torch.cuda.memory_allocated()
                forward(x_data.clone().requires_grad_()).sum().backward()
                torch.cuda.synchronize()
                entry["cuda_peak_bytes"] = torch.cuda.max_memory_allocated() - base
            memory.append(entry)
    return rows, memory, backends


def summarize(report, seq_len):
    """The ratios the chapter and the targets use, at ``seq_len``, forward+backward: per-round
    median with quartiles (:func:`mha.chapters.perf_results.paired_ratio`)."""

    def paired(a, b, key="forward_backward", t=seq_len):
        return pr.paired_ratio(report, a, b, t, key)

    device, dtype = report["environment"]["device"], report["environment"]["dtype"]
    summary = {
        "seq_len": seq_len,
        "fused_over_bare": paired(pr.FUSED, pr.BARE),
        "readable_over_bare": paired(pr.READABLE_SDPA, pr.BARE),
        "fused_over_torch_need_weights_false": paired(pr.FUSED, pr.TORCH_FAST),
        "torch_default_over_fused": paired(pr.TORCH_DEFAULT, pr.FUSED),
        "causal_over_bare_causal": paired(pr.FUSED_CAUSAL, pr.BARE_CAUSAL),
        "causal_flag_over_mask": paired(pr.FUSED_CAUSAL, pr.FUSED_CAUSAL_MASK),
        "gqa_enable_over_repeat": paired(pr.GQA, pr.GQA_REPEAT),
        "mqa_enable_over_repeat": paired(pr.MQA, pr.MQA_REPEAT),
        "looped_over_batched": {
            key: {str(t): paired(pr.LOOPED, pr.WEIGHTS, key, t) for t in pr.seq_lens(report)} for key in pr.MEASURES
        },
    }
    targets = {}
    for target_device, (impl, reference, target_dtype, limit) in TARGETS.items():
        if target_device == device and target_dtype == dtype:
            ratio = paired(impl, reference)
            targets[f"{device} {dtype}"] = {
                "impl": impl,
                "reference": reference,
                "limit": limit,
                "ratio": ratio,
                "met": ratio["median"] <= limit,
            }
    summary["targets"] = targets
    return summary


def markdown(report) -> str:
    env = report["environment"]
    lines = [
        f"# Attention benchmark: {pr.describe(report)}",
        "",
        f"Measured {env['date']} UTC on {env['cpu_model']}; python {env['python']}. "
        f"batch {report['batch_size']}, d_model {report['d_model']}, {report['num_heads']} heads; "
        f"{report['rounds']} interleaved rounds; median (IQR) in ms.",
        "",
        "| implementation | T | forward | forward+backward | SDPA backend |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in report["timings"]:
        f, b = r["forward"], r["forward_backward"]
        lines.append(
            f"| {r['impl']} | {r['seq_len']} | {f['median_ms']:.2f} ({f['iqr_ms']:.2f}) | "
            f"{b['median_ms']:.2f} ({b['iqr_ms']:.2f}) | {report['sdpa_backend'].get(r['impl']) or '-'} |"
        )
    lines += ["", "| implementation | T | activations saved for backward (MiB) |", "| --- | --- | --- |"]
    for m in report["memory"]:
        lines.append(f"| {m['impl']} | {m['seq_len']} | {m['saved_activation_bytes'] / 2**20:.2f} |")
    lines += ["", bench_decoding.markdown(report["decoding"])]
    if report.get("compile"):
        lines += ["", bench_compile.markdown(report["compile"])]
    s = report["summary"]
    lines += ["", f"Per-round ratios at T = {s['seq_len']}, forward+backward: median [q1, q3]", ""]
    for key, value in s.items():
        if isinstance(value, dict) and "median" in value:
            lines.append(f"- {key}: {value['median']:.3f} [{value['q1']:.3f}, {value['q3']:.3f}]")
    for name, target in s["targets"].items():
        verdict = "met" if target["met"] else "NOT met"
        lines.append(
            f"- target ({name}): {target['impl']} / {target['reference']} = {target['ratio']['median']:.3f} "
            f"<= {target['limit']}: {verdict}"
        )
    return "\n".join(lines) + "\n"


def configuration(device, tiny):
    if tiny:
        return dict(batch_size=2, d_model=32, num_heads=4, seq_lens=[8, 16], memory_seq_lens=[8, 16], rounds=3)
    if device.type == "cuda":
        lengths = [128, 256, 512, 1024, 2048]
        return dict(batch_size=8, d_model=768, num_heads=12, seq_lens=lengths, memory_seq_lens=lengths, rounds=25)
    return dict(
        batch_size=8,
        d_model=768,
        num_heads=12,
        seq_lens=[128, 256, 512],
        memory_seq_lens=[128, 256, 512, 1024],
        rounds=11,
    )


def run(tiny=False, out_dir=RESULTS, dtypes=None, device=None):
    device = device or mha.get_device()
    config = configuration(device, tiny)
    min_sample_s = 0.005 if device.type == "cuda" and not tiny else 0.0
    dtypes = dtypes or ([torch.float32, torch.bfloat16] if device.type == "cuda" else [torch.float32])
    reports = []
    for dtype in dtypes:
        env = environment(device, dtype)
        progress(f"== {env['device']} {env['dtype']}: layers")
        rows, memory, backends = bench_layers(device=device, dtype=dtype, min_sample_s=min_sample_s, **config)
        report = {
            "environment": env,
            **{k: config[k] for k in ("batch_size", "d_model", "num_heads", "rounds")},
            "timings": rows,
            "memory": memory,
            "sdpa_backend": backends,
        }
        progress("== decoding")
        report["decoding"] = bench_decoding.run(config["d_model"], config["num_heads"], device, dtype, tiny)
        if device.type == "cpu" and dtype == torch.float32:
            progress("== torch.compile")
            report["compile"] = bench_compile.run(device, dtype, tiny)
        report["summary"] = summarize(report, config["seq_lens"][-1] if tiny else TARGET_LEN)
        env["load_average_after"] = load_average()
        reports.append(report)
    write(reports, Path(out_dir), ("tiny-" if tiny else "") + device.type)
    return reports


def write(reports, out_dir: Path, stem: str):
    """The results file, its Markdown table, and one line per report appended to the history."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{stem}.json").write_text(json.dumps(reports, indent=1) + "\n")
    (out_dir / f"{stem}.md").write_text("\n".join(markdown(r) for r in reports))
    with open(out_dir / f"{stem}-history.jsonl", "a", encoding="utf-8") as history:
        for r in reports:
            history.write(json.dumps({"environment": r["environment"], "summary": r["summary"]}) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="tiny sizes, seconds (used by the tests)")
    parser.add_argument("--out", default=str(RESULTS), help="folder for the JSON and Markdown results")
    args = parser.parse_args()
    for report in run(tiny=args.tiny, out_dir=args.out):
        print(markdown(report))


if __name__ == "__main__":
    main()
