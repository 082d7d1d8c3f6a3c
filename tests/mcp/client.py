#!/usr/bin/env python3
"""A real MCP client — the Python SDK (`pip install mcp`) — driving
marktoflow's MCP server for the end-to-end tests.

    client.py stdio ACTIONS_JSON -- COMMAND [ARGS...]
    client.py http ACTIONS_JSON URL [BEARER_TOKEN [NAME=VALUE...]]

(NAME=VALUE: more request headers, such as a gateway's identity header.)

ACTIONS_JSON is a list of steps: {"do": "list"}, {"do": "call", "name",
"arguments", "progress": bool, "elicit": [REPLY...]} (`{"error"}` for a
protocol error; with "elicit" the client offers forms, answers the server's
elicitation requests in turn with the REPLYs — {"action", "content"} — and
prints the requests it got as "elicited"), {"do": "cancel", "name", "arguments",
"after": seconds}, {"do": "write", "path", "text"} (a file, from here, so it
happens between two steps), {"do": "remove", "path"}, {"do":
"wait_list_changed", "within": seconds} (until the server says its tool list
changed). One JSON object per step is printed on stdout.
"""

import json
import os
import sys

import anyio
import httpx2
from mcp import types
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError


def dump(model):
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


LIST_CHANGED = anyio.Event()
CHANGES = []
# Replies to the server's elicitation requests, in turn, and what it asked.
REPLIES = []
ELICITED = []


async def on_elicit(context, params):
    ELICITED.append(dump(params))
    if not REPLIES:
        return types.ElicitResult(action="cancel")
    r = REPLIES.pop(0)
    return types.ElicitResult(action=r["action"], content=r.get("content"))


async def on_message(message):
    if isinstance(message, types.ToolListChangedNotification):
        CHANGES.append(1)
        LIST_CHANGED.set()


async def run(session, actions):
    global LIST_CHANGED
    await session.initialize()
    for a in actions:
        if a["do"] == "list":
            r = await session.list_tools()
            out = {"tools": [dump(t) for t in r.tools]}
        elif a["do"] == "call":
            progress = []
            REPLIES[:] = a.get("elicit", [])
            ELICITED.clear()

            async def on_progress(p, total, message):
                progress.append({"progress": p, "total": total, "message": message})

            try:
                r = await session.call_tool(
                    a["name"], a.get("arguments", {}),
                    progress_callback=on_progress if a.get("progress") else None)
            except MCPError as e:
                # A protocol error (an unknown tool): its message.
                out = {"error": str(e)}
            else:
                out = {"result": dump(r), "progress": progress}
                if "elicit" in a:
                    out["elicited"] = list(ELICITED)
        elif a["do"] == "cancel":
            started = anyio.current_time()
            with anyio.move_on_after(a["after"]) as scope:
                await session.call_tool(a["name"], a.get("arguments", {}))
            out = {"cancelled": scope.cancelled_caught,
                   "seconds": round(anyio.current_time() - started, 2)}
        elif a["do"] == "write":
            with open(a["path"], "w") as f:
                f.write(a["text"])
            out = {"written": a["path"]}
        elif a["do"] == "remove":
            os.remove(a["path"])
            out = {"removed": a["path"]}
        elif a["do"] == "wait_list_changed":
            with anyio.move_on_after(a["within"]):
                await LIST_CHANGED.wait()
            out = {"changed": LIST_CHANGED.is_set(), "notifications": len(CHANGES)}
            LIST_CHANGED = anyio.Event()
        else:
            raise SystemExit(f"unknown action {a}")
        print(json.dumps(out), flush=True)


async def main():
    mode, actions = sys.argv[1], json.loads(sys.argv[2])
    if mode == "stdio":
        argv = sys.argv[sys.argv.index("--") + 1:]
        # The server gets this process's environment (the test sets it).
        params = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write, message_handler=on_message,
                                     elicitation_callback=elicitation(actions)) as session:
                await run(session, actions)
    else:
        url = sys.argv[3]
        headers = {"Authorization": f"Bearer {sys.argv[4]}"} if len(sys.argv) > 4 else {}
        headers.update(h.split("=", 1) for h in sys.argv[5:])
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            async with streamable_http_client(url, http_client=http) as (read, write, *_):
                async with ClientSession(read, write, message_handler=on_message,
                                         elicitation_callback=elicitation(actions)) as session:
                    await run(session, actions)


def elicitation(actions):
    """The client offers forms only when a step gives replies, so the other
    tests see a client without them."""
    return on_elicit if any("elicit" in a for a in actions) else None


anyio.run(main)
