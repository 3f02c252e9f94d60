"""Tasks, tracks and instruction templates of Personalized-VLABench (selection tasks on "my" object).

Every task is a VLABench-style *selection* task: the scene holds the user's object among 2-4 same-category
look-alikes (at least one a hard negative: same colour or same pattern) and possibly one object of another
category; the instruction says "my <category>" (or, on the ``in_distribution`` track, names colour [+ pattern]).
Success is a condition set; ``progress_score`` = (conditions met + target grasped at some point) / (conditions + 1).
The first three tasks draw from the library's six categories; the shelf and button tasks also draw books
(:mod:`envs.manipulation.vlabench.books`), which never appear in the first three.
"""

from __future__ import annotations

from dataclasses import dataclass

from envs.manipulation.objects import CATEGORIES, PATTERN_WORDS, ObjectInstance


@dataclass(frozen=True)
class SelectionTask:
    """One task: the goal (``pick``, ``in_box``, ``on_plate``, ``from_shelf`` or ``press_button``), its fixture
    and its instruction templates."""

    name: str
    goal: str
    fixture: str | None  # "box", "plate", "shelf", "buttons" (one per object) or None
    templates: tuple[str, ...]  # "{obj}" is "my mug" or "the red striped mug"
    conditions: tuple[str, ...]
    description: str
    categories: tuple[str, ...] = CATEGORIES  # where the target's category is drawn from

    @property
    def kind(self) -> str:
        """The SIMPLER task kind with the same motion ("pick" or "put_on"), e.g. for the soft-prompt map."""
        return "pick" if self.goal in ("pick", "from_shelf", "press_button") else "put_on"


TASKS: dict[str, SelectionTask] = {t.name: t for t in (
    SelectionTask("select_my_pick", "pick", None,
                  ("pick up {obj}", "grab {obj} and lift it", "please pick {obj} up"),
                  ("lifted",), "pick up my <object> (grasped and lifted 8 cm)"),
    SelectionTask("select_my_in_box", "in_box", "box",
                  ("put {obj} in the box", "place {obj} into the box", "please put {obj} in the box"),
                  ("contained",), "put my <object> into the box (contain condition, released)"),
    SelectionTask("select_my_on_plate", "on_plate", "plate",
                  ("put {obj} on the plate", "place {obj} onto the plate", "please put {obj} on the plate"),
                  ("on_plate",), "put my <object> on the plate (on-top condition, released)"),
    # Appended after the first three, which must keep their episodes: they never draw a book.
    SelectionTask("select_my_from_shelf", "from_shelf", "shelf",
                  ("take {obj} out of the shelf", "get {obj} off the shelf", "please take {obj} from the shelf"),
                  ("out_of_shelf",), "take my <object> out of the shelf (grasped and lifted clear of it); "
                  "books too", categories=(*CATEGORIES, "book")),
    SelectionTask("select_my_button", "press_button", "buttons",
                  ("press the button in front of {obj}", "push the button in front of {obj}",
                   "please press the button in front of {obj}"),
                  ("pressed",), "press the button in front of my <object> (that button pressed, no other); "
                  "books too", categories=(*CATEGORIES, "book")),
)}

# The first three tasks, whose seeded episodes are pinned (tests/envs/manipulation/test_vlabench_pinned_episodes.py):
# studies and training runs measured on them default to these, so adding a task does not change their figures.
PICK_PLACE_TASKS: tuple[str, ...] = ("select_my_pick", "select_my_in_box", "select_my_on_plate")


@dataclass(frozen=True)
class Track:
    """An episode distribution: which objects, how the instruction names the target, and the room's look."""

    name: str
    personalized: bool  # "my <category>" (else colour [+ pattern] + category)
    split: str  # library split of target and distractors
    novel_target: bool  # the target wears a design that no split of the library has
    random_look: bool  # random table / floor textures and light
    description: str


TRACKS: dict[str, Track] = {t.name: t for t in (
    Track("personal", True, "test", False, False, "test-split personal objects among look-alikes (the VAP table)"),
    Track("in_distribution", False, "train", False, False, "generic instructions naming attributes, train designs"),
    Track("unseen_texture", True, "test", False, True, "personal track with random table/floor textures and light"),
    Track("cross_instance", True, "test", True, False,
          "personal objects wearing designs no library split (and no training) ever used"),
)}


def subject(inst: ObjectInstance, personalized: bool, with_pattern: bool) -> str:
    """The noun phrase: "my mug", "the red mug", "the red striped mug" or "the red book titled MIA"."""
    if personalized:
        return f"my {inst.category}"
    if not with_pattern:
        return f"the {inst.colour} {inst.category}"
    if inst.category == "book":  # a book's "pattern" is its title
        return f"the {inst.colour} book titled {inst.word}"
    pattern = "plain" if inst.pattern == "plain" else PATTERN_WORDS[inst.pattern]
    return f"the {inst.colour} {pattern} {inst.category}" if inst.pattern != "plain" else \
        f"the plain {inst.colour} {inst.category}"
