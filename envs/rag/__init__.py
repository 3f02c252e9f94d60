"""Multimodal RAG corpora (robot run logs, keyframes, catalogue photos) and the question env over them.

Importing this package registers one gymnasium id per question type, ``Embodia/VimRAG-<Type>-v0`` (e.g.
``gym.make("Embodia/VimRAG-PlacedColour-v0", split="dev")``; keywords: ``envs.rag.env.QuestionEnvOptions``). The
first ``make`` of a corpus seed generates and caches the corpus (a few minutes, once).
"""

from envs.rag.corpus import QUESTION_TYPES
from envs.registration import register_family

register_family("VimRAG", QUESTION_TYPES, "envs.rag.env:make_question_env")
