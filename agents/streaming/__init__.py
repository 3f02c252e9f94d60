"""Streaming RL learners (one transition in, one update, nothing replayed) and their training loop."""

from agents.streaming.stream_ac import StreamAC, StreamACConfig
from agents.streaming.stream_q import StreamQ, StreamQConfig
from agents.streaming.stream_spr import StreamSPR, StreamSPRConfig

LEARNERS = {"stream_q": (StreamQ, StreamQConfig), "stream_ac": (StreamAC, StreamACConfig),
            "stream_spr": (StreamSPR, StreamSPRConfig)}

__all__ = ["LEARNERS", "StreamAC", "StreamACConfig", "StreamQ", "StreamQConfig", "StreamSPR", "StreamSPRConfig"]
