// Paddock's follower of one run: runs in the sandbox pod's sidecar, as the sidecar's user, on
// the operator's one long-lived exec for the run, and pushes what the run produces as it does.
//
//   node follow.mjs RUN PRIVATE STDOUT_OFFSET FILES_OFFSET launch|run
//
// RUN is the run's directory on the run volume (the agent's, mounted read-only here), PRIVATE
// the sidecar's own directory of the run (the gate's requests, if the run is gated); "launch":
// the run is about to be launched (its directory comes), "run": it was (its directory is there,
// or the pod lost it). Frames
// go out on stdout, one JSON object a line:
//   {"k":"j","j":"stdout"|"files","at":N,"b":B64}  journal bytes from offset N, in order
//   {"k":"exit","exit":B64,"stderr":B64,"changes":B64,"diff":B64,"ends":{...}}  once a
//       completion record is there and every journal byte up to its end ("ends") was sent;
//       again whenever the record changes (the agent may write one before the wrapper does)
//   {"k":"wrapper","stale":BOOL}  whether the wrapper last beat (it rewrites its file list
//       each tick) over STALE_S seconds ago, or at a time to come; sent when it flips, and
//       with each beat
//   {"k":"server","stale":BOOL}  whether the gate server has stopped or not beaten for
//       SERVER_STALE_S; sent as the wrapper's
//   {"k":"gate","id":ID,"b":B64} a request waiting for an answer, GATE_PER_SECOND a second
//       at most (the server lets 64 wait); {"k":"done","id":ID} once it no longer waits
//   {"k":"missing"}  the run's directory is gone (the pod's run volume is new)
//   {"k":"refused","why":TEXT}  a journal is not one the follower reads (see below)
//   {"k":"beat"}  every BEAT_MS, so that the operator can tell a quiet run from a lost stream
// Only a frame that brings something new wakes the operator's step (a beat does not).
// Lines come in on stdin: "ack STDOUT FILES" (the operator stored the log up to there: the
// follower sends at most WINDOW bytes past it) and "answer ID B64" (written for the gate
// server, which answers the connection the request came on). At the end of stdin it exits.
//
// The run's directory is the agent's: every byte read from it is the agent's word, and only
// the wrapper's completion record, with the run's nonce, ends a run. The directory is opened
// once, as a directory and not through a link, and its files are read through that
// descriptor (a directory swapped for a link later changes nothing); a file is read only if it
// is a regular file that is not the sidecar's own (by owner or group), opened without
// following a link: the agent cannot make the follower send the sidecar's files.
import fs from "node:fs";
import path from "node:path";

const [runDir, privateDir, stdoutAt, filesAt, expect] = process.argv.slice(2);
const WINDOW = 1024 * 1024; // bytes sent past the last ack, at most
const CHUNK = 256 * 1024; // bytes of a journal in one frame, at most
const BEAT_MS = 10000;
const CHECK_MS = 1000; // liveness, and a net under the directory watches
const SETTLE_MS = 20; // changes that come together are sent together (ticks at most this often)
const STALE_S = 5; // a wrapper that has not beaten for this long is reported stale
const SERVER_STALE_S = 15;
const GATE_PER_SECOND = 16;
const TAILS = { exit: [256, false], stderr: [4096, true], changes: [65536, false], diff: [65536, false] };
const ID = /^[0-9]+-[0-9]+$/;
const uid = process.getuid();
const gid = process.getgid();
const requests = path.join(privateDir, "requests");

const journals = {
  stdout: { sent: Number(stdoutAt) || 0, acked: Number(stdoutAt) || 0 },
  files: { sent: Number(filesAt) || 0, acked: Number(filesAt) || 0 },
};
const gate = new Set(); // ids of the requests sent and still waiting
const gateSent = []; // when the last requests were sent (ms)
let seen = expect === "run"; // the run's directory was there
let dirFd = null; // the run's directory, opened once
let exitSent = ""; // the completion record's identity (inode, size, time) last sent
let wrapperStale = null;
let serverStale = null;
let refused = "";
let scheduled = null;
let blocked = false; // stdout is full: frames wait for its drain

