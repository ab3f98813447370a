// Paddock's gate server: runs in the sandbox pod's sidecar, as the sidecar's user, for one run.
//
//   node server.mjs SOCKET REQUESTS HEARTBEAT
//
// A harness's hook (client.mjs, as the agent's user) connects to SOCKET and sends the hook's
// request as its length in bytes (decimal, then a newline) and the bytes; the request is left
// in REQUESTS/<id>.req, a directory only the sidecar's user can reach, where the operator's
// exec into the sidecar finds it. The operator's answer (REQUESTS/<id>.ans) goes back on that
// connection only, and the connection ends. A request is at most 64 KiB (a bigger one is
// refused at once, as is a malformed length); one whose client goes away before its answer,
// mid-request or while it waits, is withdrawn; an answer for an id nobody waits for is never
// read. HEARTBEAT is rewritten every second, so that the operator can tell a stopped server
// from a quiet one.
//
// Two more messages serve Paddock's shell (data/gate/shell.sh), which a CLI that runs its
// commands through the bash on its PATH (Gemini CLI) finds first, so that a command runs only
// if the gate allowed it, whatever became of the hook that asked:
// - "register PID LENGTH\n" and the names of the harness's environment, one a line: the
//   harness, just before it execs the CLI, names the CLI's process and its environment; the
//   first to register is written to cli.pid and cli.env beside SOCKET (read-only to the agent),
//   and any later one is refused. The shell asks the gate only when its parent is that process,
//   and gives a command no variable the CLI gained since (from a file of the agent's).
// - "shell LENGTH\n" and the text the shell was given: allowed once for each answer of
//   "allow" that named that text ("ticket BASE64" lines after the verdict, written by the
//   operator) in the last TICKET_MS; anything else is refused.
import fs from "node:fs";
import net from "node:net";
import path from "node:path";

const [socketPath, requests, heartbeat] = process.argv.slice(2).map((p) => path.resolve(p));
const MAX_REQUEST = 65536;
const MAX_WAITING = 64; // requests waiting for an answer at once; more are refused
const ANSWER_POLL_MS = 100;
const HEARTBEAT_MS = 1000;
const TICKET_MS = 60000; // an allowed command's text stays runnable this long after its answer
const MAX_TICKETS = 256;
const cliPid = path.join(path.dirname(socketPath), "cli.pid");

const waiting = new Map(); // request id -> the connection waiting for its answer
const tickets = []; // {text, until}: texts the gate allowed, each runnable once
let registered = false;
let sequence = 0;

function refuse(socket, why) {
  socket.end(`deny\nPaddock's gate refused this request: ${why}.\n`);
}

function withdraw(id) {
  waiting.delete(id);
  for (const end of [".req", ".ans", ".tmp"]) fs.rmSync(path.join(requests, id + end), { force: true });
}

function received(socket, body) {
  if (waiting.size >= MAX_WAITING) return refuse(socket, "too many requests are waiting");
  const id = `${Date.now()}-${++sequence}`;
  const file = path.join(requests, id);
  fs.writeFileSync(file + ".tmp", body, { mode: 0o600 });
  fs.renameSync(file + ".tmp", file + ".req");
  waiting.set(id, socket);
  socket.on("close", () => { if (waiting.get(id) === socket) withdraw(id); });
}

// The texts an answer of "allow" lets Paddock's shell run: its "ticket BASE64" lines.
function keepTickets(answer) {
  const lines = answer.toString().split("\n");
  if (lines[0] !== "allow") return;
  const until = Date.now() + TICKET_MS;
  for (const line of lines.slice(1)) {
    if (!line.startsWith("ticket ")) continue;
    tickets.push({ text: Buffer.from(line.slice(7), "base64").toString(), until });
    if (tickets.length > MAX_TICKETS) tickets.shift();
  }
}

function answerWaiting() {
  for (const [id, socket] of waiting) {
    let answer;
    try {
      answer = fs.readFileSync(path.join(requests, id + ".ans"));
    } catch {
      continue; // not answered yet
    }
    waiting.delete(id);
    keepTickets(answer);
    socket.end(answer);
    withdraw(id);
  }
}

function register(socket, pid, names) {
  if (registered) return refuse(socket, "the CLI's process is already registered");
  registered = true;
  const cliEnv = path.join(path.dirname(socketPath), "cli.env");
  fs.writeFileSync(cliEnv + ".tmp", names, { mode: 0o644 });
  fs.renameSync(cliEnv + ".tmp", cliEnv);
  fs.writeFileSync(cliPid + ".tmp", `${pid}\n`, { mode: 0o644 });
  fs.renameSync(cliPid + ".tmp", cliPid);
  socket.end("allow\n");
}

function shell(socket, text) {
  const now = Date.now();
  const index = tickets.findIndex((t) => t.text === text && t.until > now);
  if (index < 0) return refuse(socket, "the gate did not allow this command");
  tickets.splice(index, 1);
  socket.end("allow\n");
}

const server = net.createServer((socket) => {
  let buffered = Buffer.alloc(0);
  let length = null; // the request's length, once its header is read
  // What the message is: a hook's "request", Paddock's "shell" asking whether it may run a
  // text, or the harness's "register" of the CLI's process (pid).
  let kind = "request";
  let pid = null;
  let done = false;
  socket.on("error", () => socket.destroy());
  socket.on("data", (chunk) => {
    if (done) return;
    buffered = Buffer.concat([buffered, chunk]);
    if (length === null) {
      const newline = buffered.indexOf(10);
      if (newline < 0) {
        if (buffered.length > 32) {
          done = true;
          refuse(socket, "it does not start with its length");
        }
        return;
      }
      const header = buffered.subarray(0, newline).toString();
      const framed = /^(?:(shell) |(register) ([0-9]{1,9}) )?([0-9]{1,9})$/.exec(header);
      if (!framed) {
        done = true;
        return refuse(socket, "it does not start with its length");
      }
      kind = framed[1] || framed[2] || kind;
      pid = framed[3] || null;
      length = Number(framed[4]);
      buffered = buffered.subarray(newline + 1);
      if (length > MAX_REQUEST) {
        done = true;
        return refuse(socket, "it is over 64 KiB");
      }
    }
    if (buffered.length >= length) {
      done = true;
      const body = buffered.subarray(0, length);
      if (kind === "shell") shell(socket, body.toString());
      else if (kind === "register") register(socket, pid, body.toString());
      else received(socket, body);
    }
  });
});

fs.rmSync(requests, { recursive: true, force: true });
fs.mkdirSync(requests, { recursive: true, mode: 0o700 });
fs.rmSync(socketPath, { force: true });
fs.rmSync(cliPid, { force: true });
fs.rmSync(path.join(path.dirname(socketPath), "cli.env"), { force: true });
// A socket's path is at most 107 bytes: it is named from its own directory.
const socketName = path.basename(socketPath);
process.chdir(path.dirname(socketPath));
server.listen(socketName, () => {
  fs.chmodSync(socketName, 0o666); // the agent's user connects; the directory stays the sidecar's
  const beat = () => fs.writeFileSync(heartbeat, `${process.pid}\n`);
  beat();
  setInterval(beat, HEARTBEAT_MS);
  setInterval(answerWaiting, ANSWER_POLL_MS);
});
for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"]) {
  process.on(signal, () => {
    for (const socket of waiting.values()) refuse(socket, "the gate stopped");
    process.exit(0);
  });
}
