// The TypeScript SDK's README (Quick Start, CMD Streaming), its e2e smoke test and the file calls of
// the SDKs' e2e tests, against our server. Run by tests/api/test_sdk_js.py with the SDK from npm.
const { Client } = await import(process.env.SANDBOX0_JS_ENTRY);

const client = new Client({
  token: process.env.SANDBOX0_TOKEN,
  baseUrl: process.env.SANDBOX0_BASE_URL,
});

function check(condition, message) {
  if (!condition) throw new Error(`check failed: ${message}`);
}

async function main() {
  // Claim a sandbox. With SANDBOX0_CLAIM_URL (two nodes, tests/cluster) it is claimed on that
  // node and used through this one, which forwards every call to it.
  const claimer = process.env.SANDBOX0_CLAIM_URL
    ? new Client({ token: process.env.SANDBOX0_TOKEN, baseUrl: process.env.SANDBOX0_CLAIM_URL })
    : client;
  const claimed = await claimer.sandboxes.claim("default");
  const sandbox = claimer === client ? claimed : client.sandbox(claimed.id);

  try {
    // README Quick Start: Execute Python code (REPL - stateful)
    const result = await sandbox.run("python", "print('Hello, Sandbox0!')");
    process.stdout.write(result.outputRaw);

    // README CMD Streaming
    const stream = await sandbox.cmdStream("sh -c 'echo hello && echo warn >&2'", {
      command: ["sh", "-c", "echo hello && echo warn >&2"],
    });
    for await (const output of stream.outputs()) {
      process.stdout.write(`[${output.source}] ${output.data}`);
    }
    const done = await stream.wait();
    console.log(`exit=${done.exitCode} state=${done.state}`);

    // tests/e2e/sdk/smoke.test.ts
    const command = await sandbox.cmdStream("printf sdk-e2e-ok", { command: ["bash", "-lc", "printf sdk-e2e-ok"] });
    const chunks = [];
    try {
      for await (const output of command.outputs()) {
        if (output.source === "stdout") chunks.push(output.data);
      }
      check((await command.wait()).exitCode === 0, "smoke exit code");
    } finally {
      command.close();
    }
    check(chunks.join("") === "sdk-e2e-ok", `smoke output ${JSON.stringify(chunks)}`);
    console.log("smoke ok");

    // The file calls of the SDKs' e2e tests (sdk-py tests/e2e/test_sandbox_files.py), through this SDK.
    const baseDir = `/tmp/sdk-js-e2e-${Date.now()}`;
    await sandbox.mkdir(baseDir, true);
    await sandbox.writeFile(`${baseDir}/hello.txt`, new TextEncoder().encode("hello e2e"));
    const info = await sandbox.statFile(`${baseDir}/hello.txt`);
    check(info.size === 9, `stat size ${JSON.stringify(info)}`);
    check(new TextDecoder().decode(await sandbox.readFile(`${baseDir}/hello.txt`)) === "hello e2e", "read back");
    check((await sandbox.listFiles(baseDir)).some((e) => e.name === "hello.txt"), "listed");
    await sandbox.moveFile(`${baseDir}/hello.txt`, `${baseDir}/moved.txt`);
    await sandbox.deleteFile(`${baseDir}/moved.txt`);
    await sandbox.deleteFile(baseDir);
    console.log("files ok");
  } finally {
    // Cleanup
    await client.sandboxes.delete(sandbox.id);
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
