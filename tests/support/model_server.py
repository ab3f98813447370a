"""A small scripted model server that speaks the Anthropic Messages API and the OpenAI
Responses API (streamed as server-sent events), so the real agent CLIs run a real agent loop
offline.

The script is a tool call per step, then an answer: a request of an agent loop (one that
offers tools) carrying N tool results gets the N-th step: a call of the shell tool with a
command, or (a ``Write``) a call of the CLI's file-writing tool (a shell redirection for
Codex); once it
carries a result for every step, the model answers with ``FINAL_TEXT``. Requests without
tools (titles, summaries) get a short text. Every answer reports 100 input and 20 output
tokens of the model the request names. Every request is recorded.
"""

from __future__ import annotations

import json
import shlex
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FINAL_TEXT = "The listing is done."
WAIT_FOR_MCP = "WaitForMcpServers"  # Claude Code's tool that waits for its MCP servers
WAITED = "toolu_wait_"


def _anthropic_call(step: Step, shell: str) -> tuple[str, dict[str, Any]]:
    """The tool and its input for a step: Claude Code's tools are capitalised (Bash, Write,
    ``file_path``), OpenCode's are not (bash, write, ``filePath``)."""
    if isinstance(step, Call):
        return step.tool, step.arguments
    if isinstance(step, str):
        return shell, {"command": step, "description": "Run"}
    if shell == "Bash":
        return "Write", {"file_path": step.path, "content": step.content}
    return "write", {"filePath": step.path, "content": step.content}


def _gemini_model(path: str) -> str:
    """The model a Gemini request names in its path (.../models/NAME:generateContent)."""
    return path.split("?")[0].rpartition("/models/")[2].partition(":")[0] or "scripted"


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


@dataclass(frozen=True)
class Write:
    """A step that writes ``content`` to the file at ``path`` with the CLI's own tool."""

    path: str
    content: str


@dataclass(frozen=True)
class Call:
    """A step that calls the tool ``tool`` (one the request offers, an MCP server's say) with
    ``arguments``."""

    tool: str
    arguments: dict[str, Any]


Step = str | Write | Call


