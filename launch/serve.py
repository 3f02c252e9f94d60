"""``embodia serve SERVICE --db PATH``: one of ToolPro's services (travel, orders, tickets) as an MCP server over
stdio, for any MCP client. A new ``--db`` is created and seeded (``--seed N`` picks the world); the flags are those
of ``python -m envs.services.server`` (fault injection included). ``python -m envs.services.site`` serves the
same tools plus ToolPro's program tools.
"""

from __future__ import annotations

from envs.services.server import server_main


def main(argv: list[str] | None = None) -> int:
    """Serve until the client closes stdin; a bad flag or database exits 2 with one line."""
    return server_main("embodia serve", argv, __doc__, service_flag=False)


if __name__ == "__main__":
    raise SystemExit(main())
