"""The drop-in for agent runtimes: a compacting OpenAI/Anthropic-compatible proxy,
an MCP server for the history tools, and live follow of agent logs. Sits on top of every
other app (README "Architecture")."""
