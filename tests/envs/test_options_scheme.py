"""One way to declare options: every ``*Config`` / ``*Options`` dataclass is an ``envs.config.Options``, each
default is declared once, and command-line flags are parsed by the same code as ``--option key=value``."""

import ast
import inspect
import typing
from pathlib import Path

import pytest

from envs.config import coerce
from envs.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("envs", "perception", "policies", "agents", "sim_benchmarks", "launch")
# The design card keeps policies/aux on torch and numpy alone (tests/test_architecture.py checks it), so its
# method configs cannot import envs.config; the studies that drive them declare their user-facing options.
TORCH_NUMPY_ONLY = "policies/aux/"


def _declared() -> dict[str, tuple[str, list[str]]]:
    """Every top-level dataclass named ``*Config`` / ``*Options``: qualified name -> (file, base names)."""
    found = {}
    for layer in LAYERS:
        for path in sorted((ROOT / layer).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            for node in ast.parse(path.read_text(encoding="utf-8")).body:
                dataclass = any("dataclass" in ast.unparse(d) for d in getattr(node, "decorator_list", []))
                if isinstance(node, ast.ClassDef) and dataclass and node.name.endswith(("Config", "Options")):
                    found[f"{rel}:{node.name}"] = (rel, [ast.unparse(b).split(".")[-1] for b in node.bases])
    return found


def test_every_config_and_options_dataclass_derives_from_options():
    declared = _declared()
    assert len(declared) > 50  # the scan sees the tree (a broken walk would pass vacuously)
    in_scheme, bases_in_scheme = {"envs/config.py:Options"}, {"Options"}
    changed = True
    while changed:  # a subclass of a class in the scheme is in it (StreamSPRConfig derives from StreamQConfig)
        changed = False
        for name, (_, bases) in declared.items():
            if name not in in_scheme and any(b in bases_in_scheme for b in bases):
                in_scheme.add(name)
                bases_in_scheme.add(name.split(":")[1])
                changed = True
    outside = sorted(name for name, (rel, _) in declared.items()
                     if name not in in_scheme and not rel.startswith(TORCH_NUMPY_ONLY))
    assert outside == [], f"declare these as envs.config.Options subclasses: {outside}"


def test_component_configs_parse_key_value_strings_like_every_option():
    from perception.matching import MatcherConfig
    from policies.vla.training import TrainConfig

    assert TrainConfig.from_options({"epochs": "3", "memory_source": "true"}).epochs == 3
    with pytest.raises(ConfigError, match="epochs must be an integer, got 'x'"):
        TrainConfig.from_options({"epochs": "x"})
    with pytest.raises(ConfigError, match="unknown option for MatcherConfig 'colour_weight'"):
        MatcherConfig.from_options({"colour_weight": "1"})


def test_a_suite_policy_option_default_is_its_component_default():
    from agents.manipulation.demonstrations import DemoConfig
    from policies.manipulation.scripted_expert import DESCENTS, ExpertOptions, ScriptedExpert
    from policies.vap.configuration import VAPConfig, VAPOptions
    from policies.vla.configuration import EXECUTION_MODES, MEMORY_SOURCES, VLAMemoryOptions, VLAOptions
    from policies.vla.generic import GenericVLA

    vap = VAPOptions()
    assert (vap.vap_min_score, vap.vap_category_weight) == (VAPConfig().min_score, VAPConfig().category_weight)
    # Two VAP keys restate a perception default (declaring the options must not import OpenCV or torch): held equal.
    from perception.matching import MatcherConfig
    from perception.tracking import TrackerConfig

    assert (vap.vap_every, vap.vap_components) == (TrackerConfig().every, MatcherConfig().components)
    expert = inspect.signature(ScriptedExpert).parameters
    assert expert["noise_std"].default == ExpertOptions().expert_noise
    assert expert["descent"].default == ExpertOptions().expert_descent == DemoConfig().descent
    hints = typing.get_type_hints(ExpertOptions)
    assert typing.get_args(hints["expert_descent"]) == DESCENTS
    assert typing.get_args(typing.get_type_hints(VLAMemoryOptions)["vla_memory"]) == MEMORY_SOURCES
    vla, generic = VLAOptions(), inspect.signature(GenericVLA).parameters
    assert [generic[k].default for k in ("execution", "action_steps", "attributes", "localiser")] == [
        vla.vla_execution, vla.vla_action_steps, vla.vla_attributes, vla.vla_localiser]
    assert typing.get_args(typing.get_type_hints(VLAOptions)["vla_execution"]) == EXECUTION_MODES


def test_the_vla_memory_option_is_typed_and_checked_before_a_run():
    from sim_benchmarks import registry

    assert "vla_memory" in registry.policy_option_names("personalized_vlabench")
    registry.check_policy_options("personalized_vlabench", {"vla_memory": "depth"})
    with pytest.raises(ConfigError, match="vla_memory 'oracle'; valid: own, depth, perceived"):
        registry.check_policy_options("personalized_vlabench", {"vla_memory": "oracle"})


@pytest.mark.parametrize("flag, value, tp", [("--epochs", "x", int), ("--lr", "fast", float), ("--width", "2.5", int)])
def test_a_numeric_flag_is_refused_with_the_typed_option_message(tmp_path, flag, value, tp):
    from launch.train_vla import run

    with pytest.raises(ConfigError) as flag_error:
        run(["--out", str(tmp_path / "o"), flag, value])
    with pytest.raises(ConfigError) as option_error:
        coerce(flag, value, tp, what="")
    assert str(flag_error.value) == str(option_error.value) and value in str(flag_error.value)
    assert not (tmp_path / "o").exists()
