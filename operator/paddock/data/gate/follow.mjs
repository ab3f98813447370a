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
//   {"k":"exit","exit":B64,"stderr":B64,"changes":B64,"diff":B64,"ends":{...}}  once the
//       wrapper wrote its record and every journal byte up to its end ("ends") was sent
//   {"k":"wrapper","age":S}  seconds since the wrapper last beat (it rewrites its file list
//       each tick); sent when it turns stale or fresh, and with each beat
//   {"k":"server","age":S|null}  the gate server's heartbeat age, null once it has stopped
//   {"k":"gate","id":ID,"b":B64} a request waiting for an answer; {"k":"done","id":ID} once not
//   {"k":"missing"}  the run's directory is gone (the pod's run volume is new)
//   {"k":"refused","why":TEXT}  a journal is not one the follower reads (see below)
//   {"k":"beat"}  every BEAT_MS, so that the operator can tell a quiet run from a lost stream
// Lines come in on stdin: "ack STDOUT FILES" (the operator stored the log up to there: the
// follower sends at most WINDOW bytes past it) and "answer ID B64" (written for the gate
// server, which answers the connection the request came on). At the end of stdin it exits.
//
// The run's directory is the agent's: every byte read from it is the agent's word, and only
// the wrapper's completion record, with the run's nonce, ends a run. A journal is read only
// if it is a regular file that is not the sidecar's own (by owner or group), opened without
// following a link: the agent cannot make the follower send the sidecar's files.
import fs from "node:fs";
import path from "node:path";

const [runDir, privateDir, stdoutAt, filesAt, expect] = process.argv.slice(2);
const WINDOW = 1024 * 1024; // bytes sent past the last ack, at most
const CHUNK = 256 * 1024; // bytes of a journal in one frame, at most
const BEAT_MS = 10000;
const CHECK_MS = 1000; // liveness, and a net under the directory watches
const SETTLE_MS = 5; // changes that come together are sent together
const STALE_S = 5; // a wrapper that has not beaten for this long is reported stale
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
let seen = expect === "run"; // the run's directory was there
let ended = false; // the exit frame was sent
let wrapperStale = null;
let serverAge;
let refused = "";
let scheduled = null;
let blocked = false; // stdout is full: frames wait for its drain

function say(frame) {
  if (!process.stdout.write(`${JSON.stringify(frame)}\n`)) blocked = true;
}

function own(stat) {
  return uid !== 0 && (stat.uid === uid || stat.gid === gid);
}

// Bytes [start, start + max) of the run's file NAME; null if it is not there.
function read(name, start, max, fromEnd = false) {
  let fd;
  try {
    fd = fs.openSync(path.join(runDir, name), fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
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

function age(file) {
  try {
    return Math.max(0, (Date.now() - fs.statSync(file).mtimeMs) / 1000);
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
  if (ended || !fs.existsSync(path.join(runDir, "exit"))) return;
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
  ended = true;
  say(frame);
}

function sendWrapper(always) {
  // The wrapper rewrites its list of the workspace's files each tick: its last write is its beat.
  const ages = [age(path.join(runDir, "snapshot")), age(runDir)].filter((a) => a !== null);
  const last = ages.length ? Math.min(...ages) : null;
  const stale = last === null || last > STALE_S;
  if (always || stale !== wrapperStale) say({ k: "wrapper", age: last === null ? null : Math.floor(last) });
  wrapperStale = stale;
}

function sendServer(always) {
  let alive = false;
  try {
    process.kill(Number(fs.readFileSync(path.join(privateDir, "server.pid"), "utf8")), 0);
    alive = true;
  } catch {}
  if (!alive && !fs.existsSync(path.join(privateDir, "server.pid"))) return; // not gated
  const beat = alive ? age(path.join(privateDir, "heartbeat")) : null;
  const now = beat === null ? null : Math.floor(beat);
  if (always || (now === null) !== (serverAge === null) || serverAge === undefined) say({ k: "server", age: now });
  serverAge = now;
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
  for (const id of waiting) {
    if (gate.has(id)) continue;
    let body;
    try {
      body = fs.readFileSync(path.join(requests, `${id}.req`));
    } catch {
      continue; // withdrawn meanwhile
    }
    gate.add(id);
    say({ k: "gate", id, b: body.toString("base64") });
  }
  const now = new Set(waiting);
  for (const id of gate) {
    if (!now.has(id)) {
      gate.delete(id);
      say({ k: "done", id });
    }
  }
}

let watching = null;
function tick(always = false) {
  scheduled = null;
  if (!fs.existsSync(runDir)) {
    if (seen) {
      say({ k: "missing" });
      process.exit(0);
    }
  } else {
    seen = true;
    watching ||= watch(runDir);
    const whole = sendJournals();
    if (whole) sendExit();
    sendWrapper(always);
    if (refused) {
      say({ k: "refused", why: refused });
      process.exit(0);
    }
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
try {
  process.kill(Number(fs.readFileSync(pidFile, "utf8")), "SIGTERM");
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
