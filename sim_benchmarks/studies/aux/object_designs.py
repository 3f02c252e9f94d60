"""Design classes of Embodia's object library (category × colour × pattern), rendered and described.

- Images: each design is put on two library body shapes of its category and rendered by the PyBullet reference
  renderer (``render_references``: object alone, varied viewpoint, distance, object yaw, light colour and strength),
  then embedded by the offline MobileNetV2 (1,280-d pooled features).
- Semantics: several descriptions per design (different wordings: the "sources"), each under several nuisance
  contexts (setting, light, photo wording — interventions that change nothing about the class), embedded by the
  offline MiniLM sentence encoder.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from envs.manipulation.objects import instances, make_texture
from envs.manipulation.personal import PersonalObject, render_references

CATEGORIES = ("mug", "bowl", "bottle", "box")
COLOURS = ("red", "blue", "green", "yellow")
PATTERNS = ("plain", "striped", "dotted")
PATTERN_PHRASES = {"plain": "with no pattern", "striped": "with horizontal stripes", "dotted": "with polka dots"}
SOURCES = (
    "a {colour} {pattern} {category}",
    "a {category} that is {colour} {phrase}",
    "{category}, colour {colour}, {pattern} design",
    "a {colour} {category} {phrase}",
)
NUISANCES = (
    "{text}",
    "a photo of {text} on a wooden table",
    "{text}, seen in warm evening light",
    "a blurry snapshot of {text} in a kitchen",
    "{text} photographed from above on a grey floor",
)


@dataclass
class DesignData:
    """Classes, their image features and their semantics."""

    classes: list[tuple[str, str, str]]  # (category, colour, pattern)
    features: np.ndarray  # [N, 1280] unit-norm MobileNetV2 features
    labels: np.ndarray  # [N] class index
    semantics: np.ndarray  # [K, C, 384]: per (source, nuisance) intervention, unit-norm MiniLM embeddings


def design_classes() -> list[tuple[str, str, str]]:
    """Every (category, colour, pattern) design of the study."""
    return [(c, k, p) for c in CATEGORIES for k in COLOURS for p in PATTERNS]


def descriptions(design: tuple[str, str, str]) -> list[str]:
    """All (source × nuisance) descriptions of a design, source-major."""
    category, colour, pattern = design
    texts = [s.format(category=category, colour=colour, pattern=pattern, phrase=PATTERN_PHRASES[pattern])
             for s in SOURCES]
    return [n.format(text=t) for t in texts for n in NUISANCES]


def render_design(design: tuple[str, str, str], bodies: int = 2, views: int = 5, size: int = 160) -> list[np.ndarray]:
    """``bodies × views`` RGB renders of a design on different library body shapes of its category."""
    category, colour, pattern = design
    images = []
    for k, body in enumerate(instances(category)[:bodies]):
        inst = dataclasses.replace(body, instance_id=f"zs_{category}_{colour}_{pattern}_{k}", colour=colour,
                                   pattern=pattern, split="design")
        images.extend(render_references(PersonalObject(inst, make_texture(inst)), size=size, count=views).images)
    return images


def load_designs(bodies: int = 2, views: int = 5, classes: list[tuple[str, str, str]] | None = None) -> DesignData:
    """Render, embed and describe every design (a few minutes of CPU for all 48 designs)."""
    from perception.mobilenet_v2 import pooled_features
    from perception.text_encoder import load_text_encoder

    classes = classes or design_classes()
    feats, labels = [], []
    for c, design in enumerate(classes):
        imgs = np.stack(render_design(design, bodies, views))
        feats.append(pooled_features(imgs))
        labels.extend([c] * len(imgs))
    features = np.concatenate(feats).astype(np.float32)
    features /= np.linalg.norm(features, axis=1, keepdims=True)
    encoder = load_text_encoder()
    texts = [t for d in classes for t in descriptions(d)]
    emb = np.asarray(encoder.encode(texts), dtype=np.float32).reshape(len(classes), -1, 384)
    emb /= np.linalg.norm(emb, axis=-1, keepdims=True)
    return DesignData(list(classes), features, np.array(labels), emb.transpose(1, 0, 2).copy())
