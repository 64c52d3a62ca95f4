// What the Node.js suites share (tests/mcp_sdk/test_sdk.mjs, tests/editor/*.mjs), as
// tests/e2e/harness.py is for the Python scripts: `expect` throws with its detail as JSON, and
// `runTests` runs an object of named (async) tests in order, prints `ok`/`FAIL` per test and
// `N passed, M failed`, and exits 1 on a failure.
export function expect(condition, what, detail) {
  if (!condition) throw new Error(what + (detail === undefined ? "" : "\n" + JSON.stringify(detail, null, 1)));
}

export async function runTests(tests) {
  let failed = 0;
  for (const [name, test] of Object.entries(tests)) {
    try {
      await test();
      console.log(`ok    ${name}`);
    } catch (error) {
      failed += 1;
      console.log(`FAIL  ${name}\n${error.stack ?? error}`);
    }
  }
  console.log(`${Object.keys(tests).length - failed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}
