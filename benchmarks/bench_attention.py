"""Benchmark the course's attention implementations against PyTorch's, side by side.

Usage (from the repository root):
    python -m benchmarks.bench_attention                 # CPU, fp32, T = 128..512 (+ memory up to 1024)
    MHA_DEVICE=cuda python -m benchmarks.bench_attention # fp32 and bf16, T up to 1024
    python -m benchmarks.bench_attention --tiny          # seconds; what the test suite runs

Writes ``benchmarks/results/<device>.json`` and ``.md`` (device, torch version, threads, dtype).
Times come from ``torch.utils.benchmark`` (warm-up, repeated blocks, at least ``MIN_REPEATS``
samples, median and IQR); every implementation runs in the same process on the same inputs.
Memory is the bytes of activations the backward pass reads (parameters excluded), counted
exactly with ``saved_tensors_hooks`` (``mha.perf.saved_activation_bytes``); on CUDA it is also
the peak allocated memory. The environment record includes the machine's load average before
and after the run: timings taken on a busy machine are inflated.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.utils.benchmark as tbench
from torch import nn

import mha
from mha.chapters.perf import saved_activation_bytes

RESULTS = Path(__file__).resolve().parent / "results"
#: Fewest timed samples per measurement (slow calls still get this many).
MIN_REPEATS = 5


def implementations(d_model, num_heads, device, dtype):
    """name -> forward(x) returning the output tensor; all share the same weights where they can.

    "mha" is the fast layer, ``mha.FusedMultiHeadAttention`` (one matmul for Q, K and V, PyTorch's
    fused kernel with ``need_weights=False``): ``mha.MultiHeadAttention``'s function and weights.
    """
    torch.manual_seed(0)
    ref = nn.MultiheadAttention(d_model, num_heads, batch_first=True).to(device, dtype)
    readable = mha.MultiHeadAttention.from_torch(ref)
    ours = mha.FusedMultiHeadAttention.from_multi_head(readable)
    looped = mha.LoopedMultiHeadAttention.from_multi_head(readable)
    gqa = mha.GroupedQueryAttention(d_model, num_heads, max(1, num_heads // 4)).to(device, dtype)
    mqa = mha.GroupedQueryAttention(d_model, num_heads, 1).to(device, dtype)
    return {
        "looped (mha.LoopedMultiHeadAttention)": lambda x: looped(x)[0],
        "mha, need_weights=True (matmul + softmax)": lambda x: ours(x)[0],
        "mha, need_weights=False (SDPA)": lambda x: ours(x, need_weights=False)[0],
        "nn.MultiheadAttention (default)": lambda x: ref(x, x, x)[0],
        "nn.MultiheadAttention, need_weights=False": lambda x: ref(x, x, x, need_weights=False)[0],
        f"mha GQA g={max(1, num_heads // 4)}, need_weights=False": lambda x: gqa(x, need_weights=False)[0],
        "mha MQA g=1, need_weights=False": lambda x: mqa(x, need_weights=False)[0],
    }


def progress(message):
    """One line per measurement on stderr, so a run of several minutes shows where it is."""
    print(message, file=sys.stderr, flush=True)


def time_it(fn, min_run_time, min_repeats=MIN_REPEATS):
    """Median and IQR (ms) of ``fn()``: blocks until ``min_run_time``, then single calls up to ``min_repeats``."""
    timer = tbench.Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
    m = timer.blocked_autorange(min_run_time=min_run_time)  # warms up first
    times = list(m.times)
    while len(times) < min_repeats:
        times.append(timer.timeit(1).median)
    q1, _, q3 = statistics.quantiles(times, n=4) if len(times) > 1 else (times[0],) * 3
    return {"median_ms": statistics.median(times) * 1e3, "iqr_ms": (q3 - q1) * 1e3, "repeats": len(times)}


def bench_forward_backward(
    batch_size, d_model, num_heads, seq_lens, memory_seq_lens, device, dtype, min_run_time, min_repeats=MIN_REPEATS
):
    rows = []
    impls = implementations(d_model, num_heads, device, dtype)
    params = [p for m in gc_modules(impls) for p in m.parameters()]
    for seq_len in seq_lens:
        gen = torch.Generator().manual_seed(seq_len)
        x_data = torch.randn(batch_size, seq_len, d_model, generator=gen).to(device, dtype)
        for name, forward in impls.items():
            x = x_data.clone().requires_grad_()
            with torch.no_grad():
                fwd = time_it(lambda: forward(x_data), min_run_time, min_repeats)  # noqa: B023 (called within this iteration)

            def fwd_bwd():
                forward(x).sum().backward()  # noqa: B023 (called within this iteration)

            both = time_it(fwd_bwd, min_run_time, min_repeats)
            progress(
                f"T={seq_len:5d} {name}: forward {fwd['median_ms']:.1f} ms, forward+backward {both['median_ms']:.1f} ms"
            )
            rows.append({"impl": name, "seq_len": seq_len, "forward": fwd, "forward_backward": both})
    memory = []
    for seq_len in memory_seq_lens:
        gen = torch.Generator().manual_seed(seq_len)
        x_data = torch.randn(batch_size, seq_len, d_model, generator=gen).to(device, dtype)
        for name, forward in impls.items():
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
    return rows, memory


def gc_modules(impls):
    """The nn.Modules captured by the implementations' closures."""
    found = []
    for fn in impls.values():
        for cell in fn.__closure__ or ():
            if isinstance(cell.cell_contents, nn.Module) and cell.cell_contents not in found:
                found.append(cell.cell_contents)
    return found


