#!/usr/bin/env bash
# Drives one model (shipped, or a file of your own) through `jobstream run`
# against any DynamoDB + SQS endpoint (moto: scripts/moto-server.py), as an
# operator would:
#   1. creates the tables and queues (`jobstream create`, stack S),
#   2. starts two `run` processes sharing the shards (lease owners a, b),
#   3. plays the scenario (scripts/endpoint-play.py: expected items, absent
#      items, every declared query after each part) while process a is
#      killed (SIGKILL) and restarted with its lease owner, and process b
#      is stopped with SIGTERM (handover) and restarted,
#   4. `jobstream verify` (exit 0),
#   5. `--from-start` replay: the table is unchanged,
#   6. `jobstream backfill` of the scenario's writes loaded into a second
#      table without processors, then verify and the final expectations.
#
#   scripts/endpoint-acceptance.sh http://127.0.0.1:5071 social [WORKDIR]
#   scripts/endpoint-acceptance.sh http://127.0.0.1:5071 --model-file my-table.yaml \
#     [--scenario my-table.scenario.yaml] [--metrics-ports 9401,9402] [WORKDIR]
#   scripts/endpoint-acceptance.sh http://127.0.0.1:8000 --sqs-endpoint http://127.0.0.1:9324 jobboard
#
# The queues are on URL too (moto serves both), unless `--sqs-endpoint Q`
# names another (`jobstream serve --sqs-port`: the `SQS endpoint:` it prints).
#
# A shipped model plays models/M.scenario.yaml; a model file plays
# `--scenario S`, else its stem + `.scenario.yaml` beside it (as `jobstream
# demo --model-file` does). The two `run` processes serve their metrics on
# `--metrics-ports A,B` of 127.0.0.1 (default: two free ports).
# Needs the `jobstream` binary on PATH, python3 with boto3 and PyYAML;
# AWS_REGION and credentials in the environment (any values for moto).
# Exit 0 when every check passed, 1 when one failed, 2 on a usage error;
# logs in WORKDIR (default a temp dir).
set -uo pipefail
export AWS_DEFAULT_REGION=${AWS_DEFAULT_REGION:-${AWS_REGION:-us-east-1}}
HERE=$(cd "$(dirname "$0")" && pwd)
usage() {
  echo "usage: $0 URL (MODEL | --model-file F [--scenario S]) [--sqs-endpoint Q] [--metrics-ports A,B] [WORKDIR]" >&2
  [ -n "${1:-}" ] && echo "error: $1" >&2
  exit 2
}
[ $# -ge 2 ] || usage
E=$1; shift
MF= SC= PORTS= SQ= pos=()
while [ $# -gt 0 ]; do
  case $1 in
    --model-file) [ $# -ge 2 ] || usage "--model-file needs a file"; MF=$2; shift 2 ;;
    --scenario) [ $# -ge 2 ] || usage "--scenario needs a file"; SC=$2; shift 2 ;;
    --metrics-ports) [ $# -ge 2 ] || usage "--metrics-ports needs A,B"; PORTS=$2; shift 2 ;;
    --sqs-endpoint) [ $# -ge 2 ] || usage "--sqs-endpoint needs a URL"; SQ=$2; shift 2 ;;
    -h|--help) usage ;;
    -*) usage "unknown option $1" ;;
    *) pos+=("$1"); shift ;;
  esac
