"""VAP — Visual Attentive Prompting: ground "my <object>" with perception, then prompt a frozen generic policy.

- :mod:`configuration`: :class:`VAPConfig`, how candidates are scored and when grounding fails.
- :mod:`modeling`: :class:`VisualAttentivePrompting`, the policy (detect → match → track → prompt).
- :mod:`multiview`: :class:`MultiViewVAP`, the same over several calibrated views.

``from policies.vap import VisualAttentivePrompting, VAPConfig`` is the public import. The model is imported on
first use, so that option declarations can read :class:`VAPConfig`'s defaults without loading perception.
"""

from typing import Any

from policies.vap.configuration import VAPConfig

__all__ = ["VAPConfig", "VisualAttentivePrompting", "category_prior"]


def __getattr__(name: str) -> Any:
    if name in ("VisualAttentivePrompting", "category_prior"):
        from policies.vap import modeling

        return getattr(modeling, name)
    raise AttributeError(f"module 'policies.vap' has no attribute {name!r}")
