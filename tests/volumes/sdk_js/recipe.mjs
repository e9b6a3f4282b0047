// The seed's coding-agent recipe through the official TypeScript SDK (sandbox0@0.9.5 from npm,
// unmodified): a volume, a claim of coding-agent with it at /workspace, a repository written
// there, the sandbox deleted, a second claim with the same volume that finds the repository.
// On the way: a second RWO binding refused, unknown and other teams' volumes 404, a bound volume's
// delete refused unless forced. Run by tests/volumes/test_volumes_sdk_js.py; prints one JSON line
// of findings that the Python side checks.
const { Client, APIError, apis, runtime } = await import(process.env.SANDBOX0_JS_ENTRY);

const url = process.env.SANDBOX0_BASE_URL;
const token = process.env.SANDBOX0_TOKEN;
const out = {};

function check(condition, message) {
  if (!condition) throw new Error(`check failed: ${message}`);
}

// The SDK's error for a refused call: {status, code, message, details}.
async function refusal(promise) {
  try {
    await promise;
  } catch (error) {
    check(error instanceof APIError, `not an APIError: ${error}`);
    return { status: error.statusCode, code: error.code, message: error.message, details: error.details ?? null };
  }
  return { status: 200 };
}

// A client whose key belongs to a team of its own (the SDK's generated TeamsApi and ApiKeysApi).
async function teamClient(name) {
  const admin = new runtime.Configuration({ basePath: url, accessToken: token });
  const team = (await new apis.TeamsApi(admin).teamsPost({ createTeamRequest: { name, homeRegionId: "local" } })).data;
  const asTeam = new runtime.Configuration({ basePath: url, accessToken: token, headers: { "X-Team-ID": team.id } });
  const key = (await new apis.ApiKeysApi(asTeam).apiKeysPost({
    createAPIKeyRequest: { name: `${name}-dev`, roles: ["developer"], expiresIn: "30d" },
  })).data;
  return new Client({ token: key.key, baseUrl: url });
}

const GIT = ["git", "-c", "user.email=agent@example.com", "-c", "user.name=agent"];
const sh = (script) => ({ command: ["sh", "-c", script] });

const client = await teamClient("recipe-team");
const stranger = await teamClient("other-team");

// CreateVolume(ctx, {AccessMode: RWO}) then ClaimSandbox(ctx, "coding-agent", WithSandboxBootstrapMount(id, "/workspace")).
const volume = await client.volumes.create({ accessMode: "RWO" });
out.volume = { accessMode: volume.accessMode, backend: volume.backend, hasTeam: !!volume.teamId };
const mounts = [{ sandboxvolumeId: volume.id, mountPoint: "/workspace" }];

const claimStarted = performance.now();
const first = await client.sandboxes.claim("coding-agent", { mounts });
out.claimWithVolumeMs = performance.now() - claimStarted;
out.bootstrapMounts = first.bootstrapMounts.map((m) => ({ id: m.sandboxvolumeId, at: m.mountPoint, state: m.state }));
const made = await first.cmd("git init", sh(
  `cd /workspace && git init -q repo && cd repo && echo 'print("hi")' > main.py && ` +
  `${GIT.join(" ")} add main.py && ${GIT.join(" ")} commit -qm 'first commit' && git log --format=%s`));
check(made.exitCode === 0, `git in the first sandbox: ${JSON.stringify(made)}`);
out.firstLog = made.outputRaw.trim();

// While the first sandbox lives, a second RWO binding is refused, and a plain delete too.
out.secondBinding = await refusal(client.sandboxes.claim("coding-agent", { mounts }));
out.busyDelete = await refusal(client.volumes.delete(volume.id));
out.sandboxesAfterRefusal = (await client.sandboxes.list()).count;

// Another team's key: the volume does not exist for it, not to read, bind or delete.
out.strangerGet = await refusal(stranger.volumes.get(volume.id));
out.strangerClaim = await refusal(stranger.sandboxes.claim("coding-agent", { mounts }));
out.strangerDelete = await refusal(stranger.volumes.delete(volume.id));
out.strangerList = (await stranger.volumes.list()).map((v) => v.id);
out.unknownGet = await refusal(client.volumes.get("6f1c2b8e-1111-4222-8333-444455556666"));
out.unknownClaim = await refusal(client.sandboxes.claim("coding-agent", {
  mounts: [{ sandboxvolumeId: "6f1c2b8e-1111-4222-8333-444455556666", mountPoint: "/workspace" }],
}));

await client.sandboxes.delete(first.id);
// The volume's files, read through the volume file API with no sandbox bound.
out.betweenSandboxes = (await client.volumes.listFiles(volume.id, "/repo")).map((e) => e.name).sort();
out.mainPy = Buffer.from(await client.volumes.readFile(volume.id, "/repo/main.py")).toString();

const second = await client.sandboxes.claim("coding-agent", { mounts });
const later = await second.cmd("git log", sh(
  `cd /workspace/repo && git status --porcelain && echo 'print("again")' >> main.py && ` +
  `${GIT.join(" ")} commit -qam 'second commit' && git log --format=%s`));
check(later.exitCode === 0, `git in the second sandbox: ${JSON.stringify(later)}`);
out.secondLog = later.outputRaw.trim().split("\n");
await client.sandboxes.delete(second.id);

out.deleted = await client.volumes.delete(volume.id);
out.afterDelete = await refusal(client.volumes.get(volume.id));
out.listedAfter = (await client.volumes.list()).length;
console.log(JSON.stringify(out));
