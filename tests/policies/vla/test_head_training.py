"""The FiLM head learns language-conditioned targets on cached features; checkpoints verify and reload."""

import json

import numpy as np
import pytest
import torch

from envs.errors import ConfigError
from policies.vla.checkpoint import load_checkpoint, save_checkpoint
from policies.vla.checkpoint_files import parameter_digest, sha256_file
from policies.vla.model import FiLMActionHead, HeadConfig, VisionSpec, spatial_softmax
from policies.vla.training import (
    DemoArrays,
    TrainConfig,
    chunk_targets,
    episode_batches,
    heatmap_loss,
    memory_labels,
    split_episodes,
    train_head,
)

SMALL = HeadConfig(vision=VisionSpec(channels=8, input_size=96), state_dim=2, width=32, keypoints=8, hidden=64,
                   chunk=2)


def grounding_data(n_episodes: int, steps: int, seed: int) -> DemoArrays:
    """Two feature channels each hold one peak; instruction k's target is the (x, y) of channel k's peak.

    A head that ignores the instruction can at best predict the midpoint, so low loss needs grounding.
    """
    rng = np.random.default_rng(seed)
    n = n_episodes * steps
    feats = np.zeros((n, 8, 6, 6), np.float32)
    text_index = np.repeat(rng.integers(0, 2, n_episodes), steps)
    actions = np.zeros((n, 7), np.float32)
    grid = np.linspace(-1, 1, 6)
    for i in range(n):
        cells = rng.choice(36, size=2, replace=False)
        for ch, cell in enumerate(cells):
            feats[i, ch, cell // 6, cell % 6] = 6.0
        r, c = divmod(int(cells[text_index[i]]), 6)
        actions[i, :2] = grid[c], grid[r]
        actions[i, 6] = 1.0 if text_index[i] else -1.0
    text_table = np.eye(2, 384, dtype=np.float32)
    return DemoArrays(torch.from_numpy(feats).half(), text_table, text_index, rng.normal(size=(n, 2)).astype(
        np.float32), actions, np.repeat(np.arange(n_episodes), steps))


def test_spatial_softmax_finds_peak():
    x = torch.full((1, 1, 5, 5), -50.0)
    x[0, 0, 1, 4] = 50.0
    np.testing.assert_allclose(spatial_softmax(x).numpy(), [[1.0, -0.5]], atol=1e-5)


def test_chunk_targets_stay_inside_episode():
    actions = np.arange(6, dtype=np.float32)[:, None].repeat(7, 1)
    episode = np.array([0, 0, 0, 1, 1, 1])
    y, m = chunk_targets(actions, episode, 3)
    assert y[1, :, 0].tolist() == [1, 2, 2] and m[1].tolist() == [1, 1, 0]
    assert y[3, :, 0].tolist() == [3, 4, 5] and m[5].tolist() == [1, 0, 0]
    tr, va = split_episodes(np.repeat(np.arange(10), 4), 0.2, seed=3)
    assert va.sum() == 8 and not (tr & va).any()


def test_head_learns_grounded_targets_and_is_reproducible():
    torch.set_num_threads(1)
    data = grounding_data(40, 10, seed=0)
    cfg = TrainConfig(head=SMALL, epochs=25, batch_size=64, lr=3e-3, patience=25, seed=1, max_minutes=2.0)
    bundle, stats = train_head(data, cfg)
    first_val = stats["history"][0]["val_loss"]
    assert stats["best_val_loss"] < 0.35 * first_val, stats["history"]
    # the prediction moves with the instruction: same image, two instructions → the two peaks
    test = grounding_data(1, 20, seed=5)
    errs = []
    with torch.no_grad():
        for k in (0, 1):
            text = torch.as_tensor(test.text_table[[k] * 20])
            states = torch.zeros(20, 2)
            out = bundle.head(test.features, text, states)[:, 0].numpy() * bundle.action_std + bundle.action_mean
            # recompute the per-frame peak of channel k directly from the features
            peaks = test.features[:, k].float().flatten(1).argmax(1).numpy()
            target = np.stack([np.linspace(-1, 1, 6)[peaks % 6], np.linspace(-1, 1, 6)[peaks // 6]], 1)
            errs.append(np.abs(out[:, :2] - target).mean())
    assert max(errs) < 0.25, errs  # cell spacing is 0.4: the right peak, not the midpoint or the other one
    bundle2, _ = train_head(data, cfg)
    assert parameter_digest(bundle.head) == parameter_digest(bundle2.head)
    assert not any(p.requires_grad for p in bundle.head.parameters())


def test_checkpoint_round_trip_and_corruption(tmp_path):
    torch.manual_seed(0)
    head = FiLMActionHead(SMALL)
    from policies.vla.checkpoint import HeadBundle

    bundle = HeadBundle(SMALL, head, np.zeros(7, np.float32), np.ones(7, np.float32), np.zeros(2, np.float32),
                        np.ones(2, np.float32))
    digest = save_checkpoint(bundle, tmp_path / "ck", training={"command": "x"})
    assert digest == sha256_file(tmp_path / "ck" / "head.pt")
    assert (tmp_path / "ck" / "head.pt.sha256").read_text().startswith(digest)
    loaded = load_checkpoint(tmp_path / "ck")
    assert parameter_digest(loaded.head) == parameter_digest(head)
    assert not loaded.head.training and not any(p.requires_grad for p in loaded.head.parameters())

    # one flipped byte → sha256 failure
    raw = bytearray((tmp_path / "ck" / "head.pt").read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    (tmp_path / "ck" / "head.pt").write_bytes(bytes(raw))
    with pytest.raises(ConfigError, match="fail the sha256 check"):
        load_checkpoint(tmp_path / "ck")

    # consistent checksum but a config that does not match the weights → mismatch error
    save_checkpoint(bundle, tmp_path / "ck2")
    manifest = json.loads((tmp_path / "ck2" / "manifest.json").read_text())
    manifest["head_config"]["width"] = 64
    (tmp_path / "ck2" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ConfigError, match="do not match its head_config"):
        load_checkpoint(tmp_path / "ck2")

    # garbage weights with a matching checksum → unreadable
    save_checkpoint(bundle, tmp_path / "ck3")
    (tmp_path / "ck3" / "head.pt").write_bytes(b"not a torch file")
    manifest = json.loads((tmp_path / "ck3" / "manifest.json").read_text())
    manifest["weights_sha256"] = sha256_file(tmp_path / "ck3" / "head.pt")
    (tmp_path / "ck3" / "manifest.json").write_text(json.dumps(manifest))
    (tmp_path / "ck3" / "head.pt.sha256").unlink()
    with pytest.raises(ConfigError, match="cannot be read"):
        load_checkpoint(tmp_path / "ck3")

    with pytest.raises(ConfigError, match="does not exist"):
        load_checkpoint(tmp_path / "missing")
    (tmp_path / "ck4").mkdir()
    (tmp_path / "ck4" / "manifest.json").write_text("{")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_checkpoint(tmp_path / "ck4")


def test_shift_features_translates_within_bound():
    from policies.vla.training import shift_features

    x = torch.zeros(64, 1, 7, 7)
    x[:, 0, 3, 3] = 1.0
    gen = torch.Generator().manual_seed(0)
    y = shift_features(x, 1.0, gen)
    kp = spatial_softmax(y * 40.0) * 3  # keypoint in cell units from the centre
    assert kp.abs().max() <= 1.0 + 1e-3 and kp.abs().max() > 0.5  # moved, by at most one cell
    torch.testing.assert_close(y.sum((1, 2, 3)), torch.ones(64), atol=1e-5, rtol=0)  # interior mass kept
    torch.testing.assert_close(shift_features(x, 0.0, gen), x)


def test_aux_targets_cover_pre_grasp_frames_only():
    from policies.vla.training import AUX_SCALE, aux_targets

    grip = np.array([-1, -1, 1, 1, -1, 1, -1], np.float32)  # episode 0: 4 frames, episode 1: 3 frames
    actions = np.zeros((7, 7), np.float32)
    actions[:, 6] = grip
    states = np.zeros((7, 6), np.float32)
    states[:, 0] = np.linspace(0.0, 0.06, 7)
    targets = np.tile(np.array([[0.1, -0.2, 0.0]], np.float32), (7, 1))
    data = DemoArrays(torch.zeros(7, 8, 6, 6), np.eye(2, 384, dtype=np.float32), np.zeros(7, int), states,
                      actions, np.array([0, 0, 0, 0, 1, 1, 1]), targets)
    offset, mask = aux_targets(data)
    assert mask.tolist() == [1, 1, 0, 0, 1, 0, 0]  # after the first close (even once reopened) the label is stale
    np.testing.assert_allclose(offset[:, 0], (0.1 - states[:, 0]) / AUX_SCALE, rtol=1e-6)
    np.testing.assert_allclose(offset[:, 1], -0.2 / AUX_SCALE, rtol=1e-6)
    with pytest.raises(ConfigError, match="no target positions"):
        aux_targets(DemoArrays(data.features, data.text_table, data.text_index, states, actions, data.episode))
    # a head with the auxiliary output trains on it and keeps its action interface
    cfg = TrainConfig(head=HeadConfig(vision=VisionSpec(channels=8, input_size=96), state_dim=6, width=16,
                                      keypoints=4, hidden=32, chunk=2, aux_dim=2), epochs=2, batch_size=4)
    bundle, stats = train_head(data, cfg)
    assert stats["epochs_run"] == 2 and bundle.head(data.features[:3], torch.zeros(3, 384),
                                                    torch.zeros(3, 6)).shape == (3, 2, 7)


def pixel_grounding_data(n_episodes: int, steps: int, seed: int, size: int = 64) -> DemoArrays:
    """Raw images with a red and a blue square; instruction k's target is square k's centre (x, y) in [-1, 1]."""
    rng = np.random.default_rng(seed)
    n = n_episodes * steps
    images = np.full((n, 3, size, size), 90, np.uint8)
    text_index = np.repeat(rng.integers(0, 2, n_episodes), steps)
    actions = np.zeros((n, 7), np.float32)
    for i in range(n):
        centres = []
        while len(centres) < 2:
            c = rng.integers(6, size - 6, 2)
            if all(np.abs(c - o).max() > 12 for o in centres):
                centres.append(c)
        for ch, (r, col) in zip((0, 2), centres, strict=True):
            images[i, :, r - 4:r + 4, col - 4:col + 4] = 20
            images[i, ch, r - 4:r + 4, col - 4:col + 4] = 230
        r, col = centres[text_index[i]]
        actions[i, :2] = 2 * col / size - 1, 2 * r / size - 1
    text_table = np.eye(2, 384, dtype=np.float32)
    return DemoArrays(torch.from_numpy(images), text_table, text_index, np.zeros((n, 0), np.float32), actions,
                      np.repeat(np.arange(n_episodes), steps))


@pytest.mark.slow
def test_cnn_backbone_learns_colour_grounding_from_pixels(tmp_path):
    torch.set_num_threads(1)
    head = HeadConfig(vision=VisionSpec(backbone="cnn", blocks=0, channels=3, input_size=64), state_dim=0,
                      width=16, keypoints=8, hidden=64, chunk=1, dropout=0.0)
    data = pixel_grounding_data(60, 8, seed=0)
    cfg = TrainConfig(head=head, epochs=30, batch_size=32, lr=3e-3, patience=30, seed=2, max_minutes=3.0,
                      shift_cells=2.0)
    bundle, stats = train_head(data, cfg)
    test = pixel_grounding_data(8, 5, seed=9)
    with torch.no_grad():
        out = bundle.head(test.features, torch.as_tensor(test.text_table[test.text_index]))[:, 0].numpy()
    out = out * bundle.action_std + bundle.action_mean
    err = np.abs(out[:, :2] - test.actions[:, :2]).mean()
    # the squares are >= 0.375 apart in these units: a small error means the named square, not the other one
    assert err < 0.12, (err, stats["history"][-1])
    digest = save_checkpoint(bundle, tmp_path / "ck")
    again = load_checkpoint(tmp_path / "ck")
    assert again.config.vision.backbone == "cnn" and sha256_file(tmp_path / "ck" / "head.pt") == digest


def test_heatmap_loss_is_lowest_at_the_labelled_cell_and_masked():
    g = 8
    uv = torch.tensor([[[-0.625, 0.375]]])  # the centre of cell (row 5, column 2)
    hit = torch.full((1, 1, g, g), -5.0)
    hit[0, 0, 5, 2] = 5.0
    miss = torch.full((1, 1, g, g), -5.0)
    miss[0, 0, 2, 5] = 5.0
    one = torch.ones(1, 1)
    assert heatmap_loss(hit, uv, one, 1.0) < heatmap_loss(miss, uv, one, 1.0) - 1.0
    assert float(heatmap_loss(miss, uv, torch.zeros(1, 1), 1.0)) == 0.0


def test_episode_batches_group_frames_of_one_episode():
    episode = np.repeat(np.arange(10), 7)
    idx = np.flatnonzero(episode != 3)  # one episode held out
    batches = episode_batches(idx, episode, 4, 8, np.random.default_rng(0))
    flat = np.concatenate(batches)
    assert sorted(flat.tolist()) == idx.tolist()  # every frame once
    assert all(len(np.unique(episode[b])) <= 2 for b in batches)  # 8 frames = at most 2 episodes' groups
    assert not np.array_equal(flat, np.sort(flat))  # shuffled


def test_memory_head_remembers_the_first_frame():
    cfg = HeadConfig(vision=VisionSpec(backbone="cnn", blocks=0, input_size=64, channels=3), state_dim=6, width=16,
                     keypoints=4, hidden=32, memory=2)
    head = FiLMActionHead(cfg).eval()  # no feature dropout: the two calls below must see the same map
    pixels = torch.randint(0, 255, (2, 3, 64, 64), dtype=torch.uint8)
    text, state = torch.randn(2, 384), torch.randn(2, 6)
    loc = head.localise(*head.trunk(pixels, text))
    assert loc["logits"].shape == (2, 2, 32, 32) and loc["uv"].abs().max() <= 1 and loc["desc"].shape == (2, 2, 16)
    memory = head.remember(pixels, text)
    assert memory.shape == (2, 2, 2 + 16)
    # with the memory given, the output depends on it (not on a re-localisation of the current frame)
    moved = memory.clone()
    moved[..., :2] += 0.1
    assert not torch.allclose(head(pixels, text, state, memory), head(pixels, text, state, moved))
    torch.testing.assert_close(head(pixels, text, state), head(pixels, text, state, memory))
    with pytest.raises(ConfigError, match="cnn backbone"):
        FiLMActionHead(HeadConfig(vision=VisionSpec(), state_dim=6, memory=2))


def test_word_additive_heatmap_is_a_sum_over_words():
    cfg = HeadConfig(vision=VisionSpec(backbone="cnn", blocks=0, input_size=64, channels=3), state_dim=6, width=16,
                     keypoints=4, hidden=32, memory=2, words=3)
    head = FiLMActionHead(cfg).eval()
    pixels = torch.randint(0, 255, (1, 3, 64, 64), dtype=torch.uint8)
    text = torch.randn(1, 384)
    trunk = head.trunk(pixels, text)
    a, b = torch.randn(1, 1, 384), torch.randn(1, 1, 384)
    pad = torch.zeros(1, 1, 384)

    def logits(*words):
        return head.localise(*trunk, words=torch.cat(words, dim=1))["logits"]

    none = logits(pad, pad, pad)
    # each word adds its own detector map: (a + b) − b = a − nothing, and padding rows add nothing
    torch.testing.assert_close(logits(a, b, pad) - logits(pad, b, pad), logits(a, pad, pad) - none,
                               atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(logits(a, b, pad), logits(b, a, pad), atol=1e-4, rtol=1e-4)  # order-free
    with pytest.raises(ValueError, match="word embeddings"):
        head.remember(pixels, text)
    with pytest.raises(ConfigError, match="needs an object-memory head"):
        FiLMActionHead(HeadConfig(vision=cfg.vision, state_dim=6, words=3))


def test_memory_labels_take_recorded_image_positions_over_the_embodiment_camera():
    n = 6
    actions = np.zeros((n, 7), np.float32)
    actions[4:, 6] = 1.0  # the gripper closes at frame 4: the described object moves after
    uv = np.tile(np.array([[0.2, -0.3], [np.nan, np.nan]], np.float32), (n, 1, 1))
    targets = np.tile(np.array([0.5, 0.1, 0.0], np.float32), (n, 1))
    data = DemoArrays(torch.zeros(n, 3, 8, 8, dtype=torch.uint8), np.zeros((1, 384), np.float32),
                      np.zeros(n, np.int64), np.zeros((n, 6), np.float32), actions, np.zeros(n, np.int64),
                      targets=targets, goals=np.full((n, 3), np.nan, np.float32), uv=uv)
    labels = memory_labels(data, 2)
    assert np.allclose(labels["uv"][:, 0], [0.2, -0.3]) and np.allclose(labels["xy"][:, 0], [0.5, 0.1])
    assert labels["valid"][:, 0].tolist() == [1, 1, 1, 1, 0, 0]  # until the first grasp
    assert not labels["valid"][:, 1].any()  # no goal recorded (a pick task)
    with pytest.raises(ConfigError, match="image positions"):
        memory_labels(DemoArrays(data.features, data.text_table, data.text_index, data.states, actions,
                                 data.episode, targets=targets), 1)


def test_switch_frames_mark_each_chunk_that_holds_a_gripper_switch():
    from policies.vla.training import switch_frames

    grip = np.array([-1, -1, -1, 1, 1, 1, -1, -1, 1, 1], np.float32)  # episode 0: frames 0-5, episode 1: 6-9
    actions = np.zeros((10, 7), np.float32)
    actions[:, 6] = grip
    episode = np.array([0, 0, 0, 0, 0, 0, 1, 1, 1, 1])
    marked = switch_frames(actions, episode, chunk=2)
    # switches at frame 3 (close) and frame 8 (close); frame 6 starts a new episode, which is no switch
    assert np.flatnonzero(marked).tolist() == [2, 3, 7, 8]
    assert np.flatnonzero(switch_frames(actions, episode, chunk=1)).tolist() == [3, 8]


def test_memory_seen_in_training_is_the_truth_where_known_else_the_estimate():
    from policies.vla.training import memory_seen

    estimate = torch.tensor([[[0.50, 0.10], [0.60, -0.10]]], requires_grad=True)
    true_xy = torch.tensor([[[0.55, 0.05], [0.0, 0.0]]])
    valid = torch.tensor([[1.0, 0.0]])  # a pick task: no goal position
    gen = torch.Generator().manual_seed(0)
    old = memory_seen(estimate, true_xy, valid, "estimate", 0.0, gen)
    assert torch.equal(old, estimate.detach()) and not old.requires_grad  # the first heads' behaviour
    seen = memory_seen(estimate, true_xy, valid, "true", 0.0, gen)
    assert torch.allclose(seen[0, 0], true_xy[0, 0]) and torch.allclose(seen[0, 1], estimate[0, 1].detach())
    noisy = memory_seen(estimate, true_xy, valid, "true", 0.005, gen)
    assert 0 < float((noisy - seen).abs().max()) < 0.03  # a few millimetres, not centimetres
    with pytest.raises(ConfigError, match="memory_source"):
        TrainConfig(memory_source="oracle")
    with pytest.raises(ConfigError, match="switch_weight"):
        TrainConfig(switch_weight=0.5)


def test_checkpoint_records_the_action_frame_and_rejects_an_unknown_one(tmp_path):
    from dataclasses import replace

    from policies.vla.checkpoint import HeadBundle

    bundle = HeadBundle(SMALL, FiLMActionHead(SMALL), np.zeros(7, np.float32), np.ones(7, np.float32),
                        np.zeros(2, np.float32), np.ones(2, np.float32))
    save_checkpoint(bundle, tmp_path / "old")
    assert "action_frame" not in json.loads((tmp_path / "old" / "manifest.json").read_text())  # old manifests
    assert load_checkpoint(tmp_path / "old").action_frame == "command"
    save_checkpoint(replace(bundle, action_frame="hand"), tmp_path / "hand")
    assert load_checkpoint(tmp_path / "hand").action_frame == "hand"
    manifest = json.loads((tmp_path / "hand" / "manifest.json").read_text())
    manifest["action_frame"] = "world"
    (tmp_path / "hand" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ConfigError, match="action_frame 'world'"):
        load_checkpoint(tmp_path / "hand")


def test_gripper_classifier_balances_classes_and_learns_a_rare_close(tmp_path):
    from dataclasses import replace

    from policies.vla.training import gripper_classes

    targets = np.zeros((4, 2, 7), np.float32)
    targets[..., 6] = [[-1, -1], [-1, -1], [-1, 1], [1, 1]]
    closed, weights = gripper_classes(targets, np.ones((4, 2), np.float32), np.ones(4, bool))
    assert closed.tolist() == [[0, 0], [0, 0], [0, 1], [1, 1]]
    # 3 of 8 steps closed: each class's weights sum to half of the steps
    assert np.isclose(weights[closed > 0].sum(), 4.0) and np.isclose(weights[closed == 0].sum(), 4.0)

    torch.set_num_threads(1)
    data = grounding_data(40, 10, seed=0)
    rare = data.states[:, 0] > 1.2  # about one frame in nine closes, decided by the state alone
    data.actions[:, 6] = np.where(rare, 1.0, -1.0)
    head = replace(SMALL, gripper_classifier=True)
    cfg = TrainConfig(head=head, epochs=20, batch_size=64, lr=3e-3, patience=20, seed=1, max_minutes=2.0)
    bundle, _ = train_head(data, cfg)
    test = grounding_data(4, 50, seed=7)
    with torch.no_grad():
        logits = bundle.head(test.features, torch.as_tensor(test.text_table[test.text_index]),
                             torch.as_tensor((test.states - bundle.state_mean) / bundle.state_std))[:, 0, 6].numpy()
    truth = test.states[:, 0] > 1.2
    assert truth.sum() >= 10
    assert (logits[truth] > 0).mean() >= 0.8 and (logits[~truth] < 0).mean() >= 0.9, logits[truth]
    # the flag is stored with the head; manifests without it (every earlier head) load as regression heads
    save_checkpoint(bundle, tmp_path / "ck")
    assert load_checkpoint(tmp_path / "ck").config.gripper_classifier
    old = SMALL.to_dict()
    old.pop("gripper_classifier")
    assert not HeadConfig.from_dict(old).gripper_classifier


def test_widen_release_labels_the_last_frames_of_episodes_that_end_on_a_release():
    from policies.vla.training import switch_frames, widen_release

    # episode 0: a place demonstration (close at 2, the env ends it on the release at 6); episode 1: a pick
    # (closed at the end); episode 2: never closes
    grip = [-1, -1, 1, 1, 1, 1, -1] + [-1, 1, 1, 1] + [-1, -1, -1]
    actions = np.zeros((len(grip), 7), np.float32)
    actions[:, 6] = grip
    episode = np.array([0] * 7 + [1] * 4 + [2] * 3)
    widened = widen_release(actions, episode, 3)
    assert widened[:, 6].tolist() == [-1, -1, 1, 1, -1, -1, -1] + [-1, 1, 1, 1] + [-1, -1, -1]
    assert np.array_equal(widened[:, :6], actions[:, :6]) and actions[6, 6] == -1 and actions[4, 6] == 1  # a copy
    assert np.array_equal(widen_release(actions, episode, 0), actions)
    # the switch frames move with the release
    assert np.flatnonzero(switch_frames(widened, episode, chunk=1)).tolist() == [2, 4, 8]
    with pytest.raises(ConfigError, match="release_frames"):
        TrainConfig(release_frames=-1)


def test_widen_grasp_labels_the_frames_before_the_first_close():
    from policies.vla.training import widen_grasp

    # episode 0 closes at 3 (and reopens at 6); episode 1 closes at its first frame; episode 2 never closes
    grip = [-1, -1, -1, 1, 1, 1, -1] + [1, 1] + [-1, -1, -1]
    actions = np.zeros((len(grip), 7), np.float32)
    actions[:, 6] = grip
    episode = np.array([0] * 7 + [1] * 2 + [2] * 3)
    widened = widen_grasp(actions, episode, 2)
    assert widened[:, 6].tolist() == [-1, 1, 1, 1, 1, 1, -1] + [1, 1] + [-1, -1, -1]
    assert actions[1, 6] == -1 and np.array_equal(widened[:, :6], actions[:, :6])  # a copy
    assert np.array_equal(widen_grasp(actions, episode, 0), actions)
    assert widen_grasp(actions, episode, 10)[:3, 6].tolist() == [1, 1, 1]  # clipped at the episode start
    with pytest.raises(ConfigError, match="grasp_frames"):
        TrainConfig(grasp_frames=-1)


def test_displace_memory_moves_the_target_and_the_first_label_together_where_the_expert_would_follow():
    from policies.vla.training import displace_memory

    seen = torch.tensor([[[0.5, 0.1], [0.6, -0.1]]] * 3)
    y = torch.zeros(3, 2, 7)
    raw = torch.tensor([[0.01, 0.0, -0.01], [0.049, 0.0, 0.0], [0.01, 0.0, 0.0]])  # the second: at the step cap
    eligible = torch.tensor([1.0, 1.0, 0.0])  # the third: after the grasp
    a_std = torch.full((7,), 0.02)
    gen = torch.Generator().manual_seed(0)
    out_seen, out_y = displace_memory(seen, y, raw, eligible, 0.01, 0.05, a_std, gen)
    delta = out_seen[0, 0] - seen[0, 0]
    assert 0 < float(delta.abs().max()) < 0.05 and torch.equal(out_seen[:, 1], seen[:, 1])  # the goal stays
    torch.testing.assert_close(out_y[0, 0, :2], delta / 0.02)  # the label follows the memory, in label units
    assert torch.equal(out_y[0, 1], y[0, 1]) and torch.equal(out_y[0, 0, 2:], y[0, 0, 2:])  # first step's xy only
    moved_out = float((raw[1, :2] + (out_seen[1, 0] - seen[1, 0])).norm())
    assert moved_out <= 0.05 or torch.equal(out_seen[1], seen[1])  # beyond the cap: left alone
    assert torch.equal(out_seen[2], seen[2]) and torch.equal(out_y[2], y[2])
    assert torch.equal(y, torch.zeros(3, 2, 7))  # the caller's labels are not modified
    with pytest.raises(ConfigError, match="memory_shift"):
        TrainConfig(memory_shift=-0.01)
