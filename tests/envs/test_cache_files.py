"""A cache built on first use is built once across processes (light imports: spawned workers import this module)."""

from pathlib import Path

from envs.atomic_io import write_text_atomic


def _build_once(folder: str) -> str:
    from envs.cache_files import load_or_build

    target = Path(folder) / "cache.txt"

    def build() -> str:
        with open(Path(folder) / "builds.log", "a") as log:  # every build leaves a line
            log.write("built\n")
        write_text_atomic(target, "payload")
        return "payload"

    return load_or_build(Path(folder) / ".lock", lambda: target.read_text() if target.exists() else None, build)


def test_parallel_processes_build_a_cache_once_and_all_load_it(tmp_path):
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(2) as pool:
        got = pool.map(_build_once, [str(tmp_path)] * 4)
    assert got == ["payload"] * 4
    assert (tmp_path / "builds.log").read_text() == "built\n"
