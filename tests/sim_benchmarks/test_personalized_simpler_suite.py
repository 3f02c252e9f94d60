"""Registration of the Personalized-SIMPLER suites and the CLI's handling of bad configuration."""

import subprocess
import sys
from pathlib import Path

import matplotlib
import pytest

from envs.errors import ConfigError
from sim_benchmarks import registry
from sim_benchmarks.registry import PolicyContext

STOCK_PHOTO = str(Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg")


def test_suites_and_policies_registered():
    suites = registry.suites()
    assert set(suites["personalized_simpler"].tasks) == {"fractal_pick_my", "fractal_move_my_near",
                                                         "bridge_pick_my", "bridge_put_my_on"}
    assert set(suites["generic_simpler"].tasks) == {"fractal_pick", "fractal_move_near", "bridge_pick",
                                                    "bridge_put_on"}
    for name in ("personalized_simpler", "generic_simpler"):
        assert {"scripted_expert", "random"} <= set(registry.policies_for(name))


def test_factories_build_working_policies():
    suite = registry.suites()["generic_simpler"]
    env = suite.make_env("fractal_pick", {"image_size": 48})
    obs, info = env.reset(seed=0)
    for name in ("scripted_expert", "random"):
        policy = registry.policies()[name].factory(PolicyContext("generic_simpler", "fractal_pick", name, 0, env))
        policy.reset(obs["instruction"], {**info, "policy_seed": 1})
        action = policy.act(obs)
        assert env.action_space.contains(action.astype("float32"))
    env.close()
    with pytest.raises(ConfigError, match="unknown task 'fractal_pick_my'"):
        suite.make_env("fractal_pick_my", {})


@pytest.mark.parametrize("args, message", [
    (["--env", "personalized_simpler/fractal_fly"], "fractal_fly"),
    (["--env", "personalized_simpler/fractal_pick_my", "--env-option", "personal_category=spoon"], "spoon"),
    (["--env", "personalized_simpler/fractal_pick_my", "--env-option", "personal_texture=/no/such.png",
      "--env-option", "personal_category=mug"], "personal_texture"),
    (["--env", "personalized_simpler/fractal_pick_my", "--env-option", f"personal_texture={STOCK_PHOTO}",
      "--env-option", "personal_category=mug", "--env-option", "personal_references=/no/such_ref.png"],
     "cannot read personal_references '/no/such_ref.png'"),
])
def test_cli_bad_configuration_exits_2(args, message, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "launch.eval", *args, "--policy", "random", "--episodes", "1",
                           "--out", str(tmp_path / "run")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
