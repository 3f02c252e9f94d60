"""An object-memory head's memory placed by the modular base's fused depth: frames, snapping, and the suite option."""

import numpy as np
import pytest
import torch

pytest.importorskip("envs.manipulation.vlabench.scene")  # sets MUJOCO_GL before mujoco loads

from agents.manipulation.vlabench_demonstrations import to_base_frame  # noqa: E402
from envs.errors import ConfigError  # noqa: E402
from perception.tabletop_cloud import tabletop_objects, view_points  # noqa: E402
from policies.manipulation.vlabench_modular import ModularVLABenchBase  # noqa: E402
from policies.vla.checkpoint import HeadBundle  # noqa: E402
from policies.vla.checkpoint_files import freeze  # noqa: E402
from policies.vla.generic import GenericVLA  # noqa: E402
from policies.vla.model import FiLMActionHead, HeadConfig, VisionSpec  # noqa: E402
from policies.vla.perceived_memory import (  # noqa: E402
    PerceivedMemory,
    check_memory_source,
    state_to_world,
    world_to_state,
)


def _block(cx: float, cy: float, half: float, height: float, rng: np.random.Generator) -> np.ndarray:
    xy = rng.uniform(-half, half, (4000, 2)) + (cx, cy)
    return np.c_[xy, np.full(len(xy), height)]


def _scene(choose: int | None = None) -> dict:
    """Two 4 cm objects and a 20 cm box on a table at z = 0 (world frame), as the fused cloud would give them."""
    rng = np.random.default_rng(0)
    objects = tabletop_objects([_block(0.10, 0.05, 0.02, 0.08, rng), _block(-0.10, 0.02, 0.02, 0.08, rng),
                                _block(0.0, 0.25, 0.10, 0.05, rng)], 0.0)
    fixture, items = objects[0], objects[1:]
    target = None if choose is None else min(items, key=lambda o: abs(o.centre[0] - (0.10 if choose == 0 else -0.10)))
    return {"table_z": 0.0, "target": target, "fixture": fixture, "objects": items}


def _placer(source: str, scene: dict) -> PerceivedMemory:
    placer = PerceivedMemory(ModularVLABenchBase(lambda: {}, "in_box"), source)
    placer.reset("put the red can in the box", {})
    placer.base.scene = scene  # what perceive() returns on the first frame, here built from synthetic points
    return placer


def test_world_and_state_frames_match_the_demonstrations_base_frame():
    world = np.array([0.13, -0.07, 0.8])
    np.testing.assert_allclose(world_to_state(world[:2]), to_base_frame(world)[:2], atol=1e-6)
    np.testing.assert_allclose(state_to_world(world_to_state(world[:2])), world[:2], atol=1e-6)
    assert check_memory_source("depth") == "depth"
    with pytest.raises(ConfigError, match="vla_memory.*own, depth, perceived, fused"):
        check_memory_source("oracle")


def test_depth_snaps_the_heads_choice_to_the_nearest_footprint_and_keeps_a_far_one():
    scene = _scene()
    near_first = world_to_state(np.array([0.125, 0.04]))  # the head's estimate, 2.7 cm off the first object
    out = _placer("depth", scene).place({}, np.stack([near_first, world_to_state(np.array([0.05, 0.2]))]))
    np.testing.assert_allclose(state_to_world(out[0]), [0.10, 0.05], atol=0.006)
    np.testing.assert_allclose(state_to_world(out[1]), [0.0, 0.25], atol=0.006)  # the box: its footprint
    second = _placer("depth", scene).place({}, np.stack([world_to_state(np.array([-0.12, 0.0]))] * 2))
    np.testing.assert_allclose(state_to_world(second[0]), [-0.10, 0.02], atol=0.006)  # the head chose, depth placed
    nothing = _placer("depth", scene).place({}, np.stack([world_to_state(np.array([0.4, -0.3]))] * 2))
    assert np.isnan(nothing[0]).all() and not np.isnan(nothing[1]).any()  # 30 cm from everything: keep its own


def test_perceived_replaces_the_heads_choice_with_the_modular_bases():
    placer = _placer("perceived", _scene(choose=1))
    out = placer.place({}, np.stack([world_to_state(np.array([0.10, 0.05]))] * 2))  # the head looked elsewhere
    np.testing.assert_allclose(state_to_world(out[0]), [-0.10, 0.02], atol=0.006)
    with pytest.raises(ValueError, match="own"):
        PerceivedMemory(ModularVLABenchBase(lambda: {}, "pick"), "own")


class _Fixed:
    """A placement that always says the same (a stand-in for depth, to check what the policy does with it)."""

    def __init__(self, rows: np.ndarray) -> None:
        self.rows, self.resets = rows, 0

    def reset(self, instruction: str, info: dict) -> None:
        self.resets += 1

    def place(self, obs: dict, own: np.ndarray, heatmap: np.ndarray | None = None) -> np.ndarray:
        self.own = own.copy()
        return self.rows


