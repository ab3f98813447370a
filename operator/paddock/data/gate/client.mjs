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
//
//   node client.mjs register PID NAME...
//   node client.mjs shell HARNESS -c TEXT
//
// The messages of Paddock's shell (data/gate/shell.sh; the server says what each means): the
// harness registers the CLI's process and the names of its environment just before it execs
// the CLI; the shell asks whether it may run the command in TEXT, which the CLI wrapped as its
// own code does (Gemini CLI: its guard, and a subshell that records background jobs), and is
// told on stdout the variables of its environment to drop, one a line: those the CLI gained
// from no one but the agent (Gemini CLI loads a workspace's .gemini/.env for names it does not
// have). Neither reads stdin (a command's own). Exit 0 only on "allow", else 2.
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";

const MAX_REQUEST = 65536;
const SHELL_SECONDS = 30; // the server answers the shell at once: it waits for nobody
// A socket's path is at most 107 bytes: it is named from its own directory.
process.chdir(path.dirname(fileURLToPath(import.meta.url)));
const socketPath = "gate.sock";

function refuse(why) {
  process.stderr.write(`paddock gate: ${why}; refused\n`);
  process.exit(2);
}

// One message to the server; `done` gets the answer's verdict (its first line) and the rest.
function send(header, body, done) {
  const answer = [];
  const socket = net.createConnection(socketPath);
  socket.on("connect", () => {
    socket.write(header);
    if (body) socket.write(body); // the connection stays open: closing it would withdraw it
  });
  socket.on("data", (chunk) => answer.push(chunk));
  socket.on("error", (e) => refuse(`the gate cannot be reached (${e.code || e.message})`));
  socket.on("close", () => {
    const text = Buffer.concat(answer).toString();
    const newline = text.indexOf("\n");
    done(newline < 0 ? text : text.slice(0, newline), text.slice(newline + 1));
  });
}

function allowedOrRefused(verdict, rest) {
  if (verdict === "allow") process.exit(0);
  if (verdict !== "deny") refuse("the gate ended without an answer");
  process.stderr.write(rest || "paddock gate: refused\n");
  process.exit(2);
}

// Gemini CLI 0.61 runs a command as `bash -c TEXT`: its guard, then the command (trimmed, a
// space added after a final backslash) in a subshell that writes its background jobs to a file
// of a temporary directory of its own (its path as shell-quote quotes it: bare when it has
// nothing to quote, else in single quotes). The command, or null for any other text.
const GEMINI = new RegExp(
  "^shopt -u promptvars nullglob extglob nocaseglob dotglob; " +
    "_bgpids_file=(?:[A-Za-z0-9_./-]+|'[^']*')\n" +
    "\\(\n  trap 'jobs -p > \"\\$_bgpids_file\"' EXIT\n" +
    "([\\s\\S]*)\n\\)\n__code=\\$\\?\nexit \\$__code$",
);
const COMMANDS = { gemini: (text) => GEMINI.exec(text)?.[1] ?? null };
// What the CLI adds to a command's environment itself, besides the harness's (Gemini CLI 0.61's
// ShellExecutionService; the harness sets GIT_CONFIG_COUNT=0, so the keys are all its own).
const ADDED = {
  gemini: (name) =>
    /^GIT_CONFIG_(KEY|VALUE)_[0-9]+$/.test(name) ||
    ["GEMINI_CLI", "TERM", "PAGER", "GIT_PAGER", "GIT_CONFIG_COUNT", "GIT_CONFIG_GLOBAL",
     "GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM", "GIT_TERMINAL_PROMPT", "GIT_ASKPASS",
     "SSH_ASKPASS", "GH_PROMPT_DISABLED", "GCM_INTERACTIVE", "DISPLAY",
     "DBUS_SESSION_BUS_ADDRESS"].includes(name),
};

// The variables of the shell's environment (its parent's, as it started) that neither the
// harness gave the CLI (cli.env, written by the server at registration) nor the CLI added.
function gained(harness) {
  const had = new Set(fs.readFileSync("cli.env", "utf8").split("\n"));
  const names = fs
    .readFileSync(`/proc/${process.ppid}/environ`, "utf8")
    .split("\0")
    .filter((entry) => entry.includes("="))
    .map((entry) => entry.slice(0, entry.indexOf("=")));
  const drop = names.filter((name) => !had.has(name) && !ADDED[harness](name));
  if (drop.some((name) => name === "" || name.includes("\n"))) return null;
  return drop;
}

function hook(harness, seconds) {
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
    const body = Buffer.concat(input);
    send(`${body.length}\n`, body, (verdict, rest) => {
      if (verdict === "allow" && harness === "claude-code") {
        const allow = { hookEventName: "PreToolUse", permissionDecision: "allow" };
        process.stdout.write(JSON.stringify({ hookSpecificOutput: allow }) + "\n");
      }
      allowedOrRefused(verdict, rest);
    });
  });
}

function register(pid, ...names) {
  if (!/^[0-9]{1,9}$/.test(pid || "")) refuse("no process to register");
  const body = Buffer.from(names.join("\n"));
  send(`register ${pid} ${body.length}\n`, body, allowedOrRefused);
}

function shell(harness, flag, text, ...more) {
  const of = COMMANDS[harness];
  const command = of && flag === "-c" && more.length === 0 ? of(text) : null;
  if (command === null) refuse(`not a command as ${harness} runs one`);
  const body = Buffer.from(command);
  if (body.length > MAX_REQUEST) refuse("the command is over 64 KiB");
  let drop;
  try {
    drop = gained(harness);
  } catch (e) {
    refuse(`the CLI's environment cannot be read (${e.code || e.message})`);
  }
  if (drop === null) refuse("a variable of the CLI's environment has no name Paddock can drop");
  setTimeout(() => refuse("no decision in time"), SHELL_SECONDS * 1000);
  send(`shell ${body.length}\n`, body, (verdict, rest) => {
    if (verdict === "allow") process.stdout.write(drop.map((name) => name + "\n").join(""));
    allowedOrRefused(verdict, rest);
  });
}

const [mode, ...args] = process.argv.slice(2);
if (mode === "register") register(...args);
else if (mode === "shell") shell(...args);
else hook(mode, args[0]);