function say(frame) {
  if (!process.stdout.write(`${JSON.stringify(frame)}\n`)) blocked = true;
}

function own(stat) {
  return uid !== 0 && (stat.uid === uid || stat.gid === gid);
}

function inRun(name) {
  return `/proc/self/fd/${dirFd}/${name}`;
}

// Opens the run's directory once it is there: a directory, not a link, not the sidecar's.
function openRun() {
  if (dirFd !== null) return true;
  let fd;
  try {
    fd = fs.openSync(runDir, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY | fs.constants.O_NOFOLLOW);
  } catch (error) {
    if (error.code !== "ENOENT") refused ||= `the run's directory: ${error.code}`;
    return false;
  }
  if (own(fs.fstatSync(fd))) {
    fs.closeSync(fd);
    refused ||= "the run's directory is not the sandbox user's";
    return false;
  }
  dirFd = fd;
  return true;
}

// Bytes [start, start + max) of the run's file NAME; null if it is not there.
function read(name, start, max, fromEnd = false) {
  let fd;
  try {
    fd = fs.openSync(inRun(name), fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
  } catch (error) {
    if (error.code === "ENOENT") return null;
    refused ||= `${name}: ${error.code}`;
    return null;
  }
  try {
    const stat = fs.fstatSync(fd);
    if (!stat.isFile() || own(stat)) {
      refused ||= `${name} is not a file of the sandbox's user`;
      return null;
    }
    const from = fromEnd ? Math.max(stat.size - max, 0) : start;
    const length = Math.max(Math.min(max, stat.size - from), 0);
    const buffer = Buffer.alloc(length);
    const got = length ? fs.readSync(fd, buffer, 0, length, from) : 0;
    return { data: buffer.subarray(0, got), size: stat.size };
  } finally {
    fs.closeSync(fd);
  }
}

// Seconds since FILE was last written; null if it is not there, Infinity if written at a time
// to come (an agent's touch -d: never a beat).
function age(file) {
  try {
    const seconds = (Date.now() - fs.lstatSync(file).mtimeMs) / 1000;
    return seconds < -1 ? Infinity : Math.max(seconds, 0);
  } catch {
    return null;
  }
}

function pid(file) {
  try {
    const value = Number(fs.readFileSync(file, "utf8").trim());
    return Number.isSafeInteger(value) && value > 1 ? value : null;
  } catch {
    return null;
  }
}

function sendJournals() {
  let whole = true;
  for (const [name, journal] of Object.entries(journals)) {
    for (;;) {
      const room = journal.acked + WINDOW - journal.sent;
      if (room <= 0 || blocked) {
        whole = false;
        break;
      }
      const got = read(name, journal.sent, Math.min(CHUNK, room));
      if (got === null) break;
      if (got.data.length) {
        say({ k: "j", j: name, at: journal.sent, b: got.data.toString("base64") });
        journal.sent += got.data.length;
      }
      if (journal.sent >= got.size) break;
    }
  }
  return whole;
}

function sendExit() {
  let stat;
  try {
    stat = fs.lstatSync(inRun("exit"));
  } catch {
    return;
  }
  const identity = `${stat.ino} ${stat.size} ${stat.mtimeMs}`;
  if (identity === exitSent) return;
  const frame = { k: "exit", ends: {} };
  for (const [name, [max, fromEnd]] of Object.entries(TAILS)) {
    const got = read(name, 0, max, fromEnd);
    frame[name] = got ? got.data.toString("base64") : "";
  }
  for (const [name, journal] of Object.entries(journals)) {
    const got = read(name, 0, 0);
    if (got && journal.sent < got.size) return; // the journals' last bytes first
    frame.ends[name] = journal.sent;
  }
  exitSent = identity;
  say(frame);
}

function sendWrapper(always) {
  // The wrapper rewrites its list of the workspace's files each tick: its last write is its beat
  // (the directory's own time, until the first list is written).
  const last = age(inRun("snapshot")) ?? age(inRun("."));
  const stale = last === null || last > STALE_S;
  if (always || stale !== wrapperStale) say({ k: "wrapper", stale });
  wrapperStale = stale;
}

function sendServer(always) {
  const server = pid(path.join(privateDir, "server.pid"));
  if (server === null) return; // not gated
  let alive = false;
  try {
    process.kill(server, 0);
    alive = true;
  } catch {}
  const beat = alive ? age(path.join(privateDir, "heartbeat")) : null;
  const stale = beat === null || beat > SERVER_STALE_S;
  if (always || stale !== serverStale) say({ k: "server", stale });
  serverStale = stale;
}

function sendGate() {
  let names;
  try {
    names = fs.readdirSync(requests);
  } catch {
    return;
  }
  const files = new Set(names);
  const waiting = names
    .filter((n) => n.endsWith(".req") && !files.has(`${n.slice(0, -4)}.ans`))
    .map((n) => n.slice(0, -4))
    .filter((id) => ID.test(id));
  const now = Date.now();
  while (gateSent.length && gateSent[0] < now - 1000) gateSent.shift();
  for (const id of waiting) {
    if (gate.has(id)) continue;
    if (gateSent.length >= GATE_PER_SECOND) {
      scheduled ||= setTimeout(tick, gateSent[0] + 1000 - now); // when the oldest is a second old
      break;
    }
    let body;
    try {
      body = fs.readFileSync(path.join(requests, `${id}.req`));
    } catch {
      continue; // withdrawn meanwhile
    }
    gate.add(id);
    gateSent.push(now);
    say({ k: "gate", id, b: body.toString("base64") });
  }
  const still = new Set(waiting);
  for (const id of gate) {
    if (!still.has(id)) {
      gate.delete(id);
      say({ k: "done", id });
    }
  }
}

let watching = null;
function gone() {
  if (dirFd !== null) return fs.fstatSync(dirFd).nlink === 0; // removed (the pod's volume is new)
  return seen && !fs.existsSync(runDir);
}

function tick(always = false) {
  scheduled = null;
  if (gone()) {
    say({ k: "missing" });
    process.exit(0);
  }
  if (openRun()) {
    seen = true;
    watching ||= watch(inRun("."));
    const whole = sendJournals();
    if (whole) sendExit();
    sendWrapper(always);
  }
  if (refused) {
    say({ k: "refused", why: refused });
    process.exit(0);
  }
  sendServer(always);
  sendGate();
}

function soon() {
  scheduled ||= setTimeout(tick, SETTLE_MS);
}

function watch(dir) {
  try {
    return fs.watch(dir, soon).on("error", () => {});
  } catch {
    return null;
  }
}

function received(line) {
  const [key, first, second] = line.split(" ");
  if (key === "ack") {
    for (const [name, at] of [["stdout", first], ["files", second]]) {
      const journal = journals[name];
      const offset = Number(at);
      if (Number.isSafeInteger(offset) && offset > journal.acked) {
        journal.acked = offset;
        journal.sent = Math.max(journal.sent, offset);
      }
    }
  } else if (key === "answer" && ID.test(first ?? "") && fs.existsSync(path.join(requests, `${first}.req`))) {
    const file = path.join(requests, first);
    fs.writeFileSync(`${file}.tmp`, Buffer.from(second ?? "", "base64"), { mode: 0o600 });
    fs.renameSync(`${file}.tmp`, `${file}.ans`);
  }
  soon();
}

// One follower a run: a later one (the operator's stream broke, or the operator restarted)
// stops the one before.
const pidFile = path.join(privateDir, "follower.pid");
const before = pid(pidFile);
try {
  if (before !== null && before !== process.pid) process.kill(before, "SIGTERM");
} catch {}
fs.writeFileSync(pidFile, `${process.pid}\n`);

let pending = "";
process.stdin.on("data", (chunk) => {
  pending += chunk.toString();
  const lines = pending.split("\n");
  pending = lines.pop();
  for (const line of lines) received(line.trim());
});
process.stdin.on("end", () => process.exit(0));
process.stdout.on("error", () => process.exit(0));
process.stdout.on("drain", () => {
  blocked = false;
  soon();
});
if (fs.existsSync(requests)) watch(requests);
tick(true);
setInterval(tick, CHECK_MS);
setInterval(() => {
  say({ k: "beat" });
  tick(true);
}, BEAT_MS);
