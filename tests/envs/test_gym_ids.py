"""gymnasium ids: every family registers on import of its package, ``gym.make`` takes the typed options as keywords,
and every id passes ``check_env`` with gymnasium's space warnings made failures (:func:`checked`). The other
families' check_env tests build through their ids too: tests/envs/manipulation (SIMPLER, VLABench),
tests/envs/test_games.py and tests/agents/vimrag/test_vimrag_corpus.py (on the shared tiny corpus)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import warnings
from pathlib import Path

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import envs.games
import envs.manipulation
import envs.manipulation.maniskill
import envs.manipulation.vlabench
import envs.rag
import envs.services  # noqa: F401  (imports register the ids)
from envs.errors import ConfigError
from envs.registration import FAMILIES

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"PersonalizedSimpler": "envs.manipulation", "GenericSimpler": "envs.manipulation",
            "PersonalizedVLABench": "envs.manipulation.vlabench", "Games": "envs.games", "VimRAG": "envs.rag",
            "ToolPro": "envs.services", "ManiSkill": "envs.manipulation.maniskill",
            "PersonalizedManiSkill": "envs.manipulation.maniskill"}


def checked(env: gym.Env) -> None:
    """check_env with gymnasium's space warnings ("not within the observation space", ...) made failures."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped, skip_render_check=True)
    problems = [str(w.message) for w in caught if "space" in str(w.message) or "obs returned" in str(w.message)]
    assert not problems, problems


def test_every_family_is_registered_by_importing_its_package() -> None:
    assert set(FAMILIES) == set(PACKAGES)
    # One fresh interpreter imports the packages one by one: each import adds exactly its own families' ids.
    order = list(dict.fromkeys(PACKAGES.values()))
    code = ("import importlib, json, gymnasium as gym\n"
            "seen = {}\n"
            f"for package in {order!r}:\n"
            "    importlib.import_module(package)\n"
            "    seen[package] = sorted(i for i in gym.registry if i.startswith('Embodia/'))\n"
            "print(json.dumps(seen))\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    seen, before = json.loads(proc.stdout.splitlines()[-1]), set()
    for package in order:
        added = set(seen[package]) - before
        expected = {i for family, p in PACKAGES.items() if p == package for i in FAMILIES[family]}
        assert added == expected, package
        before |= added


def test_the_docs_table_lists_every_id() -> None:
    text = (ROOT / "docs" / "gym_ids.md").read_text()
    documented = set(re.findall(r"Embodia/[A-Za-z]+-[A-Za-z0-9]+-v0", text))
    registered = {i for ids in FAMILIES.values() for i in ids}
    assert documented == registered


@pytest.mark.parametrize("env_id", sorted(FAMILIES["ToolPro"]))
def test_toolpro_ids_pass_check_env(env_id: str, tmp_path) -> None:
    env = gym.make(env_id, rtt_ms=0.0, db_dir=str(tmp_path))
    checked(env)
    obs, _ = env.reset(seed=3)
    assert obs["task"] == FAMILIES["ToolPro"][env_id] and Path(obs["db"]).parent == tmp_path


@pytest.mark.parametrize("env_id, kwargs, message", [
    ("Embodia/Games-RpsBiased-v0", {"rounds": "many"}, "option rounds must be an integer, got 'many'"),
    ("Embodia/Games-RpsBiased-v0", {"round": 5}, "unknown option for games env 'round'"),
    ("Embodia/ToolPro-CancelOpen10-v0", {"error_rate": 2.0}, "error_rate must be in 0..1, got 2.0"),
    ("Embodia/VimRAG-PlacedColour-v0", {"split": "val"}, "unknown split 'val'"),
    ("Embodia/PersonalizedVLABench-SelectMyPick-v0", {"image_size": 8}, "image_size must be in [32, 512], got 8"),
    ("Embodia/Games-RpsBiased-v0", {"rounds": 5, "options": {"rounds": 6}}, "option rounds given both"),
])
def test_keywords_are_typed_options(env_id: str, kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        gym.make(env_id, **kwargs)
