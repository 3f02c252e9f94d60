"""One workflow task as a gymnasium env: the episode's database, the deployment to talk to, the final-state check.

``reset(seed)`` reseeds the service's database in place (a server may hold it open) and returns the task and how
to reach the service: the database path, the server's fault flags, the link's round-trip time. The agent does the
whole workflow over MCP, then sends its answer with one ``step``; the episode succeeds when the database equals the
task's reference final state. Databases live in one folder per process, one file per service, so a server process
can be reused across tasks.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sqlite3
import string
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from envs.config import Options, require
from envs.paths import check_sqlite_file
from envs.registration import merged_options
from envs.services import SERVICES
from envs.services.runtime import create_database, reset_database
from envs.services.workflows import WorkflowTask, expected_state, get_task, row_diff, state


@dataclass(frozen=True)
class WorkflowEnvOptions(Options):
    """Network and fault injection of the ``toolpro`` suite."""

    title = "toolpro env options"
    # rtt and stall are real sleeps: capped so a run cannot stall past the client's 30 s call timeout
    rtt_ms: float = field(default=20.0, metadata={"help": "injected client-server round-trip time (real sleeps)",
                                                  "min": 0, "max": 5000})
    jitter_ms: float = field(default=0.0, metadata={"help": "uniform jitter on each one-way delay (<= rtt/2)",
                                                    "min": 0})
    error_rate: float = field(default=0.0, metadata={"help": "probability a tool call fails with 503", "min": 0,
                                                     "max": 1})
    timeout_rate: float = field(default=0.0, metadata={"help": "probability the server stalls timeout_s first",
                                                       "min": 0, "max": 1})
    timeout_s: float = field(default=0.5, metadata={"help": "length of an injected stall", "min": 0, "max": 10})
    crash_rate: float = field(default=0.0, metadata={"help": "probability a write kills the server process",
                                                     "min": 0, "max": 1})
    fault_seed: int = field(default=0, metadata={"help": "seed of the injected faults (each server restart "
                                                          "draws from (fault_seed, restart))"})
    db_dir: str = field(default="", metadata={"help": "folder for the service databases (default: a temp dir)"})

    def check(self) -> None:
        require(self.rtt_ms >= 0 and 0 <= self.jitter_ms <= self.rtt_ms / 2,
                f"rtt_ms must be >= 0 and jitter_ms in 0..rtt_ms/2, got {self.rtt_ms}, {self.jitter_ms}")
        if self.db_dir:  # the folder may be new; the databases in it, when present, must be SQLite files
            folder = Path(self.db_dir).expanduser()
            require(not folder.exists() or folder.is_dir(), f"option db_dir {self.db_dir!r} is a file, not a folder")
            require(folder.is_dir() or _creatable(folder),
                    f"option db_dir {self.db_dir!r} cannot be created (no existing folder above it)")
            if folder.is_dir():
                for service in SERVICES:
                    check_sqlite_file(folder / f"{service}.db", f"option db_dir: database of {service}")


def _creatable(folder: Path) -> bool:
    """Whether ``mkdir -p folder`` can work: the nearest existing ancestor is a writable folder."""
    for parent in folder.parents:
        if parent.exists():
            return parent.is_dir() and os.access(parent, os.W_OK)
    return False


_DB_DIR: Path | None = None


def default_db_dir() -> Path:
    """One temporary folder per process, removed at exit."""
    global _DB_DIR
    if _DB_DIR is None:
        _DB_DIR = Path(tempfile.mkdtemp(prefix="toolpro-db-"))
        atexit.register(shutil.rmtree, _DB_DIR, True)
    return _DB_DIR


class WorkflowEnv(gym.Env):
    """A single-step episode: the agent acts through the services, then answers once."""

    metadata = {"render_modes": []}

    def __init__(self, task: str, options: WorkflowEnvOptions | None = None) -> None:
        self.task = get_task(task)
        self.options = options or WorkflowEnvOptions()
        folder = Path(self.options.db_dir) if self.options.db_dir else default_db_dir()
        folder.mkdir(parents=True, exist_ok=True)
        self.db_path = folder / f"{self.task.service}.db"
        if not self.db_path.exists():
            create_database(self.db_path, self.task.service, 0)
        self.observation_space = observation_space(self.task)
        # The answer: only its status is read (extra keys of the agent's answer are ignored).
        self.action_space = gym.spaces.Dict({"status": _text(32)})
        self._expected: dict[str, Any] = {}
        self._seed = 0

    def deployment(self) -> dict[str, Any]:
        """How to start and reach this task's service: database, injected faults and link (the command line that
        starts a server with them is :func:`envs.services.server.server_flags`'s business)."""
        o = self.options
        return {"service": self.task.service, "db": str(self.db_path), "error_rate": o.error_rate,
                "timeout_rate": o.timeout_rate, "timeout_s": o.timeout_s, "crash_rate": o.crash_rate,
                "fault_seed": o.fault_seed, "rtt_ms": o.rtt_ms, "jitter_ms": o.jitter_ms}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        self._seed = int(seed or 0)
        reset_database(self.db_path, self.task.service, self._seed)
        self._expected = expected_state(self.task, self._seed)
        return self._observation(), {"task": self.task.name}

    def _observation(self) -> dict[str, Any]:
        # Lists become tuples: gymnasium's Sequence space holds tuples.
        # Lists as tuples (gymnasium's Sequence space holds tuples); times as 0-d float64 arrays (a Box of shape ()).
        params = {k: tuple(v) if isinstance(v, list) else v for k, v in self.task.params.items()}
        deployment = self.deployment()
        for key in ("error_rate", "timeout_rate", "timeout_s", "crash_rate", "rtt_ms", "jitter_ms"):
            deployment[key] = np.asarray(deployment[key], dtype=np.float64)
        return {"instruction": self.task.instruction, "task": self.task.name, "template": self.task.template,
                "params": params, "run_id": f"{self.task.name}-{self._seed}", "seed": self._seed,
                **deployment}

    def final_state_diff(self) -> int:
        """Rows that differ from the reference final state now."""
        return sum(self.final_row_diff().values())

    def final_row_diff(self) -> dict[str, int]:
        """Extra, missing and changed rows relative to the reference final state now."""
        conn = sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True, timeout=30)
        try:
            return row_diff(state(conn), self._expected)
        finally:
            conn.close()

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        rows = self.final_row_diff()
        diff = sum(rows.values())
        info = {"success": diff == 0, "state_diff": diff, "extra_rows": rows["extra"],
                "missing_rows": rows["missing"], "changed_rows": rows["changed"],
                "answered": isinstance(action, dict) and action.get("status") == "ok"}
        return self._observation(), float(diff == 0), True, False, info


