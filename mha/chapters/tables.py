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
