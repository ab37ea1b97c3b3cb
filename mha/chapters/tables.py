"""Plain-text tables and byte sizes, as the chapters print them."""

from __future__ import annotations


def format_bytes(n: int) -> str:
    """Binary units with two decimals: ``2.00 GiB``, ``320.00 KiB``."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} B"


def format_table(rows: list[dict], columns: dict) -> str:
    """A plain-text table: ``columns`` maps a row key to ``(header, format spec)``."""
    header = [title for title, _ in columns.values()]
    body = [
        [format(row[key], spec) if not callable(spec) else spec(row[key]) for key, (_, spec) in columns.items()]
        for row in rows
    ]
    widths = [max(len(line[i]) for line in [header] + body) for i in range(len(header))]
    lines = ["  ".join(cell.rjust(w) for cell, w in zip(line, widths)) for line in [header] + body]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


#: Chapter 4's table of published models: a row key of ``configs.param_table`` -> (header, format).
PARAM_COLUMNS = {
    "model": ("model", "s"),
    "d_model": ("d_model", "d"),
    "heads": ("h", "d"),
    "head_dim": ("d_k", "d"),
    "layers": ("L", "d"),
    "attn_per_layer": ("attention/layer", ","),
    "attn_stack": ("attention, L layers", ","),
    "total": ("all parameters", ","),
    "attn_share": ("attention share", ".1%"),
}

#: Chapter 4's KV-cache table: a row key of ``configs.kv_cache_table`` -> (header, format).
KV_COLUMNS = {
    "model": ("model", "s"),
    "kv_heads": ("g", "d"),
    "seq_len": ("context n", ","),
    "precision": ("precision", "s"),
    "bytes": ("KV cache", format_bytes),
}

#: The calculator's lines: a key of ``configs.calculator`` -> its label.
CALCULATOR_LABELS = {
    "head_dim": "d_k",
    "params_per_layer": "parameters, one layer",
    "params_stack": "parameters, all layers",
    "flops_per_layer": "FLOPs, one layer, whole batch",
    "projection_flops": "  of which projections",
    "attention_flops": "  of which attention",
    "crossover_seq_len": "crossover n* (tokens)",
    "cache_bytes": "KV cache, whole batch (g)",
    "cache_bytes_mha": "KV cache, whole batch (g = h)",
}


def param_table_text(rows: list[dict]) -> str:
    """The published models' attention parameters (rows of ``configs.param_table``) as text."""
    return format_table(rows, PARAM_COLUMNS)


def kv_table_text(rows: list[dict]) -> str:
    """KV-cache sizes (rows of ``configs.kv_cache_table``) as text, in binary units."""
    return format_table(rows, KV_COLUMNS)


def calculator_text(values: dict) -> str:
    """The calculator's numbers (a ``configs.calculator`` dict), one labelled line each."""
    return "\n".join(
        f"{CALCULATOR_LABELS[key]:30s} {format_bytes(value) if 'bytes' in key else f'{value:,.0f}'}"
        for key, value in values.items()
    )
