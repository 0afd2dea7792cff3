#!/usr/bin/env bash
# Makes the `trace2 decode` sample of docs/cli.md again: prints the console block, each
# command after `$ ` and what it wrote, to paste in place of the old one.
#
# The run is neutral, so that the docs show nothing of the machine they were made on:
# the program runs as `./quickstart` from a fresh folder (its `start` line shows that
# path, not the checkout's), with HOME in that folder and no system git config (no
# trace2.* settings of the machine), in a new PID namespace whose first process is the
# `bash` that runs the commands (so `cmd_ancestry` names that shell alone, not the
# terminal, session manager or CI runner above it). Needs `unshare` (util-linux) and
# either root or unprivileged user namespaces.
set -euo pipefail
cd "$(dirname "$0")/../.."

cargo build -q --example quickstart
cargo build -q -p trace2-cli
root=$(pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/demo"
cp target/debug/examples/quickstart "$work/demo/quickstart"
mkdir "$work/bin"
cp target/debug/trace2 "$work/bin/trace2"

# The commands of the sample, as the reader types them (bash: `<(…)`).
commands=$(cat <<'CMDS'
GIT_TRACE2_PERF=$PWD/q.perf TRACING_TRACE2_BINARY=$PWD/q.t2b ./quickstart
ls -l q.perf q.t2b | awk '{print $5, $9}'      # q.perf also holds the git child's lines
trace2 decode --format perf q.t2b | cmp - <(grep -v '| d1 |' q.perf) && echo identical
trace2 decode --format normal q.t2b | head -4
head -c 400 q.t2b > cut.t2b; trace2 decode --format normal cut.t2b > /dev/null; echo "exit $?"
CMDS
)

script=$work/run.sh
{
    echo 'set +e'
    while IFS= read -r cmd; do
        printf 'printf "%%s\\n" %q\n' "\$ $cmd"
        printf '%s 2>&1\n' "$cmd"
    done <<< "$commands"
} > "$script"

echo '```console'
(cd "$work/demo" && env -i PATH="$work/bin:/usr/local/bin:/usr/bin:/bin" HOME="$work/demo" \
    GIT_CONFIG_NOSYSTEM=1 LANG=C.UTF-8 \
    unshare --user --map-root-user --pid --fork --mount-proc bash "$script")
echo '```'
: "$root"