def test_the_policy_remembers_what_the_placement_gives_and_its_own_estimate_where_it_gives_nan():
    cfg = HeadConfig(vision=VisionSpec(backbone="cnn", blocks=0, input_size=64, channels=3), state_dim=6, width=16,
                     keypoints=4, hidden=32, memory=2)
    torch.manual_seed(0)
    bundle = HeadBundle(cfg, freeze(FiLMActionHead(cfg)), np.zeros(7, np.float32), np.ones(7, np.float32),
                        np.zeros(6, np.float32), np.ones(6, np.float32))
    obs = {"image": np.random.default_rng(0).integers(0, 255, (64, 64, 3), dtype=np.uint8),
           "ee_state": np.zeros(6, np.float32)}
    own = GenericVLA(bundle)
    own.reset("pick up the red can", {})
    chunk_own = own.predict_chunk(obs)
    placed = GenericVLA(bundle, memory_refiner=_Fixed(np.array([[0.5, -0.1], [np.nan, np.nan]], np.float32)))
    placed.reset("pick up the red can", {})
    chunk_placed = placed.predict_chunk(obs)
    memory = placed._memory[0, :, :2].numpy()
    np.testing.assert_allclose(memory[0], [0.5, -0.1])
    np.testing.assert_allclose(memory[1], own._memory[0, 1, :2].numpy())  # NaN: its own estimate
    np.testing.assert_allclose(placed.memory_refiner.own, own._memory[0, :, :2].numpy())  # it saw the estimate
    assert placed.memory_refiner.resets == 1 and not np.allclose(chunk_own, chunk_placed)


def _painted_scene(blocks: list[tuple[float, float, float, tuple[int, int, int]]]) -> tuple[dict, np.ndarray]:
    """A top-down RGB-D view (camera 1 m above a table at z = 0, 30° fov: 54 cm across) of 10 cm blocks
    (cx, cy, height, rgb) and the scene the fused cloud gives: the front view's sensors are what ``fused`` reads."""
    pose = (np.array([0.0, 0.0, 1.0]), np.eye(3), 30.0)
    depth = np.full((160, 160), 1.0)
    image = np.full((160, 160, 3), 170, np.uint8)  # a grey table
    xy = view_points(depth, pose)[..., :2]
    for cx, cy, h, rgb in blocks:
        top = xy * (1.0 - h)  # where each pixel's ray meets the block's top
        inside = (np.abs(top[..., 0] - cx) <= 0.05) & (np.abs(top[..., 1] - cy) <= 0.05)
        depth[inside], image[inside] = 1.0 - h, rgb
    items = tabletop_objects([view_points(depth, pose).reshape(-1, 3)], 0.0)
    sensors = {"depth": {"front": depth}, "pose": {"front": pose}}
    return {"table_z": 0.0, "target": None, "fixture": None, "objects": items, "sensors": sensors}, image


def _fused(instruction: str, scene: dict) -> PerceivedMemory:
    placer = PerceivedMemory(ModularVLABenchBase(lambda: {}, "pick"), "fused")
    placer.reset(instruction, {})
    placer.base.scene = scene
    return placer


def test_fused_weighs_the_heatmap_against_the_named_colour_and_the_categorys_height():
    blue, red = (35, 70, 200), (200, 30, 30)
    scene, image = _painted_scene([(0.2, 0.1, 0.10, blue), (-0.2, 0.1, 0.10, red)])
    heat = np.zeros((16, 16))
    heat[:, :8] = 0.7 / 128  # the head looks mostly at the red block (left half of the image: world x < 0)
    heat[:, 8:] = 0.3 / 128
    own = np.stack([world_to_state(np.array([-0.2, 0.1]))] * 2)
    placer = _fused("pick up the blue can", scene)
    assert placer.needs_heatmap and not _placer("depth", _scene()).needs_heatmap
    out = placer.place({"image": image}, own, heatmap=heat)
    np.testing.assert_allclose(state_to_world(out[0]), [0.2, 0.1], atol=0.01)  # the colour outvotes the heatmap
    assert placer.last["colour"] == "blue" and placer.last["colour_share"][placer.last["best"]] > 0.9
    assert np.isnan(out[1]).all()  # no box or plate: the head keeps its own
    no_colour = _fused("pick up the can", scene).place({"image": image}, own, heatmap=heat)
    np.testing.assert_allclose(state_to_world(no_colour[0]), [-0.2, 0.1], atol=0.01)  # the heatmap decides
    # Both blue, one as tall as a bottle: a can of that height does not exist, the other one is chosen.
    scene, image = _painted_scene([(0.2, 0.1, 0.17, blue), (-0.2, 0.1, 0.10, blue)])
    heat = np.ones((16, 16)) / 256
    heat[:, 8:] *= 1.5
    heat /= heat.sum()
    tall = _fused("pick up the blue can", scene).place({"image": image}, own, heatmap=heat)
    np.testing.assert_allclose(state_to_world(tall[0]), [-0.2, 0.1], atol=0.01)
