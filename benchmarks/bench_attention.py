"""Benchmark the course's attention layers against PyTorch's, side by side, and store the results.

Usage (from the repository root; ``make bench`` runs the first):
    python -m benchmarks.bench_attention                 # CPU, fp32, T = 128..512 (+ memory up to 1024)
    MHA_DEVICE=cuda python -m benchmarks.bench_attention # fp32 and bf16, T = 128..2048
    python -m benchmarks.bench_attention --tiny          # seconds; what the test suite runs

Writes ``benchmarks/results/<device>.json`` and ``.md``, and appends the run's summary to
``<device>-history.jsonl`` (so the spread of a ratio over several runs can be read back).

* **Timings**: every implementation in the same process on the same inputs, with modules of its
  own (no two share a weight tensor), in interleaved rounds whose order is shuffled anew each
  round from a recorded seed (``benchmarks.timing.time_side_by_side``): median and interquartile
  range of the samples, and per-round ratios. The record names the CPU model, core count, torch,
  ISA, threads, the load before and after, and which SDPA backend each implementation ran.
* **Verdicts**: every comparison the making-it-fast chapter makes (``mha.chapters.fast.perf_results.comparison_family``,
  fixed and recorded before the first timing) gets the median per-round ratio and its exact
  interval at the Bonferroni level for the whole family; a difference is called only when the
  interval excludes 1 (``mha.chapters.fast.perf_stats``).
* **Memory**: the bytes of activations the backward pass reads (parameters excluded), counted
  exactly with ``saved_tensors_hooks`` (``mha.chapters.fast.perf.saved_activation_bytes``); on CUDA
  also the peak allocated memory.
* **Decoding** (``benchmarks.bench_decoding``) and **torch.compile** on the CPU
  (``benchmarks.bench_compile``).

Targets (``summary["targets"]``): on the CPU, mha's fast layer within 1.05 of the bare PyTorch
layer (fp32, forward+backward); on a GPU, within 1.1 of it with ``is_causal=True`` in bf16.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

import torch
from torch import nn

import mha
from benchmarks import bench_compile, bench_decoding
from benchmarks.timing import environment, load_average, sdpa_backend, synchronizer, time_side_by_side
from mha.chapters.fast import perf_results as pr
from mha.chapters.fast import perf_stats
from mha.chapters.fast.perf import bare_attention_layer, gqa_repeat_kv_forward, saved_activation_bytes

RESULTS = Path(__file__).resolve().parent / "results"
#: The sequence length of the summary and the targets.
TARGET_LEN = 512
TARGETS = {"cpu": (pr.FUSED, pr.BARE, "float32", 1.05), "cuda": (pr.FUSED_CAUSAL, pr.BARE_CAUSAL, "bfloat16", 1.1)}


def progress(message):
    """One line per step on stderr, so a run of several minutes shows where it is."""
    print(message, file=sys.stderr, flush=True)


def implementations(d_model, num_heads, device, dtype):
    """``(name -> forward(x) returning the output, the modules)``.

    Every implementation has modules of its own: the same weights (the layers built from one
    seeded ``nn.MultiheadAttention``, the grouped-query layers from one seed each), copied into
    storage that no other implementation reads. No two implementations of a comparison share a
    weight tensor, so none finds the other's weights already in a cache.
    """

    def torch_layer():
        torch.manual_seed(0)
        return nn.MultiheadAttention(d_model, num_heads, batch_first=True).to(device, dtype)

    def readable():
        return mha.MultiHeadAttention.from_torch(torch_layer())

    def fused():
        return mha.FusedMultiHeadAttention.from_torch(torch_layer())

    def grouped(num_kv_heads):
        torch.manual_seed(1)
        return mha.GroupedQueryAttention(d_model, num_heads, num_kv_heads).to(device, dtype)

    gqa_heads = max(1, num_heads // 4)
    masks = {}

    def causal_mask(x):  # built once per length, outside the timed region's first call
        seq_len = x.shape[1]
        if seq_len not in masks:
            masks[seq_len] = mha.causal_mask(seq_len, device=x.device)
        return masks[seq_len]

    def own(module, forward):  # the module and a forward(x) that uses it alone
        return module, lambda x: forward(module, x)

    built = {
        pr.LOOPED: own(mha.LoopedMultiHeadAttention.from_multi_head(readable()), lambda m, x: m(x)[0]),
        pr.WEIGHTS: own(readable(), lambda m, x: m(x)[0]),
        pr.READABLE_SDPA: own(readable(), lambda m, x: m(x, need_weights=False)[0]),
        pr.FUSED: own(fused(), lambda m, x: m(x, need_weights=False)[0]),
        pr.TORCH_DEFAULT: own(torch_layer(), lambda m, x: m(x, x, x)[0]),
        pr.TORCH_FAST: own(torch_layer(), lambda m, x: m(x, x, x, need_weights=False)[0]),
        pr.BARE: own(torch_layer(), bare_attention_layer),
        pr.FUSED_CAUSAL: own(fused(), lambda m, x: m(x, need_weights=False, is_causal=True)[0]),
        pr.FUSED_CAUSAL_MASK: own(fused(), lambda m, x: m(x, need_weights=False, mask=causal_mask(x))[0]),
        pr.BARE_CAUSAL: own(torch_layer(), lambda m, x: bare_attention_layer(m, x, is_causal=True)),
        pr.GQA: own(grouped(gqa_heads), lambda m, x: m(x, need_weights=False)[0]),
        pr.GQA_REPEAT: own(grouped(gqa_heads), gqa_repeat_kv_forward),
        pr.MQA: own(grouped(1), lambda m, x: m(x, need_weights=False)[0]),
        pr.MQA_REPEAT: own(grouped(1), gqa_repeat_kv_forward),
    }
    assert list(built) == list(pr.IMPLS)
    fns = {name: forward for name, (_, forward) in built.items()}
    modules = {name: module for name, (module, _) in built.items()}
    return fns, modules


def bench_layers(
    batch_size, d_model, num_heads, seq_lens, memory_seq_lens, device, dtype, rounds, min_sample_s, order=0
):
    """Timings (forward, forward+backward), saved bytes, SDPA backends of every implementation;
    ``order`` shuffles the rounds (a seed or a shared ``random.Random``)."""
    rng = order if isinstance(order, random.Random) else random.Random(order)
    fns, modules = implementations(d_model, num_heads, device, dtype)
    params = [p for m in modules.values() for p in m.parameters()]
    sync = synchronizer(device)
    rows = []
    for seq_len in seq_lens:
        gen = torch.Generator().manual_seed(seq_len)
        x_data = torch.randn(batch_size, seq_len, d_model, generator=gen).to(device, dtype)
        x_grad = x_data.clone().requires_grad_()
        with torch.no_grad():
            forward = time_side_by_side(
                {n: (lambda f=f, x=x_data: f(x)) for n, f in fns.items()}, rounds, sync, min_sample_s, order=rng
            )
        both = time_side_by_side(
            {n: (lambda f=f, x=x_grad: f(x).sum().backward()) for n, f in fns.items()},
            rounds,
            sync,
            min_sample_s,
            order=rng,
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
    """The ratios the targets use, at ``seq_len``, forward+backward: per-round median with
    quartiles (:func:`mha.chapters.fast.perf_results.paired_ratio`), kept in every run's history line;
    and ``comparisons``, every comparison of the chapter's family with its corrected interval and
    verdict (:func:`mha.chapters.fast.perf_results.verdicts`)."""

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
    summary["comparisons"] = pr.verdicts({**report, "summary": {"seq_len": seq_len}})
    return summary


def markdown(report) -> str:
    env = report["environment"]
    lines = [
        f"# Attention benchmark: {pr.describe(report)}",
        "",
        f"Measured {env['date']} UTC on {env['cpu_model']}; python {env['python']}. "
        f"batch {report['batch_size']}, d_model {report['d_model']}, {report['num_heads']} heads; "
        f"{report['rounds']} interleaved rounds, order {pr.order_of(report)}; median (IQR) in ms.",
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
    comparisons = s.get("comparisons", {})
    if comparisons:
        first = next(iter(comparisons.values()))
        lines += [
            "",
            f"Every comparison of the chapter ({first['comparisons']}): median per-round ratio A / B and its "
            f"exact interval at level {1 - first['alpha'] / first['comparisons']:.4f} (Bonferroni, "
            f"family-wise {1 - first['alpha']:.2f}); a difference is called when the interval excludes 1.",
            "",
        ]
        lines += [f"- {pr.verdict_line(label, result)}" for label, result in comparisons.items()]
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
        rounds=25,
    )


def run(tiny=False, out_dir=RESULTS, dtypes=None, device=None, seed=0):
    """Run every benchmark, with the order of every round drawn from one generator seeded with
    ``seed``; the comparisons the chapter judges are fixed (``method["comparisons"]``) before the
    first timing."""
    device = device or mha.get_device()
    config = configuration(device, tiny)
    min_sample_s = 0.005 if device.type == "cuda" and not tiny else 0.0
    dtypes = dtypes or ([torch.float32, torch.bfloat16] if device.type == "cuda" else [torch.float32])
    target_len = config["seq_lens"][-1] if tiny else TARGET_LEN
    reports = []
    for dtype in dtypes:
        rng = random.Random(seed)
        with_compile = device.type == "cpu" and dtype == torch.float32
        family = pr.comparison_family(
            config["seq_lens"],
            target_len,
            config["num_heads"],
            bench_decoding.grid(device, tiny),
            bench_decoding.kv_head_counts(config["num_heads"]),
            bench_compile.FLAGS if with_compile else (),
        )
        method = {
            "order": "shuffled",
            "order_seed": seed,
            "own_weights": True,
            "alpha": perf_stats.ALPHA,
            "correction": "Bonferroni",
            "comparisons": [c.label for c in family],
        }
        env = environment(device, dtype)
        progress(f"== {env['device']} {env['dtype']}: layers ({len(family)} comparisons fixed)")
        rows, memory, backends = bench_layers(
            device=device, dtype=dtype, min_sample_s=min_sample_s, order=rng, **config
        )
        report = {
            "environment": env,
            "method": method,
            **{k: config[k] for k in ("batch_size", "d_model", "num_heads", "rounds")},
            "timings": rows,
            "memory": memory,
            "sdpa_backend": backends,
        }
        progress("== decoding")
        report["decoding"] = bench_decoding.run(config["d_model"], config["num_heads"], device, dtype, tiny, order=rng)
        if with_compile:
            progress("== torch.compile")
            report["compile"] = bench_compile.run(device, dtype, tiny, order=rng)
        report["summary"] = summarize(report, target_len)
        if list(report["summary"]["comparisons"]) != method["comparisons"]:
            raise RuntimeError("the comparisons judged differ from those fixed before the run")
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
            line = {"environment": r["environment"], "method": r["method"], "summary": r["summary"]}
            history.write(json.dumps(line) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="tiny sizes, seconds (used by the tests)")
    parser.add_argument("--out", default=str(RESULTS), help="folder for the JSON and Markdown results")
    parser.add_argument("--seed", type=int, default=0, help="seed of the order of the rounds (recorded)")
    args = parser.parse_args()
    for report in run(tiny=args.tiny, out_dir=args.out, seed=args.seed):
        print(markdown(report))


if __name__ == "__main__":
    main()
