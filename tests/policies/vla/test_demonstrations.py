"""Scripted-expert demonstrations: valid attribute relabelling, DART labels, index-seeded reproducibility."""

import numpy as np
import pytest

from agents.manipulation.demonstrations import DemoConfig, collect_demos, describe_options
from envs.errors import ConfigError
from envs.manipulation.objects import LIBRARY, instances


def test_describe_options_single_out_the_target():
    mugs = instances("mug", "train")
    target = next(m for m in mugs if m.pattern != "plain")
    same_pattern = next(m for m in mugs if m.pattern == target.pattern and m.colour != target.colour)
    other = next(m for m in mugs if m.pattern != target.pattern and m.colour != target.colour)
    opts = describe_options(target, [other])
    assert f"the {target.colour} mug" in opts and f"the {target.pattern} mug" in opts
    assert f"the {target.colour} {target.pattern} mug" in opts
    opts = describe_options(target, [same_pattern])  # the pattern no longer singles it out
    assert f"the {target.pattern} mug" not in opts and f"the {target.colour} mug" in opts
    assert all(LIBRARY[m.instance_id].split == "train" for m in mugs)


def test_demos_are_reproducible_sharded_and_clean_labelled():
    cfg = DemoConfig(tasks=("fractal_pick",), episodes=2, seed=3, noise_std=0.01, noise_fraction=1.0,
                     image_size=64, keep_failed=True)
    full = collect_demos(cfg)
    parts = [collect_demos(cfg, indices=[i]) for i in (1, 0)]
    assert [e["seed"] for e in full.episodes] == [parts[1].episodes[0]["seed"], parts[0].episodes[0]["seed"]]
    merged_actions = np.stack(parts[1].actions + parts[0].actions)
    np.testing.assert_array_equal(np.stack(full.actions), merged_actions)
    np.testing.assert_array_equal(np.stack(full.frames), np.stack(parts[1].frames + parts[0].frames))
    assert len(full) == sum(e["steps"] for e in full.episodes) and len(full.frames) == len(full)
    acts = np.stack(full.actions)
    # clean expert labels: xyz within the per-step clip, gripper exactly ±1, roll/pitch zero
    assert np.abs(acts[:, :3]).max() <= 0.03 + 1e-6 and set(np.unique(acts[:, 6])) <= {-1.0, 1.0}
    assert np.all(acts[:, 3:5] == 0)
    for text in full.instructions:
        assert text.startswith("pick up the ") and " my " not in f" {text} "
    assert full.episode[0] == 0 and full.episode[-1] == 1
    with pytest.raises(ConfigError, match="generic only"):
        collect_demos(DemoConfig(tasks=("fractal_pick_my",), episodes=1))


def test_dropped_objects_are_regrasped_with_expert_labels():
    cfg = DemoConfig(tasks=("bridge_put_on",), episodes=2, seed=0, noise_fraction=0.0, image_size=48,
                     regrasps=2, drop_fraction=1.0)
    demos = collect_demos(cfg)
    assert all(e["dropped"] and e["regrasps"] >= 1 for e in demos.episodes)
    kept = sorted(set(demos.episode))
    assert kept, "a re-grasp that held keeps its episode"
    acts = np.stack(demos.actions)
    # the recorded labels stay the expert's: after the drop it opens (retreat), later it closes again
    grip = acts[np.asarray(demos.episode) == kept[0], 6]
    closes = np.flatnonzero(np.diff(grip) > 0)
    assert len(closes) >= 2, "two closing commands in one episode: the grasp and the re-grasp"
    # the drop draws from its own stream: turning drops on changes no episode's seed
    plain = collect_demos(DemoConfig(tasks=("bridge_put_on",), episodes=2, seed=0, noise_fraction=0.0,
                                     image_size=48))
    assert [e["seed"] for e in plain.episodes] == [e["seed"] for e in demos.episodes]
    assert "dropped" not in plain.episodes[0]
    with pytest.raises(ConfigError, match="needs expert re-grasps"):
        DemoConfig(drop_fraction=0.5)
    with pytest.raises(ConfigError, match=r"must be in \[0, 1\]"):
        DemoConfig(regrasps=1, drop_fraction=1.5)
