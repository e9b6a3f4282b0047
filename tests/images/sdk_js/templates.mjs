// The TypeScript SDK's own templates calls against our server: create a template from an image the
// test imported, wait until it is ready, list and get it, claim it and run on the image's system.
// Run by tests/images/test_templates_sdk_js.py with the SDK from npm.
const { Client } = await import(process.env.SANDBOX0_JS_ENTRY);

const client = new Client({ token: process.env.SANDBOX0_TOKEN, baseUrl: process.env.SANDBOX0_BASE_URL });
const image = process.env.IMAGE_REFERENCE;

function check(condition, message) {
  if (!condition) throw new Error(`check failed: ${message}`);
}

const created = await client.templates.create({
  templateId: "ts-trixie",
  spec: { mainContainer: { image, resources: { memory: "1Gi", ephemeralStorage: "1Gi" } }, displayName: "TS" },
});
check(created.templateId === "ts-trixie" && created.scope === "team", "created");
const ready = await client.templates.waitUntilReady("ts-trixie", { timeoutMs: 10000 });
check(ready.spec.mainContainer.image === image, "ready with its image");
const listed = (await client.templates.list()).map((t) => t.templateId);
check(listed.includes("ts-trixie") && listed.includes("default"), `listed: ${listed}`);
const got = await client.templates.get("ts-trixie");
check(got.spec.displayName === "TS", "get");
const sandbox = await client.sandboxes.claim("ts-trixie");
try {
  const result = await sandbox.cmd("sh -c 'grep VERSION_CODENAME /etc/os-release; python3 --version'");
  process.stdout.write(result.stdout ?? result.outputRaw ?? "");
} finally {
  await client.sandboxes.delete(sandbox.id);
  await client.templates.delete("ts-trixie");
}
console.log("templates ok");
