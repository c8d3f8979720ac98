#!/usr/bin/env python3
"""A scripted model server for the agent-runtime tests: the real Claude Code and
Codex CLIs talk to it on 127.0.0.1 as they would to their providers.

It speaks the two wire protocols those CLIs use, both streamed as server-sent
events: Anthropic's `POST /v1/messages` (Claude Code) and OpenAI's
`POST /v1/responses` (Codex). What it answers comes from a script (JSON):

    {"turns": [{"match": "text in the prompt",
                "steps": [{"tools": [{"name": "Bash", "input": {"command": "rm f"}}]},
                          {"text": "done"}]}]}

A request belongs to the first turn whose `match` occurs in the request's last
user prompt (a subagent's prompt is a turn of its own); its step is the number of
tool-call rounds since that prompt (assistant messages in Anthropic's shape,
tool outputs in OpenAI's). A step names tool calls (several at once are one
assistant message with several calls) or ends the turn with `text`. Requests no
turn matches, and requests without tools (titles, summaries), get a short text.

Usage: model_server.py SCRIPT.json PORT_FILE [LOG_FILE]; the port it bound is
written to PORT_FILE; each request's path and step is appended to LOG_FILE.
Standard library only (it runs under /usr/bin/python3 for any uid).
"""

import http.server
import json
import os
import sys
import threading

SCRIPT = {"turns": []}
LOG = None
LOCK = threading.Lock()
COUNTER = [0]
# Ids are unique across server runs too: a runtime resuming a conversation
# (`--continue`) drops messages whose ids it has seen.
RUN = os.urandom(4).hex()


def next_id(prefix):
    with LOCK:
        COUNTER[0] += 1
        return f"{prefix}_{RUN}_{COUNTER[0]:04d}"


def log(line):
    if LOG:
        with LOCK, open(LOG, "a") as f:
            f.write(line + "\n")


def texts(content):
    """The text of a message's content (a string or a list of blocks)."""
    if isinstance(content, str):
        return content
    out = []
    for b in content or []:
        if isinstance(b, dict):
            if b.get("type") in ("text", "input_text"):
                out.append(b.get("text", ""))
    return "\n".join(out)


def find_turn(prompt):
    for t in SCRIPT.get("turns", []):
        if t.get("match", "") in prompt:
            return t
    return None


def pick(prompt, rounds, has_tools):
    """The step to answer, or None for a plain reply."""
    if not has_tools:
        return None
    turn = find_turn(prompt)
    if turn is None:
        return None
    steps = turn.get("steps", [])
    if rounds < len(steps):
        return steps[rounds]
    return {"text": "(the script has no more steps)"}


# ---- Anthropic messages ----------------------------------------------------


def anthropic_position(body):
    """(the last user prompt, assistant messages after it)."""
    msgs = body.get("messages", [])
    last = -1
    for i, m in enumerate(msgs):
        if m.get("role") != "user":
            continue
        c = m.get("content")
        if isinstance(c, str) or any(
            isinstance(b, dict) and b.get("type") == "text" for b in c or []
        ):
            # A user message with text (not only tool results) is a prompt,
            # unless it also carries tool results (a reminder next to them).
            if isinstance(c, list) and any(
                isinstance(b, dict) and b.get("type") == "tool_result" for b in c
            ):
                continue
            last = i
    prompt = texts(msgs[last].get("content")) if last >= 0 else ""
    rounds = sum(1 for m in msgs[last + 1 :] if m.get("role") == "assistant")
    return prompt, rounds


def anthropic_events(step, model):
    mid = next_id("msg")
    yield "message_start", {
        "type": "message_start",
        "message": {
            "id": mid,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        },
    }
    blocks = []
    if step.get("text"):
        blocks.append(("text", step["text"]))
    for call in step.get("tools", []):
        blocks.append(("tool", call))
    for i, (kind, v) in enumerate(blocks):
        if kind == "text":
            yield "content_block_start", {
                "type": "content_block_start",
                "index": i,
                "content_block": {"type": "text", "text": ""},
            }
            yield "content_block_delta", {
                "type": "content_block_delta",
                "index": i,
                "delta": {"type": "text_delta", "text": v},
            }
        else:
            yield "content_block_start", {
                "type": "content_block_start",
                "index": i,
                "content_block": {
                    "type": "tool_use",
                    "id": next_id("toolu"),
                    "name": v["name"],
                    "input": {},
                },
            }
            yield "content_block_delta", {
                "type": "content_block_delta",
                "index": i,
                "delta": {"type": "input_json_delta", "partial_json": json.dumps(v["input"])},
            }
        yield "content_block_stop", {"type": "content_block_stop", "index": i}
    stop = "tool_use" if step.get("tools") else "end_turn"
    yield "message_delta", {
        "type": "message_delta",
        "delta": {"stop_reason": stop, "stop_sequence": None},
        "usage": {"output_tokens": 1},
    }
    yield "message_stop", {"type": "message_stop"}


