"""Leaderboards from one or more ``summary.json`` files: Markdown, a self-contained HTML page and a PNG chart."""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any


def _rows(summaries: list[dict[str, Any]]) -> tuple[list[str], list[tuple[str, dict[str, Any]]]]:
    # One row per (benchmark, policy); the benchmark is prefixed only when several are merged.
    several = len({s["benchmark"] for s in summaries}) > 1
    tasks: list[str] = []
    rows = []
    for s in summaries:
        for name, entry in s["policies"].items():
            for t in entry["per_task"]:
                label = f"{s['benchmark']}/{t}" if several else t
                if label not in tasks:
                    tasks.append(label)
            label = f"{s['benchmark']}:{name}" if several else name
            per_task = {(f"{s['benchmark']}/{t}" if several else t): v for t, v in entry["per_task"].items()}
            rows.append((label, {**entry, "per_task": per_task}))
    rows.sort(key=lambda r: -r[1]["success_rate"])
    return tasks, rows


def _cell(entry: dict[str, Any] | None) -> str:
    if not entry or not entry.get("episodes"):
        return "–"
    lo, hi = entry["success_ci95"]
    return f"{100 * entry['success_rate']:.0f}% [{100 * lo:.0f}–{100 * hi:.0f}]"


def render_markdown(summaries: list[dict[str, Any]]) -> str:
    """A table: rows are policies, columns are tasks (success % with Wilson 95 % CI), then overall figures."""
    tasks, rows = _rows(summaries)
    head = ["policy", *tasks, "overall success", "correct object", "wrong object", "episodes"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, e in rows:
        cells = [_cell(e["per_task"].get(t)) for t in tasks]
        cells += [_cell(e), f"{100 * e['correct_object_rate']:.0f}%", f"{100 * e['wrong_object_rate']:.0f}%",
                  str(e["episodes"])]
        lines.append("| " + " | ".join([name, *cells]) + " |")
    seeds = sorted({str(s["config"].get("seed")) for s in summaries})
    lines.append("")
    lines.append(f"Success rate per task with Wilson 95 % intervals; seed(s) {', '.join(seeds)}; "
                 f"benchmark(s) {', '.join(sorted({s['benchmark'] for s in summaries}))}.")
    return "\n".join(lines) + "\n"


def leaderboard_figure(summaries: list[dict[str, Any]]):
    """Grouped bar chart of per-task success with 95 % CI error bars; bars in each group in the table's row order,
    the legend outside the axes so it never hides a bar. Returns the matplotlib figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    tasks, rows = _rows(summaries)
    cols = [*tasks, "overall"] if len(tasks) > 1 else tasks
    fig, ax = plt.subplots(figsize=(max(6.0, 0.35 * len(cols) * max(1, len(rows))) + 2.0, 4.0), dpi=110)
    width = 0.8 / max(1, len(rows))
    x = np.arange(len(cols))
    for i, (name, e) in enumerate(rows):
        cells = [e["per_task"].get(t) if t != "overall" else e for t in cols]
        rate = np.array([c["success_rate"] if c else 0.0 for c in cells])
        lo = np.array([c["success_ci95"][0] if c else 0.0 for c in cells])
        hi = np.array([c["success_ci95"][1] if c else 0.0 for c in cells])
        ax.bar(x + (i - (len(rows) - 1) / 2) * width, 100 * rate, width, label=name,
               yerr=[100 * np.clip(rate - lo, 0, None), 100 * np.clip(hi - rate, 0, None)], capsize=2)
    ax.set_xticks(x, cols, rotation=20, ha="right")
    ax.set_ylabel("success rate (%)")
    ax.set_ylim(0, 105)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, title="policy")
    ax.set_title("success rate with 95 % Wilson CI")
    fig.tight_layout()
    return fig


def render_png(summaries: list[dict[str, Any]], path: Path) -> Path:
    """The leaderboard figure saved as a PNG."""
    import matplotlib.pyplot as plt

    fig = leaderboard_figure(summaries)
    fig.savefig(path)
    plt.close(fig)
    return path


def render_html(summaries: list[dict[str, Any]], png_path: Path | None) -> str:
    """A self-contained page (chart inlined as base64) with the same table as the Markdown board."""
    tasks, rows = _rows(summaries)
    head = ["policy", *tasks, "overall success", "correct object", "wrong object", "episodes"]
    body = []
    for name, e in rows:
        cells = [_cell(e["per_task"].get(t)) for t in tasks]
        cells += [_cell(e), f"{100 * e['correct_object_rate']:.0f}%", f"{100 * e['wrong_object_rate']:.0f}%",
                  str(e["episodes"])]
        body.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in [name, *cells]) + "</tr>")
    img = ""
    if png_path is not None and png_path.exists():
        data = base64.b64encode(png_path.read_bytes()).decode()
        img = f'<img alt="success chart" src="data:image/png;base64,{data}">'
    title = html.escape(", ".join(sorted({s["benchmark"] for s in summaries})))
    style = ("body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
             "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}td:first-child{text-align:left}"
             "th{background:#f3f3f3}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>Embodia leaderboard: {title}</title>"
            f"<style>{style}</style></head><body><h1>Leaderboard: {title}</h1><table><tr>"
            + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>" + "".join(body)
            + f"</table><p>Success rate per task, Wilson 95 % CI in brackets.</p>{img}</body></html>\n")


def write_leaderboard(summaries: list[dict[str, Any]], out_dir: Path) -> dict[str, Path]:
    """Write leaderboard.md, leaderboard.png and leaderboard.html into ``out_dir``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    md = out_dir / "leaderboard.md"
    md.write_text(render_markdown(summaries))
    png = render_png(summaries, out_dir / "leaderboard.png")
    page = out_dir / "leaderboard.html"
    page.write_text(render_html(summaries, png))
    return {"md": md, "png": png, "html": page}
