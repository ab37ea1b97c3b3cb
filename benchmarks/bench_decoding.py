"""Decoding benchmarks: generating with a KV cache, and one decoding step against its roofline.

* ``generation``: generate ``new_tokens`` tokens one at a time with a KV cache and by recomputing
  the whole prefix at every step, for G = H, H/4 and 1 key/value heads (MHA, GQA, MQA).
* ``steps``: one decoding step with a cache already holding ``context_len`` tokens, for several
  batch sizes x contexts, with the bytes the step must read (weights + cache) beside its time.
* ``bandwidth``: how fast this device reads memory (the sum of a large tensor), the slope of the
  roofline ``time >= bytes / bandwidth``.

All timings are side by side in interleaved rounds whose order is shuffled by ``order``
(``benchmarks.timing.time_side_by_side``), and every timed function has a module of its own
(the same seeded weights, in storage no other one reads).
"""

from __future__ import annotations

import torch

import mha
from benchmarks.timing import synchronizer, time_side_by_side
from mha.chapters.fast import perf_results as pr


def kv_head_counts(num_heads):
    """MHA, GQA with a quarter of the heads, MQA: G = H, H/4, 1 (without repeats at small H)."""
    return sorted({num_heads, max(1, num_heads // 4), 1}, reverse=True)


def _layer(d_model, num_heads, g, device, dtype):
    torch.manual_seed(0)
    return mha.GroupedQueryAttention(d_model, num_heads, g).to(device, dtype).eval()


def generation(d_model, num_heads, new_tokens, device, dtype, rounds, order=0):
    """KV cache against recomputing the prefix, generating ``new_tokens`` tokens at batch 1."""
    gen = torch.Generator().manual_seed(1)
    tokens = torch.randn(1, new_tokens, d_model, generator=gen).to(device, dtype)
    fns, checks = {}, {}
    for g in kv_head_counts(num_heads):
        cached, full = _layer(d_model, num_heads, g, device, dtype), _layer(d_model, num_heads, g, device, dtype)

        def with_cache(module=cached):
            cache = module.new_cache(1, new_tokens)
            outs = [module.decode_step(tokens[:, t : t + 1], cache)[0] for t in range(new_tokens)]
            return torch.cat(outs, 1), cache

        def recompute(module=full):
            outs = [
                module(tokens[:, : t + 1], is_causal=True, need_weights=False)[0][:, -1:] for t in range(new_tokens)
            ]
            return torch.cat(outs, 1)

        with torch.no_grad():
            cached_out, cache = with_cache()
            checks[g] = (float((cached_out - recompute()).abs().max()), cache.nbytes)
        fns[f"cache g={g}"], fns[f"recompute g={g}"] = with_cache, recompute
    with torch.no_grad():
        times = time_side_by_side(fns, rounds, synchronizer(device), warmup=0, order=order)
    element = torch.tensor([], dtype=dtype).element_size()
    results = []
    for g, (max_abs_diff, nbytes) in checks.items():
        cache_t, full_t = times[f"cache g={g}"], times[f"recompute g={g}"]
        ratios = [f / c for f, c in zip(full_t["samples_ms"], cache_t["samples_ms"])]
        results.append(
            {
                "num_kv_heads": g,
                "new_tokens": new_tokens,
                "cache": cache_t,
                "recompute": full_t,
                "speedup": dict(zip(("q1", "median", "q3"), pr.quartiles(ratios))),
                "max_abs_diff": max_abs_diff,
                "cache_bytes": nbytes,
                "kv_cache_bytes_formula": mha.kv_cache_bytes(1, new_tokens, 1, g, d_model // num_heads, element),
            }
        )
    return results


def steps(d_model, num_heads, device, dtype, grid, rounds, order=0):
    """One decoding step (batch B, one new token each) with ``context_len`` tokens already cached."""
    head_dim = d_model // num_heads
    element = torch.tensor([], dtype=dtype).element_size()
    results = []
    for batch_size, context_len in grid:
        gen = torch.Generator().manual_seed(batch_size * 100_003 + context_len)
        x = torch.randn(batch_size, 1, d_model, generator=gen).to(device, dtype)
        fns, sizes = {}, {}
        for g in kv_head_counts(num_heads):
            module = _layer(d_model, num_heads, g, device, dtype)
            cache = module.new_cache(batch_size, context_len)
            prefix = (batch_size, g, context_len - 1, head_dim)
            cache.append(
                torch.randn(prefix, generator=gen).to(device, dtype),
                torch.randn(prefix, generator=gen).to(device, dtype),
            )

            def step(module=module, cache=cache, x=x, filled=context_len - 1):
                cache.length = filled  # the step appends token number context_len again
                module.decode_step(x, cache)

            fns[g] = step
            weight_bytes = sum(p.numel() * p.element_size() for p in module.parameters())
            sizes[g] = (weight_bytes, mha.kv_cache_bytes(batch_size, context_len, 1, g, head_dim, element))
        with torch.no_grad():
            times = time_side_by_side(fns, rounds, synchronizer(device), warmup=2, order=order)
        for g, (weight_bytes, cache_bytes) in sizes.items():
            results.append(
                {
                    "num_kv_heads": g,
                    "batch_size": batch_size,
                    "context_len": context_len,
                    "time": times[g],
                    "weight_bytes": weight_bytes,
                    "cache_bytes": cache_bytes,
                }
            )
        del fns
    return results


def bandwidth(device, dtype, nbytes, rounds):
    """Read bandwidth (bytes/s): the time to sum a tensor of ``nbytes``."""
    element = torch.tensor([], dtype=dtype).element_size()
    x = torch.ones(nbytes // element, dtype=dtype, device=device)
    time = time_side_by_side({"sum": lambda: x.sum()}, rounds, synchronizer(device), warmup=2)["sum"]
    per_sample = [x.numel() * element / (ms / 1e3) for ms in time["samples_ms"]]
    q1, median, q3 = pr.quartiles(per_sample)
    return {"bytes": x.numel() * element, "time": time, "bytes_per_s": median, "q1": q1, "q3": q3}


def grid(device, tiny=False):
    """The (batch, context) pairs of the decoding steps."""
    if tiny:
        return [(1, 8), (2, 16)]
    if device.type == "cuda":
        return [(1, 512), (1, 4096), (16, 4096), (64, 4096)]
    return [(1, 512), (1, 4096), (4, 4096), (16, 4096)]


def run(d_model, num_heads, device, dtype, tiny=False, order=0):
    if tiny:
        new_tokens, rounds, generations, read = 8, 2, 1, 2**20
    elif device.type == "cuda":
        new_tokens, rounds, generations, read = 256, 25, 11, 2**30
    else:
        new_tokens, rounds, generations, read = 256, 25, 11, 2**28
    return {
        "generation": generation(d_model, num_heads, new_tokens, device, dtype, generations, order),
        "steps": steps(d_model, num_heads, device, dtype, grid(device, tiny), rounds, order),
        "bandwidth": bandwidth(device, dtype, read, rounds),
    }


def markdown(decoding) -> str:
    lines = [
        "| KV heads | tokens | cache (ms) | recompute (ms) | speed-up [q1, q3] | cache bytes = formula |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for d in decoding["generation"]:
        s = d["speedup"]
        lines.append(
            f"| {d['num_kv_heads']} | {d['new_tokens']} | {d['cache']['median_ms']:.1f} | "
            f"{d['recompute']['median_ms']:.1f} | {s['median']:.1f}x [{s['q1']:.1f}, {s['q3']:.1f}] | "
            f"{d['cache_bytes'] == d['kv_cache_bytes_formula']} |"
        )
    bw = decoding["bandwidth"]
    lines += [
        "",
        f"Read bandwidth (sum of {bw['bytes'] / 2**20:.0f} MiB): {bw['bytes_per_s'] / 1e9:.1f} GB/s "
        f"[{bw['q1'] / 1e9:.1f}, {bw['q3'] / 1e9:.1f}]",
        "",
        "| KV heads | batch | context | step (ms) | IQR | weights (MiB) | cache read (MiB) | bytes / bandwidth (ms) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for s in decoding["steps"]:
        total = s["weight_bytes"] + s["cache_bytes"]
        lines.append(
            f"| {s['num_kv_heads']} | {s['batch_size']} | {s['context_len']} | {s['time']['median_ms']:.2f} | "
            f"{s['time']['iqr_ms']:.2f} | {s['weight_bytes'] / 2**20:.1f} | {s['cache_bytes'] / 2**20:.1f} | "
            f"{total / bw['bytes_per_s'] * 1e3:.2f} |"
        )
    return "\n".join(lines)
