"""An MCP server written with the Python SDK, for workflows to call in tests.

Usage: server.py [--http PORT] [--started FILE]
Writes its process id to FILE when it starts (so a test can see that it ran,
and that it stopped).
"""

import os
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("test-tools")


@server.tool()
def echo(text: str, shout: bool = False) -> str:
    """Returns the text, upper-cased when asked."""
    return text.upper() if shout else text


@server.tool()
def add(a: int, b: int) -> dict:
    """Adds two numbers."""
    return {"sum": a + b}


@server.tool()
def getenv(name: str) -> str:
    """The value of an environment variable of this server ('' when unset)."""
    return os.environ.get(name, "")


@server.tool()
def fail(message: str) -> str:
    """Always fails with the message."""
    raise ValueError(message)


@server.tool()
def pid() -> int:
    """This server's process id."""
    return os.getpid()


@server.tool()
def crash() -> str:
    """Exits the server at once, without answering."""
    os._exit(3)


@server.tool()
def big(mib: int) -> str:
    """A text of MIB mebibytes (a reply past the transport's limit)."""
    return "x" * (mib << 20)


@server.tool()
def hang() -> str:
    """Never answers."""
    import time

    while True:
        time.sleep(60)


def main():
    args = sys.argv[1:]
    if "--started" in args:
        with open(args[args.index("--started") + 1], "w") as f:
            f.write(str(os.getpid()))
    if "--http" in args:
        port = int(args[args.index("--http") + 1])
        server.run(transport="streamable-http", host="127.0.0.1", port=port)
    else:
        server.run()


main()
