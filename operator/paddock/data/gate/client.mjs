// Paddock's gate client: what a harness's pre-execution hook runs, as the agent's user.
//
//   node client.mjs HARNESS SECONDS < REQUEST
//
// Sends the hook's request (stdin, at most 64 KiB) to the gate server in the sandbox's sidecar
// over the socket next to this file, and waits at most SECONDS for its answer. Exits 0 only on
// an answer of "allow" (for Claude Code, with the hook output that allows the tool: its own
// permission rules do not, so a gate that dies leaves the tool refused); anything else exits
// 2, the hooks' "block", with the reason on stderr: a denial, no answer in time, a request
// too big, a server that cannot be reached or that ends the connection without an answer.
import net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";

const [harness, seconds] = process.argv.slice(2);
const MAX_REQUEST = 65536;
// A socket's path is at most 107 bytes: it is named from its own directory.
process.chdir(path.dirname(fileURLToPath(import.meta.url)));
const socketPath = "gate.sock";

function refuse(why) {
  process.stderr.write(`paddock gate: ${why}; refused\n`);
  process.exit(2);
}

setTimeout(() => refuse("no decision in time"), Number(seconds || 900) * 1000);

const input = [];
let size = 0;
process.stdin.on("error", () => refuse("the request could not be read"));
process.stdin.on("data", (chunk) => {
  size += chunk.length;
  if (size > MAX_REQUEST) refuse("the request is over 64 KiB");
  input.push(chunk);
});
process.stdin.on("end", () => {
  const answer = [];
  const socket = net.createConnection(socketPath);
  socket.on("connect", () => {
    const body = Buffer.concat(input);
    socket.write(`${body.length}\n`);
    socket.write(body); // the connection stays open: closing it would withdraw the request
  });
  socket.on("data", (chunk) => answer.push(chunk));
  socket.on("error", (e) => refuse(`the gate cannot be reached (${e.code || e.message})`));
  socket.on("close", () => {
    const text = Buffer.concat(answer).toString();
    const newline = text.indexOf("\n");
    const verdict = newline < 0 ? text : text.slice(0, newline);
    if (verdict === "allow") {
      if (harness === "claude-code") {
        const allow = { hookEventName: "PreToolUse", permissionDecision: "allow" };
        process.stdout.write(JSON.stringify({ hookSpecificOutput: allow }) + "\n");
      }
      process.exit(0);
    }
    if (verdict !== "deny") refuse("the gate ended without an answer");
    process.stderr.write(text.slice(newline + 1) || "paddock gate: refused\n");
    process.exit(2);
  });
});
