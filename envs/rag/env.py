"""The question-answering env: one episode = one question of a split; the single action is the agent's answer.

The observation carries the question; the action is a dict with ``answer`` (scored by exact match against the
simulator ground truth) and the agent's own accounting (``visual_tokens``, ``text_tokens``, ``agent_steps``),
which the env echoes into ``info`` so the harness records them per episode.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from envs.errors import ConfigError
from envs.rag.corpus import Corpus, Question


class QuestionEnv(gym.Env):
    """Episode ``i`` (``reset(options={"episode": i})``) is question ``i`` of ``split``/``qtype``; else seed-chosen."""

    metadata = {"render_modes": []}
    indexed_episodes = True  # the harness passes the episode index (see agents.episodic.run_episode)

    def __init__(self, corpus: Corpus, split: str = "test", qtype: str | None = None) -> None:
        self.corpus = corpus
        self.questions = corpus.split(split, qtype)
        if not self.questions:
            raise ConfigError(f"the {split} split has no questions of type {qtype!r}")
        self.split, self.qtype = split, qtype
        self.observation_space = gym.spaces.Dict({"question": gym.spaces.Text(512)})
        self.action_space = gym.spaces.Text(64)
        self.current: Question | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Pick the question: by index when given, else uniformly from the seed."""
        super().reset(seed=seed)
        index = (options or {}).get("episode")
        if index is None:
            index = int(self.np_random.integers(len(self.questions)))
        if not 0 <= int(index) < len(self.questions):
            raise ConfigError(f"episode {index} is past the {len(self.questions)} {self.split} questions of type "
                              f"{self.qtype}; use --episodes <= {len(self.questions)}")
        self.current = self.questions[int(index)]
        obs = {"question": self.current.text, "qid": self.current.qid, "instruction": self.current.text}
        return obs, {"qid": self.current.qid, "qtype": self.current.qtype}

    def step(self, action: dict[str, Any] | str):
        """Score the answer (exact match, case-sensitive on the normalised vocabulary); the episode ends."""
        if self.current is None:
            raise RuntimeError("call reset() before step()")
        act = action if isinstance(action, dict) else {"answer": action}
        answer = str(act.get("answer", "")).strip().lower()
        correct = answer == self.current.answer
        info = {"success": correct, "answer": answer, "gold_answer": self.current.answer, "qid": self.current.qid,
                "visual_tokens": int(act.get("visual_tokens", 0)), "text_tokens": int(act.get("text_tokens", 0)),
                "agent_steps": int(act.get("agent_steps", 0)),
                "evidence_recall": float(act.get("evidence_recall", np.nan))}
        return {"question": self.current.text, "qid": self.current.qid}, float(correct), True, False, info
