"""ToolPro agents over MCP services: the LangGraph program agent and the ReAct-style stepwise baseline."""
