// The TypeScript SDK's generated TeamsApi and ApiKeysApi against our server, then a team key in the
// SDK's Client. Run by tests/api/test_sdk_js.py with the SDK from npm.
const { Client, APIError, apis, runtime } = await import(process.env.SANDBOX0_JS_ENTRY);

const url = process.env.SANDBOX0_BASE_URL;
const token = process.env.SANDBOX0_TOKEN;

function check(condition, message) {
  if (!condition) throw new Error(`check failed: ${message}`);
}

async function status(promise) {
  try {
    await promise;
    return 200;
  } catch (error) {
    return error.response?.status ?? error.statusCode ?? error.status ?? String(error);
  }
}

const admin = new runtime.Configuration({ basePath: url, accessToken: token });
const team = (await new apis.TeamsApi(admin).teamsPost({
  createTeamRequest: { name: "ts-team", homeRegionId: "local" },
})).data;
const asTeam = new runtime.Configuration({ basePath: url, accessToken: token, headers: { "X-Team-ID": team.id } });
const keys = new apis.ApiKeysApi(asTeam);
const created = (await keys.apiKeysPost({
  createAPIKeyRequest: { name: "ts-dev", roles: ["developer"], expiresIn: "30d" },
})).data;
check(created.teamId === team.id && created.key.startsWith("s0_"), JSON.stringify(created));
const listed = (await keys.apiKeysGet()).data.apiKeys;
check(listed.length === 1 && listed[0].keyValue.endsWith("***") && listed[0].isActive, JSON.stringify(listed));

const developer = new Client({ token: created.key, baseUrl: url });
const current = (await new apis.ApiKeysApi(new runtime.Configuration({ basePath: url, accessToken: created.key }))
  .apiKeysCurrentGet()).data.apiKey;
check(current.id === created.id && current.permissions.includes("sandbox:create"), JSON.stringify(current));
const sandbox = await developer.sandboxes.claim("default");
check((await developer.sandboxes.get(sandbox.id)).teamId === team.id, "claimed into the key's team");
const run = await sandbox.cmd("sh -c 'echo team-key-ok'", { command: ["sh", "-c", "echo team-key-ok"] });
check(run.outputRaw.includes("team-key-ok"), JSON.stringify(run));
console.log("team key ok");

await keys.apiKeysIdDeactivatePost({ id: created.id });
const refused = await status(developer.sandboxes.get(sandbox.id));
check(refused === 401, `a deactivated key: ${refused}`);
await new Client({ token, baseUrl: url }).sandboxes.delete(sandbox.id);
console.log("deactivated ok");
