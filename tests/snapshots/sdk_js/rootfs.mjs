// The TypeScript SDK's own rootfs calls against our server, on a Debian image template: a running
// sandbox with a file and a dpkg package installed is snapshotted; both change; restoreRootFS
// brings the old state back; fork makes a child with that state while the parent moves on; a claim
// with snapshotId starts from the snapshot; createFromSandbox then a claim of it starts from the
// parent's newest state. Run by tests/snapshots/test_rootfs_sdk_js.py with the SDK from npm.
const { Client } = await import(process.env.SANDBOX0_JS_ENTRY);

const client = new Client({ token: process.env.SANDBOX0_TOKEN, baseUrl: process.env.SANDBOX0_BASE_URL });
const image = process.env.IMAGE_REFERENCE;
const made = [];

function check(condition, message) {
  if (!condition) throw new Error(`check failed: ${message}`);
}

async function sh(sandbox, script) {
  const result = await sandbox.cmd(`sh -c '${script}'`);
  check(result.exitCode === 0 || result.exitCode === undefined, `${script}: ${JSON.stringify(result)}`);
  return (result.stdout ?? result.outputRaw ?? "").trim();
}

// A real package: built with dpkg-deb and installed with dpkg -i into the image's /usr and dpkg database.
async function install(sandbox, version) {
  await sh(sandbox, [
    "set -e; d=/tmp/pkg; rm -rf $d; mkdir -p $d/DEBIAN $d/usr/bin",
    `printf "Package: sbtool\\nVersion: ${version}\\nArchitecture: all\\nMaintainer: t <t@t>\\nDescription: t\\n" > $d/DEBIAN/control`,
    `printf "#!/bin/sh\\necho sbtool-${version}\\n" > $d/usr/bin/sbtool; chmod 755 $d/usr/bin/sbtool`,
    "dpkg-deb --build $d /tmp/sbtool.deb >/dev/null; dpkg -i /tmp/sbtool.deb >/dev/null",
  ].join("; "));
}

async function state(sandbox) {
  const file = new TextDecoder().decode(await sandbox.readFile("/workspace/notes.txt"));
  const version = await sh(sandbox, "dpkg-query -W -f=\\${Version} sbtool");
  const output = await sh(sandbox, "sbtool");
  check(output === `sbtool-${version}`, `the installed program matches dpkg's record: ${output} ${version}`);
  return `${file} ${version}`;
}

async function claim(template, options) {
  const sandbox = await client.sandboxes.claim(template, options);
  made.push(sandbox.id);
  return sandbox;
}

try {
  await client.templates.create({
    templateId: "ts-rootfs",
    spec: { mainContainer: { image, resources: { memory: "1Gi", ephemeralStorage: "1Gi" } } },
  });
  const parent = await claim("ts-rootfs");
  await parent.writeFile("/workspace/notes.txt", "v1");
  await install(parent, "1.0");
  check(await state(parent) === "v1 1.0", "the first state");

  const snapshot = await client.sandboxes.createRootFSSnapshot(parent.id);
  check(snapshot.sandboxId === parent.id && snapshot.id.startsWith("rootfs-snapshot-"), "snapshot");
  const listed = await client.sandboxes.listRootFSSnapshots(parent.id);
  check(listed.length === 1 && listed[0].id === snapshot.id, "listed");
  check((await client.sandboxes.getRootFSSnapshot(snapshot.id)).id === snapshot.id, "get");

  await parent.writeFile("/workspace/notes.txt", "v2");
  await install(parent, "2.0");
  check(await state(parent) === "v2 2.0", "both changed");
  console.log(`changed: ${await state(parent)}`);

  await client.sandboxes.pause(parent.id);
  const restored = await client.sandboxes.restoreRootFS(parent.id, { snapshotId: snapshot.id });
  check(restored.status === "paused" && restored.snapshotId === snapshot.id, `restored: ${JSON.stringify(restored)}`);
  await client.sandboxes.resume(parent.id);
  console.log(`restored: ${await state(parent)}`);

  const forked = await client.sandboxes.fork(parent.id, {});
  const child = client.sandboxes.sandbox(forked.sandbox.id);
  made.push(child.id);
  check(forked.sourceSandboxId === parent.id && forked.sandbox.status === "paused", "fork");
  await parent.writeFile("/workspace/notes.txt", "v3");
  await install(parent, "3.0");
  console.log(`fork child: ${await state(child)}`);
  console.log(`fork parent: ${await state(parent)}`);

  const fromSnapshot = await claim("ts-rootfs", { snapshotId: snapshot.id });
  console.log(`claim from snapshot: ${await state(fromSnapshot)}`);

  const template = await client.templates.createFromSandbox(
    { templateId: "ts-from-parent", sandboxId: parent.id }, { wait: true, timeoutMs: 60000 });
  check(template.status?.creation?.state === "ready", `template ready: ${JSON.stringify(template.status)}`);
  const fromTemplate = await claim("ts-from-parent");
  console.log(`claim of the template: ${await state(fromTemplate)}`);

  await client.sandboxes.deleteRootFSSnapshot(snapshot.id);
} finally {
  for (const id of made) await client.sandboxes.delete(id).catch(() => {});
  await client.templates.delete("ts-from-parent").catch(() => {});
  await client.templates.delete("ts-rootfs").catch(() => {});
}
console.log("rootfs ok");
