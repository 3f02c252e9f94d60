"""The README's ``policies/aux`` rows and each results page's verdict line, rendered from committed results files.

``docs/results/aux/<method>.json`` is a full run's ``results.json``, copied as it was written. Rows are never typed
by hand: ``python -m sim_benchmarks.studies.aux.readme_table [--write]`` prints them (and rewrites them in
README.md), and a test checks that the README and the pages say what the files say.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

RESULTS_DIR = Path("docs/results/aux")
# Which results page describes each method.
PAGES = {
    "dmanet": "docs/results/aux_structured.md", "confsleepnet": "docs/results/aux_structured.md",
    "gotabpfn": "docs/results/aux_structured.md", "zeroshot_expansion": "docs/results/aux_structured.md",
    "pseudo_mallows": "docs/results/aux_structured.md", "manifold_kv": "docs/results/aux_lm_geometry.md",
    "curvature": "docs/results/aux_lm_geometry.md", "subspace_path": "docs/results/aux_subspace_path.md",
    "instemb": "docs/results/aux_instemb.md", "hamu": "docs/results/aux_training.md",
    "llr": "docs/results/aux_training.md", "robuq": "docs/results/aux_training.md",
    "spard": "docs/results/aux_training.md", "theseus": "docs/results/aux_training.md",
}


def seeds_text(seeds: list[int]) -> str:
    """``0-4`` for a contiguous run of seeds, else the comma list."""
    if len(seeds) > 1 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}"
    return ",".join(str(s) for s in seeds)


def num(x: float) -> str:
    """A figure with 3 significant digits (no exponent for ordinary magnitudes)."""
    return f"{x:.3g}" if abs(x) >= 1e-3 or x == 0 else f"{x:.2e}"


def verdict_text(data: dict[str, Any]) -> str:
    """The verdict cell: the word, with how many parts are ``yes`` for ``partly``."""
    word = data["verdict"]
    if word == "partly":
        yes = sum(v == "yes" for v in data["parts"].values())
        return f"partly ({yes} of {len(data['parts'])} parts)"
    return "**yes**" if word == "yes" else word


def readme_row(data: dict[str, Any]) -> str:
    """One README table row from a results file's payload."""
    lo, hi = data["ci95"]
    measured = f"{data['metric']}: {num(data['value'])} [{num(lo)}, {num(hi)}]"
    if data.get("margin") is not None:
        measured += f"; margin {num(data['margin'])}"
    room = data.get("headroom")
    if room:
        measured += f"; headroom: best {num(room['best'])} vs baseline {num(room['baseline'])}"
    if data.get("synthetic"):
        measured += " (synthetic)"
    return f"| {data['method']} | {seeds_text(data['seeds'])} | {measured} | {verdict_text(data)} |"


def page_verdict_line(data: dict[str, Any]) -> str:
    """The line a results page carries for the method's verdict."""
    line = f"**Verdict: {data['verdict']}**"
    if data["verdict"] == "partly":
        line += " (yes: " + "; ".join(k for k, v in data["parts"].items() if v == "yes") + ")"
    return line


def load_results(root: Path = Path(".")) -> dict[str, dict[str, Any]]:
    """Every committed results file by method name."""
    folder = root / RESULTS_DIR
    return {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))}


def update_readme(text: str, results: dict[str, dict[str, Any]]) -> str:
    """``text`` with the aux table row of every method in ``results`` replaced by its rendered row."""
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        for method, data in results.items():
            if line.startswith(f"| {method} |"):
                lines[i] = readme_row(data) + "\n"
    return "".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print the README rows and page verdict lines for every committed results file; ``--write`` also rewrites
    those rows in README.md."""
    argv = sys.argv[1:] if argv is None else argv
    results = load_results()
    for data in results.values():
        print(readme_row(data))
    print()
    for method, data in results.items():
        print(f"{PAGES[method]} ({method}): {page_verdict_line(data)}")
    if "--write" in argv:
        readme = Path("README.md")
        readme.write_text(update_readme(readme.read_text(), results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
