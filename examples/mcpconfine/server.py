"""A small MCP server over stdio, written without the MCP SDK: newline-delimited
JSON-RPC 2.0 on standard input and output, logs on standard error.

Tools:
  read_file(path)        the text of a file
  list_dir(path)         the names in a directory
  connect(host, port)    opens a TCP connection and closes it

It trusts its caller entirely: any path, any address. Under python-sb the
policy decides: what the rules do not grant fails with the sandbox's exception
(RuleFileNotFoundError, RulePermissionError...), which the tool returns as a
tool error naming the rule line that would allow it.
"""
import json
import os
import socket
import sys

PROTOCOL_VERSIONS = ("2025-06-18", "2025-03-26", "2024-11-05")

TOOLS = [
    {
        "name": "read_file",
        "description": "Returns the text of a file.",
        "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
    {
        "name": "list_dir",
        "description": "Returns the names in a directory, one a line.",
        "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
    {
        "name": "connect",
        "description": "Opens a TCP connection to host:port and closes it.",
        "inputSchema": {
            "type": "object",
            "properties": {"host": {"type": "string"}, "port": {"type": "integer"}},
            "required": ["host", "port"],
        },
    },
]


def read_file(args):
    with open(args["path"], encoding="utf-8") as f:
        return f.read()


def list_dir(args):
    return "\n".join(sorted(os.listdir(args["path"])))


def connect(args):
    with socket.create_connection((args["host"], int(args["port"])), timeout=5):
        return "connected"


HANDLERS = {"read_file": read_file, "list_dir": list_dir, "connect": connect}


def call_tool(params):
    name = params.get("name")
    handler = HANDLERS.get(name)
    if handler is None:
        return {"content": [{"type": "text", "text": "unknown tool %r" % name}], "isError": True}
    try:
        text = handler(params.get("arguments") or {})
    except Exception as e:  # the sandbox's refusals are exceptions too
        return {"content": [{"type": "text", "text": "%s: %s" % (type(e).__name__, e)}], "isError": True}
    return {"content": [{"type": "text", "text": text}]}


def handle(msg):
    method = msg.get("method")
    params = msg.get("params") or {}
    if method == "initialize":
        version = params.get("protocolVersion")
        return {
            "protocolVersion": version if version in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[0],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "confined-python", "version": "0.1.0"},
        }
    if method == "ping":
        return {}
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call":
        return call_tool(params)
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
                continue  # a notification: nothing to answer
            try:
                reply = {"jsonrpc": "2.0", "id": msg["id"], "result": handle(msg)}
            except LookupError:
                reply = {"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "method not found"}}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
    print("confined-python: standard input closed, exiting", file=sys.stderr)


if __name__ == "__main__":
    main()
