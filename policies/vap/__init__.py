"""VAP — Visual Attentive Prompting: ground "my <object>" with perception, then prompt a frozen generic policy.

- :mod:`configuration`: :class:`VAPConfig`, how candidates are scored and when grounding fails, and
  :class:`VAPOptions`, the policy's ``--policy-option`` keys (scoring defaults taken from :class:`VAPConfig`).
- :mod:`modeling`: :class:`VisualAttentivePrompting`, the policy (detect → match → track → prompt).
- :mod:`multiview`: :class:`MultiViewVAP`, the same over several calibrated views.

``from policies.vap import VisualAttentivePrompting, VAPConfig`` is the public import. The model is imported on
first use, so that option declarations can read :class:`VAPConfig`'s defaults without loading perception.
"""

from typing import Any

from policies.vap.configuration import VAPConfig, VAPOptions

__all__ = ["VAPConfig", "VAPOptions", "VisualAttentivePrompting", "category_prior"]


def __getattr__(name: str) -> Any:
    if name in ("VisualAttentivePrompting", "category_prior"):
        from policies.vap import modeling

        return getattr(modeling, name)
    raise AttributeError(f"module 'policies.vap' has no attribute {name!r}")
