// The rest of the TypeScript SDK's client.volumes (sandbox0@0.9.5 from npm, unmodified): its file
// calls, the watch, snapshots, restore, fork, a volume from a snapshot, open() and delete with
// force. Run by tests/volumes/test_volumes_sdk_js.py; prints one JSON line of findings.
const { Client, APIError } = await import(process.env.SANDBOX0_JS_ENTRY);

const client = new Client({ token: process.env.SANDBOX0_TOKEN, baseUrl: process.env.SANDBOX0_BASE_URL });
const out = {};
const text = async (volumeId, path) => Buffer.from(await client.volumes.readFile(volumeId, path)).toString();

async function refusal(promise) {
  try {
    await promise;
  } catch (error) {
    if (!(error instanceof APIError)) throw error;
    return { status: error.statusCode, code: error.code, message: error.message };
  }
  return { status: 200 };
}

// A tar of one file, made by hand (512-byte header, then the data padded to 512, then two zero blocks).
function tarOf(name, body) {
  const header = Buffer.alloc(512);
  header.write(name, 0);
  header.write("0000644\0", 100);
  header.write("0000000\0", 108);
  header.write("0000000\0", 116);
  header.write(body.length.toString(8).padStart(11, "0") + "\0", 124);
  header.write("00000000000\0", 136);
  header.write("        ", 148);
  header.write("0", 156);
  header.write("ustar\0" + "00", 257);
  let sum = 0;
  for (const byte of header) sum += byte;
  header.write(sum.toString(8).padStart(6, "0") + "\0 ", 148);
  const data = Buffer.alloc(Math.ceil(body.length / 512) * 512);
  Buffer.from(body).copy(data);
  return Buffer.concat([header, data, Buffer.alloc(1024)]);
}

const volume = await client.volumes.create({ accessMode: "RWO" });
const id = volume.id;
try {
  out.mkdir = (await client.volumes.mkdir(id, "/src/pkg", true)).data;
  out.write = (await client.volumes.writeFile(id, "/src/pkg/main.py", "print(1)\n")).data;
  out.read = await text(id, "/src/pkg/main.py");
  const stat = await client.volumes.statFile(id, "/src/pkg/main.py");
  out.stat = { path: stat.path, type: stat.type, size: stat.size };
  out.move = (await client.volumes.moveFile(id, "/src/pkg/main.py", "/src/app.py")).data;
  out.list = (await client.volumes.listFiles(id, "/src")).map((e) => `${e.type}:${e.name}`).sort();
  out.archive = await client.volumes.importArchive(id, "/src", tarOf("from-tar.txt", "tarred\n"));
  out.tarred = await text(id, "/src/from-tar.txt");

  const stream = await client.volumes.watchFiles(id, "/src", true);
  out.watchId = !!stream.watchId;
  const events = stream.events();
  await client.volumes.writeFile(id, "/src/watched.txt", "seen\n");
  for (;;) {
    const { value, done } = await events.next();
    if (done) break;
    if (value.type === "event" && value.path === "/src/watched.txt") {
      out.watched = value.event;
      break;
    }
  }
  await events.return();
  stream.socket.close();

  const snapshot = await client.volumes.createSnapshot(id, { name: "before", description: "app.py only" });
  out.snapshot = { name: snapshot.name, volumeId: snapshot.volumeId === id, sized: snapshot.sizeBytes > 0,
    created: !Number.isNaN(new Date(snapshot.createdAt).getTime()) }; // a string in this model
  await client.volumes.writeFile(id, "/src/app.py", "print(2)\n");
  await client.volumes.deleteFile(id, "/src/from-tar.txt");
  out.listedSnapshots = (await client.volumes.listSnapshots(id)).map((s) => s.name);
  out.gotSnapshot = (await client.volumes.getSnapshot(id, snapshot.id)).description;

  const fork = await client.volumes.fork(id, { accessMode: "ROX" });
  out.fork = { source: fork.sourceVolumeId === id, accessMode: fork.accessMode, app: await text(fork.id, "/src/app.py") };
  out.restored = (await client.volumes.restoreSnapshot(id, snapshot.id)).data;
  out.afterRestore = await text(id, "/src/app.py");
  out.tarBack = await text(id, "/src/from-tar.txt");
  const copy = await client.volumes.create({ snapshotId: snapshot.id });
  out.fromSnapshot = await text(copy.id, "/src/app.py");
  out.deletedSnapshot = (await client.volumes.deleteSnapshot(id, snapshot.id)).data;
  out.snapshotGone = await refusal(client.volumes.getSnapshot(id, snapshot.id));
  for (const other of [fork.id, copy.id]) await client.volumes.delete(other);

  // open(): a volume that close() deletes.
  const session = await client.volumes.open({ accessMode: "RWO" });
  out.opened = (await client.volumes.get(session.volume.id)).accessMode;
  await session.close();
  out.closed = await refusal(client.volumes.get(session.volume.id));

  const sandbox = await client.sandboxes.claim("default", { mounts: [{ sandboxvolumeId: id, mountPoint: "/workspace" }] });
  out.seenInside = (await sandbox.cmd("cat", { command: ["cat", "/workspace/src/app.py"] })).outputRaw;
  out.busy = await refusal(client.volumes.delete(id));
  out.forced = (await client.volumes.delete(id, { force: true })).data;
  await client.sandboxes.delete(sandbox.id);
} finally {
  await client.volumes.delete(id, { force: true }).catch(() => {});
}
out.left = (await client.volumes.list()).length;
console.log(JSON.stringify(out));
