"""End-to-end client of `treefork mcp`, with the official MCP Python SDK (pinned
mcp==1.22.0, see clients/python/requirements-test.txt).

Run by tests/it/mcp.rs against real mounts:

    python client.py SCENARIO --bin TREEFORK --workspace MP [--socket SOCK] [--repo REPO]

Without --socket the server finds the workspace's session socket itself (`-C MP`).

Each scenario drives the server over stdio as an MCP client does, asserts what the
protocol promises, and prints one JSON line of facts for the Rust test to check
against the real filesystem and git. Any failed assertion exits non-zero.
"""

import argparse
import asyncio
import json
import os
import re
import sys

import jsonschema
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared import exceptions as _exceptions

# The SDK's error for a refused request: McpError in 1.x, MCPError in 2.x.
McpError = getattr(_exceptions, "MCPError", None) or getattr(_exceptions, "McpError")


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def field(obj, camel):
    """Attribute `camel` of an SDK object: SDK 2.x spells result fields in
    snake_case (`structured_content`, `is_error`, `server_info`, `input_schema`,
    `read_only_hint`), 1.x in camelCase, as on the wire."""
    snake = re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), camel)
    return getattr(obj, snake) if hasattr(obj, snake) else getattr(obj, camel)


class Tools:
    """Calls tools and keeps the progress notifications each call received."""

    def __init__(self, session):
        self.s = session

    async def call(self, name, args=None, ok=True):
        progress = []

        async def on_progress(p, total, message):
            progress.append({"progress": p, "total": total, "message": message})

        r = await self.s.call_tool(name, args or {}, progress_callback=on_progress)
        sc = field(r, "structuredContent")
        if ok:
            check(not field(r, "isError"), f"{name} failed: {r.content}")
            check(isinstance(sc, dict), f"{name}: no structured content")
        return r, sc, progress


