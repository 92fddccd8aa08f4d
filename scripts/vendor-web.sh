#!/usr/bin/env bash
# Refresh the web page's vendored libraries (evacore/web/static/vendor/) from the npm
# registry: each package at its pinned version, its ES module file and its license texts.
# Change a version below, run this script, look at the page, commit the result.
set -euo pipefail
cd "$(dirname "$0")/.."

# package@version  file in the package  -> vendored name
PINS=(
  "preact@11.2.0       dist/preact.mjs        preact.js"
  "preact@11.2.0       hooks/dist/hooks.mjs   preact-hooks.js"
  "htm@3.1.1           dist/htm.mjs           htm.js"
  "marked@18.2.1       lib/marked.esm.js      marked.js"
  "dompurify@3.5.0     dist/purify.es.mjs     purify.js"
)

out=evacore/web/static/vendor
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

rm -rf "$out"
mkdir -p "$out/licenses"
{
  echo "# Vendored libraries"
  echo
  echo "Written by \`scripts/vendor-web.sh\` from the npm registry; do not edit by hand."
  echo
  echo "| file | package | license | npm integrity |"
  echo "|---|---|---|---|"
} > "$out/README.md"

for pin in "${PINS[@]}"; do
  read -r spec path name <<< "$pin"
  pkg=${spec%@*}
  dir="$work/$pkg"
  if [ ! -d "$dir" ]; then
    mkdir -p "$dir"
    (cd "$dir" && npm pack "$spec" --json --silent > pack.json)
    tar xzf "$dir"/*.tgz -C "$dir"
    for lic in "$dir"/package/LICENSE*; do
      base=$(basename "$lic")
      cp "$lic" "$out/licenses/$pkg-${base}.txt"
    done
  fi
  integrity=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[0]["integrity"])' \
              "$dir/pack.json")
  license=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("license"))' \
            "$dir/package/package.json")
  # a source-map comment would make browser tools ask for a file that is not shipped
  grep -v '^//# sourceMappingURL=' "$dir/package/$path" | sed 's|//# sourceMappingURL=.*$||' \
    > "$out/$name"
  echo "| \`$name\` | $spec \`$path\` | $license | \`$integrity\` |" >> "$out/README.md"
done
echo "vendored into $out:"
ls -l "$out" "$out/licenses"
