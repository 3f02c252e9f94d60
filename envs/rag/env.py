"""The question-answering env: one episode = one question of a split; the single action is the agent's answer.

The observation carries the question; the action is a dict with ``answer`` (scored by exact match against the
simulator ground truth) and the agent's own accounting (``visual_tokens``, ``text_tokens``, ``agent_steps``),
which the env echoes into ``info`` so the harness records them per episode.
"""

from __future__ import annotations

import dataclasses
import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from envs.config import Options
from envs.errors import ConfigError
from envs.rag.corpus import SPLITS, Corpus, Question, load_corpus
from envs.registration import merged_options

# Questions and ids are printable ASCII; gymnasium's Text space only holds the characters it is given.
TEXT = frozenset(string.printable)


@dataclass(frozen=True)
class QuestionEnvOptions(Options):
    """Options of the question env (``--env-option`` keys of the vimrag suite, keywords of its gymnasium ids)."""

    title = "vimrag env options"
    corpus_seed: int = dataclasses.field(default=0, metadata={"help": "seed of the generated corpus"})
    corpus_dir: str | None = dataclasses.field(default=None, metadata={
        "help": "folder of a saved corpus (corpus.json + pixels.npz) instead of the generated one"})
    split: str = dataclasses.field(default="test", metadata={"help": "question split: train, dev or test"})

    def check(self) -> None:
        from envs.errors import choice_error

        if self.split not in SPLITS:
            raise choice_error("split", self.split, SPLITS)


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
        text = gym.spaces.Text(512, min_length=1, charset=TEXT)
        self.observation_space = gym.spaces.Dict({"question": text, "qid": text, "instruction": text})
        self.action_space = gym.spaces.Text(64, charset=TEXT)
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
                "agent_steps": int(act.get("agent_steps", 0))}
        if "evidence_recall" in act:  # only agents that know the gold evidence report it (NaN otherwise)
            info["evidence_recall"] = float(act["evidence_recall"])
        obs = {"question": self.current.text, "qid": self.current.qid, "instruction": self.current.text}
        return obs, float(correct), True, False, info


def make_question_env(task: str, options: Mapping[str, Any] | None = None, **kwargs: Any) -> QuestionEnv:
    """The env of question type ``task`` over the (cached, built on first use) corpus; options as in
    :class:`QuestionEnvOptions`, also as keywords (the ``gym.make`` entry point)."""
    opts = QuestionEnvOptions.from_options(merged_options(options, kwargs))
    env = QuestionEnv(load_corpus(opts.corpus_seed, opts.corpus_dir), opts.split, task)
    env.corpus_folder = opts.corpus_dir
    return env
