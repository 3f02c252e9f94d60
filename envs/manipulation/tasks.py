"""Task definitions of Personalized-SIMPLER and their generic counterparts, with instruction templates."""

from __future__ import annotations

from dataclasses import dataclass

from envs.manipulation.objects import PATTERN_WORDS, ObjectInstance


@dataclass(frozen=True)
class TaskSpec:
    """One task: which embodiment, what must happen, and whether the instruction says "my"."""

    name: str
    embodiment: str  # "fractal" or "bridge"
    kind: str  # "pick", "move_near" or "put_on"
    personalized: bool
    description: str


PERSONALIZED_TASKS: dict[str, TaskSpec] = {
    t.name: t for t in (
        TaskSpec("fractal_pick_my", "fractal", "pick", True, "Google-Robot view: pick up my <object> (lift 5 cm)"),
        TaskSpec("fractal_move_my_near", "fractal", "move_near", True,
                 "Google-Robot view: move my <object> within 10 cm of the apple"),
        TaskSpec("bridge_pick_my", "bridge", "pick", True, "WidowX view: pick up my <object> (lift 5 cm)"),
        TaskSpec("bridge_put_my_on", "bridge", "put_on", True,
                 "WidowX view: put my <object> on the plate / in the basket"),
    )
}
GENERIC_TASKS: dict[str, TaskSpec] = {
    t.name: t for t in (
        TaskSpec("fractal_pick", "fractal", "pick", False,
                 "Google-Robot view: pick up the <colour> [<pattern>] <object>"),
        TaskSpec("fractal_move_near", "fractal", "move_near", False,
                 "Google-Robot view: move the <colour> [<pattern>] <object> near the apple"),
        TaskSpec("bridge_pick", "bridge", "pick", False, "WidowX view: pick up the <colour> [<pattern>] <object>"),
        TaskSpec("bridge_put_on", "bridge", "put_on", False,
                 "WidowX view: put the <colour> [<pattern>] <object> on the plate / in the basket"),
    )
}
# personalized task -> its generic counterpart (and back)
GENERIC_OF: dict[str, str] = {"fractal_pick_my": "fractal_pick", "fractal_move_my_near": "fractal_move_near",
                              "bridge_pick_my": "bridge_pick", "bridge_put_my_on": "bridge_put_on"}
PERSONALIZED_OF: dict[str, str] = {v: k for k, v in GENERIC_OF.items()}


def describe(inst: ObjectInstance, with_pattern: bool) -> str:
    """The noun phrase a generic instruction uses: "red mug" or "red striped mug"."""
    if with_pattern and inst.pattern == "plain":
        return f"plain {inst.colour} {inst.category}"
    if with_pattern:
        return f"{inst.colour} {PATTERN_WORDS[inst.pattern]} {inst.category}"
    return f"{inst.colour} {inst.category}"


def instruction(kind: str, subject: str, receptacle: str = "plate") -> str:
    """Fill the task's template; ``subject`` is "my mug" or "the red striped mug"."""
    if kind == "pick":
        return f"pick up {subject}"
    if kind == "move_near":
        return f"move {subject} near the apple"
    if receptacle == "basket":
        return f"put {subject} in the basket"
    return f"put {subject} on the plate"
