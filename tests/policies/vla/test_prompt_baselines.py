"""Learned-prompt baselines: colour naming from reference images, instruction rewrite, soft-prompt regression."""

import numpy as np

from envs.manipulation.objects import instances
from envs.manipulation.personal import PersonalObject, render_references
from policies.vla.prompt_baselines import dominant_colour, fit_soft_prompt, hard_prompt_instruction


def test_dominant_colour_of_reference_renders():
    mugs = instances("mug", "test")
    right = 0
    for inst in mugs:
        refs = render_references(PersonalObject.from_library(inst.instance_id), 96, 3).images
        right += dominant_colour(refs) == inst.colour
    assert right >= len(mugs) - 1, right  # patterns (white/black ink) must not win over the base colour
    assert dominant_colour([np.full((20, 20, 3), 128, np.uint8)]) is None  # nothing but background


def test_hard_prompt_instruction():
    assert hard_prompt_instruction("pick up my mug", "mug", "blue") == "pick up the blue mug"
    assert hard_prompt_instruction("put my cup on the plate", "cup", "red") == "put the red cup on the plate"
    assert hard_prompt_instruction("pick up my mug", "mug", None) == "pick up the mug"


def test_soft_prompt_ridge_recovers_linear_map():
    rng = np.random.default_rng(0)
    w = rng.normal(size=(20, 5))
    x = rng.normal(size=(200, 20))
    y = x @ w + 0.3
    m = fit_soft_prompt(x, y, ridge=1e-6)
    pred = m.predict(x[0])
    target = y[0] / np.linalg.norm(y[0])
    np.testing.assert_allclose(pred, target, atol=1e-4)
    assert abs(np.linalg.norm(pred) - 1.0) < 1e-5