def _text(max_length: int) -> gym.spaces.Text:
    return gym.spaces.Text(max_length, min_length=0, charset=frozenset(string.printable))


def observation_space(task: WorkflowTask) -> gym.spaces.Dict:
    """What ``reset`` returns for ``task``: the task's intent (its own parameters) and how to reach its service."""
    params: dict[str, gym.spaces.Space] = {}
    for key, value in task.params.items():
        if isinstance(value, list):
            params[key] = gym.spaces.Sequence(_text(64))
        elif isinstance(value, int):
            params[key] = gym.spaces.Discrete(2**31)
        else:
            params[key] = _text(256)
    path = _text(4096)
    return gym.spaces.Dict({
        "instruction": _text(512), "task": _text(64), "template": _text(64), "params": gym.spaces.Dict(params),
        "run_id": _text(128), "seed": gym.spaces.Discrete(2**63 - 1),
        "service": _text(16), "db": path,
        **{k: gym.spaces.Box(0.0, 1.0, (), np.float64) for k in ("error_rate", "timeout_rate", "crash_rate")},
        "timeout_s": gym.spaces.Box(0.0, 1e9, (), np.float64), "fault_seed": gym.spaces.Discrete(2**63 - 1),
        "rtt_ms": gym.spaces.Box(0.0, 1e9, (), np.float64), "jitter_ms": gym.spaces.Box(0.0, 1e9, (), np.float64),
    })


def make_workflow_env(task: str, options: Mapping[str, Any] | None = None, **kwargs: Any) -> WorkflowEnv:
    """The env of one workflow task; options as in :class:`WorkflowEnvOptions`, also as keywords (the ``gym.make``
    entry point)."""
    return WorkflowEnv(task, WorkflowEnvOptions.from_options(merged_options(options, kwargs)))