# ---- OpenAI responses ------------------------------------------------------


def openai_position(body):
    items = body.get("input", [])
    if isinstance(items, str):
        return items, 0
    last = -1
    for i, it in enumerate(items):
        if it.get("type", "message") == "message" and it.get("role") == "user":
            t = texts(it.get("content"))
            if not t.lstrip().startswith("<"):
                last = i
    prompt = texts(items[last].get("content")) if last >= 0 else ""
    rounds = 0
    seen_call = False
    for it in items[last + 1 :]:
        if it.get("type") in ("function_call", "custom_tool_call", "local_shell_call"):
            seen_call = True
        elif it.get("type", "").endswith("_output") and seen_call:
            rounds += 1
            seen_call = False
    return prompt, rounds


def openai_events(step, model):
    rid = next_id("resp")
    yield "response.created", {
        "type": "response.created",
        "response": {"id": rid, "object": "response", "model": model, "status": "in_progress", "output": []},
    }
    idx = 0
    if step.get("text"):
        item_id = next_id("msg")
        item = {"type": "message", "role": "assistant", "id": item_id, "status": "in_progress", "content": []}
        yield "response.output_item.added", {"type": "response.output_item.added", "output_index": idx, "item": item}
        yield "response.output_text.delta", {
            "type": "response.output_text.delta",
            "item_id": item_id,
            "output_index": idx,
            "content_index": 0,
            "delta": step["text"],
        }
        done = dict(item, status="completed", content=[{"type": "output_text", "text": step["text"], "annotations": []}])
        yield "response.output_item.done", {"type": "response.output_item.done", "output_index": idx, "item": done}
        idx += 1
    for call in step.get("tools", []):
        cid = next_id("call")
        if call["name"] == "apply_patch":
            item = {"type": "custom_tool_call", "id": next_id("ctc"), "call_id": cid, "name": "apply_patch",
                    "input": call["input"], "status": "completed"}
        else:
            args = call["input"] if isinstance(call["input"], str) else json.dumps(call["input"])
            item = {"type": "function_call", "id": next_id("fc"), "call_id": cid, "name": call["name"],
                    "arguments": args, "status": "completed"}
        yield "response.output_item.added", {"type": "response.output_item.added", "output_index": idx, "item": item}
        yield "response.output_item.done", {"type": "response.output_item.done", "output_index": idx, "item": item}
        idx += 1
    yield "response.completed", {
        "type": "response.completed",
        "response": {
            "id": rid,
            "object": "response",
            "model": model,
            "status": "completed",
            "output": [],
            "usage": {
                "input_tokens": 1,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 1,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 2,
            },
        },
    }


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        # Model lists and the like: nothing to offer.
        body = json.dumps({"data": [], "models": []}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        n = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        path = self.path.split("?")[0]
        model = body.get("model", "scripted")
        has_tools = bool(body.get("tools"))
        if path.endswith("/messages"):
            prompt, rounds = anthropic_position(body)
            events = anthropic_events
        elif path.endswith("/responses"):
            prompt, rounds = openai_position(body)
            events = openai_events
        else:
            self.send_response(404)
            self.send_header("content-length", "0")
            self.end_headers()
            return
        step = pick(prompt, rounds, has_tools)
        log(json.dumps({"path": path, "prompt": prompt[:200], "rounds": rounds, "step": step}))
        if step is None:
            step = {"text": "ok"}
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        for name, data in events(step, model):
            self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()
        self.close_connection = True


def main():
    global SCRIPT, LOG
    with open(sys.argv[1]) as f:
        SCRIPT = json.load(f)
    if len(sys.argv) > 3:
        LOG = sys.argv[3]
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(sys.argv[2] + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(sys.argv[2] + ".tmp", sys.argv[2])
    srv.serve_forever()


if __name__ == "__main__":
    main()
