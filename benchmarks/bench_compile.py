"""``torch.compile`` on mha.MultiHeadAttention, measured: compile time apart from the steady state.

The first forward+backward call of a compiled module traces it, generates and compiles kernels
(C++ on the CPU, Triton on a GPU) for the forward and the backward graph: that call's time is
reported as the compile time, in a fresh Inductor cache so that no earlier run's kernels are
reused. The first compile in a process also pays one-time costs (importing and starting the
compiler), so an unrelated function is compiled first (``warmup_compile_s``) and the two layers
are then compiled in an order drawn from ``order`` and recorded (``compile_order``). Then the
compiled and the eager module run side by side in interleaved rounds, with the weights returned
(the explicit softmax, where fusing element-wise steps can help) and without (PyTorch's fused
kernel already); each of the four has a module of its own (the same seeded weights).
"""

from __future__ import annotations

import os
import random
import tempfile
import time

import torch

import mha
from benchmarks.timing import synchronizer, time_side_by_side
from mha.chapters.fast import perf_results as pr

#: The two variants, named as in the report.
FLAGS = pr.COMPILE_FLAGS


def _warm_up(backend, device, dtype, sync) -> float:
    """Compile and run an unrelated function (forward and backward): the compiler's start-up, in s."""

    def unrelated(a):
        return (a.sin() * 2 + a.cos()).sum()

    a = torch.linspace(0, 1, 64, device=device, dtype=dtype).requires_grad_()
    sync()
    start = time.perf_counter()
    torch.compile(unrelated, backend=backend)(a).backward()
    sync()
    return time.perf_counter() - start


def run(device, dtype, tiny=False, order=0):
    if tiny:  # the test suite checks the code path, not Inductor's C++ compiler
        batch_size, seq_len, d_model, num_heads, backend, rounds = 2, 16, 32, 4, "eager", 2
    else:
        batch_size, seq_len, d_model, num_heads, backend, rounds = 8, 512, 768, 12, "inductor", 25
    rng = order if isinstance(order, random.Random) else random.Random(order)
    previous_cache = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    sync = synchronizer(device)

    def layer():
        torch.manual_seed(0)
        return mha.MultiHeadAttention(d_model, num_heads).to(device, dtype)

    with tempfile.TemporaryDirectory(prefix="mha-inductor-") as cache_dir:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache_dir
        try:
            torch.compiler.reset()
            warmup_s = _warm_up(backend, device, dtype, sync)
            gen = torch.Generator().manual_seed(seq_len)
            x = torch.randn(batch_size, seq_len, d_model, generator=gen).to(device, dtype).requires_grad_()
            first_call_s, fns = {}, {}
            compile_order = rng.sample(FLAGS, len(FLAGS))
            for flag in compile_order:
                need_weights = flag == "need_weights=True"
                eager_module, compiled = layer(), torch.compile(layer(), backend=backend)

                def eager(module=eager_module, need_weights=need_weights):
                    module(x, need_weights=need_weights)[0].sum().backward()

                def fast(module=compiled, need_weights=need_weights):
                    module(x, need_weights=need_weights)[0].sum().backward()

                sync()
                start = time.perf_counter()
                fast()  # traces and compiles the forward and the backward graph
                sync()
                first_call_s[flag] = time.perf_counter() - start
                fns[f"eager, {flag}"], fns[f"compiled, {flag}"] = eager, fast
            first_call_s = {flag: first_call_s[flag] for flag in FLAGS}
            timings = time_side_by_side(fns, rounds, sync, warmup=1, order=rng)
        finally:
            torch.compiler.reset()
            if previous_cache is None:
                os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
            else:
                os.environ["TORCHINDUCTOR_CACHE_DIR"] = previous_cache
    ratios = {}
    for flag in FLAGS:
        compiled_t, eager_t = timings[f"compiled, {flag}"]["samples_ms"], timings[f"eager, {flag}"]["samples_ms"]
        ratios[flag] = dict(zip(("q1", "median", "q3"), pr.quartiles([c / e for c, e in zip(compiled_t, eager_t)])))
    return {
        "backend": backend,
        "batch_size": batch_size,
        "seq_len": seq_len,
        "d_model": d_model,
        "num_heads": num_heads,
        "warmup_compile_s": warmup_s,
        "compile_order": compile_order,
        "first_call_s": first_call_s,
        "timings": timings,
        "compiled_over_eager": ratios,
    }


def markdown(result) -> str:
    order = ", then ".join(result.get("compile_order", ["need_weights=True", "need_weights=False"]))
    warmup = result.get("warmup_compile_s")
    lines = [
        f"torch.compile ({result['backend']}) of mha.MultiHeadAttention, batch {result['batch_size']}, "
        f"T {result['seq_len']}, forward+backward; compiled {order}"
        + (f", after a warm-up compile of an unrelated function ({warmup:.1f} s):" if warmup is not None else ":"),
        "",
        "| variant | first call, compiling (s) | eager (ms) | compiled (ms) | compiled / eager [q1, q3] |",
        "| --- | --- | --- | --- | --- |",
    ]
    for flag, first in result["first_call_s"].items():
        eager, compiled = result["timings"][f"eager, {flag}"], result["timings"][f"compiled, {flag}"]
        r = result["compiled_over_eager"][flag]
        lines.append(
            f"| {flag} | {first:.1f} | {eager['median_ms']:.1f} | {compiled['median_ms']:.1f} | "
            f"{r['median']:.2f} [{r['q1']:.2f}, {r['q3']:.2f}] |"
        )
    return "\n".join(lines)
