"""The colour vote: each object's share of pixels in the instruction's colour, white and black included."""

import numpy as np

from envs.manipulation.objects import COLOURS
from perception.colour_vote import colour_labels, colour_shares, named_colour


def _painted(colours: list[str], shade: float = 1.0) -> np.ndarray:
    """One 4-pixel-wide column per colour, darkened by ``shade`` (a side facing away from the light)."""
    img = np.concatenate([np.tile(np.array(COLOURS[c], float), (8, 4, 1)) for c in colours], axis=1)
    return np.clip(img * shade, 0, 255).astype(np.uint8)


def test_every_library_colour_is_labelled_as_itself_also_in_shade():
    names = list(COLOURS)
    for shade in (1.0, 0.75):
        labels = colour_labels(_painted(names, shade))
        got = [names[int(labels[0, 4 * k])] for k in range(len(names))]
        assert got == names or shade < 1.0 and sum(a == b for a, b in zip(got, names, strict=True)) >= 7


def test_shares_score_each_object_and_unknown_colours_score_none():
    img = _painted(["white", "black", "blue"])
    owners = np.repeat(np.arange(3), 4)[None].repeat(8, axis=0)
    owners[:, 10:] = -1  # half of the blue column is nobody's (table)
    assert np.allclose(colour_shares(img, owners, 4, "white"), [1, 0, 0, 0])  # object 3 has no pixels: 0
    assert np.allclose(colour_shares(img, owners, 4, "blue"), [0, 0, 1, 0])
    assert np.allclose(colour_shares(img, owners, 3, "pink"), 0)


def test_the_named_colour_is_the_first_library_colour_word():
    assert named_colour("grab the white dotted can and lift it") == "white"
    assert named_colour("Put the Black, banded mug on the plate") == "black"
    assert named_colour("pick up my mug") is None
