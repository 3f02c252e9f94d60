"""Category words: parsing "my <category>" out of an instruction, and scoring image crops for a category.

The scorer needs no detector weights: MobileNetV2's ImageNet probabilities are mapped onto the category word by
MiniLM similarity between the word and each class's names (e.g. "mug" → "coffee mug" 1.0, "cup" 0.3, …).
"""

from __future__ import annotations

import re

import numpy as np

from envs.errors import ConfigError
from perception.candidate import OBJECT_CROP, object_crop

# Words that end a noun phrase after "my": prepositions, articles and connectives used in manipulation commands.
_STOP = {"on", "onto", "in", "into", "to", "near", "next", "beside", "by", "from", "off", "and", "the", "a", "an",
         "with", "under", "over", "inside", "towards", "toward", "at", "of", "up", "please", "that", "which"}


def parse_category(instruction: str) -> str:
    """The personal object's category from an instruction: "put my coffee mug on the plate" → "coffee mug".

    Raises ConfigError when the instruction names no personal ("my ...") object.
    """
    words = re.findall(r"[a-zA-Z][a-zA-Z'-]*", instruction.lower())
    if "my" not in words:
        raise ConfigError(f"instruction {instruction!r} names no personal object; expected '... my <object> ...'")
    phrase = []
    for word in words[words.index("my") + 1:]:
        if word in _STOP:
            break
        phrase.append(word)
    if not phrase:
        raise ConfigError(f"instruction {instruction!r} has 'my' but no object word after it")
    return " ".join(phrase[-2:])  # at most a two-word head noun, e.g. "coffee mug"


def drop_personal(instruction: str, replacement: str = "the") -> str:
    """The generic phrasing of a personal instruction: "pick up my mug" → "pick up the mug"."""
    return re.sub(r"\bmy\b", replacement, instruction, flags=re.IGNORECASE)


class CategoryScorer:
    """P(category | crop) from ImageNet class probabilities weighted by class-name/category text similarity."""

    def __init__(self, band: float = 0.25, text_encoder=None, embedder=None) -> None:
        self.band = band  # classes within this cosine of the best-matching class get positive weight
        self._text = text_encoder
        if embedder is None or not hasattr(embedder, "class_probabilities"):  # e.g. a DINOv2 embedder: no classes
            from perception.embedders import MobileNetEmbedder

            embedder = MobileNetEmbedder()
        self.embedder = embedder  # share it with the matcher: one network pass per candidate crop
        self._weights: dict[str, np.ndarray] = {}

    def class_weights(self, category: str) -> np.ndarray:
        """Weight in [0, 1] of each ImageNet class for ``category`` (1 for the best-matching class name)."""
        if category not in self._weights:
            from perception.imagenet_classes import IMAGENET_CLASSES
            from perception.text_encoder import load_text_encoder

            enc = self._text or load_text_encoder()
            sims = (enc.encode([category]) @ enc.encode(list(IMAGENET_CLASSES)).T)[0]
            top = float(sims.max())
            self._weights[category] = np.clip((sims - (top - self.band)) / self.band, 0.0, 1.0).astype(np.float32)
        return self._weights[category]

    @staticmethod
    def crops(image: np.ndarray, masks: list[np.ndarray]) -> np.ndarray:
        """The matcher's object crops (object alone on grey: neighbours confuse the classifier)."""
        out = [object_crop(image, m)[0] for m in masks]
        return np.stack(out) if out else np.zeros((0, OBJECT_CROP, OBJECT_CROP, 3), np.uint8)

    def score(self, image: np.ndarray, masks: list[np.ndarray], boxes: list[tuple[int, int, int, int]],
              category: str) -> np.ndarray:
        """Category probability mass for every crop, shape (n,)."""
        if not masks:
            return np.zeros(0, np.float32)
        probs = self.embedder.class_probabilities(self.crops(image, masks))
        return probs @ self.class_weights(category)