class ScriptedModel:
    """The server, in a thread; ``url`` is its base URL."""

    def __init__(
        self,
        command: Step | list[Step],
        *,
        refuse_with: int | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        self.commands: list[Step] = command if isinstance(command, list) else [command]
        self.refuse_with = refuse_with
        # A refusal that echoes the request's headers back, as some APIs' errors do.
        self.echo_headers = False
        self.requests: list[dict[str, Any]] = []
        self.others: list[dict[str, Any]] = []  # requests of any other method (not answered)
        # An answer of Claude Code's loop to hold after its first event (its usage so far)
        # until ``release`` is set: the step whose call it carries (None: none is held).
        self.hold_step: int | None = None
        self.holding = threading.Event()
        self.release = threading.Event()
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                model.requests.append(
                    {"path": self.path, "headers": dict(self.headers), "body": body}
                )
                if model.refuse_with is not None:
                    self._refuse(model.refuse_with)
                elif self.path.split("?")[0].endswith("/messages"):
                    self._stream(model.anthropic(body))
                elif self.path.split("?")[0].endswith("/responses"):
                    self._stream(model.openai(body))
                elif ":streamGenerateContent" in self.path:
                    self._stream(model.gemini({"model": _gemini_model(self.path), **body}))
                elif ":generateContent" in self.path:
                    answer = model.gemini({"model": _gemini_model(self.path), **body}, sse=False)
                    self._json(b"".join(answer))
                else:
                    self.send_error(404)

            def do_GET(self) -> None:
                self._other()

            def do_DELETE(self) -> None:
                self._other()

            def do_PUT(self) -> None:
                self._other()

            def do_PATCH(self) -> None:
                self._other()

            def _other(self) -> None:
                model.others.append(
                    {"method": self.command, "path": self.path, "headers": dict(self.headers)}
                )
                self.send_error(404)

            def _refuse(self, status: int) -> None:
                # The type a provider gives the status (a 4xx body typed as a server error
                # makes OpenCode retry it).
                kind = {401: "authentication_error"}.get(
                    status, "invalid_request_error" if status < 500 else "api_error"
                )
                message = "the scripted model refuses"
                if model.echo_headers:
                    message += f" the request with headers {dict(self.headers)}"
                error = {"type": kind, "message": message}
                payload = json.dumps({"type": "error", "error": error}).encode()
                self.send_response(status)
                if model.echo_headers:
                    for name in ("x-api-key", "authorization", "x-goog-api-key"):
                        if self.headers.get(name):
                            self.send_header(f"x-echo-{name}", self.headers[name])
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _json(self, payload: bytes) -> None:
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _stream(self, chunks: Iterator[bytes]) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("connection", "close")
                self.end_headers()
                for chunk in chunks:
                    self.wfile.write(chunk)
                self.wfile.flush()
                self.close_connection = True

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.url = f"http://{host}:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> ScriptedModel:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    # -- Anthropic Messages ------------------------------------------------------------------

    def anthropic(self, body: dict[str, Any]) -> Iterator[bytes]:
        messages = body.get("messages") or []
        tools = [t.get("name") for t in body.get("tools") or []]
        results = [
            block
            for message in messages
            if isinstance(message.get("content"), list)
            for block in message["content"]
            if isinstance(block, dict) and block.get("type") == "tool_result"
        ]
        answered = sum(1 for r in results if not str(r.get("tool_use_id")).startswith(WAITED))
        shell = next((name for name in ("Bash", "bash") if name in tools), None)
        step = self.commands[answered] if answered < len(self.commands) else None
        offered = isinstance(step, Call) and step.tool in tools
        if isinstance(step, Call) and not offered and WAIT_FOR_MCP in tools:
            # Claude Code starts a turn before its MCP servers are up, and offers a tool that
            # waits for them: called (not counted as a step) until the step's tool is offered.
            step, offered = Call(WAIT_FOR_MCP, {}), True
        if step is not None and (offered or (shell and not isinstance(step, Call))):
            name, arguments = _anthropic_call(step, shell or "Bash")
            waiting = isinstance(step, Call) and step.tool == WAIT_FOR_MCP
            call_id = f"{WAITED}{len(results)}" if waiting else f"toolu_scripted_{answered + 1}"
            block = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(arguments)}
            stop = "tool_use"
        else:
            text = FINAL_TEXT if tools else '{"title": "Scripted run"}'
            block = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": text}
            stop = "end_turn"
        usage = {"input_tokens": 100, "output_tokens": 1}
        message = {
            "id": f"msg_scripted_{len(self.requests)}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "scripted"),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage,
        }
        yield _sse("message_start", {"type": "message_start", "message": message})
        if tools and answered == self.hold_step:
            self.holding.set()
            self.release.wait(300)
        yield _sse(
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": block},
        )
        yield _sse(
            "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}
        )
        yield _sse("content_block_stop", {"type": "content_block_stop", "index": 0})
        yield _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 20},
            },
        )
        yield _sse("message_stop", {"type": "message_stop"})

    # -- OpenAI Responses ----------------------------------------------------------------------

    def openai(self, body: dict[str, Any]) -> Iterator[bytes]:
        items = body.get("input") or []
        outputs = ("function_call_output", "custom_tool_call_output")
        answered = sum(1 for i in items if isinstance(i, dict) and i.get("type") in outputs)
        tools = {t.get("name"): t for t in body.get("tools") or [] if isinstance(t, dict)}
        response_id = f"resp_scripted_{len(self.requests)}"
        shell = next((n for n in ("shell", "shell_command", "exec_command") if n in tools), None)
        step = self.commands[answered] if answered < len(self.commands) else None
        item: dict[str, Any]
        if isinstance(step, Write) and "apply_patch" in tools:
            # A model Codex knows (gpt-5.5) edits files with its patch tool (freeform).
            lines = "".join(f"+{line}\n" for line in step.content.splitlines())
            patch = f"*** Begin Patch\n*** Add File: {step.path}\n{lines}*** End Patch\n"
            item = {
                "type": "custom_tool_call",
                "id": f"ctc_scripted_{answered + 1}",
                "call_id": f"call_scripted_{answered + 1}",
                "name": "apply_patch",
                "input": patch,
                "status": "completed",
            }
        elif shell and step is not None:
            # Codex's file writes are shell commands where it offers no patch tool (its
            # fallback model, gpt-5 here).
            command = (
                step
                if isinstance(step, str)
                else f"printf %s {shlex.quote(step.content)} > {shlex.quote(step.path)}"
            )
            arguments = {
                "shell": {"command": ["bash", "-lc", command]},
                "shell_command": {"command": command},
                "exec_command": {"cmd": command},
            }[shell]
            item = {
                "type": "function_call",
                "id": f"fc_scripted_{answered + 1}",
                "call_id": f"call_scripted_{answered + 1}",
                "name": shell,
                "arguments": json.dumps(arguments),
                "status": "completed",
            }
        else:
            item = {
                "type": "message",
                "id": "msg_scripted_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": FINAL_TEXT, "annotations": []}],
            }
        response = {"id": response_id, "object": "response", "status": "in_progress",
                    "output": [], "model": body.get("model", "scripted")}  # fmt: skip
        yield _sse("response.created", {"type": "response.created", "response": response})
        yield _sse(
            "response.output_item.done",
            {"type": "response.output_item.done", "output_index": 0, "item": item},
        )
        usage = {
            "input_tokens": 100,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 20,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 120,
        }
        done = {**response, "status": "completed", "output": [item], "usage": usage}
        yield _sse("response.completed", {"type": "response.completed", "response": done})

    # -- Gemini generateContent ----------------------------------------------------------------

    def gemini(self, body: dict[str, Any], *, sse: bool = True) -> Iterator[bytes]:
        contents = body.get("contents") or []
        answered = sum(
            1
            for content in contents
            for part in content.get("parts") or []
            if isinstance(part, dict) and "functionResponse" in part
        )
        declared = {
            d.get("name")
            for tool in body.get("tools") or []
            for d in tool.get("functionDeclarations") or []
        }
        if "run_shell_command" in declared and answered < len(self.commands):
            step = self.commands[answered]
            if isinstance(step, str):
                call = {"name": "run_shell_command", "args": {"command": step}}
            else:
                call = {"name": "write_file",
                        "args": {"file_path": step.path, "content": step.content}}  # fmt: skip
            part: dict[str, Any] = {"functionCall": call}
        else:
            part = {"text": FINAL_TEXT if declared else "{}"}
        response = {
            "candidates": [
                {"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": {
                "promptTokenCount": 100, "candidatesTokenCount": 20, "totalTokenCount": 120
            },
            "modelVersion": body.get("model", "scripted"),
        }  # fmt: skip
        yield (
            f"data: {json.dumps(response)}\r\n\r\n".encode()
            if sse
            else json.dumps(response).encode()
        )
