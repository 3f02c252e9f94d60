"""The one error type for mistakes a user can make (bad names, numbers, files, checkpoints).

It lives in the lowest layer so every layer can raise it; ``launch`` turns it into exit status 2 and a single
stderr line, so its message must name the bad value and the valid ones.
"""


class ConfigError(ValueError):
    """A user-caused configuration error; its message is shown verbatim on one line."""


def choice_error(what: str, value: object, valid: list[str] | tuple[str, ...]) -> ConfigError:
    """A ConfigError saying ``value`` is not a valid ``what`` and listing the valid choices."""
    shown = ", ".join(str(v) for v in valid) if valid else "(none)"
    return ConfigError(f"unknown {what} {value!r}; valid: {shown}")
