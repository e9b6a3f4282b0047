// A sandbox's edges through the official TypeScript SDK (sandbox0@0.9.5 from npm, unmodified):
// services, logs (list and watch), events and metrics. Run by tests/edges/test_sdk_js_edges.py;
// prints one JSON line of findings that the Python side checks.
const { Client } = await import(process.env.SANDBOX0_JS_ENTRY);

const client = new Client({ token: process.env.SANDBOX0_TOKEN, baseUrl: process.env.SANDBOX0_BASE_URL });
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const out = {};

const sandbox = await client.sandboxes.claim("default");
try {
  const services = await sandbox.updateServices([
    { id: "web", port: 9000, ingress: { public: true }, runtime: { type: "manual" } },
  ]);
  out.services = services.services.map((s) => ({ id: s.id, publishable: s.publishable, blockers: s.publishBlockers }));
  out.servicesAgain = (await sandbox.getServices()).services.map((s) => s.id);

  const started = new Date(Date.now() - 1000);
  const session = await sandbox.createSession({
    command: ["sh", "-c", "for i in 1 2 3; do echo ts line $i; done; exec cat"],
  });
  await sleep(1500);
  const logs = await sandbox.listLogs({ startTime: started });
  out.logs = logs.logs.filter((e) => e.contextId === session.id).map((e) => e.message);
  out.logStream = logs.logs[0]?.stream;

  const stream = await sandbox.watchLogs();
  const iterator = stream[Symbol.asyncIterator]();
  const first = await iterator.next(); // the heartbeat that opens the stream
  out.firstLineType = first.value?.type;
  const sent = Date.now();
  await sandbox.writeSessionInput(session.id, { inputId: "ts-1", dataBase64: Buffer.from("hello ts\n").toString("base64") });
  for (;;) {
    const { value, done } = await iterator.next();
    if (done) break;
    if (value.type === "log") {
      out.watched = value.data.message;
      out.watchMs = Date.now() - sent;
      break;
    }
  }
  await iterator.return(); // releases the reader
  await stream.body.cancel();

  const catalog = await sandbox.getMetricsCatalog();
  out.catalog = catalog.metrics.length;
  // A process that allocates 8 MiB every 0.2 s up to 160 MiB while it spins.
  const hog = "import time\nheld = []\nend = time.time() + 30\nwhile time.time() < end:\n" +
    "    if len(held) < 20: held.append(bytearray(8 << 20))\n    stop = time.time() + 0.2\n" +
    "    while time.time() < stop: pass\n";
  const hogStart = new Date();
  await sleep(2500); // an idle baseline first
  await sandbox.createSession({ command: ["python3", "-c", hog] });
  await sleep(7000);
  const metrics = await sandbox.getMetrics({
    startTime: hogStart, metrics: ["sandbox.memory.usage", "sandbox.cpu.usage", "sandbox.process.count"],
    stepSeconds: 1,
  });
  const values = (name) => metrics.series.filter((s) => s.metric === name)
    .flatMap((s) => s.segments.flatMap((g) => g.points.map((p) => p.value)));
  out.metrics = metrics.series.map((s) => s.metric);
  out.memory = values("sandbox.memory.usage");
  out.cpu = values("sandbox.cpu.usage");
  out.freshness = metrics.freshness.status;

  await client.sandboxes.pause(sandbox.id);
  const events = await sandbox.listObservabilityEvents();
  out.actions = events.events.map((e) => e.action);
  out.eventFields = Object.keys(events.events[0]).sort();
} finally {
  await client.sandboxes.delete(sandbox.id);
}
console.log(JSON.stringify(out));