done
SQ=${SQ:-$E}
if [ -n "$MF" ]; then
  [ ${#pos[@]} -le 1 ] || usage "a model file and a model name: give one"
  [ -f "$MF" ] || usage "no model file $MF"
  MF=$(cd "$(dirname "$MF")" && pwd)/$(basename "$MF")
  SC=${SC:-${MF%.y*ml}.scenario.yaml}
  W=${pos[0]:-}
  MODEL=(--model-file "$MF")
  # The stack is named after the model's `name:` (else the file's stem).
  M=$(python3 -c "import os,re,sys,yaml; m=yaml.safe_load(open(sys.argv[1])); print(re.sub('[^A-Za-z0-9-]', '-', str(m.get('name') or os.path.basename(sys.argv[1]).split('.')[0])))" "$MF") || usage "cannot read $MF"
else
  [ ${#pos[@]} -ge 1 ] || usage "no model: a shipped model's name or --model-file F"
  M=${pos[0]}; W=${pos[1]:-}
  MF=$HERE/../models/$M.yaml
  [ -f "$MF" ] || usage "no shipped model $M (models/$M.yaml); a file of your own is --model-file F"
  SC=${SC:-$HERE/../models/$M.scenario.yaml}
  MODEL=(--model "$M")
fi
[ -f "$SC" ] || usage "no scenario file $SC (give --scenario S)"
SC=$(cd "$(dirname "$SC")" && pwd)/$(basename "$SC")
PLAY=(--model-file "$MF" --scenario "$SC")
W=${W:-$(mktemp -d)}
mkdir -p "$W"
S=acc-$M
BF=$S-bf
fail=0
alive() { # pid: running (an exited process not yet reaped, a zombie, is not)
  kill -0 "$1" 2>/dev/null && ! ps -o stat= -p "$1" 2>/dev/null | grep -q Z
}
gone() { # pids: until every one has exited (they may not be this shell's children)
  for p in "$@"; do while alive "$p"; do sleep 0.5; done; done
}
note() { echo "== $M: $*"; }
bad() { echo "!! $M: $*"; fail=1; }

jobstream create --endpoint "$E" --sqs-endpoint "$SQ" "${MODEL[@]}" --stack "$S" > "$W/tables.out" 2> "$W/tables.err" || { bad "creating tables"; cat "$W/tables.err"; exit 1; }
queues=$(python3 - "$SQ" "$S" <<'EOF'
import boto3, sys
sqs = boto3.client("sqs", endpoint_url=sys.argv[1])
urls = sqs.list_queues(QueueNamePrefix=sys.argv[2] + "-").get("QueueUrls", [])
print(" ".join(f"--queue-url {u}" for u in urls if not u.endswith("-dlq")))
EOF
)
if [ -n "$PORTS" ]; then
  IFS=, read -r PORT_A PORT_B <<< "$PORTS"
  [[ "$PORT_A" =~ ^[0-9]+$ && "$PORT_B" =~ ^[0-9]+$ ]] || usage "--metrics-ports A,B: two port numbers, not $PORTS"
else # two ports free now (each `run` restarted keeps its own)
  read -r PORT_A PORT_B < <(python3 -c 'import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*(x.getsockname()[1] for x in s))')
fi
note "metrics of the run processes on 127.0.0.1:$PORT_A and :$PORT_B; scenario $SC"
start() { # owner port [flags]
  local o=$1 p=$2; shift 2
  jobstream run "${MODEL[@]}" --stack "${STACK:-$S}" --endpoint "$E" --sqs-endpoint "$SQ" \
    --lease-owner "$o" --metrics-listen "127.0.0.1:$p" --on-failure-file "$W/failures-$o.jsonl" "$@" \
    >> "$W/run-$o.log" 2>&1 &
  echo $!
}
A=$(start a $PORT_A); B=$(start b $PORT_B)
sleep 5
metrics="--metrics 127.0.0.1:$PORT_A --metrics 127.0.0.1:$PORT_B"
now=$(date +%s)
(
  sleep 6; kill -KILL "$A"; echo "SIGKILL a at $(date +%T)" >> "$W/events"
  sleep 2; echo "$(start a $PORT_A)" > "$W/a.pid"
  sleep 6; kill -TERM "$B"; echo "SIGTERM b at $(date +%T)" >> "$W/events"
  gone "$B"; echo "$(start b $PORT_B)" > "$W/b.pid"
) &
chaos=$!
note "play (SIGKILL a, SIGTERM b meanwhile)"
python3 "$HERE/endpoint-play.py" --endpoint "$E" --sqs-endpoint "$SQ" "${PLAY[@]}" --now "$now" $queues $metrics > "$W/play.out" 2> "$W/play.err" || bad "scenario: $(tail -1 "$W/play.out") $(tail -1 "$W/play.err")"
wait $chaos
A=$(cat "$W/a.pid"); B=$(cat "$W/b.pid")
# A restarted process that exited (at startup, say) leaves the other one
# doing all the work: the restart did not happen.
# Each is waited for until it is ready (its /readyz) or gone: a process
# looked at the moment it was started has not had time to fail.
for o in a b; do
  p=$(cat "$W/$o.pid"); port=$([ "$o" = a ] && echo "$PORT_A" || echo "$PORT_B")
  for _ in $(seq 120); do
    alive "$p" || { bad "run $o exited after its restart: $(tail -1 "$W/run-$o.log")"; break; }
    curl -sf "127.0.0.1:$port/readyz" > /dev/null && break
    sleep 0.5
  done
done
note "scenario: $(tail -1 "$W/play.out"); $(cat "$W/events" | tr '\n' ' ')"
python3 "$HERE/endpoint-play.py" --endpoint "$E" --sqs-endpoint "$SQ" "${PLAY[@]}" --now "$now" $queues $metrics --check-only > "$W/final.out" 2>&1 || bad "final state after the restarts: $(tail -1 "$W/final.out")"
jobstream verify "${MODEL[@]}" --stack "$S" --endpoint "$E" --sqs-endpoint "$SQ" > "$W/verify.out" 2>&1 || bad "verify: $(grep -m3 drift "$W/verify.out")"
note "verify: $(tail -1 "$W/verify.out")"
grep -h "LOST\|ERROR\|panick" "$W"/run-*.log | grep -v "bad input" | head -5

snapshot() { python3 - "$E" "$1" <<'EOF'
import boto3, json, sys
d = boto3.client("dynamodb", endpoint_url=sys.argv[1])
items, kw = [], {"TableName": sys.argv[2]}
while True:
    r = d.scan(**kw); items += r["Items"]
    if "LastEvaluatedKey" not in r: break
    kw["ExclusiveStartKey"] = r["LastEvaluatedKey"]
print(json.dumps(sorted(json.dumps(i, sort_keys=True) for i in items), indent=0))
EOF
}
table=$(python3 -c "import sys,yaml; t=yaml.safe_load(open(sys.argv[1]))['table']; print(t['name'] if isinstance(t, dict) else t)" "$MF")
snapshot "$table" > "$W/before-replay.json"
kill -TERM "$A" "$B"; gone "$A" "$B"
note "--from-start replay"
R=$(start r $PORT_A --from-start)
sleep 5
python3 "$HERE/endpoint-play.py" --endpoint "$E" --sqs-endpoint "$SQ" "${PLAY[@]}" --now "$now" $queues --metrics "127.0.0.1:$PORT_A" --check-only > "$W/replay.out" 2>&1 || bad "after --from-start: $(tail -1 "$W/replay.out")"
snapshot "$table" > "$W/after-replay.json"
cmp -s "$W/before-replay.json" "$W/after-replay.json" && note "replay changed nothing" || bad "the --from-start replay changed the table ($(diff "$W/before-replay.json" "$W/after-replay.json" | grep -c '^[<>]') line(s))"
kill -TERM "$R"; gone "$R"

note "backfill into $BF (loaded without processors)"
jobstream create --endpoint "$E" --sqs-endpoint "$SQ" "${MODEL[@]}" --stack "$BF" --table "$BF" > /dev/null 2>> "$W/tables.err"
python3 "$HERE/endpoint-play.py" --endpoint "$E" --sqs-endpoint "$SQ" "${PLAY[@]}" --table "$BF" --now "$now" --writes-only > /dev/null 2>> "$W/play.err"
# The processors deployed on the loaded table (LATEST: the load is not
# theirs), then the backfill while they run, as README's adoption says.
F=$(STACK=$BF start f $PORT_B --table "$BF" --starting-position latest)
until curl -sf "127.0.0.1:$PORT_B/readyz" > /dev/null; do
  alive "$F" || { bad "run f exited before it was ready: $(tail -1 "$W/run-f.log")"; break; }
  sleep 0.5
done
jobstream backfill "${MODEL[@]}" --stack "$BF" --table "$BF" --endpoint "$E" --sqs-endpoint "$SQ" > "$W/backfill.out" 2>&1 || bad "backfill: $(tail -2 "$W/backfill.out")"
bfq=$(echo "$queues" | sed "s/$S-/$BF-/g")
# A history (a fold over the stream) cannot be rebuilt from the items: an
# adopted item's history starts with one entry (README: adopting). Its
# entries and mirror are left out (--adopted); every other difference fails.
python3 "$HERE/endpoint-play.py" --endpoint "$E" --sqs-endpoint "$SQ" "${PLAY[@]}" --table "$BF" --now "$now" $bfq --metrics "127.0.0.1:$PORT_B" --check-only --adopted > "$W/backfill-check.out" 2>&1 || bad "after backfill: $(tail -1 "$W/backfill-check.out")"
jobstream verify "${MODEL[@]}" --stack "$BF" --table "$BF" --endpoint "$E" --sqs-endpoint "$SQ" > "$W/backfill-verify.out" 2>&1 || bad "verify after backfill: $(grep -m3 drift "$W/backfill-verify.out")"
note "verify after backfill: $(tail -1 "$W/backfill-verify.out")"
kill -TERM "$F"; gone "$F"
[ "$fail" = 0 ] && note "ALL PASSED (logs: $W)" || note "FAILED (logs: $W)"
exit $fail
