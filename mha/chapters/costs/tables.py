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


#: The parameter-analysis chapter's table of published models: a row key of ``configs.param_table`` -> (header, format).
#: Short headers, so that the table fits the page's 74 characters: ``attn/layer`` is one layer's
#: attention parameters, ``all params`` the whole model's, ``attn %`` the share of all parameters
#: that the L layers' attention holds (``attn_stack``, L times the first column, is left out).
PARAM_COLUMNS = {
    "model": ("model", "s"),
    "d_model": ("d_model", "d"),
    "heads": ("h", "d"),
    "head_dim": ("d_k", "d"),
    "layers": ("L", "d"),
    "attn_per_layer": ("attn/layer", ","),
    "total": ("all params", ","),
    "attn_share": ("attn %", ".1%"),
}

#: The parameter-analysis chapter's KV-cache table: a row key of ``configs.kv_cache_table`` -> (header, format).
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


def source_lines(obj, start: str | None = None, stop: str | None = None) -> str:
    """The source of ``obj`` as a page shows it: the lines that carry the idea, not the docstring.

    Without markers: the whole source (decorators and signature included), its docstring left
    out. With ``start``: from the first line that contains it through the first line at or after
    it that contains ``stop`` (or to the end), dedented. A marker that is not found raises
    ``ValueError``, so a page never prints other lines than the ones it names.
    """
    import ast
    import inspect
    import textwrap

    lines = textwrap.dedent(inspect.getsource(obj)).splitlines()
    node = ast.parse("\n".join(lines)).body[0]
    body = getattr(node, "body", [])
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
        if isinstance(body[0].value.value, str):  # drop the docstring's lines (1-based, inclusive)
            del lines[body[0].lineno - 1 : body[0].end_lineno]
    if start is None:
        return "\n".join(lines)
    first = next((i for i, line in enumerate(lines) if start in line), None)
    if first is None:
        raise ValueError(f"start marker {start!r} not found in the source of {obj.__qualname__}")
    last = len(lines) - 1
    if stop is not None:
        last = next((i for i in range(first, len(lines)) if stop in lines[i]), None)
        if last is None:
            raise ValueError(f"stop marker {stop!r} not found after {start!r} in the source of {obj.__qualname__}")
    return textwrap.dedent("\n".join(lines[first : last + 1]))