def bench_decoding(d_model, num_heads, new_tokens, device, dtype, repeats=3):
    """Generate ``new_tokens`` one at a time: KV cache vs recomputing the whole prefix each step."""
    results = []
    gen = torch.Generator().manual_seed(1)
    tokens = torch.randn(1, new_tokens, d_model, generator=gen).to(device, dtype)
    for num_kv_heads in (num_heads, max(1, num_heads // 4), 1):
        torch.manual_seed(0)
        module = mha.GroupedQueryAttention(d_model, num_heads, num_kv_heads).to(device, dtype).eval()

        def with_cache():
            cache = module.new_cache(1, new_tokens)  # noqa: B023 (called within this iteration)
            outs = [module.decode_step(tokens[:, t : t + 1], cache)[0] for t in range(new_tokens)]  # noqa: B023 (called within this iteration)
            return torch.cat(outs, 1), cache

        def recompute():
            outs = [
                module(tokens[:, : t + 1], mask=mha.causal_mask(t + 1, device=device), need_weights=False)[0][:, -1:]  # noqa: B023 (called within this iteration)
                for t in range(new_tokens)
            ]
            return torch.cat(outs, 1)

        with torch.no_grad():
            cached_out, cache = with_cache()
            full_out = recompute()
            # the two calls above were the warm-up; a full generation is slow, so time single calls
            t_cache = statistics.median(
                tbench.Timer("f()", globals={"f": with_cache}).timeit(1).median for _ in range(repeats)
            )
            t_full = statistics.median(
                tbench.Timer("f()", globals={"f": recompute}).timeit(1).median for _ in range(repeats)
            )
        element = torch.tensor([], dtype=dtype).element_size()
        expected = mha.kv_cache_bytes(1, new_tokens, 1, num_kv_heads, d_model // num_heads, element)
        results.append(
            {
                "num_kv_heads": num_kv_heads,
                "new_tokens": new_tokens,
                "cache_ms": t_cache * 1e3,
                "recompute_ms": t_full * 1e3,
                "speedup": t_full / t_cache,
                "max_abs_diff": float((cached_out - full_out).abs().max()),
                "cache_bytes": cache.nbytes,
                "kv_cache_bytes_formula": expected,
                "cache_bytes_equal_formula": cache.nbytes == expected,
            }
        )
    return results


def load_average():
    """1-minute load average (None where the OS does not report it)."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def environment(device, dtype):
    return {
        "device": str(device.type),
        "device_name": torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "dtype": str(dtype).replace("torch.", ""),
        "python": platform.python_version(),
        "load_average": load_average(),
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
    }


def ratio(rows, numerator, denominator, seq_len, key="forward_backward"):
    find = {(r["impl"], r["seq_len"]): r[key]["median_ms"] for r in rows}
    return find[(numerator, seq_len)] / find[(denominator, seq_len)]


def summarize(rows, memory, target_len, memory_len):
    ours, ref_fast, ref_default = (
        "mha, need_weights=False (SDPA)",
        "nn.MultiheadAttention, need_weights=False",
        "nn.MultiheadAttention (default)",
    )
    mem = {m["impl"]: m["saved_activation_bytes"] for m in memory if m["seq_len"] == memory_len}
    return {
        "seq_len": target_len,
        "memory_seq_len": memory_len,
        "ours_over_torch_need_weights_false": ratio(rows, ours, ref_fast, target_len),
        "torch_default_over_ours": ratio(rows, ref_default, ours, target_len),
        "ours_memory_over_torch_need_weights_false": mem[ours] / mem[ref_fast],
        "ours_memory_over_torch_default": mem[ours] / mem[ref_default],
    }


def markdown(report):
    env = report["environment"]
    lines = [
        f"# Attention benchmark: {env['device']} ({env['device_name']}), torch {env['torch']}, "
        f"{env['threads']} threads, {env['dtype']}",
        "",
        f"Measured {env.get('date', '?')}; 1-minute load average {env.get('load_average')} before, "
        f"{env.get('load_average_after')} after ({env.get('cpu_count')} CPUs).",
        "",
        f"batch {report['batch_size']}, d_model {report['d_model']}, {report['num_heads']} heads; median (IQR) in ms",
        "",
        "| implementation | T | forward | forward+backward |",
        "| --- | --- | --- | --- |",
    ]
    for r in report["timings"]:
        f, b = r["forward"], r["forward_backward"]
        lines.append(
            f"| {r['impl']} | {r['seq_len']} | {f['median_ms']:.2f} ({f['iqr_ms']:.2f}) | "
            f"{b['median_ms']:.2f} ({b['iqr_ms']:.2f}) |"
        )
    lines += ["", "| implementation | T | activations saved for backward (MiB) |", "| --- | --- | --- |"]
    for m in report["memory"]:
        lines.append(f"| {m['impl']} | {m['seq_len']} | {m['saved_activation_bytes'] / 2**20:.2f} |")
    lines += [
        "",
        "| KV heads | tokens | cache (ms) | recompute (ms) | speed-up | cache bytes = formula |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for d in report["decoding"]:
        lines.append(
            f"| {d['num_kv_heads']} | {d['new_tokens']} | {d['cache_ms']:.1f} | {d['recompute_ms']:.1f} | "
            f"{d['speedup']:.1f}x | {d['cache_bytes_equal_formula']} |"
        )
    s = report["summary"]
    lines += [
        "",
        f"At T={s['seq_len']}, forward+backward: mha (SDPA) / nn.MultiheadAttention(need_weights=False) = "
        f"{s['ours_over_torch_need_weights_false']:.2f}; nn.MultiheadAttention (default) / mha (SDPA) = "
        f"{s['torch_default_over_ours']:.2f}. Memory at T={s['memory_seq_len']}: mha (SDPA) / "
        f"nn.MultiheadAttention(need_weights=False) = {s['ours_memory_over_torch_need_weights_false']:.3f}.",
    ]
    return "\n".join(lines) + "\n"


def run(tiny=False, out_dir=RESULTS, dtypes=None):
    device = mha.get_device()
    if tiny:
        config = dict(
            batch_size=2,
            d_model=32,
            num_heads=4,
            seq_lens=[8, 16],
            memory_seq_lens=[8, 16],
            min_run_time=0.01,
            min_repeats=1,
        )
        new_tokens, repeats = 8, 1
    elif device.type == "cuda":
        config = dict(
            batch_size=8,
            d_model=768,
            num_heads=12,
            seq_lens=[128, 256, 512, 1024],
            memory_seq_lens=[128, 256, 512, 1024],
            min_run_time=0.5,
        )
        new_tokens, repeats = 512, 3
    else:
        config = dict(
            batch_size=8,
            d_model=768,
            num_heads=12,
            seq_lens=[128, 256, 512],
            memory_seq_lens=[128, 256, 512, 1024],
            min_run_time=1.0,
        )
        new_tokens, repeats = 512, 3
    dtypes = dtypes or ([torch.float32, torch.bfloat16] if device.type == "cuda" else [torch.float32])
    reports = []
    for dtype in dtypes:
        env = environment(device, dtype)
        rows, memory = bench_forward_backward(device=device, dtype=dtype, **config)
        report = {
            "environment": env,
            **{k: config[k] for k in ("batch_size", "d_model", "num_heads")},
            "timings": rows,
            "memory": memory,
            "decoding": bench_decoding(config["d_model"], config["num_heads"], new_tokens, device, dtype, repeats),
        }
        report["summary"] = summarize(
            rows, memory, config["seq_lens"][-1] if tiny else 512, config["memory_seq_lens"][-1]
        )
        env["load_average_after"] = load_average()
        reports.append(report)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = ("tiny-" if tiny else "") + device.type
    (out_dir / f"{stem}.json").write_text(json.dumps(reports, indent=1) + "\n")
    (out_dir / f"{stem}.md").write_text("\n".join(markdown(r) for r in reports))
    return reports


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="tiny sizes, seconds (used by the tests)")
    parser.add_argument("--out", default=str(RESULTS), help="folder for the JSON and Markdown results")
    args = parser.parse_args()
    for report in run(tiny=args.tiny, out_dir=args.out):
        print(markdown(report))


if __name__ == "__main__":
    main()
