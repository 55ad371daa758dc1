"""The HTTP server: the proxy (``memwire proxy``) with its memory API, page, metrics, client keys and
limits, and the MCP server (``memwire mcp``). Their public names are ``memwire.adapters.proxy`` and
``memwire.adapters.mcp``."""
