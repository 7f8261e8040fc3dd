#!/usr/bin/env bash
# Fails when a tracked file is larger than 1 MiB and not in the allow-list below: binaries, caches
# and data sets never enter the repository (a 22 MB service binary once did).
#
#   hack/check-file-sizes.sh          # checks the files tracked by git (make lint, CI)
set -euo pipefail
cd "$(dirname "$0")/.."
limit=$((1024 * 1024))
# Paths allowed past the limit, one per line, with the reason beside each. Empty today.
allow=()
status=0
while IFS= read -r -d '' f; do
	[[ -f "$f" ]] || continue
	size=$(stat -c %s "$f")
	((size > limit)) || continue
	allowed=false
	for a in "${allow[@]}"; do [[ "$f" == "$a" ]] && allowed=true; done
	$allowed && continue
	echo "file-sizes: $f is $size bytes (over 1 MiB and not allow-listed in hack/check-file-sizes.sh)" >&2
	status=1
done < <(git ls-files -z)
exit $status