def write(ws, rel, text):
    path = os.path.join(ws, rel)
    with open(path, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def read(ws, rel):
    try:
        with open(os.path.join(ws, rel)) as f:
            return f.read()
    except FileNotFoundError:
        return None


async def listed(session):
    tools = (await session.list_tools()).tools
    for t in tools:
        check(all(c.islower() or c.isdigit() or c == "_" for c in t.name), t.name)
        for schema in (field(t, "inputSchema"), field(t, "outputSchema")):
            check(schema is not None and schema.get("type") == "object", f"{t.name} schema")
            jsonschema.validators.validator_for(schema).check_schema(schema)
        a = t.annotations
        check(a is not None, f"{t.name}: no annotations")
        for hint in (field(a, "readOnlyHint"), field(a, "destructiveHint"), field(a, "idempotentHint")):
            check(hint is not None, f"{t.name}: a hint is missing")
    return {t.name: t for t in tools}


async def scenario_user(tools, session, args):
    ws = args.workspace
    facts = {}
    names = await listed(session)
    facts["tools"] = sorted(names)
    check(field(names["promote"].annotations, "destructiveHint") is True, "promote is destructive")
    check(field(names["status"].annotations, "readOnlyHint") is True, "status reads only")

    # checkpoint with message and explanation
    write(ws, "a.txt", "one\n")
    _, c, _ = await tools.call("checkpoint", {"message": "first", "explanation": "mcp test"})
    check(c["checkpoint"]["message"] == "first", c)
    facts["checkpoint"] = c["checkpoint"]["id"]

    # diff: patch text, cut at the byte limit
    write(ws, "a.txt", "one\nchanged line\n")
    _, d, _ = await tools.call("diff", {"mode": "patch"})
    check("+changed line" in d["patch"] and d["truncated"] is False, d)
    _, d, _ = await tools.call("diff", {"mode": "patch", "max_bytes": 20})
    check(d["truncated"] is True and len(d["patch"].encode()) <= 20, d)
    check(d["patch_bytes"] > 20, d)
    _, st, _ = await tools.call("status")
    check({"path": "a.txt", "change": "modified"} in st["changes"], st)

    # exec with progress while it runs
    _, e, prog = await tools.call(
        "exec",
        {"argv": ["sh", "-c", "sleep 1.5; echo hi > b.txt; echo out"], "explanation": "make b"},
    )
    check(e["status"] == 0 and e["stdout"] == "out\n", e)
    check(any(ch["path"] == "b.txt" for ch in e["changed"]), e)
    check(len(prog) >= 2, f"exec progress: {prog}")
    check(any("running" in (p["message"] or "") for p in prog), prog)
    facts["exec_progress"] = len(prog)
    check(read(ws, "b.txt") == "hi\n", "exec wrote b.txt")
    _, f, _ = await tools.call("show_file", {"ref": e["checkpoint"], "path": "b.txt"})
    check(f["kind"] == "file" and f["text"] == "hi\n", f)

    # undo reverts the exec: b.txt is gone again
    _, u, _ = await tools.call("undo")
    check(isinstance(u["op"], int), u)
    check(read(ws, "b.txt") is None, "undo removed b.txt")
    _, ol, _ = await tools.call("op_log", {"limit": 5})
    check(ol["operations"][0]["kind"] == "undo", ol["operations"][0])

    # experiment with progress, then adopt the winner
    _, x, prog = await tools.call(
        "experiment",
        {"commands": ["echo one > r.txt", "echo two > r.txt; exit 3"]},
    )
    check(x["winner"] == 1, x)
    check(len(x["runs"]) == 2, x)
    check(len(prog) >= 3 and prog[-1]["progress"] == 2, f"experiment progress: {prog}")
    facts["experiment_progress"] = len(prog)
    check(read(ws, "r.txt") is None, "runs happen in forks")
    _, ad, prog = await tools.call("experiment_adopt", {"winner": True})
    check(ad["run"] == 1 and len(prog) >= 1, ad)
    check(read(ws, "r.txt") == "one\n", "adopted the winner's r.txt")

    # bisect: four checkpoints, bisect.txt breaks at the third; the workspace stays
    ids = []
    for i, word in enumerate(["fine", "fine", "wrong", "wrong"]):
        write(ws, "bisect.txt", f"{word} {i}\n")
        _, c, _ = await tools.call("checkpoint", {"message": f"bisect {i}"})
        ids.append(c["checkpoint"]["id"])
    _, bi, prog = await tools.call(
        "bisect", {"command": "grep -q fine bisect.txt", "good": ids[0], "jobs": 2}
    )
    check(bi["first_bad"]["id"] == ids[2] and bi["last_good"]["id"] == ids[1], bi)
    check(bi["candidates"] == 4 and bi["steps"], bi)
    check(len(prog) >= 2 and any("round 1" in (p["message"] or "") for p in prog), prog)
    check(read(ws, "bisect.txt") == "wrong 3\n", "bisect moves nothing")
    check(not os.path.exists(os.path.join(os.path.dirname(ws), os.path.basename(ws) + ".bisect")), "forks left")
    _, ol, _ = await tools.call("op_log", {"limit": 1})
    check(ol["operations"][0]["kind"] == "bisect", ol["operations"][0])
    seq_bisect = ol["operations"][0]["seq"]
    # a good end that already fails: a wrong range, refused, nothing recorded
    r, sc, _ = await tools.call(
        "bisect", {"command": "grep -q fine bisect.txt", "good": ids[2]}, ok=False
    )
    check(field(r, "isError") is True and sc["error"]["code"] == "good_end_fails", sc)
    check("the range is wrong" in sc["error"]["message"], sc)
    _, ol, _ = await tools.call("op_log", {"limit": 1})
    check(ol["operations"][0]["kind"] == "bisect" and ol["operations"][0]["seq"] == seq_bisect, ol)
    r, sc, _ = await tools.call("bisect", {"command": "true", "argv": ["true"]}, ok=False)
    check(field(r, "isError") is True and sc["error"]["code"] == "invalid", sc)
    facts["bisect_first_bad"] = bi["first_bad"]["id"]
    facts["bisect_progress"] = len(prog)

    # restore is a dry run unless told otherwise
    _, rs, _ = await tools.call("restore", {"ref": facts["checkpoint"], "paths": ["r.txt"]})
    check(rs["dry_run"] is True and rs["changes"], rs)
    check(read(ws, "r.txt") == "one\n", "dry run changed nothing")

    # cherry_pick brings back the undone exec's change (b.txt) as a checkpoint
    _, cp, _ = await tools.call("cherry_pick", {"ref": e["checkpoint"]})
    check(cp["status"] == "merged" and cp["checkpoint"] and cp["conflicts"] == [], cp)
    check(read(ws, "b.txt") == "hi\n", "cherry-picked b.txt")
    _, mg, _ = await tools.call("merge", {"ref": e["checkpoint"]})
    check(mg["status"] in ("up_to_date", "merged"), mg)
    facts["cherry_pick"] = cp["status"]

    # an error result carries the protocol's code
    r, sc, _ = await tools.call("checkout", {"ref": "no-such-branch"}, ok=False)
    check(field(r, "isError") is True and sc["error"]["code"] == "not_found", sc)
    r, sc, _ = await tools.call("restore", {"paths": []}, ok=False)
    check(field(r, "isError") is True and sc["error"]["code"] == "bad_request", sc)

    # promote: dry run by default
    _, p, _ = await tools.call("promote", {"paths": ["a.txt"]})
    check(p["dry_run"] is True, p)
    check([c["path"] for c in p["changes"]] == ["a.txt"], p)
    facts["promote_dry_run"] = p["changes"]

    # a drifted path: BASELINE_CONFLICT with its paths
    with open(os.path.join(args.repo, "a.txt"), "w") as f:
        f.write("durable edit\n")
    # the dry run marks it and says how to go on; the promote itself is refused
    _, dry, _ = await tools.call("promote", {"paths": ["a.txt"]})
    check(dry["drifted"][0]["path"] == "a.txt" and dry["changes"][0]["drifted"] == "unstaged", dry)
    check("BASELINE_CONFLICT" in dry["next"], dry)
    r, sc, _ = await tools.call("promote", {"paths": ["a.txt"], "dry_run": False}, ok=False)
    check(field(r, "isError") is True and sc["error"]["code"] == "BASELINE_CONFLICT", sc)
    check(sc["error"]["paths"][0]["path"] == "a.txt", sc)
    check("BASELINE_CONFLICT" in r.content[0].text, r.content)
    os.remove(os.path.join(args.repo, "a.txt"))
    return facts


async def scenario_agent(tools, session, args):
    names = await listed(session)
    check("promote" not in names, sorted(names))
    check("checkpoint" in names and "exec" in names, sorted(names))
    _, c, _ = await tools.call("checkpoint", {"message": "by the agent"})
    # A tool the role does not list cannot be called.
    try:
        r = await session.call_tool("promote", {"paths": [], "dry_run": True})
        check(field(r, "isError"), f"promote answered on the agent socket: {r}")
    except McpError:
        pass
    return {"tools": sorted(names), "checkpoint": c["checkpoint"]["id"]}


async def scenario_messages(tools, session, args):
    ws = args.workspace
    write(ws, "m.txt", "before\n")
    _, m1, _ = await tools.call(
        "messages_append", {"role": "user", "content": {"text": "hello"}, "flush": True}
    )
    write(ws, "m.txt", "after\n")
    await tools.call("checkpoint", {"message": "after"})
    await tools.call(
        "messages_append", {"role": "assistant", "content": "done", "flush": True}
    )
    _, lst, _ = await tools.call("messages_list")
    check([m["role"] for m in lst["messages"]] == ["user", "assistant"], lst)
    _, rw, _ = await tools.call("rewind", {"to": m1["id"]})
    check(rw["conversation"]["dropped"] == 1, rw)
    check(read(ws, "m.txt") == "before\n", "rewind brought the files back")
    _, lst, _ = await tools.call("messages_list")
    check([m["role"] for m in lst["messages"]] == ["user"], lst)
    # Fork from the first message into a new mount: its files and its messages.
    write(ws, "m.txt", "later\n")
    fork_mp = os.path.join(os.path.dirname(ws.rstrip("/")), "fork-from-message")
    _, fk, _ = await tools.call(
        "fork",
        {"name": "from-msg", "mountpoint": fork_mp, "from_message": m1["id"]},
    )
    check(fk["mountpoint"] == fork_mp, fk)
    check(read(fork_mp, "m.txt") == "before\n", "the fork has the files at the message")
    return {"rewound_to": m1["id"], "fork": fork_mp}


SCENARIOS = {"user": scenario_user, "agent": scenario_agent, "messages": scenario_messages}


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario", choices=sorted(SCENARIOS))
    ap.add_argument("--bin", required=True)
    ap.add_argument("--socket")
    ap.add_argument("--workspace", required=True)
    ap.add_argument("--repo")
    args = ap.parse_args()
    where = ["--socket", args.socket] if args.socket else ["-C", args.workspace]
    params = StdioServerParameters(command=args.bin, args=["mcp", *where], env=dict(os.environ))
    async with stdio_client(params) as (read_stream, write_stream):
        async with ClientSession(read_stream, write_stream) as session:
            init = await session.initialize()
            check(field(init, "serverInfo").name == "treefork", field(init, "serverInfo"))
            check(init.capabilities.tools is not None, init.capabilities)
            facts = await SCENARIOS[args.scenario](Tools(session), session, args)
    print(json.dumps(facts))


if __name__ == "__main__":
    asyncio.run(main())
