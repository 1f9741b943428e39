"""The tool definitions for model APIs, from the same list as `jqjail tools` (the file
`tools.json` is that list; a test in the repository checks they agree)."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any, Dict, List


def definitions(format: str = "neutral") -> List[Dict[str, Any]]:
    """`neutral` ([{name, description, parameters}]), `openai` or `anthropic`."""
    tools = json.loads(resources.files(__package__).joinpath("tools.json").read_text("utf-8"))
    if format == "neutral":
        return tools
    if format == "openai":
        return [{"type": "function", "function": t} for t in tools]
    if format == "anthropic":
        return [{"name": t["name"], "description": t["description"], "input_schema": t["parameters"]} for t in tools]
    raise ValueError(f"unknown format {format!r}; use neutral, openai or anthropic")
