#!/usr/bin/env python3
"""A tiny MCP server (stdio, JSON-RPC 2.0, one message per line) that lists and finds
the skills installed under context/skills/. Standard library only."""

import json
import os
import sys

PROTOCOL = "2025-06-18"
ROOT = os.environ.get("PROCESSKIT_PROJECT_ROOT", os.getcwd())
ANNOTATIONS = {
    "readOnlyHint": True,
    "destructiveHint": False,
    "idempotentHint": True,
    "openWorldHint": False,
}
TOOLS = [
    {
        "name": "list_skills",
        "description": "List every installed skill with its description.",
        "inputSchema": {"type": "object", "properties": {}},
        "annotations": ANNOTATIONS,
    },
    {
        "name": "find_skill",
        "description": "Find installed skills whose name or description contains a keyword.",
        "inputSchema": {
            "type": "object",
            "properties": {"query": {"type": "string"}},
            "required": ["query"],
        },
        "annotations": ANNOTATIONS,
    },
]


def skills():
    base = os.path.join(ROOT, "context", "skills")
    found = []
    for category in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        cat_dir = os.path.join(base, category)
        if category.startswith("_") or not os.path.isdir(cat_dir):
            continue
        for name in sorted(os.listdir(cat_dir)):
            path = os.path.join(cat_dir, name, "SKILL.md")
            if not os.path.isfile(path):
                continue
            description = ""
            with open(path, encoding="utf-8") as f:
                for line in f:
                    if line.startswith("description:"):
                        description = line.split(":", 1)[1].strip().strip('"')
                        break
            found.append({"name": name, "category": category, "description": description,
                          "path": f"context/skills/{category}/{name}/SKILL.md"})
    return found


def call(name, args):
    if name == "list_skills":
        result = skills()
    elif name == "find_skill":
        query = str(args.get("query", "")).lower()
        result = [s for s in skills() if query in s["name"] or query in s["description"].lower()]
    else:
        return {"content": [{"type": "text", "text": f"unknown tool {name}"}], "isError": True}
    return {"content": [{"type": "text", "text": json.dumps(result)}], "isError": False}


def handle(msg):
    method, params = msg.get("method"), msg.get("params") or {}
    if method == "initialize":
        return {
            "protocolVersion": params.get("protocolVersion", PROTOCOL),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "processkit-skill-finder", "version": "0.1.0"},
        }
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call":
        return call(params.get("name"), params.get("arguments") or {})
    if method == "ping":
        return {}
    raise LookupError(method)


def main():
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            msg = json.loads(line)
        except ValueError:
            reply = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}}
        else:
            if "id" not in msg:
                continue  # a notification
            try:
                reply = {"jsonrpc": "2.0", "id": msg["id"], "result": handle(msg)}
            except LookupError as e:
                reply = {"jsonrpc": "2.0", "id": msg["id"],
                         "error": {"code": -32601, "message": f"method not found: {e}"}}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
