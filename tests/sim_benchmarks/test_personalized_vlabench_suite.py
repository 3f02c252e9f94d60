"""The personalized_vlabench suite: registration, the policies it offers, and one-line errors for bad input."""

import subprocess
import sys

import pytest

from sim_benchmarks import registry


def test_suite_registered_with_every_policy_of_the_vap_table():
    assert "personalized_vlabench" in registry.suites()
    offered = registry.policies_for("personalized_vlabench")
    for name in ("scripted_expert", "generic", "hard_prompt", "soft_prompt", "vap", "oracle_mask", "random"):
        assert name in offered
    assert "vap_views" in registry.policy_option_names("personalized_vlabench")
    # extending a policy keeps it on its original suite
    assert "personalized_simpler" in registry.policies()["vap"].suites


def test_bare_suite_runs_the_pick_and_place_tasks_and_the_others_by_name():
    from sim_benchmarks.evaluation import resolve_env

    suite, tasks = resolve_env("personalized_vlabench")
    assert tasks == ["select_my_pick", "select_my_in_box", "select_my_on_plate"]
    assert {"select_my_from_shelf", "select_my_button"} <= set(suite.tasks)
    assert resolve_env("personalized_vlabench/select_my_button")[1] == ["select_my_button"]
    assert resolve_env("personalized_simpler")[1] == list(registry.suites()["personalized_simpler"].tasks)


@pytest.mark.parametrize("args, word", [
    (["--env-option", "track=bogus"], "bogus"),
    (["--env-option", "cameras=front,top"], "top"),
    (["--env-option", "image_size=4000"], "image_size"),
])
def test_bad_input_exits_2_with_one_line(args, word):
    proc = subprocess.run([sys.executable, "-m", "launch.eval", "--env", "personalized_vlabench/select_my_pick",
                           "--policy", "scripted_expert", "--episodes", "1", "--workers", "1",
                           "--out", "/tmp/embodia_vlabench_bad_input", *args],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and "pybullet build" not in ln]
    assert len(lines) == 1 and word in lines[0]


def test_generic_policies_default_to_the_suite_trained_checkpoint_and_the_run_config_records_it():
    from sim_benchmarks.evaluation import EvalConfig, resolved, validate
    from sim_benchmarks.suites.personalized_vlabench import VLA_CHECKPOINT

    cfg = EvalConfig(env="personalized_vlabench", policies=["generic", "vap"])
    validate(cfg)
    assert resolved(cfg).policy_options["vla_checkpoint"] == str(VLA_CHECKPOINT)
    own = EvalConfig(env="personalized_vlabench", policies=["generic"],
                     policy_options={"vla_checkpoint": "checkpoints/generic_vla"})
    validate(own)  # the user's value wins
    assert resolved(own).policy_options["vla_checkpoint"] == "checkpoints/generic_vla"
    simpler = EvalConfig(env="personalized_simpler", policies=["generic"])
    validate(simpler)
    assert "vla_checkpoint" not in resolved(simpler).policy_options


def test_a_bad_memory_source_exits_2_with_one_line_before_anything_is_written(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "launch.eval", "--env", "personalized_vlabench/select_my_pick",
                           "--policy", "generic", "--episodes", "1", "--workers", "1",
                           "--policy-option", "vla_memory=oracle", "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and "pybullet build" not in ln]
    assert len(lines) == 1 and "oracle" in lines[0] and "depth" in lines[0] and not out.exists()


def test_the_generic_head_takes_its_memory_from_depth_only_when_asked_and_only_with_an_object_memory(tmp_path):
    import numpy as np

    from envs.errors import ConfigError
    from policies.vla.checkpoint import HeadBundle, save_checkpoint
    from policies.vla.checkpoint_files import freeze
    from policies.vla.model import FiLMActionHead, HeadConfig, VisionSpec
    from policies.vla.perceived_memory import PerceivedMemory
    from sim_benchmarks.specs import PolicyContext
    from sim_benchmarks.suites.personalized_vlabench import VLA_CHECKPOINT

    cfg = HeadConfig(vision=VisionSpec(input_size=96), state_dim=6, width=32, keypoints=8, hidden=64)  # no memory
    save_checkpoint(HeadBundle(cfg, freeze(FiLMActionHead(cfg)), np.zeros(7, np.float32), np.ones(7, np.float32),
                               np.zeros(6, np.float32), np.ones(6, np.float32)), tmp_path / "plain")

    registry.load_all()
    env = registry.suites()["personalized_vlabench"].make_env("select_my_in_box", {"cameras": "front"})
    spec = registry.policies()["generic"]
    try:
        def build(**options):
            return spec.factory(PolicyContext("personalized_vlabench", "select_my_in_box", "generic", 0, env,
                                              {"vla_checkpoint": str(VLA_CHECKPOINT), **options}))

        assert build().base.memory_refiner is None  # the default: the head's own estimate
        placed = build(vla_memory="depth").base.memory_refiner
        assert isinstance(placed, PerceivedMemory) and placed.source == "depth"
        # under the grasp-retry wrapper (which hands attribute reads to its base) the head itself gets the placement
        retry = build(vla_memory="fused", vla_grasp_retries=2).base
        assert "memory_refiner" not in vars(retry) and retry.base.memory_refiner.source == "fused"
        with pytest.raises(ConfigError, match="needs an object-memory head"):
            build(vla_memory="perceived", vla_checkpoint=str(tmp_path / "plain"))
    finally:
        env.close()
