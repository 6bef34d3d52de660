//! `aibox-mcp-registration`: MCP server registration for AI coding harnesses.
