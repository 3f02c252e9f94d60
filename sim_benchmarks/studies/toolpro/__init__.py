"""ToolPro studies: latency/traffic sweep, crash-injection trials, sandbox abuse table."""
