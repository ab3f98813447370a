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
import fs from "node:fs";
import net from "node:net";
import path from "node:path";

const [socketPath, requests, heartbeat] = process.argv.slice(2).map((p) => path.resolve(p));
const MAX_REQUEST = 65536;
const MAX_WAITING = 64; // requests waiting for an answer at once; more are refused
const ANSWER_POLL_MS = 100;
const HEARTBEAT_MS = 1000;

const waiting = new Map(); // request id -> the connection waiting for its answer
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

function answerWaiting() {
  for (const [id, socket] of waiting) {
    let answer;
    try {
      answer = fs.readFileSync(path.join(requests, id + ".ans"));
    } catch {
      continue; // not answered yet
    }
    waiting.delete(id);
    socket.end(answer);
    withdraw(id);
  }
}

const server = net.createServer((socket) => {
  let buffered = Buffer.alloc(0);
  let length = null; // the request's length, once its header is read
  let done = false;
  socket.on("error", () => socket.destroy());
  socket.on("data", (chunk) => {
    if (done) return;
    buffered = Buffer.concat([buffered, chunk]);
    if (length === null) {
      const newline = buffered.indexOf(10);
      if (newline < 0) {
        if (buffered.length > 16) {
          done = true;
          refuse(socket, "it does not start with its length");
        }
        return;
      }
      const header = buffered.subarray(0, newline).toString();
      if (!/^[0-9]{1,9}$/.test(header)) {
        done = true;
        return refuse(socket, "it does not start with its length");
      }
      length = Number(header);
      buffered = buffered.subarray(newline + 1);
      if (length > MAX_REQUEST) {
        done = true;
        return refuse(socket, "it is over 64 KiB");
      }
    }
    if (buffered.length >= length) {
      done = true;
      received(socket, buffered.subarray(0, length));
    }
  });
});

fs.rmSync(requests, { recursive: true, force: true });
fs.mkdirSync(requests, { recursive: true, mode: 0o700 });
fs.rmSync(socketPath, { force: true });
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
