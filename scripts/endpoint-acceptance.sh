#!/usr/bin/env bash
# Drives one shipped model through `jobstream run` against any DynamoDB +
# SQS endpoint (moto: scripts/moto-server.py), as an operator would:
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
#
# Needs the `jobstream` binary on PATH, python3 with boto3 and PyYAML;
# AWS_REGION and credentials in the environment (any values for moto).
# Exit 0 when every check passed; logs in WORKDIR (default a temp dir).
set -uo pipefail
export AWS_DEFAULT_REGION=${AWS_DEFAULT_REGION:-${AWS_REGION:-us-east-1}}
E=$1
M=$2
W=${3:-$(mktemp -d)}
mkdir -p "$W"
HERE=$(cd "$(dirname "$0")" && pwd)
S=acc-$M
BF=$S-bf
fail=0
gone() { # pids: until every one has exited (they may not be this shell's children)
  for p in "$@"; do while kill -0 "$p" 2>/dev/null; do sleep 0.5; done; done
}
note() { echo "== $M: $*"; }
bad() { echo "!! $M: $*"; fail=1; }

jobstream create --endpoint "$E" --sqs-endpoint "$E" --model "$M" --stack "$S" > "$W/tables.out" 2> "$W/tables.err" || { bad "creating tables"; cat "$W/tables.err"; exit 1; }
queues=$(python3 - "$E" "$S" <<'EOF'
import boto3, sys
sqs = boto3.client("sqs", endpoint_url=sys.argv[1])
urls = sqs.list_queues(QueueNamePrefix=sys.argv[2] + "-").get("QueueUrls", [])
print(" ".join(f"--queue-url {u}" for u in urls if not u.endswith("-dlq")))
EOF
)
PORT_A=$((9300 + RANDOM % 300)); PORT_B=$((PORT_A + 300))
start() { # owner port [flags]
  local o=$1 p=$2; shift 2
  jobstream run --model "$M" --stack "${STACK:-$S}" --endpoint "$E" --sqs-endpoint "$E" \
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
python3 "$HERE/endpoint-play.py" --endpoint "$E" --model "$M" --now "$now" $queues $metrics > "$W/play.out" 2> "$W/play.err" || bad "scenario: $(tail -1 "$W/play.out") $(tail -1 "$W/play.err")"
wait $chaos
A=$(cat "$W/a.pid"); B=$(cat "$W/b.pid")
note "scenario: $(tail -1 "$W/play.out"); $(cat "$W/events" | tr '\n' ' ')"
python3 "$HERE/endpoint-play.py" --endpoint "$E" --model "$M" --now "$now" $queues $metrics --check-only > "$W/final.out" 2>&1 || bad "final state after the restarts: $(tail -1 "$W/final.out")"
jobstream verify --model "$M" --stack "$S" --endpoint "$E" --sqs-endpoint "$E" > "$W/verify.out" 2>&1 || bad "verify: $(grep -m3 drift "$W/verify.out")"
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
table=$(python3 -c "import yaml;print(yaml.safe_load(open('$HERE/../models/$M.yaml'))['table']['name'])")
snapshot "$table" > "$W/before-replay.json"
kill -TERM "$A" "$B"; gone "$A" "$B"
note "--from-start replay"
R=$(start r $PORT_A --from-start)
sleep 5
python3 "$HERE/endpoint-play.py" --endpoint "$E" --model "$M" --now "$now" $queues --metrics "127.0.0.1:$PORT_A" --check-only > "$W/replay.out" 2>&1 || bad "after --from-start: $(tail -1 "$W/replay.out")"
snapshot "$table" > "$W/after-replay.json"
cmp -s "$W/before-replay.json" "$W/after-replay.json" && note "replay changed nothing" || bad "the --from-start replay changed the table ($(diff "$W/before-replay.json" "$W/after-replay.json" | grep -c '^[<>]') line(s))"
kill -TERM "$R"; gone "$R"

note "backfill into $BF (loaded without processors)"
jobstream create --endpoint "$E" --sqs-endpoint "$E" --model "$M" --stack "$BF" --table "$BF" > /dev/null 2>> "$W/tables.err"
python3 "$HERE/endpoint-play.py" --endpoint "$E" --model "$M" --table "$BF" --now "$now" --writes-only > /dev/null 2>> "$W/play.err"
# The processors deployed on the loaded table (LATEST: the load is not
# theirs), then the backfill while they run, as README's adoption says.
F=$(STACK=$BF start f $PORT_B --table "$BF" --starting-position latest)
until curl -sf "127.0.0.1:$PORT_B/readyz" > /dev/null; do sleep 0.5; done
jobstream backfill --model "$M" --stack "$BF" --table "$BF" --endpoint "$E" --sqs-endpoint "$E" > "$W/backfill.out" 2>&1 || bad "backfill: $(tail -2 "$W/backfill.out")"
bfq=$(echo "$queues" | sed "s/$S-/$BF-/g")
# A history (a fold over the stream) cannot be rebuilt from the items: an
# adopted item's history starts with one entry (README: adopting).
if python3 -c "import yaml,sys; sys.exit('history' not in yaml.safe_load(open('$HERE/../models/$M.yaml')))"; then
  python3 "$HERE/endpoint-play.py" --endpoint "$E" --model "$M" --table "$BF" --now "$now" $bfq --metrics "127.0.0.1:$PORT_B" --check-only > "$W/backfill-check.out" 2>&1
  note "after backfill (a history starts at adoption): $(tail -1 "$W/backfill-check.out")"
else
  python3 "$HERE/endpoint-play.py" --endpoint "$E" --model "$M" --table "$BF" --now "$now" $bfq --metrics "127.0.0.1:$PORT_B" --check-only > "$W/backfill-check.out" 2>&1 || bad "after backfill: $(tail -1 "$W/backfill-check.out")"
fi
jobstream verify --model "$M" --stack "$BF" --table "$BF" --endpoint "$E" --sqs-endpoint "$E" > "$W/backfill-verify.out" 2>&1 || bad "verify after backfill: $(grep -m3 drift "$W/backfill-verify.out")"
note "verify after backfill: $(tail -1 "$W/backfill-verify.out")"
kill -TERM "$F"; gone "$F"
[ "$fail" = 0 ] && note "ALL PASSED (logs: $W)" || note "FAILED (logs: $W)"
exit $fail
