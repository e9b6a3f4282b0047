// A command and a cwd that do not exist in the sandbox, through the TypeScript SDK: prints one
// JSON line per case with what the SDK parsed (phase, each attempt's reason and exit code).
// Run by tests/api/test_start_failed.py with the SDK from npm.
const { Client } = await import(process.env.SANDBOX0_JS_ENTRY);
const client = new Client({ token: process.env.SANDBOX0_TOKEN, baseUrl: process.env.SANDBOX0_BASE_URL });
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const restart = { policy: "on_failure", maxRestarts: 2, windowSeconds: 60, initialBackoffMs: 50, maxBackoffMs: 100 };
const cases = [
  ["missing command, never", { command: ["no-such-command-here"] }],
  ["missing cwd, never", { command: ["true"], cwd: "/workspace/no/such/dir" }],
  ["missing command, on_failure", { command: ["no-such-command-here"], lifecycle: { restart } }],
  ["missing cwd, on_failure", { command: ["true"], cwd: "/workspace/no/such/dir", lifecycle: { restart } }],
];

const sandbox = await client.sandboxes.claim("default");
try {
  for (const [name, spec] of cases) {
    const created = await sandbox.createSession(spec);
    let session = created;
    for (let i = 0; i < 100 && session.phase !== "failed"; i++) {
      await sleep(50);
      session = await sandbox.getSession(created.id);
    }
    // A page holds committed events only: the last exit may trail the phase by a moment.
    let page;
    for (let i = 0; i < 100; i++) {
      page = await sandbox.listSessionEvents(created.id, { after: 0 });
      if (page.events.filter((e) => e.type === "attempt.exited").length >= session.attempt.number) break;
      await sleep(50);
    }
    const exits = page.events.filter((e) => e.type === "attempt.exited")
      .map((e) => ({ reason: e.reason, exit_code: e.exitCode ?? null }));
    console.log(JSON.stringify({
      name, created_phase: created.phase, phase: session.phase,
      attempt: { number: session.attempt.number, reason: session.attempt.reason, exit_code: session.attempt.exitCode ?? null },
      exits, outputs: page.events.filter((e) => e.type === "output").length,
    }));
  }
} finally {
  await client.sandboxes.delete(sandbox.id);
}
