"""The tools the agents call: the protocol (base), the artifact tools, web search and web fetch."""
