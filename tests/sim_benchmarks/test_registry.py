import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

from envs.errors import ConfigError
from sim_benchmarks import registry, suites

ROOT = Path(__file__).resolve().parents[2]


def test_the_table_names_every_suite_module_and_what_each_declares():
    modules = {m.name for m in pkgutil.iter_modules(suites.__path__)}
    table = {m for mods in (*registry.SUITE_MODULES.values(), *registry.TRAINER_MODULES.values(),
                            registry.EVERY_SUITE) for m in mods}
    assert table == modules
    registry.load_all()
    assert registry.unavailable() == {}
    assert sorted(registry.suites()) == registry.suite_names()
    # every suite is declared by a module of its own entry, and every policy offered for it comes from one
    assert all(module in registry.SUITE_MODULES[s] for s, module in registry.SUITE_ORIGINS.items())
    for (policy, suite), module in registry.POLICY_ORIGINS.items():
        assert module in (registry.EVERY_SUITE if suite == "*" else registry.SUITE_MODULES[suite]), (policy, suite)


def test_unknown_suite_is_a_config_error_naming_the_valid_ones():
    with pytest.raises(ConfigError, match="unknown env 'nope'; valid: classic_control, games"):
        registry.suite("nope")


def test_the_main_job_loads_only_its_own_line():
    code = ("import sys, json\nfrom sim_benchmarks import evaluation\n"
            "evaluation.validate(evaluation.EvalConfig(env='personalized_simpler'))\nprint(json.dumps(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    others = [m for m in loaded if m.split(".")[0] in {"langgraph", "langchain_core", "mcp"} or any(
        line in m for line in ("vimrag", "toolpro", "envs.rag", "envs.services", "streaming", "games", "maniskill",
                               "vlabench", "classic_control"))]
    assert others == []
    assert "sim_benchmarks.suites.vap_policies" in loaded  # what it runs is there
